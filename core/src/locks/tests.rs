//! The locks from plain OS threads on the std test platform (asm-free:
//! Miri runs these, with small counts): exclusion, FIFO wake order,
//! poisoning, condvar waits (timed too), reader/writer rules, semaphore
//! bounds, grants and close, barrier generations. Kills cannot happen to
//! threads, so the withdrawal paths (`W4`: a waiter leaving after a wake
//! was spent on it) are driven directly: a "ghost" entry stands for an
//! actor killed in its park, and each test shows the waiter behind it
//! would be stranded without the pass-on (it would time out).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering as O};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use std::vec;
use std::vec::Vec;

use super::condvar::Expire;
use super::rwlock::{Ask, Want};
use super::waitlist::me;
use super::{AcquireError, Barrier, Condvar, Mutex, RwLock, Semaphore, TryAcquireError, TryLockError};
use crate::sched::timer::Poke;
use crate::seam::test_platform::{with_timeout, StdPlatform as P};

/// Iterations per thread in the threaded tests.
const N: usize = if cfg!(miri) { 8 } else { 2000 };
/// Bounds every test body (a lost wake fails instead of hanging).
const SECS: u64 = 60;

/// Spins (yielding) until `f` holds; the enclosing `with_timeout` bounds
/// it. For state another thread settles (a waiter listing itself).
fn until(mut f: impl FnMut() -> bool) {
    while !f() {
        thread::yield_now();
    }
}

// ---------------------------------------------------------------------------
// Mutex
// ---------------------------------------------------------------------------

#[test]
fn mutex_basics() {
    let mut m = Mutex::<u32, P>::new(1);
    {
        let mut g = m.lock().unwrap();
        *g += 1;
        assert!(
            matches!(m.try_lock(), Err(TryLockError::WouldBlock)),
            "try_lock succeeded while held"
        );
    }
    assert_eq!(*m.try_lock().unwrap(), 2, "the write through the guard stuck");
    *m.get_mut().unwrap() += 1;
    assert!(!m.is_poisoned());
    assert_eq!(m.into_inner().unwrap(), 3);
}

#[test]
fn mutex_threads_exclude_each_other() {
    with_timeout(SECS, || {
        // (count, someone inside): a second holder would see the flag.
        let m = Arc::new(Mutex::<(usize, bool), P>::new((0, false)));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                thread::spawn(move || {
                    for _ in 0..N {
                        let mut g = m.lock().unwrap();
                        assert!(!g.1, "two holders at once");
                        g.1 = true;
                        // Held across a yield: the others contend and wait.
                        thread::yield_now();
                        g.0 += 1;
                        g.1 = false;
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(m.lock().unwrap().0, 4 * N);
    });
}

#[test]
fn mutex_waiters_are_woken_in_arrival_order() {
    with_timeout(SECS, || {
        const K: usize = 4;
        let m = Arc::new(Mutex::<Vec<usize>, P>::new(Vec::new()));
        let g = m.lock().unwrap();
        let mut hs = Vec::new();
        for i in 0..K {
            let m2 = m.clone();
            hs.push(thread::spawn(move || m2.lock().unwrap().push(i)));
            // Thread i is listed before thread i + 1 starts.
            until(|| m.waiters.lock().len() == i + 1);
        }
        drop(g);
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*m.lock().unwrap(), (0..K).collect::<Vec<_>>(), "FIFO wakes");
    });
}

#[test]
fn mutex_poisoned_by_a_panicking_holder() {
    let m = Arc::new(Mutex::<u32, P>::new(0));
    let m2 = m.clone();
    let r = thread::spawn(move || {
        let mut g = m2.lock().unwrap();
        *g = 7;
        panic!("the holder fails");
    })
    .join();
    assert!(r.is_err());
    assert!(m.is_poisoned());
    match m.lock() {
        Err(e) => assert_eq!(**e.get_ref(), 7, "the guard comes with the error"),
        Ok(_) => panic!("lock() after a panicking holder is not Err"),
    }
    match m.try_lock() {
        Err(TryLockError::Poisoned(e)) => assert_eq!(*e.into_inner(), 7),
        Err(TryLockError::WouldBlock) => panic!("the unwind did not unlock"),
        Ok(_) => panic!("try_lock after a panicking holder is not Err"),
    }
    m.clear_poison();
    assert!(!m.is_poisoned());
    assert_eq!(*m.lock().unwrap(), 7);
    // into_inner reports poison too.
    let m3 = Mutex::<u32, P>::new(1);
    let _ = thread::scope(|s| {
        s.spawn(|| {
            let _g = m3.lock().unwrap();
            panic!("poison it");
        })
        .join()
    });
    assert_eq!(m3.into_inner().unwrap_err().into_inner(), 1);
}

#[test]
fn a_guard_taken_inside_an_unwind_does_not_poison() {
    struct LockOnDrop(Arc<Mutex<u32, P>>);
    impl Drop for LockOnDrop {
        fn drop(&mut self) {
            *self.0.lock().unwrap() += 1;
        }
    }
    let m = Arc::new(Mutex::<u32, P>::new(0));
    let m2 = m.clone();
    let r = thread::spawn(move || {
        let _d = LockOnDrop(m2);
        panic!("unwind");
    })
    .join();
    assert!(r.is_err());
    assert!(
        !m.is_poisoned(),
        "a guard locked and dropped inside one unwind poisoned the lock"
    );
    assert_eq!(*m.lock().unwrap(), 1);
}

#[test]
fn mutex_wake_spent_on_a_leaving_waiter_goes_on() {
    with_timeout(SECS, || {
        let m = Arc::new(Mutex::<u32, P>::new(0));
        let g = m.lock().unwrap();
        let m2 = m.clone();
        let t = thread::spawn(move || *m2.lock().unwrap() += 1);
        until(|| m.waiters.lock().len() == 1);
        // A waiter at the front that will leave without locking (an actor
        // killed in its park).
        let (ghost, _me) = me::<P>();
        let ticket = m.waiters.lock().push(ghost, false, true);
        drop(g);
        {
            let list = m.waiters.lock();
            assert!(!list.contains(ticket), "the unlock did not wake the front");
            assert_eq!(list.len(), 1, "the thread still waits, beside a free lock");
        }
        m.withdraw(ticket);
        t.join().unwrap();
        assert_eq!(*m.lock().unwrap(), 1);
    });
}

#[test]
fn mutex_hands_the_lock_to_a_starving_waiter() {
    with_timeout(SECS, || {
        let m = Arc::new(Mutex::<u32, P>::new(0));
        let g = m.lock().unwrap();
        let m2 = m.clone();
        let t = thread::spawn(move || *m2.lock().unwrap() += 1);
        until(|| m.waiters.lock().len() == 1);
        // A waiter that was woken once and lost the lock to a barger: back
        // at the front, starving.
        let (ghost, _me) = me::<P>();
        let ticket = m.waiters.lock().push(ghost, true, true);
        drop(g);
        assert!(
            matches!(m.try_lock(), Err(TryLockError::WouldBlock)),
            "the unlock freed the lock instead of handing it to the starving waiter"
        );
        {
            let mut list = m.waiters.lock();
            assert!(!list.contains(ticket) && list.unmark(ticket), "not handed over");
            // (Put the mark back: the ghost "wakes" and withdraws below.)
            list.mark(ticket);
        }
        // The ghost leaves holding the handed lock: it unlocks, and the
        // thread (not starving) is woken and takes it.
        m.withdraw(ticket);
        t.join().unwrap();
        assert_eq!(*m.lock().unwrap(), 1);
    });
}

// ---------------------------------------------------------------------------
// Condvar
// ---------------------------------------------------------------------------

/// A bounded queue shared by producers and consumers.
struct Queue {
    items: VecDeque<usize>,
    producers_left: usize,
}

#[test]
fn condvar_producers_and_consumers() {
    with_timeout(SECS, || {
        const CAP: usize = 2;
        let s = Arc::new((
            Mutex::<Queue, P>::new(Queue {
                items: VecDeque::new(),
                producers_left: 2,
            }),
            Condvar::<P>::new(),
            Condvar::<P>::new(),
        ));
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let s = s.clone();
                thread::spawn(move || {
                    let (m, not_empty, not_full) = &*s;
                    for i in 0..N {
                        let mut q = not_full
                            .wait_while(m.lock().unwrap(), |q| q.items.len() == CAP)
                            .unwrap();
                        assert!(q.items.len() < CAP, "wait_while returned with the queue full");
                        q.items.push_back(p * N + i);
                        not_empty.notify_one();
                    }
                    m.lock().unwrap().producers_left -= 1;
                    not_empty.notify_all();
                })
            })
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    let (m, not_empty, not_full) = &*s;
                    let mut got = Vec::new();
                    loop {
                        let mut q = not_empty
                            .wait_while(m.lock().unwrap(), |q| q.items.is_empty() && q.producers_left > 0)
                            .unwrap();
                        match q.items.pop_front() {
                            Some(v) => got.push(v),
                            None => return got,
                        }
                        not_full.notify_one();
                    }
                })
            })
            .collect();
        for h in producers {
            h.join().unwrap();
        }
        let mut all: Vec<usize> = consumers.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..2 * N).collect::<Vec<_>>(), "every item once");
    });
}

#[test]
fn condvar_wait_timeout_expires_and_relocks() {
    let m = Mutex::<u32, P>::new(5);
    let cv = Condvar::<P>::new();
    let (g, r) = cv
        .wait_timeout(m.lock().unwrap(), Duration::from_millis(2))
        .unwrap();
    assert!(r.timed_out());
    assert_eq!(*g, 5);
    assert!(
        matches!(m.try_lock(), Err(TryLockError::WouldBlock)),
        "the returned guard does not hold the lock"
    );
    assert_eq!(
        cv.waiting.load(O::SeqCst),
        0,
        "the timed-out waiter is still listed"
    );
    let (g, r) = cv
        .wait_timeout_while(g, Duration::from_millis(2), |v| *v == 5)
        .unwrap();
    assert!(r.timed_out(), "the condition held throughout");
    let (g, r) = cv.wait_timeout_while(g, Duration::ZERO, |v| *v != 5).unwrap();
    assert!(!r.timed_out(), "the condition was false from the start");
    drop(g);
    // A notify after the timeout finds nobody and is not kept for later.
    cv.notify_one();
    let (_g, r) = cv
        .wait_timeout(m.lock().unwrap(), Duration::from_millis(1))
        .unwrap();
    assert!(r.timed_out(), "a notify before the wait woke it");
}

#[test]
fn condvar_notify_one_wakes_one_and_notify_all_the_rest() {
    with_timeout(SECS, || {
        const K: usize = 3;
        // (generation, woken)
        let s = Arc::new((Mutex::<(u32, usize), P>::new((0, 0)), Condvar::<P>::new()));
        let hs: Vec<_> = (0..K)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    let (m, cv) = &*s;
                    let mut g = cv.wait_while(m.lock().unwrap(), |v| v.0 == 0).unwrap();
                    g.1 += 1;
                })
            })
            .collect();
        let (m, cv) = &*s;
        until(|| cv.waiting.load(O::SeqCst) == K);
        m.lock().unwrap().0 = 1;
        cv.notify_one();
        until(|| m.lock().unwrap().1 == 1);
        assert_eq!(
            cv.waiting.load(O::SeqCst),
            K - 1,
            "notify_one took more than one waiter"
        );
        cv.notify_all();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(m.lock().unwrap().1, K);
    });
}

#[test]
fn condvar_notification_spent_on_a_leaving_waiter_goes_on() {
    with_timeout(SECS, || {
        let s = Arc::new((Mutex::<bool, P>::new(false), Condvar::<P>::new()));
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let (m, cv) = &*s2;
            drop(cv.wait_while(m.lock().unwrap(), |ready| !*ready).unwrap());
        });
        let (m, cv) = &*s;
        until(|| cv.waiting.load(O::SeqCst) == 1);
        let push_ghost = || {
            let (ghost, _me) = me::<P>();
            let mut list = cv.waiters.lock();
            let t = list.push(ghost, (), true);
            cv.waiting.store(list.len(), O::SeqCst);
            t
        };
        // A ghost whose timer took it: its withdrawal passes nothing on.
        let expired = push_ghost();
        Expire { cv, ticket: expired }.poke();
        cv.withdraw(expired);
        assert_eq!(cv.waiting.load(O::SeqCst), 1, "an expiry woke the thread");
        // A ghost that a notify takes: its withdrawal passes it on.
        let notified = push_ghost();
        *m.lock().unwrap() = true;
        cv.notify_one();
        assert_eq!(cv.waiting.load(O::SeqCst), 1, "the notify skipped the front");
        cv.withdraw(notified);
        t.join().unwrap();
    });
}

// ---------------------------------------------------------------------------
// RwLock
// ---------------------------------------------------------------------------

#[test]
fn rwlock_readers_share_and_writers_exclude() {
    with_timeout(SECS, || {
        let l = Arc::new(RwLock::<u32, P>::new(0));
        // Both readers hold at once, or neither passes the barrier.
        let both = Arc::new(std::sync::Barrier::new(2));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (l, both) = (l.clone(), both.clone());
                thread::spawn(move || {
                    let g = l.read().unwrap();
                    both.wait();
                    *g
                })
            })
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), 0);
        }
        let mut w = l.write().unwrap();
        *w = 1;
        assert!(matches!(l.try_read(), Err(TryLockError::WouldBlock)));
        assert!(matches!(l.try_write(), Err(TryLockError::WouldBlock)));
        drop(w);
        let r = l.read().unwrap();
        assert_eq!(*r, 1);
        assert!(matches!(l.try_write(), Err(TryLockError::WouldBlock)));
        assert_eq!(*l.try_read().unwrap(), 1, "a second reader while one reads");
    });
}

#[test]
fn rwlock_a_waiting_writer_goes_before_new_readers() {
    with_timeout(SECS, || {
        let l = Arc::new(RwLock::<Vec<&'static str>, P>::new(Vec::new()));
        let r = l.read().unwrap();
        let l2 = l.clone();
        let w = thread::spawn(move || l2.write().unwrap().push("writer"));
        until(|| l.waiters.lock().writers == 1);
        assert!(
            matches!(l.try_read(), Err(TryLockError::WouldBlock)),
            "a new reader passed a waiting writer"
        );
        let l3 = l.clone();
        let reader = thread::spawn(move || l3.read().unwrap().clone());
        until(|| l.waiters.lock().list.len() == 2);
        drop(r);
        w.join().unwrap();
        assert_eq!(reader.join().unwrap(), vec!["writer"], "the reader went first");
    });
}

#[test]
fn rwlock_poisoned_by_a_writer_only() {
    let l = Arc::new(RwLock::<u32, P>::new(0));
    let l2 = l.clone();
    let _ = thread::spawn(move || {
        let _r = l2.read().unwrap();
        panic!("a reader fails");
    })
    .join();
    assert!(!l.is_poisoned(), "a read guard poisoned the lock");
    let l2 = l.clone();
    let _ = thread::spawn(move || {
        let mut w = l2.write().unwrap();
        *w = 3;
        panic!("a writer fails");
    })
    .join();
    assert!(l.is_poisoned());
    assert_eq!(*l.read().unwrap_err().into_inner(), 3);
    assert!(matches!(l.try_write(), Err(TryLockError::Poisoned(_))));
    l.clear_poison();
    assert_eq!(*l.write().unwrap(), 3);
}

#[test]
fn rwlock_wake_spent_on_a_leaving_writer_goes_on() {
    with_timeout(SECS, || {
        let l = Arc::new(RwLock::<u32, P>::new(0));
        let w = l.write().unwrap();
        let l2 = l.clone();
        let t = thread::spawn(move || *l2.read().unwrap());
        until(|| l.waiters.lock().list.len() == 1);
        let (ghost, _me) = me::<P>();
        let ticket = {
            let mut q = l.waiters.lock();
            q.writers += 1;
            let ask = Ask {
                kind: Want::Write,
                starving: false,
            };
            q.list.push(ghost, ask, true)
        };
        drop(w);
        assert_eq!(
            l.waiters.lock().list.len(),
            1,
            "the reader was woken together with a writer"
        );
        l.withdraw(ticket, Want::Write);
        assert_eq!(t.join().unwrap(), 0);
    });
}

#[test]
fn rwlock_hands_the_lock_to_a_starving_writer() {
    with_timeout(SECS, || {
        let l = Arc::new(RwLock::<u32, P>::new(0));
        let r = l.read().unwrap();
        let l2 = l.clone();
        let t = thread::spawn(move || *l2.write().unwrap() += 1);
        until(|| l.waiters.lock().writers == 1);
        let (ghost, _me) = me::<P>();
        let ticket = {
            let mut q = l.waiters.lock();
            q.writers += 1;
            let ask = Ask {
                kind: Want::Write,
                starving: true,
            };
            q.list.push(ghost, ask, true)
        };
        // The last reader out hands the lock to the starving writer.
        drop(r);
        assert!(matches!(l.try_read(), Err(TryLockError::WouldBlock)));
        assert!(
            matches!(l.try_write(), Err(TryLockError::WouldBlock)),
            "the read unlock freed the lock instead of handing it over"
        );
        // The ghost leaves with the lock handed to it: it unlocks, and
        // the thread writes.
        l.withdraw(ticket, Want::Write);
        t.join().unwrap();
        assert_eq!(*l.read().unwrap(), 1);
    });
}

// ---------------------------------------------------------------------------
// Semaphore
// ---------------------------------------------------------------------------

#[test]
fn semaphore_bounds_concurrency() {
    with_timeout(SECS, || {
        let sem = Arc::new(Semaphore::<P>::new(2));
        let inside = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (sem, inside, max) = (sem.clone(), inside.clone(), max.clone());
                thread::spawn(move || {
                    for _ in 0..N {
                        let p = sem.acquire().unwrap();
                        let now = inside.fetch_add(1, O::SeqCst) + 1;
                        max.fetch_max(now, O::SeqCst);
                        thread::yield_now();
                        inside.fetch_sub(1, O::SeqCst);
                        drop(p);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert!(max.load(O::SeqCst) <= 2, "more holders than permits");
        assert_eq!(sem.available_permits(), 2, "a permit was lost or made up");
    });
}

#[test]
fn semaphore_grants_in_arrival_order() {
    with_timeout(SECS, || {
        let sem = Arc::new(Semaphore::<P>::new(2));
        let held = sem.acquire_many(2).unwrap();
        assert_eq!(held.num_permits(), 2);
        let s2 = sem.clone();
        let a = thread::spawn(move || s2.acquire_many(2).unwrap().num_permits());
        until(|| sem.waiters.lock().len() == 1);
        let s3 = sem.clone();
        let b = thread::spawn(move || s3.acquire().unwrap().num_permits());
        until(|| sem.waiters.lock().len() == 2);
        // One permit free: the front (wanting 2) cannot have it, and the one
        // behind it (wanting 1) must not take it.
        sem.add_permits(1);
        assert_eq!(sem.available_permits(), 1);
        assert_eq!(
            sem.waiters.lock().len(),
            2,
            "a later, smaller request passed the front"
        );
        assert_eq!(
            sem.try_acquire().unwrap_err(),
            TryAcquireError::NoPermits,
            "try_acquire took a permit others wait for"
        );
        drop(held);
        assert_eq!(a.join().unwrap(), 2);
        assert_eq!(b.join().unwrap(), 1);
        assert_eq!(sem.available_permits(), 3);
    });
}

#[test]
fn semaphore_close_fails_waiters_and_later_acquires() {
    with_timeout(SECS, || {
        let sem = Arc::new(Semaphore::<P>::new(1));
        let p = sem.acquire().unwrap();
        let s2 = sem.clone();
        let t = thread::spawn(move || s2.acquire().map(|p| p.num_permits()));
        until(|| sem.waiters.lock().len() == 1);
        sem.close();
        assert!(
            matches!(t.join().unwrap(), Err(AcquireError { .. })),
            "the waiter was not failed by close"
        );
        assert!(sem.is_closed());
        assert_eq!(sem.try_acquire().unwrap_err(), TryAcquireError::Closed);
        assert!(sem.acquire().is_err());
        drop(p);
        assert_eq!(sem.available_permits(), 1, "a held permit still comes back");
    });
}

#[test]
fn semaphore_forget_and_add_permits() {
    let sem = Semaphore::<P>::new(3);
    let p = sem.try_acquire_many(2).unwrap();
    assert_eq!(sem.available_permits(), 1);
    p.forget();
    assert_eq!(sem.available_permits(), 1, "a forgotten permit came back");
    assert_eq!(sem.try_acquire_many(2).unwrap_err(), TryAcquireError::NoPermits);
    sem.add_permits(4);
    assert_eq!(sem.try_acquire_many(5).unwrap().num_permits(), 5);
    assert_eq!(sem.available_permits(), 5);
}

#[test]
fn semaphore_grant_to_a_leaving_waiter_is_given_back() {
    with_timeout(SECS, || {
        let sem = Arc::new(Semaphore::<P>::new(0));
        let s2 = sem.clone();
        let t = thread::spawn(move || s2.acquire().unwrap().num_permits());
        until(|| sem.waiters.lock().len() == 1);
        let (ghost, _me) = me::<P>();
        let ticket = sem.waiters.lock().push(ghost, 1, true);
        sem.add_permits(1);
        assert_eq!(sem.available_permits(), 0);
        assert_eq!(sem.waiters.lock().len(), 1, "the grant went past the front");
        sem.withdraw(ticket, 1);
        assert_eq!(t.join().unwrap(), 1);
        assert_eq!(sem.available_permits(), 1);
    });
}

// ---------------------------------------------------------------------------
// Barrier
// ---------------------------------------------------------------------------

#[test]
fn barrier_one_leader_per_generation_and_reusable() {
    with_timeout(SECS, || {
        const K: usize = 3;
        const G: usize = if cfg!(miri) { 2 } else { 50 };
        let b = Arc::new(Barrier::<P>::new(K));
        let arrived: Arc<Vec<AtomicUsize>> = Arc::new((0..G).map(|_| AtomicUsize::new(0)).collect());
        let leaders: Arc<Vec<AtomicUsize>> = Arc::new((0..G).map(|_| AtomicUsize::new(0)).collect());
        let hs: Vec<_> = (0..K)
            .map(|_| {
                let (b, arrived, leaders) = (b.clone(), arrived.clone(), leaders.clone());
                thread::spawn(move || {
                    for g in 0..G {
                        arrived[g].fetch_add(1, O::SeqCst);
                        let r = b.wait();
                        assert_eq!(
                            arrived[g].load(O::SeqCst),
                            K,
                            "a party passed before everyone arrived"
                        );
                        if r.is_leader() {
                            leaders[g].fetch_add(1, O::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        for g in 0..G {
            assert_eq!(leaders[g].load(O::SeqCst), 1, "generation {g}");
        }
    });
}

#[test]
fn barrier_of_zero_or_one_never_waits() {
    for n in [0, 1] {
        let b = Barrier::<P>::new(n);
        assert!(b.wait().is_leader());
        assert!(b.wait().is_leader());
    }
}

#[test]
fn barrier_party_leaving_takes_back_its_arrival() {
    with_timeout(SECS, || {
        let b = Arc::new(Barrier::<P>::new(2));
        // A party arrives (B1) and leaves before the release.
        let (ghost, _me) = me::<P>();
        let ticket = {
            let mut st = b.state.lock();
            st.arrived += 1;
            let g = st.generation;
            st.list.push(ghost, g, false)
        };
        b.withdraw(ticket, 0);
        assert_eq!(b.state.lock().arrived, 0);
        // Two real parties: neither may pass alone.
        let b2 = b.clone();
        let t = thread::spawn(move || b2.wait().is_leader());
        until(|| b.state.lock().list.len() == 1);
        let me_leader = b.wait().is_leader();
        assert!(t.join().unwrap() ^ me_leader, "exactly one leader");
    });
}
