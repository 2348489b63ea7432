//! chained_spawn: each actor spawns the next and returns (a chain of 1,000,
//! the last one signals a channel), on 1 and 2 workers; tokio tasks doing
//! the same in the same binary (tokio's own `chained_spawn` bench shape).
//! Throughput is in spawns. Each side times its chains inside one actor
//! (one task), as `spawn_join` does: a `block_on` per chain would add a
//! crossing from the bench thread to a worker and back that tokio's
//! current-thread runtime does not make (it polls on the calling thread).
//!
//! `cargo bench -p smarm-benches --bench chained_spawn`

use std::time::Instant;

#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::{Criterion, Throughput};
use smarm_benches::{port_name, smarm, smarm_rt};
use tokio_side::{in_task, tokio_rt};

const DEPTH: u64 = 1000;

fn smarm_chain(n: u64, done: smarm::UnboundedSender<()>) {
    if n == 0 {
        done.send(()).expect("root alive");
    } else {
        // Dropping the handle detaches the child.
        drop(smarm::spawn(move || smarm_chain(n - 1, done)));
    }
}

fn tokio_chain(n: u64, done: tokio::sync::mpsc::UnboundedSender<()>) {
    if n == 0 {
        done.send(()).expect("root alive");
    } else {
        drop(tokio::spawn(async move { tokio_chain(n - 1, done) }));
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("chained_spawn/{}", port_name()));
    g.throughput(Throughput::Elements(DEPTH));
    for workers in [1usize, 2] {
        let rt = smarm_rt(workers);
        g.bench_function(format!("smarm/{workers}w"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let (tx, mut rx) = smarm::channel();
                        smarm_chain(DEPTH, tx);
                        rx.recv().expect("chain end");
                    }
                    t.elapsed()
                })
            })
        });
        let tk = tokio_rt(workers);
        g.bench_function(format!("tokio/{workers}w"), |b| {
            b.iter_custom(|iters| {
                in_task(&tk, async move {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                        tokio_chain(DEPTH, tx);
                        rx.recv().await.expect("chain end");
                    }
                    t.elapsed()
                })
            })
        });
    }
    g.finish();
}

smarm_benches::bench_main!(bench);
