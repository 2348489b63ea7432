//! timers: the timer structure and timer lateness.
//!
//! 1. `timer_heap`: arm 10,000 timers with random deadlines, then fire them
//!    all in deadline order: smarm's `TimerHeap` (a binary heap with an
//!    arming sequence for ties) against an ordered map keyed by
//!    `(deadline, seq)` (the row `smarm_btreemap`: the alternative
//!    structure smarm could use), side by side (criterion).
//! 2. `lateness`: 10,000 concurrent sleepers, each sleeping a random
//!    10–100 ms from when it starts; lateness = wake time − deadline,
//!    p50/p99/max, smarm (2
//!    workers) against tokio's multi-thread runtime (2 workers,
//!    `tokio::time::sleep`) in the same run. Printed as a table.
//!
//! `cargo bench -p smarm-benches --bench timers`
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use smarm_benches::{port_name, smarm};
use smarm_core::timer::TimerHeap;

const SLEEPERS: u64 = 10_000;

/// Deterministic pseudo-random deadlines (xorshift).
fn deadlines(n: usize) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 100_000_000
        })
        .collect()
}

fn heap_bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("timer_heap/{}", port_name()));
    let ds = deadlines(10_000);
    g.bench_function("smarm_heap/arm_fire_10k", |b| {
        b.iter(|| {
            let mut h = TimerHeap::new();
            for (i, &d) in ds.iter().enumerate() {
                h.push(d, i);
            }
            let mut sum = 0;
            h.pop_due(u64::MAX, |_, v| sum += v);
            black_box(sum)
        })
    });
    g.bench_function("smarm_btreemap/arm_fire_10k", |b| {
        b.iter(|| {
            let mut m = BTreeMap::new();
            for (i, &d) in ds.iter().enumerate() {
                m.insert((d, i as u64), i);
            }
            let mut sum = 0;
            while let Some((_, v)) = m.pop_first() {
                sum += v;
            }
            black_box(sum)
        })
    });
    g.finish();
}

/// p50, p99 and max of `v` (sorted in place), in µs.
fn percentiles(v: &mut [Duration]) -> (f64, f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.99), at(1.0))
}

fn smarm_lateness() -> Vec<Duration> {
    let rt = smarm::Runtime::builder()
        .workers(2)
        .build()
        .expect("smarm runtime");
    let ds = deadlines(SLEEPERS as usize);
    let late = rt.block_on(move || {
        let (tx, mut rx) = smarm::channel::<Duration>();
        for d in ds {
            let tx = tx.clone();
            smarm::spawn(move || {
                // Each sleeper's deadline from when it arms its timer, so
                // the time the spawner takes (10k stacks) is not counted.
                let deadline =
                    Instant::now() + Duration::from_millis(10) + Duration::from_nanos(d % 90_000_000);
                smarm::sleep_until(deadline);
                tx.send(Instant::now().saturating_duration_since(deadline))
                    .expect("collector");
                // Stay alive (parked) until the runtime is dropped: the
                // exits of 10k actors (stacks beyond the pool unmapped)
                // would otherwise delay the wake-ups still to come, which
                // measures exit cost, not timers.
                smarm::sleep(Duration::from_secs(3600));
            });
        }
        drop(tx);
        (0..SLEEPERS)
            .map(|_| rx.recv().expect("a lateness"))
            .collect::<Vec<_>>()
    });
    // Dropping the runtime fires the parked sleepers' timers and cancels them.
    drop(rt);
    late
}

fn tokio_lateness() -> Vec<Duration> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("tokio runtime");
    let ds = deadlines(SLEEPERS as usize);
    rt.block_on(async move {
        let hs: Vec<_> = ds
            .into_iter()
            .map(|d| {
                tokio::spawn(async move {
                    let deadline = tokio::time::Instant::now()
                        + Duration::from_millis(10)
                        + Duration::from_nanos(d % 90_000_000);
                    tokio::time::sleep_until(deadline).await;
                    tokio::time::Instant::now().saturating_duration_since(deadline)
                })
            })
            .collect();
        let mut v = Vec::with_capacity(hs.len());
        for h in hs {
            v.push(h.await.expect("sleeper"));
        }
        v
    })
}

fn main() {
    let mut c = smarm_benches::config().configure_from_args();
    heap_bench(&mut c);
    c.final_summary();
    // The lateness table runs with the plain command only (not for a
    // listing, nor for the per-implementation filters `scripts/bench.py`
    // passes, such as `/smarm_heap/`).
    if std::env::args().skip(1).any(|a| a == "--list" || a.contains('/')) {
        return;
    }

    println!(
        "\ntimer lateness/{}: {SLEEPERS} concurrent sleepers, 10-100 ms, 2 workers",
        port_name()
    );
    println!(
        "{:<8} {:>10} {:>10} {:>10}",
        "runtime", "p50 µs", "p99 µs", "max µs"
    );
    let mut rows = Vec::new();
    for _ in 0..3 {
        let (s50, s99, smax) = percentiles(&mut smarm_lateness());
        let (t50, t99, tmax) = percentiles(&mut tokio_lateness());
        println!("{:<8} {s50:>10.1} {s99:>10.1} {smax:>10.1}", "smarm");
        println!("{:<8} {t50:>10.1} {t99:>10.1} {tmax:>10.1}", "tokio");
        rows.push((s50 / t50, s99 / t99));
    }
    for (r50, r99) in rows {
        println!("smarm/tokio lateness: p50 {r50:.3}  p99 {r99:.3}");
    }
}
