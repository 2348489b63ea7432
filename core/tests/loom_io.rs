//! Loom models of the poller's place in the idle protocol
//! (`smarm_core::idle::Idle::sleep_polling` and the wake that kicks it),
//! with the real `Idle` over the loom futex, and a model poller: a flag the
//! kick sets under the poller's own lock and the poll waits on with a
//! condvar (a kick before the wait still ends it, as an eventfd's or
//! `EVFILT_USER`'s does). (A model poller built on the loom futex mock
//! instead reported a deadlock in the two-worker model in which the kick's
//! wake found no sleeper listed although the poll had started its wait; the
//! mock is shared by every model and checked by `loom_futex.rs`, so the
//! poller has its own primitive here. Not explained further.)
//!
//! - a push's `notify_one` racing the only worker's way into the poller:
//!   the worker sees the work or is kicked out of the poll (a lost kick is
//!   a loom deadlock: the model poll has no timeout);
//! - two workers, one in the poller and one on its futex word, and two
//!   pushes: both are consumed (each wake reaches the worker it popped,
//!   kicking the poller for the one inside it). Without the kick it
//!   deadlocks (`scripts/mutants.sh idle-no-kick`).
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_io`
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use smarm_core::idle::Idle;
use smarm_core::lock::FutexLock;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

type TestIdle = Idle<LoomP, FutexLock<LoomP>>;

/// The model poller: `kicked` is the kick's sticky readiness, under the
/// poller's own lock (its "kernel"), with a condvar for the wait.
struct ModelPoller {
    kicked: Mutex<bool>,
    cv: Condvar,
}

impl ModelPoller {
    /// The poll: returns once kicked (consuming the kick).
    fn poll(&self) {
        let mut k = self.kicked.lock().unwrap();
        while !*k {
            k = self.cv.wait(k).unwrap();
        }
        *k = false;
    }
}

/// `Idle`'s kick function.
fn kick(arg: *const ()) {
    // SAFETY: the models pass a live `ModelPoller` (kept alive by an Arc
    // until every thread is joined).
    let p = unsafe { &*arg.cast::<ModelPoller>() };
    *p.kicked.lock().unwrap() = true;
    p.cv.notify_all();
}

/// Worker `i`'s loop: take an item, else sleep (in the poller if `polls`).
fn worker(
    i: usize,
    polls: bool,
    idle: &TestIdle,
    poller: &ModelPoller,
    work: &AtomicUsize,
    done: &AtomicUsize,
    items: usize,
) {
    loop {
        if done.load(Ordering::SeqCst) == items {
            return;
        }
        let n = work.load(Ordering::SeqCst);
        if n > 0 {
            if work
                .compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
                && done.fetch_add(1, Ordering::SeqCst) + 1 == items
            {
                idle.notify_all();
            }
            continue;
        }
        let has_work = || work.load(Ordering::SeqCst) > 0 || done.load(Ordering::SeqCst) == items;
        let arg: *const ModelPoller = poller;
        let slept = if polls {
            idle.sleep_polling(i, has_work, None, arg.cast(), &mut |_| poller.poll())
        } else {
            idle.sleep(i, has_work, None)
        };
        if !slept {
            thread::yield_now();
        }
    }
}

fn model(workers: usize, items: usize) {
    let mut b = loom::model::Builder::new();
    b.max_branches = 100_000;
    b.check(move || {
        let idle = Arc::new(TestIdle::with_kick(workers, Some(kick)));
        let poller = Arc::new(ModelPoller {
            kicked: Mutex::new(false),
            cv: Condvar::new(),
        });
        let work = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..workers)
            .map(|i| {
                let (idle, poller, work, done) = (idle.clone(), poller.clone(), work.clone(), done.clone());
                // Worker 0 sleeps in the poller, the others on their words.
                thread::spawn(move || worker(i, i == 0, &idle, &poller, &work, &done, items))
            })
            .collect();
        for _ in 0..items {
            work.fetch_add(1, Ordering::SeqCst);
            idle.notify_one();
        }
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), items);
    });
}

#[test]
fn a_push_reaches_the_worker_in_the_poller() {
    model(1, 1);
}

#[test]
fn wakes_reach_the_poller_and_the_futex_sleeper() {
    model(2, 2);
}
