//! call: request and reply, a fresh oneshot per call (the reply slot of a
//! `gen_server:call`): a client actor sends a request carrying the
//! oneshot's sender to a server actor's mailbox and waits on the receiver;
//! ns per call (one request, one reply, one oneshot made and dropped).
//! smarm (a mailbox and `smarm::oneshot`) vs tokio (an unbounded mpsc and
//! `tokio::sync::oneshot`), 1 and 2 workers, in the same binary.
//!
//! `cargo bench -p smarm-benches --bench call`
use std::time::Instant;

#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::Criterion;
use smarm_benches::{port_name, smarm, smarm_rt};
use tokio_side::{in_task, tokio_rt};

/// A request: add one to the value; `None` stops the server.
type Req = Option<(u64, smarm::OneshotSender<u64>)>;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("call/{}", port_name()));
    for workers in [1usize, 2] {
        let rt = smarm_rt(workers);
        g.bench_function(format!("smarm/{workers}w"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    let (server, hs) = smarm::spawn_actor(|mut mb: smarm::Mailbox<Req>| {
                        while let Ok(Some((v, reply))) = mb.recv() {
                            reply.send(v + 1).expect("caller waits");
                        }
                    });
                    let t = Instant::now();
                    for i in 0..iters {
                        let (tx, rx) = smarm::oneshot::<u64>();
                        server.send(Some((i, tx))).expect("server alive");
                        assert_eq!(rx.recv(), Ok(i + 1));
                    }
                    let d = t.elapsed();
                    server.send(None).expect("server alive");
                    hs.join().unwrap();
                    d
                })
            })
        });
        let tk = tokio_rt(workers);
        g.bench_function(format!("tokio/{workers}w"), |b| {
            b.iter_custom(|iters| {
                in_task(&tk, async move {
                    use tokio::sync::{mpsc, oneshot};
                    let (server, mut reqs) = mpsc::unbounded_channel::<(u64, oneshot::Sender<u64>)>();
                    let hs = tokio::spawn(async move {
                        while let Some((v, reply)) = reqs.recv().await {
                            reply.send(v + 1).expect("caller waits");
                        }
                    });
                    let t = Instant::now();
                    for i in 0..iters {
                        let (tx, rx) = oneshot::channel();
                        server.send((i, tx)).expect("server alive");
                        assert_eq!(rx.await, Ok(i + 1));
                    }
                    let d = t.elapsed();
                    drop(server);
                    hs.await.unwrap();
                    d
                })
            })
        });
    }
    g.finish();
}

smarm_benches::bench_main!(bench);
