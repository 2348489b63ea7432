//! lock_fairness: what the locks' fairness choice costs and buys (README,
//! "Locks"). The same loads run on
//!
//! - `sync::Mutex`: barging, bounded (a woken waiter that loses once is
//!   handed the lock at the next unlock);
//! - `sync::Semaphore::new(1)` used as a lock: a strict FIFO hand-off of
//!   its one permit (what a fully fair mutex does);
//! - `std::sync::Mutex`, where it can run at all (not with a guard held
//!   across a yield on one worker: that deadlocks).
//!
//! For each: acquisitions per second, and the fewest and the most
//! acquisitions any one contender got in the window (equal is fair).
//!
//! ```text
//! cargo run --release -p smarm-examples --example lock_fairness -- [--ms 300]
//! ```
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm_examples::smarm::sync::{Mutex, Semaphore};
use smarm_examples::smarm::{self, Runtime};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Barging,
    Handoff,
    Std,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Barging => "sync::Mutex (bounded barging)",
            Kind::Handoff => "Semaphore(1) (FIFO hand-off)",
            Kind::Std => "std::sync::Mutex",
        }
    }
}

struct Locks {
    barging: Mutex<u64>,
    handoff: Semaphore,
    std: std::sync::Mutex<u64>,
}

impl Locks {
    fn new() -> Self {
        Locks {
            barging: Mutex::new(0),
            handoff: Semaphore::new(1),
            std: std::sync::Mutex::new(0),
        }
    }

    /// One critical section of `kind` around `f`.
    fn section(&self, kind: Kind, f: impl FnOnce()) {
        match kind {
            Kind::Barging => {
                let mut g = self.barging.lock().unwrap();
                *g += 1;
                f();
            }
            Kind::Handoff => {
                let _p = self.handoff.acquire().unwrap();
                f();
            }
            Kind::Std => {
                let mut g = self.std.lock().unwrap();
                *g += 1;
                f();
            }
        }
    }
}

/// One contended load: `actors` actors on `workers` workers plus
/// `threads` OS threads loop on sections of `kind` (holding it across a
/// `yield_now` if `across_yield`) for `window`. Returns acquisitions per
/// second and the fewest and most any contender got.
fn contended(
    kind: Kind,
    workers: usize,
    actors: usize,
    threads: usize,
    across_yield: bool,
    window: Duration,
) -> (f64, u64, u64) {
    let rt = Runtime::builder().workers(workers).build().unwrap();
    let locks = Arc::new(Locks::new());
    let stop = Arc::new(AtomicBool::new(false));
    let body = {
        let (locks, stop) = (locks.clone(), stop.clone());
        move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                locks.section(kind, || {
                    if across_yield {
                        smarm::yield_now();
                    }
                });
                n += 1;
                smarm::checkpoint();
            }
            n
        }
    };
    let hs: Vec<_> = (0..actors).map(|_| rt.spawn(body.clone())).collect();
    let ts: Vec<_> = (0..threads).map(|_| std::thread::spawn(body.clone())).collect();
    let t0 = Instant::now();
    std::thread::sleep(window);
    stop.store(true, Ordering::Relaxed);
    let mut counts: Vec<u64> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    counts.extend(ts.into_iter().map(|t| t.join().unwrap()));
    let secs = t0.elapsed().as_secs_f64();
    let total: u64 = counts.iter().sum();
    let (min, max) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
    (total as f64 / secs, min, max)
}

/// A contended load: its name, workers, actors, threads, whether the guard
/// is held across a yield, and the locks it runs on.
struct Load(&'static str, usize, usize, usize, bool, &'static [Kind]);

/// ns per uncontended lock and unlock, from one actor.
fn uncontended(kind: Kind) -> f64 {
    const N: u32 = 2_000_000;
    let rt = Runtime::builder().workers(1).build().unwrap();
    rt.block_on(move || {
        let locks = Locks::new();
        let t0 = Instant::now();
        for _ in 0..N {
            locks.section(kind, || {});
        }
        t0.elapsed().as_nanos() as f64 / f64::from(N)
    })
}

fn main() {
    let mut ms = 300u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--ms" => ms = args.next().and_then(|v| v.parse().ok()).expect("--ms N"),
            _ => panic!("usage: lock_fairness [--ms N]"),
        }
    }
    let window = Duration::from_millis(ms);
    const ALL: [Kind; 3] = [Kind::Barging, Kind::Handoff, Kind::Std];
    let all: &'static [Kind] = &ALL;
    println!("uncontended lock + unlock, one actor:");
    for &k in all {
        println!("  {:<32} {:>8.1} ns", k.name(), uncontended(k));
    }
    let loads = [
        Load("4 actors, 2 workers, short sections", 2, 4, 0, false, all),
        Load(
            "8 actors, 2 workers, guard across a yield",
            2,
            8,
            0,
            true,
            &all[..2],
        ),
        Load(
            "4 actors, 1 worker, guard across a yield",
            1,
            4,
            0,
            true,
            &all[..2],
        ),
        Load("4 threads, short sections", 1, 0, 4, false, all),
    ];
    for Load(name, workers, actors, threads, across, kinds) in loads {
        println!("{name} ({ms} ms):");
        for &k in kinds {
            let (rate, min, max) = contended(k, workers, actors, threads, across, window);
            println!(
                "  {:<32} {:>12.0} acq/s   per contender min {:>9} max {:>9}",
                k.name(),
                rate,
                min,
                max
            );
        }
    }
}
