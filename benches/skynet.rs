//! skynet: a 10-ary tree of actors/tasks with 1,000,000 leaves, parents
//! summing children via join, smarm vs tokio multi_thread with the same
//! worker count (2 and all cores), in the same binary (`skynet_1M`).
//!
//! `skynet_10k`: the same tree with 10,000 leaves (11,111 nodes) on each
//! worker count of `SMARM_BENCH_WORKERS`, smarm vs tokio vs may. may gives
//! each coroutine its own mapping plus a guard page, two of the kernel's
//! `vm.max_map_count` (65,530 by default) per live coroutine, and runs
//! out (ENOMEM, a panic) long before 1,000,000; 10,000 leaves fit. may's
//! `skynet_1M` row runs only where `vm.max_map_count` allows 2.5 maps per
//! node (it says so on stderr otherwise).
//!
//! `cargo bench -p smarm-benches --bench skynet`
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

#[path = "may_side.rs"]
mod may_side;
#[path = "tokio_side.rs"]
mod tokio_side;

use criterion::Criterion;
use may_side::{may_block_on, may_skynet, may_workers};
use smarm_benches::{config, port_name, smarm, worker_counts};
use tokio_side::tokio_rt;

const LEAVES: u64 = 1_000_000;
/// The tree may survives (see the module docs).
const SMALL: u64 = 10_000;

/// Whether may can hold a tree of `leaves` leaves alive at once: two maps
/// per node, with room to spare, under `vm.max_map_count`.
fn may_fits(leaves: u64) -> bool {
    let max: u64 = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530);
    let nodes = leaves + leaves / 9;
    let fits = nodes * 5 / 2 <= max;
    if !fits {
        eprintln!(
            "may: a {leaves}-leaf skynet needs ~{} maps, vm.max_map_count is {max}: may/{leaves} skipped",
            nodes * 5 / 2
        );
    }
    fits
}

fn smarm_skynet(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let child = size / 10;
    let hs: Vec<_> = (0..10)
        .map(|i| smarm::spawn(move || smarm_skynet(num + i * child, child)))
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).sum()
}

fn tokio_skynet(num: u64, size: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if size == 1 {
            return num;
        }
        let child = size / 10;
        let hs: Vec<_> = (0..10)
            .map(|i| tokio::spawn(tokio_skynet(num + i * child, child)))
            .collect();
        let mut sum = 0;
        for h in hs {
            sum += h.await.unwrap();
        }
        sum
    })
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("skynet_1M/{}", port_name()));
    g.sample_size(10);
    let expect = LEAVES * (LEAVES - 1) / 2;
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut counts = vec![2];
    if cores != 2 {
        counts.push(cores);
    }
    for &w in &counts {
        let rt = smarm::Runtime::builder()
            .workers(w)
            .stack_size(32 * 1024)
            .build()
            .unwrap();
        g.bench_function(format!("smarm/{w}w"), |b| {
            b.iter(|| assert_eq!(rt.block_on(|| smarm_skynet(0, LEAVES)), expect))
        });
        let tk = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(w)
            .build()
            .unwrap();
        g.bench_function(format!("tokio/{w}w"), |b| {
            b.iter(|| assert_eq!(tk.block_on(tokio_skynet(0, LEAVES)), expect))
        });
        drop(tk);
        if may_fits(LEAVES) && may_workers(w) {
            g.bench_function(format!("may/{w}w"), |b| {
                b.iter(|| assert_eq!(may_block_on(|| may_skynet(0, LEAVES)), expect))
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group(format!("skynet_10k/{}", port_name()));
    let expect = SMALL * (SMALL - 1) / 2;
    for w in worker_counts() {
        let rt = smarm::Runtime::builder()
            .workers(w)
            .stack_size(32 * 1024)
            .build()
            .unwrap();
        g.bench_function(format!("smarm/{w}w"), |b| {
            b.iter(|| assert_eq!(rt.block_on(|| smarm_skynet(0, SMALL)), expect))
        });
        drop(rt);
        let tk = tokio_rt(w);
        g.bench_function(format!("tokio/{w}w"), |b| {
            b.iter(|| assert_eq!(tk.block_on(tokio_skynet(0, SMALL)), expect))
        });
        drop(tk);
        if may_workers(w) {
            g.bench_function(format!("may/{w}w"), |b| {
                b.iter(|| assert_eq!(may_block_on(|| may_skynet(0, SMALL)), expect))
            });
        }
    }
    g.finish();
}

smarm_benches::bench_main!(bench, config().measurement_time(Duration::from_secs(8)));
