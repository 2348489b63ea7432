//! yield_many: 1,024 actors each yielding 32 times (32,768 yields per run)
//! on each worker count of `SMARM_BENCH_WORKERS` (default 1, 2 and all
//! CPUs), for each run-queue variant, against tokio tasks doing
//! `yield_now` and may coroutines doing `may::coroutine::yield_now` (one
//! worker count per process: see may_side.rs) in the same binary. Throughput is in yields, so criterion's
//! time per element is ns per yield: this is the run queue's churn test.
//!
//! `cargo bench -p smarm-benches --bench yield_many`

#[path = "may_side.rs"]
mod may_side;
#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::{Criterion, Throughput};
use may_side::{may_block_on, may_workers};
use smarm_benches::{
    for_each_queue, port_name, smarm, smarm_label, smarm_rt_with, worker_counts, Group, Host, RunQueue,
};
use tokio_side::{in_task, tokio_rt};

const ACTORS: u64 = 1024;
const YIELDS: u64 = 32;

fn variant<Q: RunQueue<Host>>(g: &mut Group<'_>, workers: usize) {
    let rt = smarm_rt_with::<Q>(workers);
    g.bench_function(format!("{}/{workers}w", smarm_label::<Q>()), |b| {
        b.iter(|| {
            rt.block_on(|| {
                let hs: Vec<_> = (0..ACTORS)
                    .map(|_| {
                        smarm::spawn(|| {
                            for _ in 0..YIELDS {
                                smarm::yield_now();
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
            })
        })
    });
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("yield_many/{}", port_name()));
    g.throughput(Throughput::Elements(ACTORS * YIELDS));
    for workers in worker_counts() {
        for_each_queue!(variant(&mut g, workers));
        let tk = tokio_rt(workers);
        g.bench_function(format!("tokio/{workers}w"), |b| {
            b.iter(|| {
                in_task(&tk, async {
                    let hs: Vec<_> = (0..ACTORS)
                        .map(|_| {
                            tokio::spawn(async {
                                for _ in 0..YIELDS {
                                    tokio::task::yield_now().await;
                                }
                            })
                        })
                        .collect();
                    for h in hs {
                        h.await.unwrap();
                    }
                })
            })
        });
        drop(tk);
        if may_workers(workers) {
            g.bench_function(format!("may/{workers}w"), |b| {
                b.iter(|| {
                    may_block_on(|| {
                        let hs: Vec<_> = (0..ACTORS)
                            .map(|_| {
                                may::go!(|| {
                                    for _ in 0..YIELDS {
                                        may::coroutine::yield_now();
                                    }
                                })
                            })
                            .collect();
                        for h in hs {
                            h.join().unwrap();
                        }
                    })
                })
            });
        }
    }
    g.finish();
}

smarm_benches::bench_main!(bench);
