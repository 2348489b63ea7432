//! switch_cost, in two modes, with the arch cycle count printed next to
//! wall time (`cycles: ...` lines):
//!
//! - **local**: one actor's `yield_now` loop on one worker (ns per yield
//!   round trip: actor → worker → run queue → actor), for each run-queue
//!   variant, against tokio's current-thread `yield_now` in a spawned task.
//! - **remote**: a round trip whose two wakes each cross to another worker:
//!   an actor on a one-worker runtime and an echo actor on a second
//!   one-worker runtime exchange a message over unbounded channels, so each
//!   send wakes the other runtime's (parked or spinning) worker through its
//!   shared queue. tokio: two current-thread runtimes, each on its own
//!   thread, exchanging over unbounded mpsc.
//!
//! `may/local_1w`: the local loop on may (`may::coroutine::yield_now` in a
//! coroutine, one may worker), last so its scheduler's idle thread is not
//! around for the other rows.
//!
//! `cargo bench -p smarm-benches --bench switch_cost`

#[path = "may_side.rs"]
mod may_side;
#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::Criterion;
use may_side::{may_block_on, may_workers};
use smarm_benches::{
    for_each_queue, port_name, report_cycles, smarm, smarm_label, smarm_rt, smarm_rt_with, Group, Host,
    RunQueue, Stopwatch,
};
use tokio_side::{in_task, tokio_rt};

fn local<Q: RunQueue<Host>>(g: &mut Group<'_>) {
    let rt = smarm_rt_with::<Q>(1);
    let id = format!("{}/local_1w", smarm_label::<Q>());
    g.bench_function(&id, |b| {
        b.iter_custom(|iters| {
            let id = id.clone();
            rt.block_on(move || {
                let w = Stopwatch::start();
                for _ in 0..iters {
                    smarm::yield_now();
                }
                w.stop(&id, iters)
            })
        })
    });
}

fn bench(c: &mut Criterion) {
    let group = format!("switch_cost/{}", port_name());
    let mut g = c.benchmark_group(&group);
    for_each_queue!(local(&mut g));
    let tk = tokio_rt(1);
    g.bench_function("tokio/local_1w", |b| {
        b.iter_custom(|iters| {
            // Inside a spawned task (as smarm's loop runs inside an actor):
            // a yield then goes through tokio's scheduler, not block_on's.
            in_task(&tk, async move {
                let w = Stopwatch::start();
                for _ in 0..iters {
                    tokio::task::yield_now().await;
                }
                w.stop("tokio/local_1w", iters)
            })
        })
    });

    let (ra, rb) = (smarm_rt(1), smarm_rt(1));
    g.bench_function("smarm/remote_2w", |b| {
        b.iter_custom(|iters| {
            let (to_echo, mut echo_rx) = smarm::channel::<u64>();
            let (to_me, mut me_rx) = smarm::channel::<u64>();
            let echo = rb.spawn(move || {
                while let Ok(n) = echo_rx.recv() {
                    if n == 0 {
                        return;
                    }
                    to_me.send(n).expect("alive");
                }
            });
            let d = ra.block_on(move || {
                let w = Stopwatch::start();
                for _ in 0..iters {
                    to_echo.send(1).expect("alive");
                    let _ = me_rx.recv();
                }
                let d = w.stop("smarm/remote_2w", iters);
                to_echo.send(0).expect("alive");
                d
            });
            echo.join().unwrap();
            d
        })
    });
    let (ta, tb) = (tokio_rt(1), tokio_rt(1));
    g.bench_function("tokio/remote_2w", |b| {
        b.iter_custom(|iters| {
            use tokio::sync::mpsc::unbounded_channel;
            let (to_echo, mut echo_rx) = unbounded_channel::<u64>();
            let (to_me, mut me_rx) = unbounded_channel::<u64>();
            std::thread::scope(|s| {
                s.spawn(|| {
                    tb.block_on(async move {
                        while let Some(n) = echo_rx.recv().await {
                            if n == 0 {
                                return;
                            }
                            to_me.send(n).expect("alive");
                        }
                    })
                });
                ta.block_on(async move {
                    let w = Stopwatch::start();
                    for _ in 0..iters {
                        to_echo.send(1).expect("alive");
                        let _ = me_rx.recv().await;
                    }
                    let d = w.stop("tokio/remote_2w", iters);
                    to_echo.send(0).expect("alive");
                    d
                })
            })
        })
    });
    if may_workers(1) {
        g.bench_function("may/local_1w", |b| {
            b.iter_custom(|iters| {
                may_block_on(move || {
                    let w = Stopwatch::start();
                    for _ in 0..iters {
                        may::coroutine::yield_now();
                    }
                    w.stop("may/local_1w", iters)
                })
            })
        });
    }
    g.finish();
    report_cycles(&group);
}

smarm_benches::bench_main!(bench);
