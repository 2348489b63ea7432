//! msg_pairs: N independent ping-pong pairs (N in 2, 32, 1024) on 1 and 2
//! workers, ~32,768 messages per run; smarm mailboxes vs tokio unbounded
//! mpsc in the same binary. Throughput is in messages, so criterion's
//! time per element is ns per message.
//!
//! `cargo bench -p smarm-benches --bench msg_pairs`
use std::time::Duration;

#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use smarm_benches::{port_name, smarm_pairs, smarm_rt};
use tokio_side::{tokio_pairs, tokio_rt};

const MESSAGES: u64 = 32_768;

fn bench(c: &mut Criterion) {
    for workers in [1usize, 2] {
        let mut g = c.benchmark_group(format!("msg_pairs/{}/{workers}w", port_name()));
        let rt = smarm_rt(workers);
        let tk = tokio_rt(workers);
        for pairs in [2u64, 32, 1024] {
            let each = (MESSAGES / pairs).max(2);
            g.throughput(Throughput::Elements(pairs * each));
            g.bench_function(format!("smarm/{pairs}"), |b| {
                b.iter(|| assert_eq!(rt.block_on(move || smarm_pairs(pairs, each)), pairs * each))
            });
            g.bench_function(format!("tokio/{pairs}"), |b| {
                b.iter(|| {
                    let n = tk.block_on(async move { tokio::spawn(tokio_pairs(pairs, each)).await.unwrap() });
                    assert_eq!(n, pairs * each)
                })
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
