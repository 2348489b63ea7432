//! Shutdown with live actors: no hang, every actor unwound, joiners told.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use smarm_tests::smarm::{self, Runtime};
use smarm_tests::with_timeout;

struct CountDrop(Arc<AtomicUsize>);
impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn dropping_the_runtime_with_live_actors_unwinds_them() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let dropped = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        // 50 actors that yield forever, 10 that are parked in join on one of
        // them, each holding a guard whose destructor must run.
        let spinners: Vec<_> = (0..50)
            .map(|_| {
                let (d, s) = (dropped.clone(), started.clone());
                rt.spawn(move || {
                    let _g = CountDrop(d);
                    s.fetch_add(1, Ordering::SeqCst);
                    loop {
                        smarm::yield_now();
                    }
                })
            })
            .collect();
        let joiners: Vec<_> = (0..10)
            .map(|_| {
                let (d, s) = (dropped.clone(), started.clone());
                rt.spawn(move || {
                    let _g = CountDrop(d);
                    s.fetch_add(1, Ordering::SeqCst);
                    let child = smarm::spawn(|| loop {
                        smarm::yield_now();
                    });
                    child.join()
                })
            })
            .collect();
        while started.load(Ordering::SeqCst) < 60 {
            std::thread::yield_now();
        }
        let report = rt.shutdown();
        assert_eq!(report.abandoned, 0);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            60,
            "every guard was dropped by unwinding"
        );
        for h in spinners {
            assert!(h.join().unwrap_err().is_cancelled());
        }
        for h in joiners {
            // Either the joiner itself was cancelled, or its join returned
            // Cancelled for its cancelled child.
            match h.join() {
                Err(e) => assert!(e.is_cancelled()),
                Ok(inner) => assert!(inner.unwrap_err().is_cancelled()),
            }
        }
    });
}

#[test]
fn dropping_an_idle_runtime_returns_promptly() {
    with_timeout(30, || {
        for _ in 0..50 {
            let rt = Runtime::builder().workers(2).build().unwrap();
            assert_eq!(rt.block_on(|| 1 + 1), 2);
            drop(rt);
        }
    });
}

#[test]
fn actors_queued_but_never_run_are_cancelled_for_their_joiners() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        // The single worker is held by a hog that blocks its OS thread (it
        // never reaches a switch) until it is handed the runtime, while the
        // test queues actors behind it. The hog then starts the shutdown
        // itself, on the worker, before anything behind it could run: the
        // queued actors are first resumed after the shutdown flag is set,
        // so they are cancelled before their bodies run.
        let (give, take) = std::sync::mpsc::channel::<Runtime>();
        let (started, running) = std::sync::mpsc::channel::<()>();
        let hog = rt.spawn(move || {
            started.send(()).unwrap();
            let rt = take
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("the test hands the runtime over");
            // On its own worker, shutdown sets the flag and returns: the
            // worker finishes on its own once every actor is gone.
            let report = rt.shutdown();
            assert_eq!(report.abandoned, 0);
            // Cancelled at this yield's resume point.
            smarm::yield_now();
            unreachable!("a yield after shutdown returned");
        });
        // Queued only once the hog holds the worker (whatever order the
        // run queue, or the simulation's pick, would run them in).
        running
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the hog starts");
        let queued: Vec<_> = (0..20)
            .map(|i| {
                let ran = ran.clone();
                rt.spawn(move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                    i
                })
            })
            .collect();
        give.send(rt).unwrap();
        assert!(hog.join().unwrap_err().is_cancelled());
        for (i, h) in queued.into_iter().enumerate() {
            match h.join() {
                Ok(v) => panic!("queued actor {i} ran to completion ({v}) after shutdown began"),
                Err(e) => assert!(e.is_cancelled(), "queued actor {i}: {e:?}"),
            }
        }
        assert_eq!(ran.load(Ordering::SeqCst), 0, "a queued actor's body ran");
    });
}

#[test]
fn shutdown_cancels_actors_parked_on_mailboxes_and_channels() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let dropped = Arc::new(AtomicUsize::new(0));
        // Parked forever with nobody to wake them: on their mailbox, on a
        // channel whose sender stays alive, and in a join on one of them.
        let mut addrs = Vec::new();
        let mut hs = Vec::new();
        for _ in 0..20 {
            let d = dropped.clone();
            let (a, h) = rt.spawn_actor(move |mut mb: smarm::Mailbox<u32>| {
                let _c = CountDrop(d);
                mb.recv().unwrap()
            });
            addrs.push(a);
            hs.push(h);
        }
        let (tx, mut rx) = smarm::channel::<u32>();
        let d = dropped.clone();
        let hc = rt.spawn(move || {
            let _c = CountDrop(d);
            rx.recv().ok()
        });
        let monitor = hc.actor_ref().monitor();
        smarm_tests::eventually(20, "all parked", || {
            rt.dump()
                .actors
                .iter()
                .all(|a| a.state != smarm::ActorState::Runnable)
                && rt.dump().actors.len() == 21
        });
        let report = rt.shutdown();
        assert_eq!(
            report.abandoned, 0,
            "parked actors are woken and cancelled, not abandoned"
        );
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            21,
            "each unwound: destructors ran"
        );
        for h in hs {
            assert!(h.join().unwrap_err().is_cancelled());
        }
        assert!(hc.join().unwrap_err().is_cancelled());
        assert_eq!(
            monitor.recv().map(|d| d.reason),
            Some(smarm::ExitReason::Cancelled)
        );
        drop((addrs, tx));
    });
}
