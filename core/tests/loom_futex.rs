//! Loom models of the loom futex mock itself (`common/loom_platform.rs`),
//! which every other loom model waits through: a wait ends only through a
//! wake of its own word (or a changed word at entry), `wake_one` ends at
//! most one wait of its word, `wake_all` every wait of its word and none of
//! another's. A mock that woke every waiter on any wake (as the one shared
//! condvar before it did) would hide a wake sent to the wrong word, or one
//! never sent, from every model: these fail on such a mock.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_futex`
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use smarm_core::sync::AtomicU32;
use smarm_core::Futex;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::{sleepers_on, LoomP};

/// Spins (yielding to loom's scheduler) until `n` threads sleep on `word`.
fn until_asleep(word: &AtomicU32, n: usize) {
    while sleepers_on(word) < n {
        thread::yield_now();
    }
}

/// A waiter on A, and wakes of B (both kinds) before A's store and wake:
/// the waiter's one wait returns only after A's store (it saw it at entry,
/// or A's wake ended the wait), never through B's wakes.
#[test]
fn a_wake_of_another_word_does_not_end_a_wait() {
    loom::model(|| {
        let a = Arc::new(AtomicU32::new(0));
        let b = Arc::new(AtomicU32::new(0));
        let a2 = a.clone();
        let waiter = thread::spawn(move || {
            LoomP::wait(&a2, 0, None);
            assert_eq!(a2.load(Ordering::SeqCst), 1, "a wait on A ended without A's wake");
        });
        b.store(1, Ordering::SeqCst);
        LoomP::wake_one(&b);
        LoomP::wake_all(&b);
        a.store(1, Ordering::SeqCst);
        LoomP::wake_one(&a);
        waiter.join().unwrap();
    });
}

/// Two waiters on A: the first `wake_one` ends exactly one wait, the
/// second the other (a wake lost or spent twice: a deadlock or a failed
/// count).
#[test]
fn wake_one_ends_one_wait_of_its_word() {
    loom::model(|| {
        let a = Arc::new(AtomicU32::new(0));
        let ended = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (a, ended) = (a.clone(), ended.clone());
                thread::spawn(move || {
                    LoomP::wait(&a, 0, None);
                    ended.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        until_asleep(&a, 2);
        LoomP::wake_one(&a);
        assert_eq!(sleepers_on(&a), 1, "wake_one did not end exactly one wait");
        assert!(ended.load(Ordering::SeqCst) <= 1, "wake_one ended both waits");
        LoomP::wake_one(&a);
        for w in waiters {
            w.join().unwrap();
        }
    });
}

/// Two waiters on A, one on B: `wake_all(A)` ends both of A's waits and
/// leaves B's waiter asleep until B's own wake.
#[test]
fn wake_all_ends_every_wait_of_its_word_only() {
    loom::model(|| {
        let a = Arc::new(AtomicU32::new(0));
        let b = Arc::new(AtomicU32::new(0));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let a = a.clone();
                thread::spawn(move || LoomP::wait(&a, 0, None))
            })
            .collect();
        let b2 = b.clone();
        let b_waiter = thread::spawn(move || {
            LoomP::wait(&b2, 0, None);
            assert_eq!(b2.load(Ordering::SeqCst), 1, "a wait on B ended without B's wake");
        });
        until_asleep(&a, 2);
        LoomP::wake_all(&a);
        assert_eq!(sleepers_on(&a), 0, "wake_all left a waiter of its word asleep");
        for w in waiters {
            w.join().unwrap();
        }
        b.store(1, Ordering::SeqCst);
        LoomP::wake_all(&b);
        b_waiter.join().unwrap();
    });
}
