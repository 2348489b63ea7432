//! Loom models of the locks (`smarm_core::locks`): the real code over the
//! loom platform, with threads as waiters (no actors: the current-worker
//! slot is always null, so every waiter is a thread waiter sleeping on a
//! futex built from a loom condvar). A lost wake is a deadlock, which loom
//! reports; the values behind the locks sit in loom's checked cells, so an
//! unlock that does not happen-before the next lock is a causality
//! violation; a permit or a leader lost or doubled fails an assertion.
//!
//! ```text
//! RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom \
//!     LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_locks
//! ```
//!
//! Also the scheduler's `PollLock` (`smarm_core::lock`, the registry's
//! shard lock): its unlock is a plain Release store and its waiters spin
//! and yield, never sleep.
//!
//! Not modelled: timed waits (the loom futex ignores deadlines, the clock
//! is 0) and kills (threads cannot be killed; the withdrawal paths are unit
//! tests with ghost entries, `core/src/locks/tests.rs`, and integration
//! tests with real kills, `tests/sync_locks.rs`).
#![cfg(smarm_loom)]

use loom::sync::Arc;
use loom::thread;

use smarm_core::locks::{Barrier, Condvar, Mutex, RwLock, Semaphore, TryAcquireError};

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

/// Runs `f` under loom with a preemption bound of 2 unless
/// `LOOM_MAX_PREEMPTIONS` asks for another.
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

// ---------------------------------------------------------------------------
// PollLock (the scheduler's, under `smarm_core::lock::Mutex`)
// ---------------------------------------------------------------------------

type PollMutex<T> = smarm_core::lock::Mutex<smarm_core::lock::PollLock<LoomP>, T>;

/// Two threads try a `PollLock` once each while the other may hold it
/// (the protocol's two steps: `try_lock`'s Acquire CAS and `unlock`'s
/// Release store; `lock`'s contended path only repeats the try, with
/// yields, so an unbounded spin is left to the unit test
/// `poll_lock_counts_under_contention`, core/src/seam/lock.rs). At most
/// one holds it at a time and each section happens-before the next (the
/// cell: an unlock that is not a Release store is a causality violation,
/// two holders at once a concurrent access); every success is counted.
#[test]
fn poll_lock_sections_are_ordered() {
    model(|| {
        let m = Arc::new(PollMutex::<u32>::new(0));
        let wins = Arc::new(loom::sync::atomic::AtomicU32::new(0));
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let (m, wins) = (m.clone(), wins.clone());
                thread::spawn(move || {
                    if let Some(mut g) = m.try_lock() {
                        *g += 1;
                        drop(g);
                        wins.fetch_add(1, loom::sync::atomic::Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        let won = wins.load(loom::sync::atomic::Ordering::SeqCst);
        assert!(won >= 1, "a free lock refused both tries");
        // Free after the joins: taken at once.
        assert_eq!(*m.lock(), won);
    });
}

// ---------------------------------------------------------------------------
// Mutex
// ---------------------------------------------------------------------------

/// The holder unlocks while a waiter takes the lock, lists itself or
/// sleeps (`L3` vs `U1`/`U2`): the waiter gets the lock, and each section
/// happens-before the next (the cell).
#[test]
fn mutex_unlock_races_a_waiter() {
    model(|| {
        let m = Arc::new(Mutex::<u32, LoomP>::new(0));
        let mut g = m.lock().unwrap();
        let m2 = m.clone();
        let t = thread::spawn(move || *m2.lock().unwrap() += 1);
        *g += 1;
        drop(g);
        t.join().unwrap();
        assert_eq!(*m.lock().unwrap(), 2);
    });
}

/// Two waiters and one holder: each contended unlock wakes one waiter; a
/// woken waiter may lose to the other (barging) and go back to the front.
/// Both get the lock.
#[test]
fn mutex_two_waiters() {
    model(|| {
        let m = Arc::new(Mutex::<u32, LoomP>::new(0));
        let g = m.lock().unwrap();
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let m = m.clone();
                thread::spawn(move || *m.lock().unwrap() += 1)
            })
            .collect();
        drop(g);
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*m.lock().unwrap(), 2);
    });
}

// ---------------------------------------------------------------------------
// Condvar
// ---------------------------------------------------------------------------

/// A notify (after the notifier's unlock) racing a wait: the waiter
/// registers before it releases the mutex (`C1`–`C2`), so it returns
/// having seen the flag (no lost wake).
#[test]
fn condvar_notify_races_a_wait() {
    model(|| {
        let s = Arc::new((Mutex::<bool, LoomP>::new(false), Condvar::<LoomP>::new()));
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let (m, cv) = &*s2;
            *m.lock().unwrap() = true;
            cv.notify_one();
        });
        let (m, cv) = &*s;
        let g = cv.wait_while(m.lock().unwrap(), |ready| !*ready).unwrap();
        assert!(*g);
        drop(g);
        t.join().unwrap();
    });
}

/// `notify_all` racing two waiters (each before, during or after its
/// registration): both return.
#[test]
fn condvar_notify_all_races_two_waits() {
    model(|| {
        let s = Arc::new((Mutex::<bool, LoomP>::new(false), Condvar::<LoomP>::new()));
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    let (m, cv) = &*s;
                    assert!(*cv.wait_while(m.lock().unwrap(), |ready| !*ready).unwrap());
                })
            })
            .collect();
        let (m, cv) = &*s;
        *m.lock().unwrap() = true;
        cv.notify_all();
        for t in ts {
            t.join().unwrap();
        }
    });
}

// ---------------------------------------------------------------------------
// RwLock
// ---------------------------------------------------------------------------

/// The last reader's unlock racing a writer that waits (`U1` vs `X2`).
#[test]
fn rwlock_last_reader_out_wakes_a_writer() {
    model(|| {
        let l = Arc::new(RwLock::<u32, LoomP>::new(0));
        let r = l.read().unwrap();
        let l2 = l.clone();
        let t = thread::spawn(move || *l2.write().unwrap() += 1);
        assert_eq!(*r, 0, "a writer got in under a read guard");
        drop(r);
        t.join().unwrap();
        assert_eq!(*l.read().unwrap(), 1);
    });
}

/// A writer's unlock racing a reader and a writer that wait: each gets
/// in, the writers one at a time (the cell), the reader after the first.
#[test]
fn rwlock_writer_unlock_races_a_reader_and_a_writer() {
    model(|| {
        let l = Arc::new(RwLock::<u32, LoomP>::new(0));
        let mut w = l.write().unwrap();
        let l1 = l.clone();
        let r = thread::spawn(move || *l1.read().unwrap());
        let l2 = l.clone();
        let w2 = thread::spawn(move || *l2.write().unwrap() += 1);
        *w += 1;
        drop(w);
        let seen = r.join().unwrap();
        w2.join().unwrap();
        assert!(seen == 1 || seen == 2, "the reader saw {seen}");
        assert_eq!(*l.read().unwrap(), 2);
    });
}

// ---------------------------------------------------------------------------
// Semaphore
// ---------------------------------------------------------------------------

/// A release racing an acquire that must wait (`G0`–`G1` vs `A2`): the
/// permit is taken directly or granted to the waiter, never lost and
/// never doubled.
#[test]
fn semaphore_release_races_acquire() {
    model(|| {
        let sem = Arc::new(Semaphore::<LoomP>::new(1));
        let p = sem.acquire().unwrap();
        let s2 = sem.clone();
        let t = thread::spawn(move || {
            let p = s2.acquire().unwrap();
            assert_eq!(s2.available_permits(), 0, "a permit was doubled");
            drop(p);
        });
        drop(p);
        t.join().unwrap();
        assert_eq!(sem.available_permits(), 1, "a permit was lost");
    });
}

/// `close` racing an acquire that waits: the acquire fails (seeing the
/// flag, or woken by the close), never left asleep.
#[test]
fn semaphore_close_races_a_waiting_acquire() {
    model(|| {
        let sem = Arc::new(Semaphore::<LoomP>::new(0));
        let s2 = sem.clone();
        let t = thread::spawn(move || s2.acquire().is_err());
        sem.close();
        assert!(
            t.join().unwrap(),
            "an acquire succeeded on a closed, empty semaphore"
        );
        assert_eq!(sem.try_acquire().unwrap_err(), TryAcquireError::Closed);
    });
}

// ---------------------------------------------------------------------------
// Barrier
// ---------------------------------------------------------------------------

/// Two parties arriving in either order: both return, one leader.
#[test]
fn barrier_two_parties_one_leader() {
    model(|| {
        let b = Arc::new(Barrier::<LoomP>::new(2));
        let b2 = b.clone();
        let t = thread::spawn(move || b2.wait().is_leader());
        let me = b.wait().is_leader();
        assert!(t.join().unwrap() ^ me, "not exactly one leader");
    });
}
