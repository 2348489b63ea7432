//! The test futex itself: a wait ends only through a wake of its own word,
//! a changed word at entry, or its deadline; `wake_one` ends at most one
//! wait, `wake_all` every wait of its word and none of another's. A futex
//! that woke every sleeper on any wake (the one shared condvar before it
//! did) would hide a wake sent to the wrong word from every test.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use super::{sleepers_on, with_timeout, StdPlatform};
use crate::seam::platform::{Futex, Platform};
use crate::sync::{AtomicU32, Ordering};

/// Yields until `cond` holds (a hang is caught by `with_timeout`).
fn until(cond: impl Fn() -> bool) {
    while !cond() {
        std::thread::yield_now();
    }
}

#[test]
fn a_wake_of_another_word_leaves_the_waiter_asleep() {
    with_timeout(60, || {
        let a = Arc::new(AtomicU32::new(0));
        let b = AtomicU32::new(0);
        let a2 = a.clone();
        let waiter = std::thread::spawn(move || {
            StdPlatform::wait(&a2, 0, None);
            a2.load(Ordering::SeqCst)
        });
        until(|| sleepers_on(&a) == 1);
        b.store(1, Ordering::SeqCst);
        StdPlatform::wake_one(&b);
        StdPlatform::wake_all(&b);
        // A wait returns only once unlisted, so a listed waiter is asleep;
        // and the value it returns with shows its wait ended after A's
        // store, not at B's wakes.
        assert_eq!(sleepers_on(&a), 1, "a wake of B unlisted A's waiter");
        assert!(!waiter.is_finished(), "a wake of B ended a wait on A");
        a.store(1, Ordering::SeqCst);
        StdPlatform::wake_one(&a);
        assert_eq!(waiter.join().unwrap(), 1, "the wait ended before A's store");
    });
}

#[test]
fn wake_one_ends_one_wait_of_its_word() {
    with_timeout(60, || {
        let a = Arc::new(AtomicU32::new(0));
        let ended = Arc::new(AtomicUsize::new(0));
        // Which wake each waiter's return came after: 0 before the second
        // wake, 1 after it. A waiter reads the phase before it counts
        // itself ended: the main thread moves to phase 1 only once it has
        // seen the first count, so the first waiter's read is ordered
        // before that move (reading after counting raced with it).
        let phase = Arc::new(AtomicUsize::new(0));
        let waiters: std::vec::Vec<_> = (0..2)
            .map(|_| {
                let (a, ended, phase) = (a.clone(), ended.clone(), phase.clone());
                std::thread::spawn(move || {
                    StdPlatform::wait(&a, 0, None);
                    let seen = phase.load(Ordering::SeqCst);
                    ended.fetch_add(1, Ordering::SeqCst);
                    seen
                })
            })
            .collect();
        until(|| sleepers_on(&a) == 2);
        StdPlatform::wake_one(&a);
        assert_eq!(sleepers_on(&a), 1, "wake_one did not unlist exactly one waiter");
        until(|| ended.load(Ordering::SeqCst) >= 1);
        assert_eq!(ended.load(Ordering::SeqCst), 1, "wake_one ended both waits");
        phase.store(1, Ordering::SeqCst);
        StdPlatform::wake_one(&a);
        let mut phases: std::vec::Vec<usize> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        phases.sort_unstable();
        assert_eq!(phases, [0, 1], "one wait ended per wake_one");
        assert_eq!(ended.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn wake_all_ends_every_wait_of_its_word_only() {
    with_timeout(60, || {
        let a = Arc::new(AtomicU32::new(0));
        let b = Arc::new(AtomicU32::new(0));
        let waiters: std::vec::Vec<_> = (0..2)
            .map(|_| {
                let a = a.clone();
                std::thread::spawn(move || StdPlatform::wait(&a, 0, None))
            })
            .collect();
        let b2 = b.clone();
        let b_waiter = std::thread::spawn(move || {
            StdPlatform::wait(&b2, 0, None);
            b2.load(Ordering::SeqCst)
        });
        until(|| sleepers_on(&a) == 2 && sleepers_on(&b) == 1);
        StdPlatform::wake_all(&a);
        assert_eq!(sleepers_on(&a), 0, "wake_all left a waiter of its word listed");
        for w in waiters {
            w.join().unwrap();
        }
        // Listed, so asleep; its return value then shows its wait ended
        // after B's store, not at A's wake.
        assert_eq!(sleepers_on(&b), 1, "wake_all of A unlisted B's waiter");
        assert!(!b_waiter.is_finished(), "wake_all of A ended a wait on B");
        b.store(1, Ordering::SeqCst);
        StdPlatform::wake_all(&b);
        assert_eq!(b_waiter.join().unwrap(), 1);
    });
}

#[test]
fn a_changed_word_returns_at_once_and_a_deadline_unlists_the_waiter() {
    with_timeout(60, || {
        let a = AtomicU32::new(0);
        // The word differs from `expected`: no sleep (a sleep would time out).
        StdPlatform::wait(&a, 1, None);
        let deadline = StdPlatform::now_ns() + 5_000_000;
        StdPlatform::wait(&a, 0, Some(deadline));
        assert!(
            StdPlatform::now_ns() >= deadline,
            "the wait returned before its deadline"
        );
        assert_eq!(sleepers_on(&a), 0, "a timed-out waiter stayed listed");
        // A later wake finds nobody (and must not be kept for a later wait:
        // this one then sleeps to its deadline again).
        StdPlatform::wake_one(&a);
        let deadline = StdPlatform::now_ns() + 5_000_000;
        StdPlatform::wait(&a, 0, Some(deadline));
        assert!(StdPlatform::now_ns() >= deadline);
    });
}
