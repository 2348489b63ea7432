//! msg_pairs: N independent ping-pong pairs (N in 2, 32, 1024) on each
//! worker count of `SMARM_BENCH_WORKERS` (default 1, 2 and all CPUs),
//! ~32,768 messages per run; smarm mailboxes on each run-queue variant vs
//! tokio unbounded mpsc and may coroutines with may's unbounded mpsc (one
//! worker count per process: see may_side.rs) in the same binary. Throughput is in messages, so
//! criterion's time per element is ns per message.
//!
//! `cargo bench -p smarm-benches --bench msg_pairs`

#[path = "may_side.rs"]
mod may_side;
#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::{Criterion, Throughput};
use may_side::{may_block_on, may_pairs, may_workers};
use smarm_benches::{
    for_each_queue, port_name, smarm_label, smarm_pairs, smarm_rt_with, worker_counts, Group, Host, RunQueue,
};
use tokio_side::{in_task, tokio_pairs, tokio_rt};

const MESSAGES: u64 = 32_768;
const PAIRS: [u64; 3] = [2, 32, 1024];

/// Messages each player of `pairs` pairs exchanges.
fn each(pairs: u64) -> u64 {
    (MESSAGES / pairs).max(2)
}

fn variant<Q: RunQueue<Host>>(g: &mut Group<'_>, workers: usize) {
    let rt = smarm_rt_with::<Q>(workers);
    for pairs in PAIRS {
        let each = each(pairs);
        g.throughput(Throughput::Elements(pairs * each));
        g.bench_function(format!("{}/{pairs}", smarm_label::<Q>()), |b| {
            b.iter(|| assert_eq!(rt.block_on(move || smarm_pairs(pairs, each)), pairs * each))
        });
    }
}

fn bench(c: &mut Criterion) {
    for workers in worker_counts() {
        let mut g = c.benchmark_group(format!("msg_pairs/{}/{workers}w", port_name()));
        for_each_queue!(variant(&mut g, workers));
        let tk = tokio_rt(workers);
        for pairs in PAIRS {
            let each = each(pairs);
            g.throughput(Throughput::Elements(pairs * each));
            g.bench_function(format!("tokio/{pairs}"), |b| {
                b.iter(|| {
                    let n = in_task(&tk, tokio_pairs(pairs, each));
                    assert_eq!(n, pairs * each)
                })
            });
        }
        drop(tk);
        if may_workers(workers) {
            for pairs in PAIRS {
                let each = each(pairs);
                g.throughput(Throughput::Elements(pairs * each));
                g.bench_function(format!("may/{pairs}"), |b| {
                    b.iter(|| assert_eq!(may_block_on(move || may_pairs(pairs, each)), pairs * each))
                });
            }
        }
        g.finish();
    }
}

smarm_benches::bench_main!(bench);
