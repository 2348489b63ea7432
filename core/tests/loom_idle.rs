//! Loom models of the idle protocol (`smarm_core::idle`) over the real ring:
//! a worker that sleeps for lack of work is always woken by the next push,
//! so every item is consumed and no thread blocks forever (loom reports a
//! deadlock if a wake is lost); and a timer's targeted wake
//! (`notify_worker`) racing a push's `notify_one` for one sleeper, and a
//! `notify_one` racing one sleeper's way onto the idle list. The
//! shutdown side of the protocol (`notify_all`, the last idle worker) is in
//! `loom_shutdown.rs`.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_idle`
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use smarm_core::idle::Idle;
use smarm_core::lock::FutexLock;
use smarm_core::ring::Ring;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP as LoomFutex;

type TestIdle = Idle<LoomFutex, FutexLock<LoomFutex>>;

/// The queue a model's workers share: the real ring, or (for the models
/// with more threads, to keep the state space small) a locked deque.
trait Queue: Send + Sync + 'static {
    fn new() -> Self;
    fn push(&self, v: usize) -> Result<(), usize>;
    fn pop(&self) -> Option<usize>;
    fn is_empty(&self) -> bool;
}

impl Queue for Ring<usize> {
    fn new() -> Self {
        Ring::with_capacity(2)
    }
    fn push(&self, v: usize) -> Result<(), usize> {
        Ring::push(self, v, &mut || thread::yield_now())
    }
    fn pop(&self) -> Option<usize> {
        Ring::pop(self, &mut || thread::yield_now())
    }
    fn is_empty(&self) -> bool {
        Ring::is_empty(self)
    }
}

struct Locked(Mutex<std::collections::VecDeque<usize>>, AtomicUsize);

impl Queue for Locked {
    fn new() -> Self {
        Locked(Mutex::new(Default::default()), AtomicUsize::new(0))
    }
    fn push(&self, v: usize) -> Result<(), usize> {
        let mut q = self.0.lock().unwrap();
        q.push_back(v);
        self.1.store(q.len(), Ordering::SeqCst);
        Ok(())
    }
    fn pop(&self) -> Option<usize> {
        let mut q = self.0.lock().unwrap();
        let v = q.pop_front();
        self.1.store(q.len(), Ordering::SeqCst);
        v
    }
    fn is_empty(&self) -> bool {
        self.1.load(Ordering::SeqCst) == 0
    }
}

/// `workers` consumer threads and one producer pushing `items`; each
/// consumer sleeps through the idle protocol when the ring is empty.
///
/// The preemption bound is 2 unless `LOOM_MAX_PREEMPTIONS` asks for
/// another: unbounded, these models run for many minutes.
fn model<Q: Queue>(workers: usize, items: usize) {
    let mut b = loom::model::Builder::new();
    b.max_branches = 100_000;
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(move || {
        let ring = Arc::new(Q::new());
        let idle = Arc::new(TestIdle::new(workers));
        let consumed = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(vec![0u8; items]));
        let handles: Vec<_> = (0..workers)
            .map(|i| {
                let (ring, idle, consumed, seen) =
                    (ring.clone(), idle.clone(), consumed.clone(), seen.clone());
                thread::spawn(move || loop {
                    if consumed.load(Ordering::SeqCst) == items {
                        return;
                    }
                    if let Some(v) = ring.pop() {
                        seen.lock().unwrap()[v] += 1;
                        if consumed.fetch_add(1, Ordering::SeqCst) + 1 == items {
                            idle.notify_all(); // let the others exit
                        }
                        continue;
                    }
                    if !idle.sleep(
                        i,
                        || !ring.is_empty() || consumed.load(Ordering::SeqCst) == items,
                        None,
                    ) {
                        // Work is announced but maybe not yet published (a
                        // producer between claim and publish): let it run.
                        thread::yield_now();
                    }
                })
            })
            .collect();
        for v in 0..items {
            let mut v = v;
            loop {
                match ring.push(v) {
                    Ok(()) => break,
                    Err(back) => {
                        v = back;
                        thread::yield_now();
                    }
                }
            }
            idle.notify_one();
        }
        for h in handles {
            h.join().unwrap();
        }
        assert!(
            seen.lock().unwrap().iter().all(|&n| n == 1),
            "an item was lost or duplicated"
        );
    });
}

#[test]
fn ring_one_worker_is_woken_for_each_push() {
    model::<Ring<usize>>(1, 2);
}

#[test]
fn ring_one_worker_three_items_wraps() {
    model::<Ring<usize>>(1, 3);
}

#[test]
fn two_workers_no_lost_wakeup() {
    model::<Locked>(2, 1);
}

/// One sleeper that may or may not be on the idle list when a push's
/// `notify_one` runs (before its sleep, between listing and the re-check,
/// asleep): a sleep that ends with `true` (it slept) was ended by a wake,
/// so `notify_one` must have reported one; with `false` (nobody listed at
/// its look) the sleeper's re-check finds the work instead (a lost wake
/// is a deadlock). The list ends empty. The sequential fast path (nobody
/// ever listed: no wake) is a unit test in `core/src/sched/idle/tests.rs`.
#[test]
fn notify_one_racing_a_sleep() {
    loom::model(|| {
        let idle = Arc::new(TestIdle::new(1));
        let work = Arc::new(AtomicUsize::new(0));
        let (i, wk) = (idle.clone(), work.clone());
        let sleeper = thread::spawn(move || {
            let mut slept = false;
            while wk.load(Ordering::SeqCst) == 0 {
                slept |= i.sleep(0, || wk.load(Ordering::SeqCst) != 0, None);
            }
            slept
        });
        work.store(1, Ordering::SeqCst);
        let woke = idle.notify_one();
        let slept = sleeper.join().unwrap();
        assert!(woke || !slept, "a sleep ended although notify_one issued no wake");
        assert_eq!(idle.sleepers(), 0, "the idle list kept a stale entry");
    });
}

/// A timer's targeted wake (`notify_worker`, after arming) races a push's
/// `notify_one` for the one sleeper, each after publishing one unit of
/// work: the sleeper sees both units (it exits only on seeing 2: a wake it
/// slept through, or one spent while it was awake, must not strand it), no
/// more sleeps end than wakes were issued (each sleep that returns `true`
/// took one), and the idle list ends empty (no entry popped twice or left
/// behind).
#[test]
fn notify_worker_races_notify_one() {
    loom::model(|| {
        let idle = Arc::new(TestIdle::new(1));
        let work = Arc::new(AtomicUsize::new(0));
        let (i, wk) = (idle.clone(), work.clone());
        let worker = thread::spawn(move || {
            let mut slept = 0;
            loop {
                let seen = wk.load(Ordering::SeqCst);
                if seen == 2 {
                    return slept;
                }
                slept += usize::from(i.sleep(0, || wk.load(Ordering::SeqCst) != seen, None));
            }
        });
        let (i, wk) = (idle.clone(), work.clone());
        let timer = thread::spawn(move || {
            wk.fetch_add(1, Ordering::SeqCst);
            i.notify_worker(0)
        });
        work.fetch_add(1, Ordering::SeqCst);
        let woke = usize::from(idle.notify_one());
        let woke = woke + usize::from(timer.join().unwrap());
        let slept = worker.join().unwrap();
        assert!(slept <= woke, "{slept} sleeps ended by {woke} wakes");
        assert_eq!(idle.sleepers(), 0, "the idle list kept a stale entry");
    });
}
