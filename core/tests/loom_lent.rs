//! Loom models of a lent receive's park and wakes (`smarm_core::actor`,
//! "Lent registrations"): the real `park_word` (with `lent`, the worker's
//! `RUNNING → PARKED_LENT` CAS), `wake_word_lent` (the transition of the
//! waker that took the lent registration) and `wake_word` (every other
//! waker's, `Actor::wake`: a kill, a timer, a shutdown sweep), over loom's
//! atomics. The references are counted by hand, as the runtime moves
//! them: the parked actor keeps its worker's reference, and whichever
//! waker moves it out of `PARKED_LENT` takes that reference to the run
//! queue; a counted waker holds one of its own, which it always drops.
//!
//! - a lent wake racing the park: the actor runs again exactly once
//!   (scheduled by the waker, or, the wake first, resumed by its worker);
//! - a lent and a counted wake racing the park: still exactly once, and
//!   the counted waker's own reference is the one dropped (the count ends
//!   where it started: a leak or a double drop fails);
//! - a stale lent registration of an actor parked counted elsewhere: the
//!   lent waker, with no reference to schedule it with, leaves it parked.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_lent`
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use smarm_core::state_word::{
    park_word, wake_word, wake_word_lent, Woken, NOTIFIED, PARKED, PARKED_LENT, RUNNABLE, RUNNING,
};
use smarm_core::sync::AtomicU32;

/// One actor: its state word, its lent registration (the channel's slot,
/// reduced to "present or taken"), its reference count and who ran it.
struct A {
    state: AtomicU32,
    reg: AtomicBool,
    /// Strong references: the channel's pin and the worker's, to start.
    refs: AtomicUsize,
    /// Times a waker scheduled it (with the reference the parked actor kept).
    scheduled: AtomicUsize,
    /// Times its worker resumed it because a wake beat the park.
    rerun: AtomicUsize,
}

impl A {
    fn new() -> Arc<A> {
        Arc::new(A {
            state: AtomicU32::new(RUNNING),
            reg: AtomicBool::new(true),
            refs: AtomicUsize::new(2),
            scheduled: AtomicUsize::new(0),
            rerun: AtomicUsize::new(0),
        })
    }
}

/// The worker, the actor's stack left (`park_switched` with `lent`): parked
/// (its reference stays with the actor) or, woken first, runnable again
/// with that reference.
fn park_lent(a: &A) {
    if !park_word(&a.state, true) {
        assert_eq!(a.state.load(Ordering::SeqCst), NOTIFIED);
        a.state.store(RUNNING, Ordering::Relaxed);
        a.rerun.fetch_add(1, Ordering::SeqCst);
    }
}

/// A sender that took the lent registration (`Registration::wake`, lent).
fn lent_waker(a: &A) {
    if !a.reg.swap(false, Ordering::SeqCst) {
        return;
    }
    match wake_word_lent(&a.state) {
        // The kept reference goes to the run queue: no count changes.
        Woken::ScheduleOwn => {
            a.scheduled.fetch_add(1, Ordering::SeqCst);
        }
        Woken::Nothing => {}
        w => panic!("a lent wake of a lent park returned {w:?}"),
    }
}

/// A waker with a reference of its own (`ActorArc::wake`), taken before it
/// started (a kill's upgrade, a sweep's clone).
fn counted_waker(a: &A) {
    match wake_word(&a.state) {
        Woken::ScheduleOwn => {
            // The kept reference goes to the queue; ours is dropped.
            a.scheduled.fetch_add(1, Ordering::SeqCst);
            a.refs.fetch_sub(1, Ordering::SeqCst);
        }
        Woken::Nothing => {
            a.refs.fetch_sub(1, Ordering::SeqCst);
        }
        w => panic!("a counted wake of a lent park returned {w:?}"),
    }
}

/// The actor ran again exactly once, and only the pin and the one running
/// (or queued) reference are left.
fn check_once(a: &A) {
    let (s, r) = (a.scheduled.load(Ordering::SeqCst), a.rerun.load(Ordering::SeqCst));
    assert_eq!(s + r, 1, "scheduled {s} times, rerun {r} times");
    if s == 1 {
        assert_eq!(a.state.load(Ordering::SeqCst), RUNNABLE);
    }
    assert_eq!(
        a.refs.load(Ordering::SeqCst),
        2,
        "a reference leaked or was dropped twice"
    );
}

#[test]
fn a_lent_wake_racing_the_park_runs_the_actor_once() {
    loom::model(|| {
        let a = A::new();
        let a2 = a.clone();
        let t = thread::spawn(move || lent_waker(&a2));
        park_lent(&a);
        t.join().unwrap();
        check_once(&a);
    });
}

#[test]
fn a_lent_and_a_counted_wake_racing_the_park_run_the_actor_once() {
    loom::model(|| {
        let a = A::new();
        // The counted waker's own reference.
        a.refs.fetch_add(1, Ordering::SeqCst);
        let (a2, a3) = (a.clone(), a.clone());
        let lent = thread::spawn(move || lent_waker(&a2));
        let counted = thread::spawn(move || counted_waker(&a3));
        park_lent(&a);
        lent.join().unwrap();
        counted.join().unwrap();
        check_once(&a);
    });
}

#[test]
fn a_stale_lent_registration_leaves_a_counted_park_alone() {
    loom::model(|| {
        let a = A::new();
        // The actor parked in another wait, counted (its registration
        // there holds a reference); the lent one here is stale.
        assert!(park_word(&a.state, false));
        let a2 = a.clone();
        let t = thread::spawn(move || lent_waker(&a2));
        t.join().unwrap();
        assert_eq!(a.state.load(Ordering::SeqCst), PARKED);
        assert_eq!(a.scheduled.load(Ordering::SeqCst), 0);
        // Its own wake still takes it.
        assert_eq!(wake_word(&a.state), Woken::Schedule);
    });
}

#[test]
fn with_no_wake_a_lent_park_stays_parked_lent() {
    loom::model(|| {
        let a = A::new();
        park_lent(&a);
        assert_eq!(a.state.load(Ordering::SeqCst), PARKED_LENT);
        assert_eq!(a.rerun.load(Ordering::SeqCst), 0);
        lent_waker(&a);
        check_once(&a);
    });
}
