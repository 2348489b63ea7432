//! ping_pong_steady: one pair exchanging messages back and forth (ns per
//! round trip = two messages), on 1 and 2 workers; smarm mailboxes and smarm
//! unbounded channels vs tokio unbounded mpsc and may coroutines with may's
//! unbounded mpsc (one worker count per process: see may_side.rs) in the
//! same binary.
//!
//! `cargo bench -p smarm-benches --bench ping_pong_steady`
use std::time::Instant;

#[path = "may_side.rs"]
mod may_side;
#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::Criterion;
use may_side::{may_block_on, may_workers};
use smarm_benches::{port_name, smarm, smarm_rt, Ball};
use tokio_side::tokio_rt;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("ping_pong_steady/{}", port_name()));
    for workers in [1usize, 2] {
        let rt = smarm_rt(workers);
        g.bench_function(format!("smarm/{workers}w"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    // The echo actor returns every ball; we time `iters` round trips.
                    let (echo, he) = smarm::spawn_actor(|mut mb: smarm::Mailbox<Ball>| {
                        let Ball::Peer(back) = mb.recv().unwrap() else {
                            unreachable!()
                        };
                        loop {
                            match mb.recv().unwrap() {
                                Ball::Left(0) => return,
                                Ball::Left(n) => back.send(Ball::Left(n)).expect("alive"),
                                Ball::Peer(_) => unreachable!(),
                            }
                        }
                    });
                    let (me, hm) = smarm::spawn_actor(move |mut mb: smarm::Mailbox<Ball>| {
                        echo.send(Ball::Peer(mb.addr())).expect("alive");
                        let t = Instant::now();
                        for _ in 0..iters {
                            echo.send(Ball::Left(1)).expect("alive");
                            let _ = mb.recv().unwrap();
                        }
                        let d = t.elapsed();
                        echo.send(Ball::Left(0)).expect("alive");
                        d
                    });
                    drop(me);
                    he.join().unwrap();
                    hm.join().unwrap()
                })
            })
        });
        g.bench_function(format!("smarm_channel/{workers}w"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    // The same exchange over two unbounded channels.
                    let (to_echo, mut echo_rx) = smarm::channel::<u64>();
                    let (to_me, mut me_rx) = smarm::channel::<u64>();
                    let echo = smarm::spawn(move || {
                        while let Ok(n) = echo_rx.recv() {
                            if n == 0 {
                                return;
                            }
                            to_me.send(n).expect("alive");
                        }
                    });
                    let me = smarm::spawn(move || {
                        let t = Instant::now();
                        for _ in 0..iters {
                            to_echo.send(1).expect("alive");
                            let _ = me_rx.recv();
                        }
                        let d = t.elapsed();
                        to_echo.send(0).expect("alive");
                        d
                    });
                    let d = me.join().unwrap();
                    echo.join().unwrap();
                    d
                })
            })
        });
        let tk = tokio_rt(workers);
        g.bench_function(format!("tokio/{workers}w"), |b| {
            b.iter_custom(|iters| {
                tk.block_on(async move {
                    use tokio::sync::mpsc::unbounded_channel;
                    let (to_echo, mut echo_rx) = unbounded_channel::<u64>();
                    let (to_me, mut me_rx) = unbounded_channel::<u64>();
                    let echo = tokio::spawn(async move {
                        while let Some(n) = echo_rx.recv().await {
                            if n == 0 {
                                return;
                            }
                            to_me.send(n).expect("alive");
                        }
                    });
                    let me = tokio::spawn(async move {
                        let t = Instant::now();
                        for _ in 0..iters {
                            to_echo.send(1).expect("alive");
                            let _ = me_rx.recv().await;
                        }
                        let d = t.elapsed();
                        to_echo.send(0).expect("alive");
                        d
                    });
                    let d = me.await.unwrap();
                    echo.await.unwrap();
                    d
                })
            })
        });
        drop(tk);
        if may_workers(workers) {
            g.bench_function(format!("may/{workers}w"), |b| {
                b.iter_custom(|iters| {
                    may_block_on(move || {
                        use may::sync::mpsc::channel;
                        let (to_echo, echo_rx) = channel::<u64>();
                        let (to_me, me_rx) = channel::<u64>();
                        let echo = may::go!(move || {
                            while let Ok(n) = echo_rx.recv() {
                                if n == 0 {
                                    return;
                                }
                                to_me.send(n).expect("alive");
                            }
                        });
                        let me = may::go!(move || {
                            let t = Instant::now();
                            for _ in 0..iters {
                                to_echo.send(1).expect("alive");
                                let _ = me_rx.recv();
                            }
                            let d = t.elapsed();
                            to_echo.send(0).expect("alive");
                            d
                        });
                        let d = me.join().unwrap();
                        echo.join().unwrap();
                        d
                    })
                })
            });
        }
    }
    g.finish();
}

smarm_benches::bench_main!(bench);
