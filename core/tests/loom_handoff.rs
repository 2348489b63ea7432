//! Loom models of the park a direct handoff completes
//! (`smarm_core::sched::handoff`, step `H5`): the actor that handed over
//! (A) is parked by the actor it switched to (B), on B's stack, with the
//! real `park_word` (the same `RUNNING → PARKED` CAS the worker loop runs),
//! while wakers on other threads run the real `wake_word` (every waker's
//! transition, run by `Actor::wake`).
//!
//! What a handoff changes is where and when the park's CAS runs: after A
//! saved its sp and B stored it (`H5`), on the worker's thread but on B's
//! stack. The models check the invariants that must survive that move:
//!
//! - a wake racing the handoff's park makes A runnable exactly once:
//!   either the waker schedules it (`PARKED → RUNNABLE`) or the park fails
//!   (`NOTIFIED`) and B puts A in the run-next slot, never both, never
//!   neither (a lost wake);
//! - whoever makes A runnable sees the sp stored before the park (the
//!   waker through the CAS's Release/Acquire pair: loom reports a data race
//!   on the sp cell otherwise);
//! - a second, stale wake (a kill's, a shutdown sweep's) racing the same
//!   park changes nothing: still exactly one.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_handoff`
#![cfg(smarm_loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use smarm_core::state_word::{park_word, wake_word, Woken, NOTIFIED, PARKED, RUNNABLE, RUNNING};
use smarm_core::sync::AtomicU32;

/// The parked actor A: its state word, its saved sp (written before the
/// park, read by whoever runs it next) and how many times it was made
/// runnable.
struct A {
    state: AtomicU32,
    sp: UnsafeCell<usize>,
    runnable: AtomicUsize,
}

// SAFETY: the sp cell is accessed under the protocol the models check (loom
// reports any access that protocol leaves unsynchronised).
unsafe impl Sync for A {}

impl A {
    fn new() -> Arc<Self> {
        Arc::new(A {
            state: AtomicU32::new(RUNNING),
            sp: UnsafeCell::new(0),
            runnable: AtomicUsize::new(0),
        })
    }

    /// Made runnable: reads the sp it will resume at.
    fn run_next(&self) {
        // SAFETY: only the one who made A runnable reads it; loom checks.
        let sp = self.sp.with(|p| unsafe { *p });
        assert_eq!(sp, 0x5a, "A resumed at a stale sp");
        self.runnable.fetch_add(1, Ordering::SeqCst);
    }
}

/// The worker thread: A switched to B (`H4`); on B's stack, B stores A's
/// sp and completes A's park (`H5`): parked, or (a wake came first) A goes
/// to the run-next slot.
fn handoff_park(a: &A) {
    // SAFETY: A's sp is this thread's until the park publishes it.
    a.sp.with_mut(|p| unsafe { *p = 0x5a });
    if !park_word(&a.state) {
        assert_eq!(a.state.load(Ordering::SeqCst), NOTIFIED);
        // `complete_handoff`: runnable at once, into the run-next slot.
        a.state.store(RUNNABLE, Ordering::Relaxed);
        a.run_next();
    }
}

/// A waker on another thread (`Actor::wake`).
fn waker(a: &A) {
    if wake_word(&a.state) == Woken::Schedule {
        a.run_next();
    }
}

#[test]
fn a_wake_racing_the_handoff_park_makes_the_actor_runnable_once() {
    loom::model(|| {
        let a = A::new();
        let a2 = a.clone();
        let t = thread::spawn(move || waker(&a2));
        handoff_park(&a);
        t.join().unwrap();
        assert_eq!(a.runnable.load(Ordering::SeqCst), 1, "a lost or doubled wake");
        let s = a.state.load(Ordering::SeqCst);
        assert!(s == RUNNABLE, "A ends runnable, not {s}");
    });
}

#[test]
fn a_stale_second_wake_changes_nothing() {
    loom::model(|| {
        let a = A::new();
        let (a2, a3) = (a.clone(), a.clone());
        let t1 = thread::spawn(move || waker(&a2));
        let t2 = thread::spawn(move || waker(&a3));
        handoff_park(&a);
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(a.runnable.load(Ordering::SeqCst), 1, "a lost or doubled wake");
    });
}

#[test]
fn with_no_wake_the_actor_stays_parked() {
    loom::model(|| {
        let a = A::new();
        handoff_park(&a);
        assert_eq!(a.state.load(Ordering::SeqCst), PARKED);
        assert_eq!(a.runnable.load(Ordering::SeqCst), 0);
        // The wake that comes later schedules it.
        waker(&a);
        assert_eq!(a.runnable.load(Ordering::SeqCst), 1);
    });
}
