//! mpsc_contention: 8 sender actors each send 4,096 messages to one
//! receiver as fast as they can, on 2 workers; smarm mailbox vs tokio
//! unbounded mpsc. Throughput in messages (time per element = ns/message).
//!
//! `cargo bench -p smarm-benches --bench mpsc_contention`

#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::{Criterion, Throughput};
use smarm_benches::{port_name, smarm, smarm_rt};
use tokio_side::{in_task, tokio_rt};

const SENDERS: u64 = 8;
const EACH: u64 = 4096;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("mpsc_contention/{}", port_name()));
    g.throughput(Throughput::Elements(SENDERS * EACH));
    let workers = 2;
    let rt = smarm_rt(workers);
    g.bench_function(format!("smarm/{workers}w"), |b| {
        b.iter(|| {
            let n = rt.block_on(|| {
                let (rx, hr) = smarm::spawn_actor(|mut mb: smarm::Mailbox<u64>| {
                    let mut sum = 0u64;
                    for _ in 0..SENDERS * EACH {
                        sum += mb.recv().unwrap();
                    }
                    sum
                });
                let hs: Vec<_> = (0..SENDERS)
                    .map(|_| {
                        let rx = rx.clone();
                        smarm::spawn(move || {
                            for i in 0..EACH {
                                rx.send(i).expect("receiver alive");
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                hr.join().unwrap()
            });
            assert_eq!(n, SENDERS * EACH * (EACH - 1) / 2);
        })
    });
    let tk = tokio_rt(workers);
    g.bench_function(format!("tokio/{workers}w"), |b| {
        b.iter(|| {
            let n = in_task(&tk, async {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
                let hr = tokio::spawn(async move {
                    let mut sum = 0u64;
                    for _ in 0..SENDERS * EACH {
                        sum += rx.recv().await.unwrap();
                    }
                    sum
                });
                let hs: Vec<_> = (0..SENDERS)
                    .map(|_| {
                        let tx = tx.clone();
                        tokio::spawn(async move {
                            for i in 0..EACH {
                                tx.send(i).expect("receiver alive");
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
                hr.await.unwrap()
            });
            assert_eq!(n, SENDERS * EACH * (EACH - 1) / 2);
        })
    });
    g.finish();
}

smarm_benches::bench_main!(bench);
