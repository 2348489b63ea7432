//! Timers: sleep, timed receives on mailboxes and channels, join with a
//! deadline, and the timer-vs-message race (a message arriving with the
//! deadline is delivered exactly once, never lost).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm_tests::smarm::{self, Mailbox, RecvTimeoutError, Runtime};
use smarm_tests::with_timeout;

#[test]
fn sleep_waits_at_least_its_duration_and_frees_the_worker() {
    with_timeout(60, || {
        // One worker: while one actor sleeps, another must run to the end.
        let rt = Runtime::builder().workers(1).build().unwrap();
        let progress = Arc::new(AtomicU64::new(0));
        let p = progress.clone();
        let sleeper = rt.spawn(move || {
            let t = Instant::now();
            smarm::sleep(Duration::from_millis(30));
            (t.elapsed(), p.load(Ordering::SeqCst))
        });
        let p = progress.clone();
        let worker = rt.spawn(move || {
            for _ in 0..1000 {
                p.fetch_add(1, Ordering::SeqCst);
                smarm::yield_now();
            }
        });
        worker.join().unwrap();
        let (slept, seen) = sleeper.join().unwrap();
        assert!(slept >= Duration::from_millis(30), "woke early: {slept:?}");
        assert!(seen > 0, "the other actor did not run while the sleeper slept");
        assert!(rt.counters().total().timer_fires >= 1);
    });
}

#[test]
fn sleepers_wake_in_deadline_order() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, mut rx) = smarm::channel::<u32>();
        // Spawned in reverse: the order of arming is not the order of waking.
        let hs: Vec<_> = (0..8u32)
            .rev()
            .map(|i| {
                let tx = tx.clone();
                rt.spawn(move || {
                    smarm::sleep(Duration::from_millis(5 + 15 * i as u64));
                    tx.send(i).unwrap();
                })
            })
            .collect();
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
        let mut order = Vec::new();
        while let Ok(i) = rx.recv() {
            order.push(i);
        }
        assert_eq!(order, (0..8).collect::<Vec<_>>());
    });
}

#[test]
fn ten_thousand_sleepers_all_wake_after_their_deadlines() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let before = rt.counters().total().timer_fires;
        let early = Arc::new(AtomicU64::new(0));
        let e = early.clone();
        rt.block_on(move || {
            let hs: Vec<_> = (0..10_000u64)
                .map(|i| {
                    let e = e.clone();
                    smarm::spawn(move || {
                        // Many equal deadlines: 50 distinct durations. At
                        // least 10 ms: a sleep whose deadline has passed
                        // before it arms returns without a timer (no fire),
                        // which 1 ms sleepers hit under ASan (1 in ~4 runs:
                        // 9,999 fires).
                        let d = Duration::from_millis(10 + (i * 7919) % 50);
                        let t = Instant::now();
                        smarm::sleep(d);
                        if t.elapsed() < d {
                            e.fetch_add(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        assert_eq!(
            early.load(Ordering::SeqCst),
            0,
            "some sleepers woke before their deadline"
        );
        assert_eq!(rt.counters().total().timer_fires - before, 10_000);
    });
}

#[test]
fn sleep_on_a_plain_thread_blocks_it() {
    let t = Instant::now();
    smarm::sleep(Duration::from_millis(10));
    assert!(t.elapsed() >= Duration::from_millis(10));
}

#[test]
fn mailbox_recv_timeout_times_out_and_then_still_receives() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (timed_out_tx, timed_out) = smarm::oneshot::<()>();
        let (addr, h) = rt.spawn_actor(move |mut mb: Mailbox<u32>| {
            let t = Instant::now();
            let none = mb.recv_timeout(Duration::from_millis(20));
            let waited = t.elapsed();
            timed_out_tx.send(()).unwrap();
            // The timed-out wait left nothing behind: a plain recv works.
            let first = mb.recv();
            let second = mb.recv_timeout(Duration::from_secs(30));
            (none, waited, first, second)
        });
        // Sent only once the actor has timed out.
        timed_out.recv().unwrap();
        addr.send(7).unwrap();
        addr.send(8).unwrap();
        let (none, waited, first, second) = h.join().unwrap();
        assert_eq!(none, None);
        assert!(waited >= Duration::from_millis(20), "timed out early: {waited:?}");
        assert_eq!(first, 7);
        assert_eq!(second, Some(8));
    });
}

#[test]
fn message_racing_the_deadline_is_delivered_exactly_once() {
    with_timeout(120, || {
        // The receiver uses timeouts around the sender's send times, so
        // timers and sends race for the one registration. Every message
        // must arrive once, in order.
        let rt = Runtime::builder().workers(2).build().unwrap();
        const N: u64 = 3000;
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<u64>| {
            let mut next = 0;
            let mut timeouts = 0u64;
            while next < N {
                match mb.recv_timeout(Duration::from_micros(50 + next % 100)) {
                    Some(v) => {
                        assert_eq!(v, next, "out of order or duplicated");
                        next += 1;
                    }
                    None => timeouts += 1,
                }
            }
            assert_eq!(mb.try_recv(), None, "a message arrived twice");
            timeouts
        });
        let sender = rt.spawn(move || {
            for i in 0..N {
                smarm::sleep(Duration::from_micros(i % 120));
                addr.send(i).unwrap();
            }
        });
        sender.join().unwrap();
        let timeouts = h.join().unwrap();
        assert!(
            timeouts > 0,
            "no timeout raced a message: the test did not exercise the race"
        );
    });
}

#[test]
fn channel_recv_timeout_from_actors_and_threads() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // Actor receiver: timeout, then a value, then disconnection.
        let (tx, mut rx) = smarm::channel::<u32>();
        let (timed_out_tx, timed_out) = smarm::oneshot::<()>();
        let h = rt.spawn(move || {
            let a = rx.recv_timeout(Duration::from_millis(10));
            timed_out_tx.send(()).unwrap();
            let b = rx.recv_timeout(Duration::from_secs(30));
            let c = rx.recv_timeout(Duration::from_secs(30));
            (a, b, c)
        });
        timed_out.recv().unwrap();
        tx.send(5).unwrap();
        drop(tx);
        let (a, b, c) = h.join().unwrap();
        assert_eq!(a, Err(RecvTimeoutError::Timeout));
        assert_eq!(b, Ok(5));
        assert_eq!(c, Err(RecvTimeoutError::Disconnected));

        // Thread receiver on a bounded channel fed by an actor.
        let (btx, mut brx) = smarm::bounded::<u32>(1);
        let t = Instant::now();
        assert_eq!(
            brx.recv_timeout(Duration::from_millis(10)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(t.elapsed() >= Duration::from_millis(10));
        let p = rt.spawn(move || {
            for i in 0..100 {
                btx.send(i).unwrap();
            }
        });
        for i in 0..100 {
            assert_eq!(brx.recv_timeout(Duration::from_secs(30)), Ok(i));
        }
        p.join().unwrap();
        assert_eq!(
            brx.recv_timeout(Duration::from_secs(30)),
            Err(RecvTimeoutError::Disconnected)
        );
    });
}

#[test]
fn bounded_recv_timeout_in_an_actor_races_senders() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, mut rx) = smarm::bounded::<u64>(2);
        let n = 2000u64;
        let recv = rt.spawn(move || {
            let mut got = Vec::new();
            loop {
                match rx.recv_timeout(Duration::from_micros(30)) {
                    Ok(v) => got.push(v),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return got,
                }
            }
        });
        let send = rt.spawn(move || {
            for i in 0..n {
                if i % 64 == 0 {
                    smarm::sleep(Duration::from_micros(40));
                }
                tx.send(i).unwrap();
            }
        });
        send.join().unwrap();
        assert_eq!(recv.join().unwrap(), (0..n).collect::<Vec<_>>());
    });
}

#[test]
fn join_timeout_from_an_actor_hands_the_handle_back() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (gate_tx, gate_rx) = smarm::oneshot::<()>();
        let r = rt.block_on(move || {
            let slow = smarm::spawn(move || {
                gate_rx.recv().unwrap();
                42
            });
            let t = Instant::now();
            let slow = match slow.join_timeout(Duration::from_millis(20)) {
                Ok(_) => panic!("joined an actor that cannot have finished"),
                Err(h) => h,
            };
            let waited = t.elapsed();
            gate_tx.send(()).unwrap();
            (
                waited,
                slow.join_timeout(Duration::from_secs(30))
                    .ok()
                    .map(|r| r.unwrap()),
            )
        });
        assert!(r.0 >= Duration::from_millis(20), "gave up early: {:?}", r.0);
        assert_eq!(r.1, Some(42));
    });
}

#[test]
fn shutdown_cancels_sleepers_without_waiting_for_their_timers() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let hs: Vec<_> = (0..100)
            .map(|_| rt.spawn(|| smarm::sleep(Duration::from_secs(3600))))
            .collect();
        // Wait until every sleeper has armed its timer (parked).
        smarm_tests::eventually(30, "sleepers parked", || rt.counters().total().switches >= 100);
        let t = Instant::now();
        let report = rt.shutdown();
        assert!(t.elapsed() < Duration::from_secs(30));
        // Shutdown fires the sleepers' timers early: they resume, are
        // cancelled, and unwind; none is left abandoned.
        assert_eq!(report.abandoned, 0);
        for h in hs {
            assert!(h.join().unwrap_err().is_cancelled());
        }
    });
}

#[test]
fn oneshot_recv_timeout_keeps_the_receiver_usable() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, mut rx) = smarm::oneshot::<u32>();
        let (timed_out_tx, timed_out) = smarm::oneshot::<()>();
        let h = rt.spawn(move || {
            let first = rx.recv_timeout(Duration::from_millis(10));
            timed_out_tx.send(()).unwrap();
            let second = rx.recv_timeout(Duration::from_secs(30));
            (first, second)
        });
        timed_out.recv().unwrap();
        tx.send(9).unwrap();
        assert_eq!(h.join().unwrap(), (Err(RecvTimeoutError::Timeout), Ok(9)));

        // A thread receiver: timeout, then the sender's drop disconnects.
        let (tx, mut rx) = smarm::oneshot::<u32>();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(5)),
            Err(RecvTimeoutError::Timeout)
        );
        let dropper = rt.spawn(move || drop(tx));
        dropper.join().unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(30)),
            Err(RecvTimeoutError::Disconnected)
        );
    });
}
