//! switch_cost: one actor's `yield_now` loop on one worker (ns per yield
//! round trip: actor → worker → run queue → actor), against tokio's
//! current-thread `yield_now` in the same binary.
//!
//! `cargo bench -p smarm-benches --bench switch_cost`
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use smarm_benches::{port_name, smarm, smarm_rt};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("switch_cost/{}", port_name()));
    let rt = smarm_rt(1);
    g.bench_function("smarm/yield_1w", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for _ in 0..iters {
                    smarm::yield_now();
                }
                t.elapsed()
            })
        })
    });
    let tk = tokio::runtime::Builder::new_current_thread().build().unwrap();
    g.bench_function("tokio/yield_current_thread", |b| {
        b.iter_custom(|iters| {
            tk.block_on(async move {
                let t = Instant::now();
                for _ in 0..iters {
                    tokio::task::yield_now().await;
                }
                t.elapsed()
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
