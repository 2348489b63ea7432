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

use criterion::Criterion;
use smarm_benches::{port_name, smarm, smarm_pairs};

fn runtime(slice: bool) -> smarm::Runtime {
    let b = smarm::Runtime::builder().workers(1);
    let b = if slice { b } else { b.timeslice(None) };
    b.build().expect("smarm runtime")
}

/// ns for `iters` yields on `rt`.
fn yields(rt: &smarm::Runtime, iters: u64) -> Duration {
    rt.block_on(move || {
        let t = Instant::now();
        for _ in 0..iters {
            smarm::yield_now();
        }
        t.elapsed()
    })
}

/// ns for `iters` one-way messages of one pair on `rt`.
fn ping_pong(rt: &smarm::Runtime, iters: u64) -> Duration {
    rt.block_on(move || {
        let t = Instant::now();
        smarm_pairs(1, iters.max(2));
        t.elapsed()
    })
}

/// ns for `iters` checkpoints on `rt`.
fn checkpoints(rt: &smarm::Runtime, iters: u64) -> Duration {
    rt.block_on(move || {
        let t = Instant::now();
        for i in 0..iters {
            black_box(i);
            smarm::checkpoint();
        }
        t.elapsed()
    })
}

type Workload = fn(&smarm::Runtime, u64) -> Duration;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("preempt_cost/{}", port_name()));
    // Both runtimes live side by side for the whole run (an idle one's
    // worker sleeps) and the variants alternate workload by workload: a
    // runtime built after another was dropped measured slower here, which
    // would bias whichever variant ran second.
    let rts = [
        ("smarm_slice_on", runtime(true)),
        ("smarm_slice_off", runtime(false)),
    ];
    let workloads: [(&str, Workload); 3] = [
        ("yield_1w", yields),
        ("ping_pong_msg_1w", ping_pong),
        ("checkpoint", checkpoints),
    ];
    for (what, f) in workloads {
        for (name, rt) in &rts {
            g.bench_function(format!("{name}/{what}"), |b| b.iter_custom(|iters| f(rt, iters)));
        }
    }
    g.finish();
}

smarm_benches::bench_main!(bench);
