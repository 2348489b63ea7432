//! catch_unwind: the cost of a panicking actor: spawn an actor that panics
//! and join it (the join reports the panic), from inside an actor, on one
//! worker; tokio: spawn a panicking task and await its `JoinError`, on a
//! current-thread runtime. The panic hook is silenced for both sides (set
//! after the smarm runtime is built, which replaces the hook smarm's build
//! installs), so this times unwinding and reporting, not printing.
//!
//! `cargo bench -p smarm-benches --bench catch_unwind`

#[path = "tokio_side.rs"]
mod tokio_side;

use std::time::Instant;

use criterion::Criterion;
use smarm_benches::{port_name, smarm, smarm_rt};
use tokio_side::{in_task, tokio_rt};

/// The panicking body both sides run.
fn boom() -> u64 {
    panic!("bench panic")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("catch_unwind/{}", port_name()));
    let rt = smarm_rt(1);
    // After the build: building a runtime wraps the process's hook once
    // (smarm's line naming the actor, then the previous hook), so a silent
    // hook set before it would still print smarm's line on every panic.
    std::panic::set_hook(Box::new(|_| {}));
    g.bench_function("smarm/1w", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for _ in 0..iters {
                    let h = smarm::spawn(boom);
                    assert!(h.join().is_err());
                }
                t.elapsed()
            })
        })
    });
    let tk = tokio_rt(1);
    g.bench_function("tokio/1w", |b| {
        b.iter_custom(|iters| {
            in_task(&tk, async move {
                let t = Instant::now();
                for _ in 0..iters {
                    let h = tokio::spawn(async { boom() });
                    assert!(h.await.is_err());
                }
                t.elapsed()
            })
        })
    });
    g.finish();
    let _ = std::panic::take_hook();
}

smarm_benches::bench_main!(bench);
