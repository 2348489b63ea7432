//! ping_pong_oneshot: spawn a pair, one exchange (ping, pong), join both:
//! the cost of short-lived actors that talk once. smarm (spawn_actor +
//! mailboxes) vs tokio (spawn + oneshot channels), 1 and 2 workers.
//!
//! `cargo bench -p smarm-benches --bench ping_pong_oneshot`
use std::time::Instant;

#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::Criterion;
use smarm_benches::{port_name, smarm, smarm_rt};
use tokio_side::{in_task, tokio_rt};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("ping_pong_oneshot/{}", port_name()));
    for workers in [1usize, 2] {
        let rt = smarm_rt(workers);
        g.bench_function(format!("smarm/{workers}w"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    let t = Instant::now();
                    for i in 0..iters {
                        let (pong, hp) =
                            smarm::spawn_actor(|mut mb: smarm::Mailbox<(u64, smarm::Addr<u64>)>| {
                                let (v, back) = mb.recv().unwrap();
                                back.send(v + 1).expect("alive");
                            });
                        let (_ping, hi) = smarm::spawn_actor(move |mut mb: smarm::Mailbox<u64>| {
                            pong.send((i, mb.addr())).expect("alive");
                            mb.recv().unwrap()
                        });
                        assert_eq!(hi.join().unwrap(), i + 1);
                        hp.join().unwrap();
                    }
                    t.elapsed()
                })
            })
        });
        let tk = tokio_rt(workers);
        g.bench_function(format!("tokio/{workers}w"), |b| {
            b.iter_custom(|iters| {
                in_task(&tk, async move {
                    use tokio::sync::oneshot;
                    let t = Instant::now();
                    for i in 0..iters {
                        let (to_pong, pong_rx) = oneshot::channel::<(u64, oneshot::Sender<u64>)>();
                        let hp = tokio::spawn(async move {
                            let (v, back) = pong_rx.await.unwrap();
                            back.send(v + 1).unwrap();
                        });
                        let hi = tokio::spawn(async move {
                            let (tx, rx) = oneshot::channel();
                            to_pong.send((i, tx)).expect("alive");
                            rx.await.unwrap()
                        });
                        assert_eq!(hi.await.unwrap(), i + 1);
                        hp.await.unwrap();
                    }
                    t.elapsed()
                })
            })
        });
    }
    g.finish();
}

smarm_benches::bench_main!(bench);
