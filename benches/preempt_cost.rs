//! preempt_cost: what timeslices cost on the hot paths, measured side by
//! side in one run: the same runtime built with the default timeslice (a
//! cycle-counter stamp on each fresh resume, a budgeted check in sends and
//! receives) and with `timeslice(None)`:
//! - yield round trip on one worker (the switch_cost loop);
//! - mailbox ping-pong on one worker (ns per one-way message: a send and
//!   a receive);
//! - one `checkpoint()` in a hot loop.
//!
//! `cargo bench -p smarm-benches --bench preempt_cost`
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use smarm_benches::{port_name, smarm, smarm_pairs};

fn runtime(slice: bool) -> smarm::Runtime {
    let b = smarm::Runtime::builder().workers(1);
    let b = if slice { b } else { b.timeslice(None) };
    b.build().expect("smarm runtime")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("preempt_cost/{}", port_name()));
    for (name, slice) in [("slice_on", true), ("slice_off", false)] {
        let rt = runtime(slice);
        g.bench_function(format!("yield_1w/{name}"), |b| {
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
        // One pair on one worker; `iters` one-way messages in all.
        g.bench_function(format!("ping_pong_msg_1w/{name}"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    let t = Instant::now();
                    smarm_pairs(1, iters.max(2));
                    t.elapsed()
                })
            })
        });
        g.bench_function(format!("checkpoint/{name}"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    let t = Instant::now();
                    for i in 0..iters {
                        black_box(i);
                        smarm::checkpoint();
                    }
                    t.elapsed()
                })
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
