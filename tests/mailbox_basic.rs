//! Actor mailboxes: send/recv from actors and threads, exits, selective
//! receive, FIFO per sender, and the wake-slot handoff's fairness.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use smarm_tests::smarm::{self, Addr, Mailbox, Runtime, SendError};
use smarm_tests::{spawn_pair, with_timeout};

#[test]
fn thread_sends_actor_receives() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<u32>| {
            let mut sum = 0;
            for _ in 0..3 {
                sum += mb.recv().unwrap();
            }
            sum
        });
        for i in 1..=3 {
            addr.send(i).unwrap();
        }
        assert_eq!(h.join().unwrap(), 6);
    });
}

#[test]
fn send_to_an_exited_actor_returns_the_message() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<String>| mb.recv().unwrap());
        addr.send("first".to_string()).unwrap();
        assert_eq!(h.join().unwrap(), "first");
        assert!(addr.is_closed());
        let err = addr.send("late".to_string()).unwrap_err();
        assert_eq!(err, SendError("late".to_string()));
        assert!(err.to_string().contains("exited"));
    });
}

#[test]
fn a_panicking_actor_closes_its_mailbox() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<u8>| -> () {
            mb.recv().unwrap();
            panic!("receiver died");
        });
        addr.send(1).unwrap();
        assert_eq!(h.join().unwrap_err().panic_message(), Some("receiver died"));
        assert_eq!(addr.send(2), Err(SendError(2)));
    });
}

#[test]
fn two_actors_ping_pong() {
    with_timeout(30, || {
        for workers in [1, 2] {
            let rt = Runtime::builder().workers(workers).build().unwrap();
            let total = rt.block_on(|| spawn_pair(1000).map(|h| h.join().unwrap()).iter().sum::<u32>());
            assert_eq!(
                total, 1001,
                "every ball received exactly once ({workers} workers)"
            );
        }
    });
}

#[test]
fn many_senders_fifo_per_sender_nothing_lost() {
    with_timeout(60, || {
        const SENDERS: u64 = 8;
        const EACH: u64 = 5000;
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<(u64, u64)>| {
            let mut next = vec![0u64; SENDERS as usize];
            for _ in 0..SENDERS * EACH {
                let (s, seq) = mb.recv().unwrap();
                assert_eq!(seq, next[s as usize], "sender {s}: out of order");
                next[s as usize] += 1;
            }
            assert!(mb.try_recv().is_err(), "a message was duplicated");
            next
        });
        // Half the senders are actors, half plain threads.
        let actor_senders: Vec<_> = (0..SENDERS / 2)
            .map(|s| {
                let addr = addr.clone();
                rt.spawn(move || {
                    for seq in 0..EACH {
                        addr.send((s, seq)).unwrap();
                        if seq % 64 == 0 {
                            smarm::yield_now();
                        }
                    }
                })
            })
            .collect();
        let threads: Vec<_> = (SENDERS / 2..SENDERS)
            .map(|s| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    for seq in 0..EACH {
                        addr.send((s, seq)).unwrap();
                    }
                })
            })
            .collect();
        for a in actor_senders {
            a.join().unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(h.join().unwrap(), vec![EACH; SENDERS as usize]);
    });
}

#[test]
fn a_plain_thread_can_wait_on_a_mailbox() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        // The actor hands its mailbox out; this thread then receives on it,
        // blocking on the platform's wait while an actor sends.
        let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb);
        let mut mb = h.join().unwrap();
        let sender = rt.spawn(move || {
            for i in 0..100 {
                addr.send(i).unwrap();
                smarm::yield_now();
            }
        });
        let got: Vec<u32> = (0..100).map(|_| mb.recv().unwrap()).collect();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        sender.join().unwrap();
    });
}

#[derive(Debug, PartialEq)]
enum Sel {
    Low(u32),
    High(u32),
}

#[test]
fn selective_receive_keeps_the_others_in_order() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<Sel>| {
            // Wait for the High message although Lows arrive first.
            let first = mb.recv_matching(|m| matches!(m, Sel::High(_)));
            let saved = mb.saved();
            let rest: Vec<Sel> = (0..4).map(|_| mb.recv().unwrap()).collect();
            (first, saved, rest)
        });
        for i in 0..3 {
            addr.send(Sel::Low(i)).unwrap();
        }
        addr.send(Sel::High(9)).unwrap();
        addr.send(Sel::Low(3)).unwrap();
        let (first, saved, rest) = h.join().unwrap();
        assert_eq!(first, Ok(Sel::High(9)));
        assert_eq!(saved, 3);
        assert_eq!(rest, vec![Sel::Low(0), Sel::Low(1), Sel::Low(2), Sel::Low(3)]);
    });
}

/// One worker: a ping-pong pair hands each other the run-next slot on
/// every message while a counter actor waits in the run queue. The pair
/// stops after `messages` round trips, or as soon as the counter has run
/// `enough` times during the exchange. Returns how often it ran then.
fn queued_actor_ticks(rt: Runtime, messages: u64, enough: u64) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let ticks = Arc::new(AtomicU64::new(0));
    let (s, t) = (stop.clone(), ticks.clone());
    let counter = rt.spawn(move || {
        while !s.load(Ordering::SeqCst) {
            t.fetch_add(1, Ordering::SeqCst);
            smarm::yield_now();
        }
    });
    let ticks_during = rt.block_on(move || {
        let (pong, hp) = smarm::spawn_actor(|mut mb: Mailbox<(u32, Addr<u32>)>| loop {
            let (n, back) = mb.recv().unwrap();
            if back.send(n).is_err() || n == 0 {
                return;
            }
        });
        let (_me, hm) = smarm::spawn_actor(move |mut mb: Mailbox<u32>| {
            let my = mb.addr();
            let start = ticks.load(Ordering::SeqCst);
            for k in 1..=messages {
                let last = k == messages || ticks.load(Ordering::SeqCst) - start >= enough;
                let n = u32::from(!last);
                pong.send((n, my.clone())).unwrap();
                assert_eq!(mb.recv().unwrap(), n);
                if last {
                    break;
                }
            }
            ticks.load(Ordering::SeqCst) - start
        });
        hp.join().unwrap();
        hm.join().unwrap()
    });
    stop.store(true, Ordering::SeqCst);
    counter.join().unwrap();
    ticks_during
}

#[test]
fn ping_pong_pair_does_not_starve_a_queued_actor_without_timeslices() {
    with_timeout(60, || {
        // Without timeslices, the cap on consecutive run-next runs must let
        // the queued actor progress every few messages.
        let rt = Runtime::builder().workers(1).timeslice(None).build().unwrap();
        let ticks = queued_actor_ticks(rt, 20_000, u64::MAX);
        assert!(
            ticks > 1000,
            "the queued actor ran only {ticks} times in 40,000 messages"
        );
    });
}

#[test]
fn ping_pong_pair_does_not_starve_a_queued_actor_with_timeslices() {
    with_timeout(60, || {
        // With timeslices (and no run-next cap), the pair shares one
        // inherited slice, so only its expiry lets the queued actor run.
        // The pair exchanges until the counter has run ten times: however
        // fast or slow the machine, a starving scheduler never gets there
        // (the 50,000,000 round trips are a bound, reached only then, or
        // the test's timeout first).
        let rt = Runtime::builder().workers(1).build().unwrap();
        let ticks = queued_actor_ticks(rt, 50_000_000, 10);
        assert!(
            ticks >= 10,
            "the queued actor ran only {ticks} times in 100,000,000 messages"
        );
    });
}

/// One worker: an actor that wakes several receivers leaves the last in its
/// run-next slot and the others queued; when it parks and then parks again
/// with the slot empty, each park switches straight to the queue's oldest
/// (the direct handoff), in the order the loop would have run them. A
/// broker sends a round to `K` receivers, then waits for their `K` acks.
#[cfg(not(feature = "sim"))]
#[test]
fn a_park_with_the_slot_empty_hands_over_to_the_queues_oldest() {
    const K: usize = 8;
    const ROUNDS: usize = 500;
    const STOP: usize = usize::MAX;
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).timeslice(None).build().unwrap();
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (addrs, hs): (Vec<_>, Vec<_>) = (0..K)
            .map(|id| {
                let log = log.clone();
                rt.spawn_actor(move |mut mb: Mailbox<(usize, Addr<usize>)>| loop {
                    let (round, back) = mb.recv().unwrap();
                    if round == STOP {
                        return;
                    }
                    log.lock().unwrap().push(id);
                    back.send(id).unwrap();
                })
            })
            .unzip();
        let before = rt.counters().total();
        let (_broker, hb) = rt.spawn_actor(move |mut mb: Mailbox<usize>| {
            let me = mb.addr();
            for round in 0..ROUNDS {
                for a in &addrs {
                    a.send((round, me.clone())).unwrap();
                }
                for _ in 0..K {
                    mb.recv().unwrap();
                }
            }
            for a in &addrs {
                a.send((STOP, me.clone())).unwrap();
            }
        });
        hb.join().unwrap();
        for h in hs {
            h.join().unwrap();
        }
        let c = rt.counters().total();
        let log = log.lock().unwrap();
        assert_eq!(log.len(), K * ROUNDS);
        // The last woken runs first (the slot), then the queue in order.
        let expect: Vec<usize> = [K - 1].into_iter().chain(0..K - 1).collect();
        for (round, got) in log.chunks(K).enumerate().skip(1) {
            assert_eq!(got, &expect[..], "round {round}");
        }
        // Two turns per ack; all but the loop's periodic turn (one in
        // `TIMER_CHECK_TURNS`) switch actor to actor. Through the loop, the
        // broker's parks with the slot empty (seven in eight) would not:
        // about 9 of 16.
        let (switches, direct) = (
            c.switches - before.switches,
            c.direct_switches - before.direct_switches,
        );
        assert!(switches >= (2 * K * ROUNDS) as u64, "{switches} switches: {c}");
        assert!(
            direct * 4 >= switches * 3,
            "{direct} of {switches} switches direct: {c}"
        );
    });
}
