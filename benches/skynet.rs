//! skynet: a 10-ary tree of actors/tasks with 1,000,000 leaves, parents
//! summing children via join, smarm vs tokio multi_thread with the same
//! worker count (2 and all cores), in the same binary.
//!
//! `cargo bench -p smarm-benches --bench skynet`
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use criterion::Criterion;
use smarm_benches::{config, port_name, smarm};

const LEAVES: u64 = 1_000_000;

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
    }
    g.finish();
}

smarm_benches::bench_main!(bench, config().measurement_time(Duration::from_secs(8)));
