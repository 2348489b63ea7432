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
    if !park_word(&a.state, false) {
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

// ---------------------------------------------------------------------------
// The yield handoff: A yields by switching to the queue's oldest actor B
// (`H2` pops B from the run queue); on B's stack, `H5` stores A's sp and
// queues A (the real `Ring`, which every run queue but the mutex one is
// built on). Another worker popping the queue meanwhile may take B first
// (then there is no handoff and the loop queues A the same way) and may
// take A as soon as it is queued: it must resume A at the sp stored before
// the push.
// ---------------------------------------------------------------------------

use smarm_core::ring::Ring;

/// Under loom the ring never calls `relax` (each wait is a loom yield).
fn relax() {
    thread::yield_now();
}

/// A queued actor: its saved sp and whether it is A (the yielder).
struct Queued {
    is_a: bool,
    sp: UnsafeCell<usize>,
}

// SAFETY: as `A`'s: the protocol the model checks orders the sp cell.
unsafe impl Sync for Queued {}
// SAFETY: as above; its fields move between threads only through the
// queue the model checks.
unsafe impl Send for Queued {}

/// The yielding worker: `H2` takes the queue's oldest (B, or nothing if
/// the other worker took it), then `H5` (or, without a handoff, the loop
/// after the switch back) stores A's sp and queues A. Returns what it took.
fn yield_handoff(ring: &Ring<Arc<Queued>>, a: Arc<Queued>) -> Option<Arc<Queued>> {
    let b = ring.pop(&mut relax);
    // SAFETY: A's sp is this thread's until the push publishes A.
    a.sp.with_mut(|p| unsafe { *p = 0x5a });
    let mut v = a;
    while let Err(back) = ring.push(v, &mut relax) {
        v = back;
        thread::yield_now();
    }
    b
}

/// Another worker's pop: resumes what it takes at its saved sp.
fn steal(ring: &Ring<Arc<Queued>>) -> Option<Arc<Queued>> {
    let got = ring.pop(&mut relax)?;
    if got.is_a {
        // SAFETY: the pop made A ours; loom reports a race otherwise.
        let sp = got.sp.with(|p| unsafe { *p });
        assert_eq!(sp, 0x5a, "A resumed at a stale sp");
    }
    Some(got)
}

#[test]
fn a_yield_handoff_queues_the_yielder_after_its_sp_is_stored() {
    loom::model(|| {
        let ring: Arc<Ring<Arc<Queued>>> = Arc::new(Ring::with_capacity(2));
        let a = Arc::new(Queued {
            is_a: true,
            sp: UnsafeCell::new(0),
        });
        let b = Arc::new(Queued {
            is_a: false,
            sp: UnsafeCell::new(0),
        });
        assert!(ring.push(b, &mut relax).is_ok());
        let r2 = ring.clone();
        let t = thread::spawn(move || {
            let mut took = Vec::new();
            for _ in 0..2 {
                if let Some(x) = steal(&r2) {
                    took.push(x.is_a);
                }
            }
            took
        });
        let handed = yield_handoff(&ring, a);
        let mut seen = t.join().unwrap();
        if let Some(b) = handed {
            assert!(!b.is_a, "the yielder took itself");
            seen.push(false);
        }
        while let Some(x) = ring.pop(&mut relax) {
            seen.push(x.is_a);
        }
        // A and B each run exactly once: none lost, none doubled.
        seen.sort_unstable();
        assert_eq!(seen, [false, true], "an actor lost or doubled");
    });
}
