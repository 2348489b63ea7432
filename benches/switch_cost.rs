//! switch_cost: one actor's `yield_now` loop on one worker (ns per yield
//! round trip: actor → worker → run queue → actor), against tokio's
//! current-thread `yield_now` (in a spawned task) in the same binary.
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
            // Inside a spawned task (as smarm's loop runs inside an actor):
            // a yield then goes through tokio's scheduler, not block_on's.
            tk.block_on(async move {
                tokio::spawn(async move {
                    let t = Instant::now();
                    for _ in 0..iters {
                        tokio::task::yield_now().await;
                    }
                    t.elapsed()
                })
                .await
                .unwrap()
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
