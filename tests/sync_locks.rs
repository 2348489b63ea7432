//! The actor-aware locks (`smarm::sync`): a guard held across safe points
//! on a one-worker runtime, poisoning by a panicking or killed holder,
//! killed waiters, and each primitive shared by actors and plain threads
//! at once. (Their protocols, from threads: core's `locks/tests.rs` under
//! Miri and `core/tests/loom_locks.rs`.)
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm_tests::smarm::sync::{Barrier, Condvar, Mutex, RwLock, Semaphore, TryAcquireError, TryLockError};
use smarm_tests::smarm::{self, ActorRef, ActorState, Runtime};
use smarm_tests::{eventually, with_timeout};

/// Whether the dump shows actor `id` parked on a lock.
fn parked_on_a_lock(rt: &Runtime, id: u64) -> bool {
    rt.dump()
        .actors
        .iter()
        .any(|a| a.id == id && a.state == ActorState::WaitingLock)
}

/// The case. One worker; the holder keeps its guard across a
/// receive and a yield while a second actor locks. The second actor parks
/// (the dump says so) and the worker runs the holder on, which unlocks.
///
/// With `std::sync::Mutex` this deadlocks: the second actor's `lock()`
/// blocks the only worker thread in the kernel, so the holder (parked on
/// its receive, then runnable) never runs again to unlock. (Not run here:
/// a test that must hang can only be checked by a timeout, a duration.)
#[test]
fn guard_held_across_safe_points_on_one_worker() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let m = Arc::new(Mutex::new(Vec::<&str>::new()));
        let (locked_tx, locked) = smarm::oneshot::<()>();
        let (go, go_rx) = smarm::oneshot::<()>();
        let m1 = m.clone();
        let holder = rt.spawn(move || {
            let mut g = m1.lock().unwrap();
            locked_tx.send(()).unwrap();
            // Safe points with the guard held: a receive (parks) and a
            // yield.
            go_rx.recv().unwrap();
            smarm::yield_now();
            smarm::checkpoint();
            g.push("holder");
        });
        locked.recv().unwrap();
        let m2 = m.clone();
        let waiter = rt.spawn(move || m2.lock().unwrap().push("waiter"));
        let id = waiter.id();
        eventually(30, "the waiter parks on the lock", || parked_on_a_lock(&rt, id));
        // The holder is parked on its receive, guard held: the worker is
        // free, not blocked in the waiter's lock.
        let hid = holder.id();
        assert!(
            rt.dump()
                .actors
                .iter()
                .any(|a| a.id == hid && a.state == ActorState::WaitingChannel),
            "{}",
            rt.dump()
        );
        go.send(()).unwrap();
        holder.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(*m.lock().unwrap(), ["holder", "waiter"]);
    });
}

#[test]
fn a_panicking_holder_poisons_and_releases() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let m = Arc::new(Mutex::new(0u32));
        let m1 = m.clone();
        let e = rt
            .spawn(move || {
                let mut g = m1.lock().unwrap();
                *g = 7;
                smarm::yield_now();
                panic!("the holder fails");
            })
            .join()
            .unwrap_err();
        assert_eq!(e.panic_message(), Some("the holder fails"));
        assert!(m.is_poisoned());
        let m2 = m.clone();
        let seen = rt.block_on(move || match m2.lock() {
            Err(p) => **p.get_ref(),
            Ok(_) => panic!("lock() after a panicking holder is not Err"),
        });
        assert_eq!(seen, 7, "the poisoned guard still gives the value");
        assert!(matches!(m.try_lock(), Err(TryLockError::Poisoned(_))));
        m.clear_poison();
        assert_eq!(*m.lock().unwrap(), 7);
    });
}

/// A holder killed while parked (guard held) unwinds: its guard poisons
/// the mutex and unlocks it, and the actor waiting for it gets it.
#[test]
fn a_killed_holder_poisons_and_hands_the_lock_on() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let m = Arc::new(Mutex::new(0u32));
        let (locked_tx, locked) = smarm::oneshot::<()>();
        let m1 = m.clone();
        let holder = rt.spawn(move || {
            let _g = m1.lock().unwrap();
            locked_tx.send(()).unwrap();
            let (_keep, never) = smarm::oneshot::<()>();
            let _ = never.recv();
            unreachable!("nobody sends");
        });
        locked.recv().unwrap();
        let m2 = m.clone();
        let waiter = rt.spawn(move || m2.lock().map(|_| ()).is_err());
        let id = waiter.id();
        eventually(30, "the waiter parks on the lock", || parked_on_a_lock(&rt, id));
        holder.actor_ref().kill();
        assert!(holder.join().unwrap_err().is_killed());
        assert!(
            waiter.join().unwrap(),
            "the waiter's lock() did not report the poison"
        );
        assert!(m.is_poisoned());
    });
}

/// Two waiters behind a holder, one worker. (a) The first is killed while
/// listed: it leaves the list. (b) The first is killed after the unlock
/// woke it, before it ran: the wake spent on it goes to the next. Either
/// way the second gets the lock; without the pass-on it would sleep beside
/// a free lock and the test would time out.
#[test]
fn a_killed_waiter_does_not_strand_the_next() {
    for killed_after_wake in [false, true] {
        with_timeout(60, move || killed_waiter_case(killed_after_wake));
    }
}

fn killed_waiter_case(killed_after_wake: bool) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let m = Arc::new(Mutex::new(Vec::<&str>::new()));
    let (locked_tx, locked) = smarm::oneshot::<()>();
    let (refs_tx, refs) = smarm::oneshot::<ActorRef>();
    let m0 = m.clone();
    let holder = rt.spawn(move || {
        let g = m0.lock().unwrap();
        locked_tx.send(()).unwrap();
        let first = refs.recv().unwrap();
        if killed_after_wake {
            // The unlock pops the first waiter and queues it; the kill
            // lands before it runs (one worker: we run on until we exit).
            drop(g);
            first.kill();
        } else {
            first.kill();
            // Let the killed waiter run and unwind while we hold the lock.
            while !first.has_exited() {
                smarm::yield_now();
            }
            drop(g);
        }
    });
    locked.recv().unwrap();
    let spawn_waiter = |name: &'static str| {
        let m = m.clone();
        let h = rt.spawn(move || m.lock().unwrap().push(name));
        let id = h.id();
        eventually(30, "a waiter parks on the lock", || parked_on_a_lock(&rt, id));
        h
    };
    let first = spawn_waiter("first");
    let second = spawn_waiter("second");
    refs_tx.send(first.actor_ref()).unwrap();
    holder.join().unwrap();
    assert!(first.join().unwrap_err().is_killed());
    second.join().unwrap();
    assert_eq!(
        *m.lock().unwrap(),
        ["second"],
        "case killed_after_wake={killed_after_wake}"
    );
    assert!(!m.is_poisoned(), "a waiter that never held the lock poisoned it");
}

/// The same for a condition variable and a semaphore, one worker: a
/// `notify_one` (a permit's grant) lands on the first of two waiters, which
/// is killed before it runs. Its unwind passes the notification on (gives
/// the permit back, which grants it to the second); without that the
/// second would wait for good.
#[test]
fn a_killed_condvar_or_semaphore_waiter_passes_its_wake_on() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let log = Arc::new(Mutex::new(Vec::<&str>::new()));
        // Condvar.
        let s = Arc::new((Mutex::new(false), Condvar::new()));
        let cv_waiter = |name: &'static str| {
            let (s, log) = (s.clone(), log.clone());
            let h = rt.spawn(move || {
                let (m, cv) = &*s;
                drop(cv.wait_while(m.lock().unwrap(), |ready| !*ready).unwrap());
                log.lock().unwrap().push(name);
            });
            let id = h.id();
            eventually(30, "a waiter parks on the condvar", || parked_on_a_lock(&rt, id));
            h
        };
        let (first, second) = (cv_waiter("cv first"), cv_waiter("cv second"));
        let (s1, r1) = (s.clone(), first.actor_ref());
        rt.spawn(move || {
            let (m, cv) = &*s1;
            *m.lock().unwrap() = true;
            cv.notify_one();
            r1.kill();
        })
        .join()
        .unwrap();
        assert!(first.join().unwrap_err().is_killed());
        second.join().unwrap();
        assert!(
            !s.0.is_poisoned(),
            "a waiter killed in wait() poisoned the mutex it had released"
        );
        // Semaphore.
        let sem = Arc::new(Semaphore::new(0));
        let sem_waiter = |name: &'static str| {
            let (sem, log) = (sem.clone(), log.clone());
            let h = rt.spawn(move || {
                let _p = sem.acquire().unwrap();
                log.lock().unwrap().push(name);
            });
            let id = h.id();
            eventually(30, "a waiter parks on the semaphore", || {
                parked_on_a_lock(&rt, id)
            });
            h
        };
        let (first, second) = (sem_waiter("sem first"), sem_waiter("sem second"));
        let (sem1, r1) = (sem.clone(), first.actor_ref());
        rt.spawn(move || {
            sem1.add_permits(1);
            r1.kill();
        })
        .join()
        .unwrap();
        assert!(first.join().unwrap_err().is_killed());
        second.join().unwrap();
        assert_eq!(
            sem.available_permits(),
            1,
            "the permit was lost with the killed waiter"
        );
        assert_eq!(*log.lock().unwrap(), ["cv second", "sem second"]);
    });
}

/// Bounded overtaking. One worker; A locks, yields with the guard held,
/// unlocks and locks again, in a loop, until B has had the lock. A's first
/// unlock after B lists itself wakes B, but A re-locks before B runs
/// (barging); B finds the lock held and goes back to the front, starving,
/// and A's next unlock hands the lock to it. With barging alone A would
/// re-lock before B ran every time: B would never get the lock and the
/// test would time out. On the real scheduler (a woken actor runs next)
/// A finishes at most two sections between B's first try and B's turn;
/// the simulation picks actors at random, so there only B's turn counts.
#[test]
fn a_holder_relocking_across_yields_cannot_starve_a_waiter() {
    fn case<L: Send + Sync + 'static>(lock: L, with: fn(&L, &mut dyn FnMut())) {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let lock = Arc::new(lock);
        let (sections, done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (started_tx, started) = smarm::oneshot::<()>();
        let (l, s, d) = (lock.clone(), sections.clone(), done.clone());
        let a = rt.spawn(move || {
            let mut started_tx = Some(started_tx);
            while !d.load(Ordering::SeqCst) {
                with(&l, &mut || {
                    if let Some(t) = started_tx.take() {
                        t.send(()).unwrap();
                    }
                    smarm::yield_now();
                });
                s.fetch_add(1, Ordering::SeqCst);
            }
        });
        started.recv().unwrap();
        let (l, s, d) = (lock.clone(), sections.clone(), done.clone());
        let b = rt.spawn(move || {
            // A holds the lock whenever B runs (it only yields holding).
            let before = s.load(Ordering::SeqCst);
            let mut overtaken = 0;
            with(&l, &mut || overtaken = s.load(Ordering::SeqCst) - before);
            d.store(true, Ordering::SeqCst);
            overtaken
        });
        let overtaken = b.join().unwrap();
        a.join().unwrap();
        if !cfg!(feature = "sim") {
            assert!(overtaken <= 2, "A finished {overtaken} sections while B waited");
        }
    }
    with_timeout(60, || {
        case(Mutex::new(()), |m, f| {
            let _g = m.lock().unwrap();
            f();
        });
        case(RwLock::new(()), |l, f| {
            let _g = l.write().unwrap();
            f();
        });
    });
}

/// A bounded queue for the producer/consumer test.
struct Queue {
    items: VecDeque<u64>,
    producers_left: usize,
}

/// Producers and consumers, actors and threads mixed, on two condition
/// variables (not empty, not full) over one mutex: every item is consumed
/// exactly once, by both kinds of consumer.
#[test]
fn condvar_producers_and_consumers_actors_and_threads() {
    with_timeout(120, || {
        const CAP: usize = 4;
        const PER: u64 = 500;
        const ACTORS: u64 = 3;
        const THREADS: u64 = 1;
        let rt = Arc::new(Runtime::builder().workers(2).build().unwrap());
        let s = Arc::new((
            Mutex::new(Queue {
                items: VecDeque::new(),
                producers_left: (ACTORS + THREADS) as usize,
            }),
            Condvar::new(),
            Condvar::new(),
        ));
        let produce = |p: u64, s: Arc<(Mutex<Queue>, Condvar, Condvar)>| {
            move || {
                let (m, not_empty, not_full) = &*s;
                for i in 0..PER {
                    let mut q = not_full
                        .wait_while(m.lock().unwrap(), |q| q.items.len() >= CAP)
                        .unwrap();
                    assert!(q.items.len() < CAP, "woken with the queue full");
                    q.items.push_back(p * PER + i);
                    drop(q);
                    not_empty.notify_one();
                }
                m.lock().unwrap().producers_left -= 1;
                not_empty.notify_all();
            }
        };
        let consume = |s: Arc<(Mutex<Queue>, Condvar, Condvar)>| {
            move || {
                let (m, not_empty, not_full) = &*s;
                let mut got = Vec::new();
                loop {
                    let mut q = not_empty
                        .wait_while(m.lock().unwrap(), |q| q.items.is_empty() && q.producers_left > 0)
                        .unwrap();
                    let Some(v) = q.items.pop_front() else {
                        return got;
                    };
                    drop(q);
                    got.push(v);
                    not_full.notify_one();
                }
            }
        };
        let producers: Vec<_> = (0..ACTORS).map(|p| rt.spawn(produce(p, s.clone()))).collect();
        let producer_threads: Vec<_> = (ACTORS..ACTORS + THREADS)
            .map(|p| std::thread::spawn(produce(p, s.clone())))
            .collect();
        let consumers: Vec<_> = (0..ACTORS).map(|_| rt.spawn(consume(s.clone()))).collect();
        let consumer_threads: Vec<_> = (0..THREADS)
            .map(|_| std::thread::spawn(consume(s.clone())))
            .collect();
        for h in producers {
            h.join().unwrap();
        }
        for t in producer_threads {
            t.join().unwrap();
        }
        let mut all: Vec<u64> = consumers.into_iter().flat_map(|h| h.join().unwrap()).collect();
        for t in consumer_threads {
            all.extend(t.join().unwrap());
        }
        all.sort_unstable();
        let n = (ACTORS + THREADS) * PER;
        assert_eq!(all, (0..n).collect::<Vec<_>>(), "an item was lost or duplicated");
    });
}

/// An actor's timed wait: ended by its timer (relocked, `timed_out`) when
/// nobody notifies, and by a thread's notify well before its deadline
/// otherwise.
#[test]
fn condvar_timed_waits_in_an_actor() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let s = Arc::new((Mutex::new(false), Condvar::new()));
        let s1 = s.clone();
        let (timed_out, held) = rt.block_on(move || {
            let (m, cv) = &*s1;
            let (g, r) = cv
                .wait_timeout(m.lock().unwrap(), Duration::from_millis(5))
                .unwrap();
            (
                r.timed_out(),
                matches!(m.try_lock(), Err(TryLockError::WouldBlock)) && !*g,
            )
        });
        assert!(timed_out, "nobody notified");
        assert!(held, "the returned guard does not hold the mutex");

        let s2 = s.clone();
        let (started_tx, started) = smarm::oneshot::<()>();
        let waiter = rt.spawn(move || {
            let (m, cv) = &*s2;
            let g = m.lock().unwrap();
            started_tx.send(()).unwrap();
            // Generous: the notify ends it; reaching this deadline fails.
            let (g, r) = cv
                .wait_timeout_while(g, Duration::from_secs(50), |ready| !*ready)
                .unwrap();
            (*g, r.timed_out())
        });
        started.recv().unwrap();
        let (m, cv) = &*s;
        // The waiter released the mutex to wait (or has not locked yet:
        // then it sees `true` first and never waits).
        *m.lock().unwrap() = true;
        cv.notify_all();
        assert_eq!(waiter.join().unwrap(), (true, false));
    });
}

/// Readers hold at once (they meet at a barrier while reading: exclusive
/// reads would deadlock there); writers exclude everyone. Actors and a
/// thread mixed.
#[test]
fn rwlock_readers_share_writers_exclude() {
    with_timeout(120, || {
        const READERS: usize = 4;
        const ROUNDS: usize = 200;
        let rt = Arc::new(Runtime::builder().workers(2).build().unwrap());
        let l = Arc::new(RwLock::new(0u64));
        let meet = Arc::new(Barrier::new(READERS));
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let (l, meet) = (l.clone(), meet.clone());
                rt.spawn(move || {
                    let g = l.read().unwrap();
                    meet.wait();
                    *g
                })
            })
            .collect();
        for r in readers {
            assert_eq!(r.join().unwrap(), 0);
        }
        // Writers: an actor per round and a thread, each checking that
        // nobody else is inside while it writes (readers count in too).
        let inside = Arc::new(AtomicUsize::new(0));
        let write_once = |l: &RwLock<u64>, inside: &AtomicUsize| {
            let mut w = l.write().unwrap();
            assert_eq!(
                inside.fetch_add(1, Ordering::SeqCst),
                0,
                "a writer shares the lock"
            );
            *w += 1;
            smarm::yield_now();
            inside.fetch_sub(1, Ordering::SeqCst);
        };
        let read_once = |l: &RwLock<u64>, inside: &AtomicUsize| {
            let r = l.read().unwrap();
            let before = *r;
            inside.fetch_add(1, Ordering::SeqCst);
            smarm::yield_now();
            assert_eq!(*r, before, "a write landed under a read guard");
            inside.fetch_sub(1, Ordering::SeqCst);
        };
        let mut hs = Vec::new();
        for _ in 0..3 {
            let (l, inside) = (l.clone(), inside.clone());
            hs.push(rt.spawn(move || {
                for _ in 0..ROUNDS {
                    write_once(&l, &inside);
                    read_once(&l, &inside);
                }
            }));
        }
        let (l2, inside2) = (l.clone(), inside.clone());
        let t = std::thread::spawn(move || {
            for _ in 0..ROUNDS {
                write_once(&l2, &inside2);
                read_once(&l2, &inside2);
            }
        });
        for h in hs {
            h.join().unwrap();
        }
        t.join().unwrap();
        assert_eq!(*l.read().unwrap(), 4 * ROUNDS as u64);
    });
}

/// Never more holders than permits, and exactly `permits` at once.
/// First a stress (actors and threads mixed, holders yielding): the most
/// holders seen at once is at most `permits`. Then `permits` actors take
/// one each and meet this thread at a barrier while holding: all permits
/// are out at once, and one more actor must park until they release.
#[test]
fn semaphore_bounds_concurrency_and_reaches_its_permits() {
    with_timeout(120, || {
        const PERMITS: usize = 3;
        const ACTORS: usize = 6;
        const THREADS: usize = 2;
        const ROUNDS: usize = 200;
        let rt = Arc::new(Runtime::builder().workers(2).build().unwrap());
        let sem = Arc::new(Semaphore::new(PERMITS));
        let inside = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let hold = {
            let (inside, max) = (inside.clone(), max.clone());
            move || {
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
            }
        };
        let body = {
            let (sem, inside, hold) = (sem.clone(), inside.clone(), hold.clone());
            move || {
                for _ in 0..ROUNDS {
                    let p = sem.acquire().unwrap();
                    hold();
                    smarm::yield_now();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(p);
                }
            }
        };
        let actors: Vec<_> = (0..ACTORS).map(|_| rt.spawn(body.clone())).collect();
        let threads: Vec<_> = (0..THREADS).map(|_| std::thread::spawn(body.clone())).collect();
        for h in actors {
            h.join().unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        assert!(max.load(Ordering::SeqCst) <= PERMITS, "more holders than permits");
        assert_eq!(sem.available_permits(), PERMITS, "a permit was lost or made up");

        // All permits out at once.
        let meet = Arc::new(Barrier::new(PERMITS + 1));
        let (release_tx, release) = smarm::channel::<()>();
        let release = Arc::new(Mutex::new(release));
        let holders: Vec<_> = (0..PERMITS)
            .map(|_| {
                let (sem, meet, release, hold) = (sem.clone(), meet.clone(), release.clone(), hold.clone());
                rt.spawn(move || {
                    let _p = sem.acquire().unwrap();
                    hold();
                    meet.wait();
                    release.lock().unwrap().recv().unwrap();
                })
            })
            .collect();
        meet.wait();
        assert_eq!(
            max.load(Ordering::SeqCst),
            PERMITS,
            "the permits were never all out at once"
        );
        assert_eq!(sem.try_acquire().unwrap_err(), TryAcquireError::NoPermits);
        let sem2 = sem.clone();
        let extra = rt.spawn(move || sem2.acquire().map(|p| p.num_permits()).is_ok());
        let id = extra.id();
        eventually(30, "one more acquirer parks", || parked_on_a_lock(&rt, id));
        for _ in 0..PERMITS {
            release_tx.send(()).unwrap();
        }
        for h in holders {
            h.join().unwrap();
        }
        assert!(extra.join().unwrap());
        assert_eq!(sem.available_permits(), PERMITS);
    });
}

/// `close` fails the actors waiting for permits and every later acquire.
#[test]
fn semaphore_close_wakes_waiting_actors_with_an_error() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let sem = Arc::new(Semaphore::new(0));
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let sem = sem.clone();
                let h = rt.spawn(move || sem.acquire().is_err());
                let id = h.id();
                eventually(30, "a waiter parks on the semaphore", || {
                    parked_on_a_lock(&rt, id)
                });
                h
            })
            .collect();
        sem.close();
        for h in waiters {
            assert!(h.join().unwrap(), "a waiter got a permit from a closed semaphore");
        }
        assert_eq!(sem.try_acquire().unwrap_err(), TryAcquireError::Closed);
        sem.add_permits(1);
        assert!(sem.acquire().is_err(), "acquire after close succeeded");
    });
}

/// A barrier of actors and threads, reused for several generations:
/// nobody passes before every party arrived, one leader per generation.
#[test]
fn barrier_actors_and_threads_one_leader_per_generation() {
    with_timeout(120, || {
        const ACTORS: usize = 3;
        const THREADS: usize = 2;
        const PARTIES: usize = ACTORS + THREADS;
        const GENERATIONS: usize = 20;
        let rt = Arc::new(Runtime::builder().workers(2).build().unwrap());
        let b = Arc::new(Barrier::new(PARTIES));
        let arrived: Arc<Vec<AtomicUsize>> =
            Arc::new((0..GENERATIONS).map(|_| AtomicUsize::new(0)).collect());
        let leaders: Arc<Vec<AtomicUsize>> =
            Arc::new((0..GENERATIONS).map(|_| AtomicUsize::new(0)).collect());
        let body = {
            let (b, arrived, leaders) = (b.clone(), arrived.clone(), leaders.clone());
            move || {
                for g in 0..GENERATIONS {
                    arrived[g].fetch_add(1, Ordering::SeqCst);
                    let r = b.wait();
                    assert_eq!(arrived[g].load(Ordering::SeqCst), PARTIES, "passed early");
                    if r.is_leader() {
                        leaders[g].fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        };
        let actors: Vec<_> = (0..ACTORS).map(|_| rt.spawn(body.clone())).collect();
        let threads: Vec<_> = (0..THREADS).map(|_| std::thread::spawn(body.clone())).collect();
        for h in actors {
            h.join().unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        for (g, l) in leaders.iter().enumerate() {
            assert_eq!(l.load(Ordering::SeqCst), 1, "leaders of generation {g}");
        }
    });
}

/// Many actors and a thread on one mutex, with the guard held across a
/// yield: exclusion holds and every increment lands.
#[test]
fn mutex_contended_by_actors_and_a_thread() {
    with_timeout(120, || {
        const ACTORS: usize = 8;
        const ROUNDS: usize = 300;
        let rt = Arc::new(Runtime::builder().workers(2).build().unwrap());
        let m = Arc::new(Mutex::new(0usize));
        let inside = Arc::new(AtomicBool::new(false));
        let body = {
            let (m, inside) = (m.clone(), inside.clone());
            move || {
                for _ in 0..ROUNDS {
                    let mut g = m.lock().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    smarm::yield_now();
                    *g += 1;
                    inside.store(false, Ordering::SeqCst);
                }
            }
        };
        let actors: Vec<_> = (0..ACTORS).map(|_| rt.spawn(body.clone())).collect();
        let t = std::thread::spawn(body);
        for h in actors {
            h.join().unwrap();
        }
        t.join().unwrap();
        assert_eq!(*m.lock().unwrap(), (ACTORS + 1) * ROUNDS);
    });
}
