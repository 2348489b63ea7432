//! The runtime's behaviour under the deterministic port (`smarm-sim`), each
//! scenario over many seeds: one thread runs at a time, a seeded policy
//! picks the next thread and the next actor at every switch (and at every
//! failpoint), the clock is virtual. Each scenario asserts conservation
//! (every message seen exactly once, in order per sender) and its own
//! outcome; a failure names the seed, and `SMARM_SIM_SEED=S` replays it.
//! `SMARM_SIM_SEEDS=N` runs N seeds per scenario instead of the default.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smarm_sim::{self as sim, Addr, ExitReason, Mailbox, RecvTimeoutError, Report, Runtime};
use smarm_tests::with_timeout;

#[path = "child.rs"]
mod child;

/// Seeds per scenario by default (see the module doc to change it).
const SEEDS: u64 = 64;

/// An event log shared by a scenario's actors (appended under a lock
/// that is never held across a runtime call).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u64>>>);

impl Log {
    fn push(&self, v: u64) {
        self.0.lock().unwrap().push(v);
    }
    fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Six actors on two workers that log as they run, yield, and message one
/// another: the log is the observable schedule.
fn interleaving(log: &Log) -> u64 {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let log = log.clone();
    rt.block_on(move || {
        let (sink, h) = sim::spawn_actor(|mut mb: Mailbox<u64>| {
            let mut s = 0;
            for _ in 0..6 * 5 {
                s += mb.recv().unwrap();
            }
            s
        });
        let hs: Vec<_> = (0..6u64)
            .map(|i| {
                let (log, sink) = (log.clone(), sink.clone());
                sim::spawn(move || {
                    for k in 0..5 {
                        log.push(i * 100 + k);
                        sink.send(i * 100 + k).unwrap();
                        sim::yield_now();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        h.join().unwrap()
    })
}

/// Prints what the seeds did (`--nocapture` shows it).
fn summary(name: &str, reports: &[Report]) {
    let n = reports.len().max(1) as u64;
    let sum = |f: fn(&Report) -> u64| reports.iter().map(f).sum::<u64>();
    let traces: std::collections::HashSet<u64> = reports.iter().map(|r| r.trace).collect();
    println!(
        "{name}: {} seeds, {} distinct traces; per seed {} thread decisions, {} handoffs, {} actor picks, {} clock jumps",
        reports.len(),
        traces.len(),
        sum(|r| r.decisions) / n,
        sum(|r| r.handoffs) / n,
        sum(|r| r.picks) / n,
        sum(|r| r.jumps) / n,
    );
}

#[test]
fn a_seed_replays_the_same_schedule_and_seeds_differ() {
    with_timeout(120, || {
        let expected_sum: u64 = (0..6u64).map(|i| (0..5).map(|k| i * 100 + k).sum::<u64>()).sum();
        let mut logs = std::collections::HashSet::new();
        for seed in sim::seeds(24) {
            let log = Log::default();
            let (sum, r1) = sim::run(seed, || interleaving(&log));
            assert_eq!(sum, expected_sum, "seed {seed}: messages lost or duplicated");
            let first = log.take();
            let (_, r2) = sim::run(seed, || interleaving(&log));
            let second = log.take();
            assert_eq!(
                first, second,
                "seed {seed}: the replay ran actors in another order"
            );
            assert_eq!(r1.trace, r2.trace, "seed {seed}: the replay made other decisions");
            assert_eq!(r1.decisions, r2.decisions, "seed {seed}");
            assert!(r1.picks > 0, "the scheduler never asked the policy for an actor");
            assert!(r1.handoffs > 0, "only one thread ever ran");
            logs.insert(first);
        }
        if sim::seeds(24).count() > 1 {
            assert!(
                logs.len() > 1,
                "every seed gave the same order: the policy decides nothing"
            );
        }
    });
}

/// Ping-pong pairs over mailboxes: every ball received exactly once.
fn pairs(n: usize, balls: u32) -> u32 {
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.block_on(move || {
        let mut hs = Vec::new();
        for _ in 0..n {
            let (a, ha) = sim::spawn_actor(move |mut mb: Mailbox<(Option<Addr<u32>>, u32)>| {
                let (Some(peer), _) = mb.recv().unwrap() else {
                    panic!("peer first")
                };
                peer.send(balls).unwrap();
                let mut got = 0;
                loop {
                    let (_, left) = mb.recv().unwrap();
                    got += 1;
                    if left <= 1 {
                        if left == 1 {
                            peer.send(0).unwrap();
                        }
                        return got;
                    }
                    peer.send(left - 1).unwrap();
                }
            });
            let a2 = a.clone();
            let (b, hb) = sim::spawn_actor(move |mut mb: Mailbox<u32>| {
                let mut got = 0;
                loop {
                    let left = mb.recv().unwrap();
                    got += 1;
                    if left <= 1 {
                        if left == 1 {
                            let _ = a2.send((None, 0));
                        }
                        return got;
                    }
                    a2.send((None, left - 1)).unwrap();
                }
            });
            a.send((Some(b), 0)).unwrap();
            hs.push(ha);
            hs.push(hb);
        }
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

#[test]
fn mailbox_ping_pong_pairs_lose_no_ball() {
    with_timeout(300, || {
        let reports = sim::check(SEEDS, |seed| {
            let got = pairs(8, 20);
            // Balls 20, 19, ..., 1, 0: 21 receptions per pair.
            assert_eq!(got, 8 * 21, "seed {seed}: balls lost or duplicated");
        });
        summary("mailbox_ping_pong_pairs", &reports);
    });
}

#[test]
fn fan_in_keeps_each_senders_order() {
    with_timeout(300, || {
        sim::check(SEEDS, |seed| {
            let rt = Runtime::builder().workers(2).build().unwrap();
            rt.block_on(move || {
                const SENDERS: u64 = 6;
                const EACH: u64 = 40;
                let (sink, h) = sim::spawn_actor(move |mut mb: Mailbox<(u64, u64)>| {
                    let mut next = [0u64; SENDERS as usize];
                    for _ in 0..SENDERS * EACH {
                        let (s, k) = mb.recv().unwrap();
                        assert_eq!(
                            k, next[s as usize],
                            "seed {seed}: sender {s} reordered or duplicated"
                        );
                        next[s as usize] += 1;
                    }
                    assert!(mb.try_recv().is_err(), "seed {seed}: more messages than sent");
                    next
                });
                for s in 0..SENDERS {
                    let sink = sink.clone();
                    sim::spawn(move || {
                        for k in 0..EACH {
                            sink.send((s, k)).unwrap();
                            if k % 7 == 0 {
                                sim::yield_now();
                            }
                        }
                    });
                }
                let next = h.join().unwrap();
                assert!(next.iter().all(|&n| n == EACH), "seed {seed}: {next:?}");
            });
        });
    });
}

#[test]
fn bounded_channel_full_and_disconnect() {
    with_timeout(300, || {
        sim::check(SEEDS, |seed| {
            let rt = Runtime::builder().workers(2).build().unwrap();
            rt.block_on(move || {
                let (tx, mut rx) = sim::bounded::<(u32, u32)>(2);
                for p in 0..3u32 {
                    let tx = tx.clone();
                    sim::spawn(move || {
                        for k in 0..30 {
                            tx.send((p, k)).unwrap();
                        }
                    });
                }
                drop(tx);
                let mut next = [0u32; 3];
                // Ends with Disconnected once every producer is gone and
                // the channel is drained.
                while let Ok((p, k)) = rx.recv() {
                    assert_eq!(k, next[p as usize], "seed {seed}: producer {p} out of order");
                    next[p as usize] += 1;
                }
                assert_eq!(next, [30; 3], "seed {seed}: lost messages");
            });
        });
    });
}

/// Sends 0..n to `addr` from a new actor, with gaps of 0 to 60 us of
/// virtual time between sends: timed receives on the other side sometimes
/// time out and sometimes race the send.
fn send_with_gaps(addr: Addr<u32>, n: u32) {
    sim::spawn(move || {
        for k in 0..n {
            addr.send(k).unwrap();
            sim::sleep(Duration::from_micros(u64::from(k * 7 % 61)));
        }
    });
}

#[test]
fn timed_receives_race_messages_without_loss() {
    with_timeout(300, || {
        let total_timeouts = AtomicU64::new(0);
        sim::check(SEEDS, |seed| {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let (got, timeouts) = rt.block_on(move || {
                let (addr, h) = sim::spawn_actor(move |mut mb: Mailbox<u32>| {
                    let (mut got, mut timeouts) = (Vec::new(), 0u32);
                    while got.len() < 40 {
                        match mb.recv_timeout(Duration::from_micros(30)) {
                            Ok(v) => got.push(v),
                            Err(RecvTimeoutError::Timeout) => timeouts += 1,
                            Err(e) => panic!("seed {seed}: {e} with {} of 40 received", got.len()),
                        }
                    }
                    (got, timeouts)
                });
                send_with_gaps(addr, 40);
                h.join().unwrap()
            });
            assert_eq!(
                got,
                (0..40).collect::<Vec<_>>(),
                "seed {seed}: lost, duplicated or reordered"
            );
            total_timeouts.fetch_add(u64::from(timeouts), Ordering::SeqCst);
        });
        // The receives raced both ways: some deadlines passed first.
        assert!(
            total_timeouts.load(Ordering::SeqCst) > 0,
            "no receive ever timed out"
        );
    });
}

#[test]
fn timed_selective_receives_race_messages_without_loss() {
    with_timeout(300, || {
        let total_timeouts = AtomicU64::new(0);
        sim::check(SEEDS, |seed| {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let (evens, odds, timeouts) = rt.block_on(move || {
                let (addr, h) = sim::spawn_actor(move |mut mb: Mailbox<u32>| {
                    let (mut evens, mut timeouts) = (Vec::new(), 0u32);
                    // Evens first, by selective receive with a timeout;
                    // the odds that come meanwhile must wait, in order.
                    while evens.len() < 20 {
                        match mb.recv_matching_timeout(Duration::from_micros(30), |v| v % 2 == 0) {
                            Ok(v) => evens.push(v),
                            Err(RecvTimeoutError::Timeout) => timeouts += 1,
                            Err(e) => panic!("seed {seed}: {e} with {} of 20 evens", evens.len()),
                        }
                    }
                    let odds: Vec<u32> = (0..20).map(|_| mb.recv().unwrap()).collect();
                    (evens, odds, timeouts)
                });
                send_with_gaps(addr, 40);
                h.join().unwrap()
            });
            assert_eq!(
                evens,
                (0..20).map(|k| 2 * k).collect::<Vec<_>>(),
                "seed {seed}: a match lost, duplicated or reordered"
            );
            assert_eq!(
                odds,
                (0..20).map(|k| 2 * k + 1).collect::<Vec<_>>(),
                "seed {seed}: a skipped message lost or reordered"
            );
            total_timeouts.fetch_add(u64::from(timeouts), Ordering::SeqCst);
        });
        assert!(
            total_timeouts.load(Ordering::SeqCst) > 0,
            "no selective receive ever timed out"
        );
    });
}

#[test]
fn a_name_is_free_once_its_holders_exit_is_heard() {
    // The holder is monitored before it registers, so its exit hooks run
    // the monitor's (the `Down`) before the one that unbinds the name: a
    // watcher on the other worker that registers as soon as it hears must
    // still find the name free, on every schedule.
    with_timeout(300, || {
        sim::check(SEEDS, |seed| {
            let rt = Runtime::builder().workers(2).build().unwrap();
            rt.block_on(move || {
                let (a, ha) = sim::spawn_actor(|mut mb: Mailbox<()>| mb.recv().unwrap());
                let down = ha.actor_ref().monitor();
                sim::register("svc", &a).unwrap();
                let watcher = sim::spawn(move || {
                    let (b, hb) = sim::spawn_actor(|mut mb: Mailbox<()>| mb.recv().unwrap());
                    down.recv().expect("a Down notice");
                    let r = sim::register("svc", &b);
                    let found = sim::whereis::<()>("svc").map(|x| x.id());
                    b.send(()).unwrap();
                    hb.join().unwrap();
                    (r, found, b.id())
                });
                a.send(()).unwrap();
                ha.join().unwrap();
                let (r, found, b) = watcher.join().unwrap();
                assert_eq!(r, Ok(()), "seed {seed}: the name was still taken after the Down");
                assert_eq!(found, Some(b), "seed {seed}");
                assert!(
                    sim::whereis::<()>("svc").is_none(),
                    "seed {seed}: bound to the dead"
                );
            });
        });
    });
}

#[test]
fn sleepers_wake_in_deadline_order_in_virtual_time() {
    with_timeout(120, || {
        let reports = sim::check(SEEDS, |seed| {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let order = rt.block_on(move || {
                let (tx, mut rx) = sim::channel::<u64>();
                for i in (0..8u64).rev() {
                    let tx = tx.clone();
                    // An hour apart: virtual time costs nothing.
                    sim::spawn(move || {
                        sim::sleep(Duration::from_secs(3600 * (i + 1)));
                        tx.send(i).unwrap();
                    });
                }
                drop(tx);
                let mut order = Vec::new();
                while let Ok(i) = rx.recv() {
                    order.push(i);
                }
                order
            });
            assert_eq!(order, (0..8).collect::<Vec<_>>(), "seed {seed}");
        });
        for r in &reports {
            assert!(r.virtual_ns >= 8 * 3600 * 1_000_000_000, "{r:?}");
            assert!(r.jumps > 0, "the clock never jumped: {r:?}");
        }
    });
}

#[test]
fn links_kill_and_monitors_report_each_exit_once() {
    with_timeout(300, || {
        sim::check(SEEDS, |seed| {
            let rt = Runtime::builder().workers(2).build().unwrap();
            rt.block_on(move || {
                // A panics; B, linked to A, is killed; a monitor of each
                // sees exactly one Down with the right reason.
                let (a_addr, ha) = sim::spawn_actor(|mut mb: Mailbox<u8>| {
                    if mb.recv().unwrap() == 1 {
                        panic!("injected");
                    }
                });
                let a = ha.actor_ref();
                let (b_ready_tx, b_ready) = sim::oneshot::<()>();
                let hb = sim::spawn(move || {
                    assert!(sim::link(&a));
                    b_ready_tx.send(()).unwrap();
                    loop {
                        sim::sleep(Duration::from_secs(1));
                    }
                });
                let (ma, mb_) = (ha.actor_ref().monitor(), hb.actor_ref().monitor());
                b_ready.recv().unwrap();
                a_addr.send(1).unwrap();
                let da = ma.recv().expect("A's Down");
                let db = mb_.recv().expect("B's Down");
                assert!(
                    matches!(da.reason, ExitReason::Panicked(_)),
                    "seed {seed}: {:?}",
                    da.reason
                );
                assert!(
                    matches!(db.reason, ExitReason::Killed),
                    "seed {seed}: {:?}",
                    db.reason
                );
                assert!(ha.join().is_err() && hb.join().is_err(), "seed {seed}");
            });
        });
    });
}

#[test]
fn sends_to_an_exited_actor_fail_and_nothing_is_lost() {
    with_timeout(300, || {
        sim::check(SEEDS, |seed| {
            /// Counts its drop unless it was received or handed back.
            struct Counted {
                dropped: Arc<AtomicU64>,
                ended: bool,
            }
            impl Drop for Counted {
                fn drop(&mut self) {
                    if !self.ended {
                        self.dropped.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            let dropped = Arc::new(AtomicU64::new(0));
            let rt = Runtime::builder().workers(2).build().unwrap();
            let d = dropped.clone();
            let (received, ok, failed) = rt.block_on(move || {
                // The receiver takes 25 messages and exits (closing its
                // mailbox) while three senders keep sending.
                let (addr, h) = sim::spawn_actor(|mut mb: Mailbox<Counted>| {
                    let mut received = 0u64;
                    for _ in 0..25 {
                        mb.recv().unwrap().ended = true;
                        received += 1;
                    }
                    received
                });
                let ok = Arc::new(AtomicU64::new(0));
                let failed = Arc::new(AtomicU64::new(0));
                let senders: Vec<_> = (0..3)
                    .map(|_| {
                        let (addr, ok, failed, d) = (addr.clone(), ok.clone(), failed.clone(), d.clone());
                        sim::spawn(move || {
                            for _ in 0..20 {
                                let m = Counted {
                                    dropped: d.clone(),
                                    ended: false,
                                };
                                match addr.send(m) {
                                    Ok(()) => ok.fetch_add(1, Ordering::SeqCst),
                                    Err(e) => {
                                        e.into_inner().ended = true;
                                        failed.fetch_add(1, Ordering::SeqCst)
                                    }
                                };
                                sim::yield_now();
                            }
                        })
                    })
                    .collect();
                let received = h.join().unwrap();
                for s in senders {
                    s.join().unwrap();
                }
                (received, ok.load(Ordering::SeqCst), failed.load(Ordering::SeqCst))
            });
            drop(rt);
            assert_eq!(received, 25, "seed {seed}");
            assert_eq!(
                ok + failed,
                60,
                "seed {seed}: a send neither succeeded nor failed"
            );
            // Nothing lost: every accepted message was received or dropped
            // with the closed mailbox (a send racing the close), and none
            // delivered twice.
            assert_eq!(
                ok,
                received + dropped.load(Ordering::SeqCst),
                "seed {seed}: accepted {ok}, received {received}, dropped {}",
                dropped.load(Ordering::SeqCst)
            );
        });
    });
}

#[test]
fn shutdown_cancels_parked_and_sleeping_actors() {
    with_timeout(300, || {
        sim::check(SEEDS, |seed| {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let parked = Arc::new(AtomicU64::new(0));
            let (ready_tx, mut ready) = sim::channel::<()>();
            let mut keep = Vec::new();
            for i in 0..6u64 {
                let (p, ready_tx) = (parked.clone(), ready_tx.clone());
                let (addr, h) = rt.spawn_actor(move |mut mb: Mailbox<u8>| {
                    p.fetch_add(1, Ordering::SeqCst);
                    ready_tx.send(()).unwrap();
                    if i % 2 == 0 {
                        mb.recv().unwrap();
                    } else {
                        sim::sleep(Duration::from_secs(1 << 20));
                    }
                });
                keep.push((addr, h));
            }
            // Every actor runs up to its wait before the shutdown.
            for _ in 0..6 {
                ready.recv().unwrap();
            }
            assert_eq!(parked.load(Ordering::SeqCst), 6, "seed {seed}");
            let report = rt.shutdown();
            assert_eq!(report.abandoned, 0, "seed {seed}: {report:?}");
            for (_, h) in keep {
                let e = h.join().unwrap_err();
                assert!(
                    e.is_cancelled(),
                    "seed {seed}: a parked actor was not cancelled: {e}"
                );
            }
        });
    });
}

#[test]
fn blocking_calls_hand_the_worker_over() {
    with_timeout(300, || {
        sim::check(SEEDS / 2, |seed| {
            let rt = Runtime::builder().workers(1).build().unwrap();
            let total = rt.block_on(move || {
                let hs: Vec<_> = (0..3u64)
                    .map(|i| sim::spawn(move || sim::blocking(|| i + 1) + sim::blocking(|| 10)))
                    .collect();
                let pinger = sim::spawn(|| {
                    let mut n = 0;
                    for _ in 0..50 {
                        sim::yield_now();
                        n += 1;
                    }
                    n
                });
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>() + pinger.join().unwrap()
            });
            assert_eq!(total, 6 + 30 + 50, "seed {seed}");
            assert!(rt.counters().total().blocking_handoffs >= 1, "seed {seed}");
        });
    });
}

#[test]
fn every_scenario_report_is_filled() {
    // The reports say what happened: used by the closing figures.
    with_timeout(60, || {
        let (_, r): ((), Report) = sim::run(1, || {
            let _ = pairs(2, 5);
        });
        assert_eq!(r.seed, 1);
        assert!(r.threads >= 3, "root + 2 workers: {r:?}");
        assert!(r.decisions > 0 && r.virtual_ns > 0, "{r:?}");
        // With the test-only `failpoints` feature, the failpoints inside
        // the ring, park and mailbox protocols are decisions of the
        // simulation too; without it (the default test build, the code
        // users get) there are none to reach.
        if cfg!(feature = "failpoints") {
            assert!(r.failpoints > 0, "no failpoint reached: {r:?}");
        } else {
            assert_eq!(r.failpoints, 0, "failpoint sites in the default build: {r:?}");
        }
    });
}

/// A program with a lost-update race between a load and a store across a
/// yield: 4 actors x 3 increments of a shared counter.
fn racy() -> u64 {
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.block_on(|| {
        let x = Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let x = x.clone();
                sim::spawn(move || {
                    for _ in 0..3 {
                        let v = x.load(Ordering::SeqCst);
                        sim::yield_now();
                        x.store(v + 1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        x.load(Ordering::SeqCst)
    })
}

#[test]
fn a_race_shows_on_some_seeds_and_each_failing_seed_replays() {
    with_timeout(120, || {
        let mut outcomes = std::collections::BTreeMap::new();
        for seed in 0..48 {
            let (a, ra) = sim::run(seed, racy);
            let (b, rb) = sim::run(seed, racy);
            assert_eq!(a, b, "seed {seed}: the replay computed another result");
            assert_eq!(ra.trace, rb.trace, "seed {seed}");
            *outcomes.entry(a).or_insert(0u32) += 1;
        }
        // The race is found (some seed loses an update) and is not
        // everywhere (the policy is not stuck on one order).
        let lost = outcomes
            .iter()
            .filter(|(v, _)| **v < 12)
            .map(|(_, n)| n)
            .sum::<u32>();
        assert!(lost > 0, "no seed exposed the lost update: {outcomes:?}");
        assert!(outcomes.len() > 1, "every seed gave one outcome: {outcomes:?}");
    });
}

/// The child body: an actor waits for a message nobody will send, and the
/// root waits for the actor.
fn deadlocked_program() {
    let _ = sim::run(5, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        rt.block_on(|| {
            let (addr, h) = sim::spawn_actor(|mut mb: Mailbox<u8>| mb.recv().unwrap());
            let r = h.join();
            drop(addr);
            r
        })
    });
}

#[test]
fn a_lost_wake_up_is_reported_with_its_seed() {
    child::child_entry("sim_deadlock", deadlocked_program);
    let out = child::run_child("a_lost_wake_up_is_reported_with_its_seed", "sim_deadlock");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the deadlocked child exited cleanly:\n{err}"
    );
    assert!(err.contains("smarm-sim: deadlock"), "no deadlock report:\n{err}");
    assert!(
        err.contains("SMARM_SIM_SEED=5"),
        "the report does not name the seed:\n{err}"
    );
    assert!(
        err.contains("root"),
        "the report does not list the threads:\n{err}"
    );
}

#[test]
fn a_pick_deep_in_a_long_run_queue_stays_cheap() {
    // The seeded policy picks the next actor by rotating the run queue, and
    // with the failpoints every queue push is a scheduling decision: a pick
    // anywhere in a queue of hundreds made each turn cost hundreds of
    // decisions (1,000 actors yielding 10 times took ~47 s of real time
    // against ~2 s). Picks stay near the head: the cost per pick is
    // bounded, whatever the queue's length.
    with_timeout(120, || {
        let (sum, r) = sim::run(3, || {
            let rt = Runtime::builder().workers(1).build().unwrap();
            rt.block_on(|| {
                // Each actor waits for a go, so the root's sends make all
                // 400 runnable at once: a queue of hundreds to pick from.
                let (addrs, hs): (Vec<_>, Vec<_>) = (0..400u64)
                    .map(|i| {
                        sim::spawn_actor(move |mut mb: Mailbox<()>| {
                            mb.recv().unwrap();
                            for _ in 0..5 {
                                sim::yield_now();
                            }
                            i
                        })
                    })
                    .unzip();
                for a in &addrs {
                    a.send(()).unwrap();
                }
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
            })
        });
        assert_eq!(sum, 399 * 400 / 2);
        assert!(r.picks >= 400 * 5, "an actor turn without a pick: {r:?}");
        if cfg!(feature = "failpoints") {
            assert!(
                r.failpoints < 20 * r.picks,
                "{} failpoints per pick: the picks reach deep into the queue ({r:?})",
                r.failpoints / r.picks
            );
        }
    });
}
