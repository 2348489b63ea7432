//! ring: the run queue's data structures alone, with the arch cycle count
//! printed next to wall time (`cycles: ...` lines). One push + one pop per
//! iteration: on one thread (the uncontended cost), and with a second thread
//! doing the same on the same queue (both ends contended). The default MPMC
//! [`Ring`] against the [`Striped`] queue (2 stripes, each thread on its own
//! stripe: what striping buys when the churn is spread). No tokio side:
//! tokio has no standalone MPMC run queue to compare.
//!
//! `cargo bench -p smarm-benches --bench ring`

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

use criterion::Criterion;
use smarm_benches::{port_name, report_cycles, Host, Platform, Stopwatch};
use smarm_core::queue::Striped;
use smarm_core::ring::Ring;

const CAP: usize = 1024;

type StripedQ = Striped<u64, <Host as Platform>::Lock>;

fn relax() {
    <Host as Platform>::yield_thread();
}

/// A queue as the bench sees it: push and pop by a thread on `stripe`.
trait Q: Sync {
    fn push(&self, stripe: usize, v: u64);
    fn pop(&self, stripe: usize) -> Option<u64>;

    /// Pops until an item comes: a pop may report empty while the other
    /// thread is caught between claiming a ticket and publishing it (the
    /// ring's bounded wait), and each thread has pushed one item, so the
    /// queue never stays empty and never fills up.
    fn pop_some(&self, stripe: usize) -> u64 {
        loop {
            if let Some(v) = self.pop(stripe) {
                return v;
            }
        }
    }
}

impl Q for Ring<u64> {
    fn push(&self, _: usize, v: u64) {
        Ring::push(self, v, &mut relax).expect("never full: each thread pops what it pushed");
    }
    fn pop(&self, _: usize) -> Option<u64> {
        Ring::pop(self, &mut relax)
    }
}

impl Q for StripedQ {
    fn push(&self, stripe: usize, v: u64) {
        self.push_at(stripe, v, &mut relax)
    }
    fn pop(&self, stripe: usize) -> Option<u64> {
        self.pop_at(stripe, &mut relax)
    }
}

/// `iters` push+pop pairs on `q`; with `contended`, a second thread does
/// push+pop pairs on stripe 1 for the whole timed loop.
fn run(q: &dyn Q, id: &str, iters: u64, contended: bool) -> std::time::Duration {
    let stop = AtomicBool::new(false);
    let ready = Barrier::new(if contended { 2 } else { 1 });
    std::thread::scope(|s| {
        if contended {
            s.spawn(|| {
                ready.wait();
                let mut i = 0u64;
                // Relaxed: a stop flag; the scope's join orders the rest.
                while !stop.load(Ordering::Relaxed) {
                    q.push(1, i);
                    black_box(q.pop_some(1));
                    i += 1;
                }
            });
        }
        ready.wait();
        let w = Stopwatch::start();
        for i in 0..iters {
            q.push(0, i);
            black_box(q.pop_some(0));
        }
        let d = w.stop(id, iters);
        stop.store(true, Ordering::Relaxed);
        d
    })
}

fn bench(c: &mut Criterion) {
    let group = format!("ring/{}", port_name());
    let mut g = c.benchmark_group(&group);
    let ring = Ring::<u64>::with_capacity(CAP);
    let striped = StripedQ::new(CAP, 2);
    for (name, q) in [("ring", &ring as &dyn Q), ("striped", &striped as &dyn Q)] {
        for (mode, contended) in [("1t", false), ("2t", true)] {
            let id = format!("smarm_{name}/{mode}");
            g.bench_function(&id, |b| b.iter_custom(|iters| run(q, &id, iters, contended)));
        }
    }
    g.finish();
    report_cycles(&group);
}

smarm_benches::bench_main!(bench);
