//! spawn_join: spawn a trivial actor and join it, from inside an actor,
//! against tokio's `spawn(..).await` in the same binary: smarm with 1 worker
//! vs tokio current_thread (`tokio/1w`), smarm with 2 workers vs tokio
//! multi_thread(2) (`tokio/2w`); may's `go!(..).join()` from inside a
//! coroutine (`may/1w`, `may/2w`: one of them per process, see may_side.rs).
//!
//! `cargo bench -p smarm-benches --bench spawn_join`
use std::hint::black_box;
use std::time::Instant;

#[path = "may_side.rs"]
mod may_side;
#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::Criterion;
use may_side::{may_block_on, may_workers};
use smarm_benches::{port_name, smarm, smarm_rt};
use tokio_side::{in_task, tokio_rt};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("spawn_join/{}", port_name()));
    for workers in [1usize, 2] {
        let rt = smarm_rt(workers);
        g.bench_function(format!("smarm/{workers}w"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(move || {
                    let t = Instant::now();
                    for i in 0..iters {
                        let h = smarm::spawn(move || black_box(i));
                        black_box(h.join().unwrap());
                    }
                    t.elapsed()
                })
            })
        });
    }
    let (tk1, tk2) = (tokio_rt(1), tokio_rt(2));
    for (name, tk) in [("tokio/1w", &tk1), ("tokio/2w", &tk2)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                in_task(tk, async move {
                    let t = Instant::now();
                    for i in 0..iters {
                        let h = tokio::spawn(async move { black_box(i) });
                        black_box(h.await.unwrap());
                    }
                    t.elapsed()
                })
            })
        });
    }
    drop((tk1, tk2));
    for workers in [1usize, 2] {
        if !may_workers(workers) {
            continue;
        }
        g.bench_function(format!("may/{workers}w"), |b| {
            b.iter_custom(|iters| {
                may_block_on(move || {
                    let t = Instant::now();
                    for i in 0..iters {
                        let h = may::go!(move || black_box(i));
                        black_box(h.join().unwrap());
                    }
                    t.elapsed()
                })
            })
        });
    }
    g.finish();
}

smarm_benches::bench_main!(bench);
