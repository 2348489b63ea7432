//! `spawn_link` (the link before the child runs), `unlink` (both ways; of
//! an unlink and the partner's exit, exactly one finds the link) and
//! `demonitor` (no notice after it returns).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm_tests::smarm::{self, Down, ExitReason, Mailbox, Runtime, SpawnError, TryRecvError};
use smarm_tests::{next_spawn_work_first, with_timeout};

/// Varies where a race lands: `i % 8` yields (scheduling points, for the
/// seeded port too), then a busy wait of up to ~100 µs (an exit's unwind
/// takes tens of µs).
fn stagger(i: u32) {
    for _ in 0..i % 8 {
        smarm::yield_now();
    }
    let until = Instant::now() + Duration::from_micros(u64::from(i % 25) * 4);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

#[test]
fn a_spawn_linked_child_that_fails_at_once_takes_the_parent() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        // Work-first: the child runs (and panics) before spawn_link
        // returns; the link was in place before it ran.
        let parent = rt.spawn(|| {
            next_spawn_work_first();
            let _child = smarm::spawn_link(|| panic!("child fails"));
            loop {
                smarm::yield_now(); // killed here, if not already
            }
        });
        assert!(parent.join().unwrap_err().is_killed());

        // Trapping instead: the notice arrives, once, and the parent lives.
        let parent = rt.spawn_actor(|mut mb: Mailbox<Down>| {
            assert!(smarm::trap_exits_into(&mb.addr(), |d| d));
            let child = smarm::spawn_link(|| panic!("child fails"));
            let id = child.id();
            assert!(child.join().is_err());
            let d = mb.recv().unwrap();
            assert_eq!((d.id, d.reason), (id, ExitReason::Panicked("child fails".into())));
            matches!(mb.try_recv(), Err(TryRecvError::Empty))
        });
        assert!(parent.1.join().unwrap(), "one notice per exit");
    });
}

#[test]
fn a_parents_abnormal_exit_kills_its_spawn_linked_children() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, mut rx) = smarm::channel();
        let parent = rt.spawn(move || {
            let h = smarm::spawn_link(|| loop {
                smarm::yield_now();
            });
            let (addr, h2) = smarm::spawn_actor_link(|mut mb: Mailbox<u32>| mb.recv().unwrap());
            tx.send((h, h2, addr)).unwrap();
            panic!("parent fails");
        });
        let (h, h2, _addr) = rx.recv().unwrap();
        assert!(parent.join().unwrap_err().is_panic());
        assert!(h.join().unwrap_err().is_killed());
        assert!(h2.join().unwrap_err().is_killed());
        // From a plain thread there is nothing to link to.
        assert!(matches!(smarm::try_spawn_link(|| ()), Err(SpawnError::NoRuntime)));
    });
}

#[test]
fn unlink_removes_the_link_both_ways() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // B fails after A unlinked: A lives on (it joins B, so B's exit
        // hooks have run, then reaches a resume point where a kill shows).
        let (go_tx, go) = smarm::oneshot::<()>();
        let b = rt.spawn(move || {
            go.recv().unwrap();
            panic!("b fails");
        });
        let bref = b.actor_ref();
        let a = rt.spawn(move || {
            assert!(smarm::link(&bref));
            assert!(smarm::unlink(&bref));
            assert!(!smarm::unlink(&bref), "unlinked already");
            assert!(!smarm::unlink(&smarm::current().unwrap()), "no self-link");
            go_tx.send(()).unwrap();
            assert!(b.join().unwrap_err().is_panic());
            smarm::yield_now(); // a kill would show here
            "a lives"
        });
        assert_eq!(a.join().unwrap(), "a lives");

        // A fails after it unlinked: B lives on (it waits until A's exit
        // hooks have run: the main thread joined A).
        let (done_tx, done) = smarm::oneshot::<()>();
        let b = rt.spawn(move || {
            done.recv().unwrap();
            "b lives"
        });
        let bref = b.actor_ref();
        let a = rt.spawn(move || {
            assert!(smarm::link(&bref));
            assert!(smarm::unlink(&bref));
            panic!("a fails");
        });
        assert!(a.join().unwrap_err().is_panic());
        done_tx.send(()).unwrap();
        assert_eq!(b.join().unwrap(), "b lives");

        // A plain thread has no links.
        let h = rt.spawn(|| ());
        assert!(!smarm::unlink(&h.actor_ref()));
        h.join().unwrap();
    });
}

#[test]
fn link_again_after_unlink_makes_a_working_link() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (go_tx, go) = smarm::oneshot::<()>();
        let b = rt.spawn(move || {
            go.recv().unwrap();
            panic!("b fails");
        });
        let bref = b.actor_ref();
        let a = rt.spawn_actor(move |mut mb: Mailbox<Down>| {
            assert!(smarm::trap_exits_into(&mb.addr(), |d| d));
            assert!(smarm::link(&bref));
            assert!(smarm::unlink(&bref));
            assert!(smarm::link(&bref));
            assert!(smarm::link(&bref), "linked: idempotent");
            go_tx.send(()).unwrap();
            // Joined: B's exit hooks have run, every notice is out.
            assert!(b.join().is_err());
            let d = mb.recv().unwrap();
            (d.reason, mb.try_recv().is_err())
        });
        let (reason, no_more) = a.1.join().unwrap();
        assert_eq!(reason, ExitReason::Panicked("b fails".into()));
        assert!(no_more, "one notice: the pending hooks serve the new link");
    });
}

#[test]
fn unlink_racing_the_partners_exit_one_of_them_finds_the_link() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (mut unlinked, mut reached) = (0, 0);
        for i in 0..200 {
            // B spins (yielding) rather than parks, so that it runs on the
            // other worker while A unlinks: a real race.
            let go = Arc::new(AtomicBool::new(false));
            let go2 = go.clone();
            let b = rt.spawn(move || {
                while !go2.load(Ordering::SeqCst) {
                    smarm::yield_now();
                }
                panic!("b fails");
            });
            let bref = b.actor_ref();
            let (_a, a) = rt.spawn_actor(move |mut mb: Mailbox<Down>| {
                assert!(smarm::trap_exits_into(&mb.addr(), |d| d));
                assert!(smarm::link(&bref));
                go.store(true, Ordering::SeqCst);
                stagger(i);
                let r = smarm::unlink(&bref);
                // Joined: B's exit hooks have run; a notice that was
                // coming is here.
                assert!(b.join().is_err());
                (r, mb.try_recv().is_ok())
            });
            let (r, notice) = a.join().unwrap();
            assert!(
                r ^ notice,
                "unlink {r}, notice {notice}: exactly one finds the link"
            );
            if r {
                unlinked += 1;
            } else {
                reached += 1;
            }
        }
        eprintln!("unlink won {unlinked}, the exit won {reached}");
    });
}

#[test]
fn demonitor_before_the_end_means_no_notice_ever() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (go_tx, go) = smarm::oneshot::<()>();
        let target = rt.spawn(move || {
            go.recv().unwrap();
            panic!("gone");
        });
        let tref = target.actor_ref();
        let ran = Arc::new(AtomicBool::new(false));
        let ran2 = ran.clone();
        let (_w, watcher) = rt.spawn_actor(move |mut mb: Mailbox<Down>| {
            let m = tref.monitor();
            let mref = tref.monitor_into(&mb.addr(), move |d| {
                ran2.store(true, Ordering::SeqCst);
                d
            });
            let kept = tref.monitor_into(&mb.addr(), |d| d);
            assert!(m.demonitor(), "cancelled before the end");
            assert!(mref.demonitor(), "cancelled before the end");
            go_tx.send(()).unwrap();
            // Joined: the target's exit hooks have run.
            assert!(target.join().is_err());
            let d = mb.try_recv().expect("the monitor kept on has delivered");
            (d.reason, mb.try_recv().is_err(), kept.demonitor())
        });
        let (reason, no_more, kept_cancelled) = watcher.join().unwrap();
        assert_eq!(reason, ExitReason::Panicked("gone".into()));
        assert!(no_more, "the cancelled monitors delivered nothing");
        assert!(!kept_cancelled, "its notice was delivered: too late to cancel");
        assert!(
            !ran.load(Ordering::SeqCst),
            "a cancelled monitor's f does not run"
        );

        // After the end: too late, and the notice stays (no flush).
        let h = rt.spawn(|| 5);
        let href = h.actor_ref();
        assert_eq!(h.join().unwrap(), 5);
        let m = href.monitor();
        assert!(!m.demonitor());
    });
}

#[test]
fn demonitor_racing_the_exit_no_notice_after_it_returns() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (mut cancelled, mut delivered) = (0, 0);
        for i in 0..200 {
            // As in the unlink race: the target spins on the other worker.
            let go = Arc::new(AtomicBool::new(false));
            let go2 = go.clone();
            let target = rt.spawn(move || {
                while !go2.load(Ordering::SeqCst) {
                    smarm::yield_now();
                }
            });
            let tref = target.actor_ref();
            let (_w, watcher) = rt.spawn_actor(move |mut mb: Mailbox<Down>| {
                let mref = tref.monitor_into(&mb.addr(), |d| d);
                go.store(true, Ordering::SeqCst);
                stagger(i);
                let r = mref.demonitor();
                // Returned: a notice is in the mailbox now or never.
                let now = mb.try_recv().is_ok();
                target.join().unwrap(); // its exit hooks have run
                (r, now, mb.try_recv().is_ok())
            });
            let (r, now, later) = watcher.join().unwrap();
            assert!(!later, "a notice arrived after demonitor returned");
            assert!(r ^ now, "demonitor {r}, notice {now}");
            if r {
                cancelled += 1;
            } else {
                delivered += 1;
            }
        }
        eprintln!("demonitor won {cancelled}, the exit won {delivered}");
    });
}
