//! spawn_storm: spawning under load. 64 actors keep yielding (the run queue
//! stays busy) while a root spawns 1,024 trivial actors and joins them; for
//! each run-queue variant and worker count (`SMARM_BENCH_WORKERS`), against
//! tokio tasks doing the same. Throughput is in spawns (ns per spawn+join
//! under load).
//!
//! `cargo bench -p smarm-benches --bench spawn_storm`

#[path = "tokio_side.rs"]
mod tokio_side;

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use criterion::{Criterion, Throughput};
use smarm_benches::{
    for_each_queue, port_name, smarm, smarm_label, smarm_rt_with, worker_counts, Group, Host, RunQueue,
};
use tokio_side::{in_task, tokio_rt};

const LOAD: usize = 64;
const SPAWNS: u64 = 1024;

fn variant<Q: RunQueue<Host>>(g: &mut Group<'_>, workers: usize) {
    let rt = smarm_rt_with::<Q>(workers);
    g.bench_function(format!("{}/{workers}w", smarm_label::<Q>()), |b| {
        b.iter(|| {
            rt.block_on(|| {
                let stop = Arc::new(AtomicBool::new(false));
                let load: Vec<_> = (0..LOAD)
                    .map(|_| {
                        let stop = stop.clone();
                        smarm::spawn(move || {
                            // Relaxed: a stop flag; the join below orders the rest.
                            while !stop.load(Ordering::Relaxed) {
                                smarm::yield_now();
                            }
                        })
                    })
                    .collect();
                let hs: Vec<_> = (0..SPAWNS).map(|i| smarm::spawn(move || black_box(i))).collect();
                for h in hs {
                    black_box(h.join().unwrap());
                }
                stop.store(true, Ordering::Relaxed);
                for h in load {
                    h.join().unwrap();
                }
            })
        })
    });
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("spawn_storm/{}", port_name()));
    g.throughput(Throughput::Elements(SPAWNS));
    for workers in worker_counts() {
        for_each_queue!(variant(&mut g, workers));
        let tk = tokio_rt(workers);
        g.bench_function(format!("tokio/{workers}w"), |b| {
            b.iter(|| {
                in_task(&tk, async {
                    let stop = Arc::new(AtomicBool::new(false));
                    let load: Vec<_> = (0..LOAD)
                        .map(|_| {
                            let stop = stop.clone();
                            tokio::spawn(async move {
                                while !stop.load(Ordering::Relaxed) {
                                    tokio::task::yield_now().await;
                                }
                            })
                        })
                        .collect();
                    let hs: Vec<_> = (0..SPAWNS)
                        .map(|i| tokio::spawn(async move { black_box(i) }))
                        .collect();
                    for h in hs {
                        black_box(h.await.unwrap());
                    }
                    stop.store(true, Ordering::Relaxed);
                    for h in load {
                        h.await.unwrap();
                    }
                })
            })
        });
    }
    g.finish();
}

smarm_benches::bench_main!(bench);
