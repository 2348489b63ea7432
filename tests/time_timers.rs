//! Timers: sleep, timed receives on mailboxes and channels, join with a
//! deadline, and the timer-vs-message race (a message arriving with the
//! deadline is delivered exactly once, never lost).
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm_tests::smarm::{self, ActorState, Mailbox, RecvTimeoutError, Runtime};
use smarm_tests::{eventually, with_timeout};

#[test]
fn sleep_waits_at_least_its_duration_and_frees_the_worker() {
    with_timeout(60, || {
        // One worker: while one actor sleeps, another must run to the end.
        let rt = Runtime::builder().workers(1).build().unwrap();
        let short = rt.spawn(|| {
            let t = Instant::now();
            smarm::sleep(Duration::from_millis(30));
            t.elapsed()
        });
        let slept = short.join().unwrap();
        assert!(slept >= Duration::from_millis(30), "woke early: {slept:?}");
        assert!(rt.counters().total().timer_fires >= 1);
        // A sleeping actor holds no worker: on the only worker, another
        // actor that starts once the sleeper has switched out (the sleep is
        // its only switch after raising the flag) runs 1,000 turns while
        // the sleeper stays parked (an hour's sleep; it is cancelled at the
        // runtime's drop).
        let (parked, woke) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (pk, wk) = (parked.clone(), woke.clone());
        let long = rt.spawn(move || {
            pk.store(true, Ordering::SeqCst);
            smarm::sleep(Duration::from_secs(3600));
            wk.store(true, Ordering::SeqCst);
        });
        let progress = Arc::new(AtomicU64::new(0));
        let p = progress.clone();
        let other = rt.spawn(move || {
            while !parked.load(Ordering::SeqCst) {
                smarm::yield_now();
            }
            for _ in 0..1000 {
                p.fetch_add(1, Ordering::SeqCst);
                smarm::yield_now();
            }
            woke.load(Ordering::SeqCst)
        });
        assert!(
            !other.join().unwrap(),
            "the hour's sleep ended during 1,000 turns"
        );
        assert_eq!(progress.load(Ordering::SeqCst), 1000);
        drop(rt);
        match long.join() {
            Err(e) => assert!(e.is_cancelled(), "{e:?}"),
            // The simulated clock jumps to the deadline once every thread
            // waits (docs/sim.md): the sleep may end before the drop.
            Ok(()) => {
                if !cfg!(feature = "sim") {
                    panic!("an hour's sleep returned");
                }
            }
        }
    });
}

/// Whether actor `id` is parked in a sleep in `d`.
fn is_sleeping(d: &smarm::Dump, id: u64) -> bool {
    d.actors
        .iter()
        .any(|a| a.id == id && a.state == ActorState::Sleeping)
}

/// One round of [`sleepers_wake_in_deadline_order`]: 8 sleepers, sleeper
/// `i` for `(i + 1) * step`, spawned in reverse (the order of arming is not
/// the order of the deadlines). Returns `false`, asserting nothing, when
/// the round cannot tell the deadlines' order: some sleeper woke before
/// all had armed, or they armed more than one `step` apart.
fn deadline_order_round(step: Duration) -> bool {
    const N: usize = 8;
    // One worker: one thread fires the timer heap, a whole batch of due
    // timers before it runs any actor, and in deadline order.
    let rt = Arc::new(Runtime::builder().workers(1).build().unwrap());
    let hs: Vec<_> = (0..N)
        .rev()
        .map(|i| {
            let rt2 = rt.clone();
            let d = step * (i as u32 + 1);
            let h = rt.spawn(move || {
                let lo = smarm::now_ns();
                smarm::sleep(d);
                let woke = smarm::now_ns();
                // Who is still parked in a sleep now that this one runs.
                let asleep: Vec<u64> = rt2
                    .dump()
                    .actors
                    .iter()
                    .filter(|a| a.state == ActorState::Sleeping)
                    .map(|a| a.id)
                    .collect();
                drop(rt2);
                (lo, woke, asleep)
            });
            (i, d, h)
        })
        .collect();
    let mut hs: Vec<_> = hs.into_iter().rev().collect(); // by i
    let ids: Vec<u64> = hs.iter().map(|(_, _, h)| h.id()).collect();
    // Wait until one dump shows all 8 parked in their sleeps (so every one
    // armed its timer and none has fired), or until one has woken.
    let give_up = Instant::now() + Duration::from_secs(30);
    let armed_at = loop {
        let d = rt.dump();
        if ids.iter().all(|&id| is_sleeping(&d, id)) {
            break Some(smarm::now_ns());
        }
        if hs.iter().any(|(_, _, h)| h.is_finished()) {
            break None;
        }
        assert!(
            Instant::now() < give_up,
            "the sleepers neither parked nor woke:\n{d}"
        );
        std::thread::yield_now();
    };
    let results: Vec<_> = hs.drain(..).map(|(i, d, h)| (i, d, h.join().unwrap())).collect();
    drop(Arc::into_inner(rt).expect("the sleepers dropped their references"));
    for (i, d, (lo, woke, _)) in &results {
        // A causal bound of the monotonic clock, checked in every round.
        assert!(
            *woke >= lo + d.as_nanos() as u64,
            "sleeper {i} woke {} ns after it began a sleep of {d:?}",
            woke - lo
        );
    }
    let Some(armed_at) = armed_at else {
        return false;
    };
    // Sleeper `i`'s deadline lies in [lo_i + d_i, armed_at + d_i]: its
    // sleep read the clock after `lo_i`, and before it parked, which the
    // dump saw before `armed_at`. With every `armed_at - lo_i` under one
    // step, these intervals are disjoint and increase with `i`.
    let first_lo = results.iter().map(|(_, _, (lo, _, _))| *lo).min().unwrap();
    if armed_at - first_lo >= step.as_nanos() as u64 {
        return false;
    }
    for (j, _, (_, _, asleep)) in &results {
        let earlier: Vec<u64> = ids[..*j]
            .iter()
            .copied()
            .filter(|id| asleep.contains(id))
            .collect();
        assert!(
            earlier.is_empty(),
            "sleeper {j} woke while sleepers with earlier deadlines ({earlier:?} of {ids:?}) still slept"
        );
    }
    true
}

#[test]
fn sleepers_wake_in_deadline_order() {
    with_timeout(120, || {
        // Each woken sleeper checks, in a dump, that no sleeper with an
        // earlier deadline is still parked in its sleep: an order of
        // wake-ups, not of wall-clock times. The deadlines are known to
        // be ordered only when the sleepers armed within one step of each
        // other; a round that stalled that long is rerun with a longer step.
        for step_ms in [15, 60, 240, 960] {
            if deadline_order_round(Duration::from_millis(step_ms)) {
                return;
            }
            eprintln!("sleepers armed over {step_ms} ms apart or woke first: again, slower");
        }
        panic!("in no round did all sleepers arm within one step (up to 960 ms) of each other");
    });
}

#[test]
fn ten_thousand_sleepers_all_wake_after_their_deadlines() {
    with_timeout(120, || {
        for workers in [1, 2] {
            ten_thousand_sleepers(workers);
        }
    });
}

fn ten_thousand_sleepers(workers: usize) {
    const N: usize = 10_000;
    let rt = Runtime::builder().workers(workers).build().unwrap();
    let before = rt.counters().total().timer_fires;
    let (early, proven) = rt.block_on(move || {
        let early = Arc::new(AtomicU64::new(0));
        // Per sleeper: the clock just before its sleep, and its worker + 1.
        let seen: Arc<Vec<(AtomicU64, AtomicU64)>> =
            Arc::new((0..N).map(|_| (AtomicU64::new(0), AtomicU64::new(0))).collect());
        let mut proven = 0u64;
        let mut hs = Vec::with_capacity(N);
        for i in 0..N {
            let (e, s) = (early.clone(), seen.clone());
            // Many equal deadlines: 50 distinct durations.
            let d = Duration::from_millis(10 + (i as u64 * 7919) % 50);
            hs.push(smarm::spawn(move || {
                // No safe point from here to the park in `sleep`.
                let w = smarm::current_worker().unwrap() as u64 + 1;
                let lo = smarm::now_ns();
                s[i].1.store(w, Ordering::SeqCst);
                s[i].0.store(lo, Ordering::SeqCst);
                let t = Instant::now();
                smarm::sleep(d);
                if t.elapsed() < d {
                    e.fetch_add(1, Ordering::SeqCst);
                }
            }));
            // A sleep whose deadline passed before it armed returns without
            // a timer, so not every sleep fires one. This one provably
            // armed if it ran (to its park) on this worker before this
            // resumption, and this resumption came before its deadline: its
            // in-sleep clock check then saw the deadline ahead.
            let now = smarm::now_ns();
            let me = smarm::current_worker().unwrap() as u64 + 1;
            let lo = seen[i].0.load(Ordering::SeqCst);
            if lo != 0 && seen[i].1.load(Ordering::SeqCst) == me && now < lo + d.as_nanos() as u64 {
                proven += 1;
            }
        }
        for h in hs {
            h.join().unwrap();
        }
        (early.load(Ordering::SeqCst), proven)
    });
    assert_eq!(early, 0, "some sleepers woke before their deadline");
    let fires = rt.counters().total().timer_fires - before;
    eprintln!("{workers} workers: {fires} timer fires, {proven} sleepers provably armed");
    // Every armed timer fires exactly once: at least one per provably
    // armed sleeper, at most one per sleeper.
    assert!(
        (proven..=N as u64).contains(&fires),
        "{fires} timer fires for {N} sleepers, {proven} of them provably armed"
    );
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
            let first = mb.recv().unwrap();
            let second = mb.recv_timeout(Duration::from_secs(30));
            (none, waited, first, second)
        });
        // Sent only once the actor has timed out.
        timed_out.recv().unwrap();
        addr.send(7).unwrap();
        addr.send(8).unwrap();
        let (none, waited, first, second) = h.join().unwrap();
        assert_eq!(none, Err(RecvTimeoutError::Timeout));
        assert!(waited >= Duration::from_millis(20), "timed out early: {waited:?}");
        assert_eq!(first, 7);
        assert_eq!(second, Ok(8));
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
                    Ok(v) => {
                        assert_eq!(v, next, "out of order or duplicated");
                        next += 1;
                    }
                    Err(RecvTimeoutError::Timeout) => timeouts += 1,
                    Err(e) => panic!("{e} with {next} of {N} received"),
                }
            }
            assert!(mb.try_recv().is_err(), "a message arrived twice");
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
        // Wait until every sleeper has armed its timer: parked in its sleep.
        let ids: Vec<u64> = hs.iter().map(|h| h.id()).collect();
        eventually(30, "all 100 sleepers parked in their sleeps", || {
            let d = rt.dump();
            ids.iter().all(|&id| is_sleeping(&d, id))
        });
        // An hour's timers inside this test's 60 s timeout: shutdown does
        // not wait for them.
        let report = rt.shutdown();
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

#[test]
fn deadlines_are_instants_everywhere() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<u32>| {
            // Past deadlines: nothing waits, nothing is lost.
            let past = Instant::now();
            let a = mb.recv_deadline(past);
            let (tx, mut rx) = smarm::channel::<u32>();
            let b = rx.recv_deadline(past);
            let (btx, mut brx) = smarm::bounded::<u32>(1);
            let c = brx.recv_deadline(past);
            let (otx, mut orx) = smarm::oneshot::<u32>();
            let d = orx.recv_deadline(past);
            smarm::sleep_until(past);
            // A near deadline parks until it passes (on the runtime's
            // clock, which the deterministic port runs virtually), then
            // times out.
            let t0 = smarm::now_ns();
            let e = mb.recv_deadline(Instant::now() + Duration::from_millis(5));
            let waited = smarm::now_ns() - t0;
            let j = smarm::spawn(|| smarm::sleep(Duration::from_secs(60)));
            let j = j
                .join_deadline(Instant::now() + Duration::from_millis(1))
                .map(|_| ())
                .unwrap_err();
            j.actor_ref().kill();
            let killed = j.join().unwrap_err().is_killed();
            // A message already queued beats any deadline.
            tx.send(1).unwrap();
            btx.send(2).unwrap();
            otx.send(3).unwrap();
            let f = [
                rx.recv_deadline(past),
                brx.recv_deadline(past),
                orx.recv_deadline(past),
            ];
            (a, b, c, d, e, waited, killed, f)
        });
        let (a, b, c, d, e, waited, killed, f) = h.join().unwrap();
        drop(addr);
        assert_eq!(a, Err(RecvTimeoutError::Timeout));
        assert_eq!(b, Err(RecvTimeoutError::Timeout));
        assert_eq!(c, Err(RecvTimeoutError::Timeout));
        assert_eq!(d, Err(RecvTimeoutError::Timeout));
        assert_eq!(e, Err(RecvTimeoutError::Timeout));
        assert!(
            waited >= 4_000_000,
            "recv_deadline returned {waited} ns after the call, 5 ms asked"
        );
        assert!(killed, "join_deadline handed the handle back, still joinable");
        assert_eq!(f, [Ok(1), Ok(2), Ok(3)]);
    });
}

/// A timer that falls due while the only worker runs something else is
/// fired on the worker's way to sleep (its idle step fires due timers
/// first), which puts the sleeper in the worker's own run-next slot. The
/// worker must run it rather than sleep on it: no timer is left to end
/// the sleep and no other actor runs, so a worker that slept here would
/// never wake (this test then hangs into its timeout). Timeslices are off
/// so the busy actor's spin is one turn, and the loop's own periodic
/// timer check (every few turns) fires the timer in only some rounds.
#[test]
fn a_timer_fired_on_the_way_to_sleep_runs_its_actor() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).timeslice(None).build().unwrap();
        for round in 0..32 {
            let slept = rt.block_on(|| {
                let sleeper = smarm::spawn(|| {
                    let t = Instant::now();
                    smarm::sleep(Duration::from_millis(1));
                    t.elapsed()
                });
                // Past the sleeper's deadline, without a safe point.
                let busy = smarm::spawn(|| {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(3) {
                        std::hint::spin_loop();
                    }
                });
                busy.join().unwrap();
                sleeper.join().unwrap()
            });
            assert!(
                slept >= Duration::from_millis(1),
                "round {round}: woke early: {slept:?}"
            );
        }
    });
}
