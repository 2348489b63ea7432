//! The `may` side of the benches (may, a stackful coroutine runtime, is a
//! dev-dependency only, so this file is included by each bench binary that
//! has may rows: `#[path = "may_side.rs"] mod may_side;`).
//!
//! may's scheduler is process-global: its worker count is read once, when
//! the first coroutine is spawned, and never changes. A bench binary
//! therefore runs may rows for one worker count only: the first count a
//! row asks for, or `SMARM_BENCH_MAY_WORKERS` when set. Rows for other
//! counts are skipped with a note on stderr; `scripts/bench.py run` runs
//! the may rows once per worker count, each in its own process.
//!
//! may pins its workers to cores by default; here pinning is off, as
//! neither smarm nor tokio pins.
#![allow(dead_code)]

use std::sync::OnceLock;

static WORKERS: OnceLock<usize> = OnceLock::new();

/// Whether may rows for `workers` run in this process (see the module
/// docs); the first call fixes may's worker count.
pub fn may_workers(workers: usize) -> bool {
    let fixed = *WORKERS.get_or_init(|| {
        let n = match std::env::var("SMARM_BENCH_MAY_WORKERS") {
            Ok(v) => v.trim().parse().expect("SMARM_BENCH_MAY_WORKERS: a worker count"),
            Err(_) => workers,
        };
        may::config().set_workers(n).set_worker_pin(false);
        n
    });
    if fixed != workers {
        eprintln!(
            "may: this process's scheduler has {fixed} worker(s); may/{workers}w rows skipped \
             (SMARM_BENCH_MAY_WORKERS={workers} runs them)"
        );
    }
    fixed == workers
}

/// Runs `f` in a may coroutine and waits for its result from this thread
/// (as smarm's `block_on` runs its closure in an actor).
pub fn may_block_on<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    may::go!(f).join().expect("may coroutine")
}

/// `smarm_pairs` on may coroutines with may's unbounded mpsc channels
/// (inside a coroutine); returns the messages counted.
pub fn may_pairs(pairs: u64, msgs_each: u64) -> u64 {
    use may::sync::mpsc::{channel, Receiver, Sender};
    fn play(rx: Receiver<u64>, tx: Sender<u64>) -> u64 {
        let mut seen = 0;
        while let Ok(n) = rx.recv() {
            seen += 1;
            if n == 0 {
                return seen;
            }
            tx.send(n - 1).expect("partner alive");
            if n == 1 {
                return seen;
            }
        }
        seen
    }
    let mut hs = Vec::with_capacity(2 * pairs as usize);
    for _ in 0..pairs {
        let (atx, arx) = channel();
        let (btx, brx) = channel();
        btx.send(msgs_each - 1).expect("fresh channel");
        hs.push(may::go!(move || play(arx, btx)));
        hs.push(may::go!(move || play(brx, atx)));
    }
    hs.into_iter().map(|h| h.join().expect("player")).sum()
}

/// skynet on may: a coroutine per node, parents summing their children's
/// results by join.
pub fn may_skynet(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let child = size / 10;
    let hs: Vec<_> = (0..10)
        .map(|i| may::go!(move || may_skynet(num + i * child, child)))
        .collect();
    hs.into_iter().map(|h| h.join().expect("skynet node")).sum()
}
