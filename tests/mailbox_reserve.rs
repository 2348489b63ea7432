//! Addresses before spawn (`ActorBuilder::reserve`), closed mailboxes and
//! bounded mailboxes, from actors and plain threads.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm_tests::smarm::{
    self, ActorBuilder, ExitReason, Mailbox, RecvError, Runtime, SendTimeoutError, SpawnError, TrySendError,
};
use smarm_tests::with_timeout;

#[test]
fn two_actors_know_each_other_from_the_start() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let total = rt.block_on(|| {
            // Each needs the other's address before either runs: reserve
            // one, hand its address to the other, then spawn it.
            let (pong_addr, pong) = ActorBuilder::new().name("pong").reserve::<u32>().unwrap();
            let (ping_addr, ping) = smarm::spawn_actor(move |mut mb: Mailbox<u32>| {
                pong_addr.send(0).unwrap();
                let mut last = 0;
                while let Ok(n) = mb.recv() {
                    last = n;
                    if n >= 100 {
                        break;
                    }
                    pong_addr.send(n + 1).unwrap();
                }
                last
            });
            let pong = pong
                .spawn(move |mut mb: Mailbox<u32>| {
                    let mut seen = 0;
                    while let Ok(n) = mb.recv() {
                        seen += 1;
                        if ping_addr.send(n + 1).is_err() {
                            break;
                        }
                    }
                    seen
                })
                .unwrap();
            let last = ping.join().unwrap();
            // Ping has exited and dropped pong's last address: pong's
            // mailbox closes and its loop ends.
            (last, pong.join().unwrap())
        });
        assert_eq!(total, (101, 51), "every ball crossed once each way");
    });
}

#[test]
fn what_is_sent_before_the_spawn_waits_in_order() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (addr, r) = ActorBuilder::new()
            .name("late")
            .reserve_on::<_, u32>(&rt)
            .unwrap();
        let id = r.id();
        for i in 0..10 {
            addr.send(i).unwrap();
        }
        drop(addr);
        let h = r
            .spawn_on(&rt, |mut mb: Mailbox<u32>| {
                let mut got = Vec::new();
                while let Ok(m) = mb.recv() {
                    got.push(m);
                }
                (smarm::current_id(), smarm::current_name(), got)
            })
            .unwrap();
        assert_eq!(h.id(), id, "the handle is the reservation's actor");
        let (me, name, got) = h.join().unwrap();
        assert_eq!(me, Some(id));
        assert_eq!(name.as_deref(), Some("late"));
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    });
}

#[test]
fn a_reserved_actor_can_be_monitored_and_killed_before_it_runs() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // Monitored before the spawn: the notice carries its real end.
        let (addr, r) = ActorBuilder::new().reserve_on::<_, u32>(&rt).unwrap();
        let down = r.actor_ref().monitor();
        let h = r
            .spawn_on(&rt, |mut mb: Mailbox<u32>| mb.recv().unwrap() * 2)
            .unwrap();
        addr.send(21).unwrap();
        assert_eq!(h.join().unwrap(), 42);
        assert_eq!(down.recv().unwrap().reason, ExitReason::Normal);

        // Killed before the spawn: it ends `Killed`, its body never runs.
        let ran = Arc::new(AtomicBool::new(false));
        let (addr, r) = ActorBuilder::new().reserve_on::<_, u32>(&rt).unwrap();
        let down = r.actor_ref().monitor();
        r.actor_ref().kill();
        let ran2 = ran.clone();
        let h = r
            .spawn_on(&rt, move |_mb: Mailbox<u32>| ran2.store(true, Ordering::SeqCst))
            .unwrap();
        assert!(h.join().unwrap_err().is_killed());
        assert!(!ran.load(Ordering::SeqCst), "a killed reservation ran its body");
        assert_eq!(down.recv().unwrap().reason, ExitReason::Killed);
        assert_eq!(addr.send(1).unwrap_err().0, 1, "its mailbox closed with it");
    });
}

#[test]
fn a_reservation_dropped_unspawned_ends_cancelled_and_refuses_mail() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, r) = ActorBuilder::new().reserve_on::<_, String>(&rt).unwrap();
        addr.send("queued".into()).unwrap();
        let down = r.actor_ref().monitor();
        drop(r);
        assert_eq!(down.recv().unwrap().reason, ExitReason::Cancelled);
        assert!(addr.is_closed());
        assert_eq!(addr.send("late".into()).unwrap_err().0, "late");
    });
}

#[test]
fn reservations_stay_on_their_runtime() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let other = Runtime::builder().workers(1).build().unwrap();
        let (_addr, r) = ActorBuilder::new().reserve_on::<_, u32>(&rt).unwrap();
        let down = r.actor_ref().monitor();
        let e = r.spawn_on(&other, |_mb: Mailbox<u32>| ()).unwrap_err();
        assert_eq!(e, SpawnError::ForeignRuntime);
        assert_eq!(
            down.recv().unwrap().reason,
            ExitReason::Cancelled,
            "a failed spawn ends it"
        );
        // Outside any actor, `reserve` has no runtime to reserve on.
        assert_eq!(
            ActorBuilder::new().reserve::<u32>().unwrap_err(),
            SpawnError::NoRuntime
        );
        assert_eq!(
            ActorBuilder::new()
                .capacity(0)
                .reserve_on::<_, u32>(&rt)
                .unwrap_err(),
            SpawnError::MailboxCapacity
        );
    });
}

#[test]
fn a_bounded_mailbox_parks_its_senders_until_the_actor_catches_up() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (gate_tx, gate) = smarm::oneshot::<()>();
        let (addr, h) = ActorBuilder::new()
            .capacity(4)
            .spawn_actor_on(&rt, move |mut mb: Mailbox<u32>| {
                gate.recv().unwrap(); // not taking anything until told
                let mut got = Vec::new();
                while let Ok(m) = mb.recv() {
                    got.push(m);
                }
                got
            })
            .unwrap();
        assert_eq!(addr.capacity(), Some(4));
        for i in 0..4 {
            addr.try_send(i).unwrap();
        }
        assert_eq!(addr.try_send(4), Err(TrySendError::Full(4)));
        assert_eq!(
            addr.send_timeout(4, Duration::from_millis(5)),
            Err(SendTimeoutError::Timeout(4))
        );
        // Senders on actors park; the actor catches up once let go.
        let senders: Vec<_> = (0..3)
            .map(|s| {
                let a = addr.clone();
                rt.spawn(move || {
                    for i in 0..50 {
                        a.send(100 * (s + 1) + i).unwrap();
                    }
                })
            })
            .collect();
        drop(addr);
        gate_tx.send(()).unwrap();
        for s in senders {
            s.join().unwrap();
        }
        let got = h.join().unwrap();
        assert_eq!(got.len(), 4 + 150, "every message, then closed");
        assert_eq!(&got[..4], [0, 1, 2, 3]);
        for s in 1..=3 {
            let mine: Vec<u32> = got.iter().copied().filter(|m| m / 100 == s).collect();
            assert_eq!(
                mine,
                (0..50).map(|i| 100 * s + i).collect::<Vec<_>>(),
                "FIFO per sender"
            );
        }
    });
}

#[test]
fn an_actor_that_keeps_its_own_address_never_sees_its_mailbox_close() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<u32>| {
            let me = mb.addr();
            let first = mb.recv_timeout(Duration::from_millis(20));
            drop(me);
            // Now only the caller's address is left; once it is dropped,
            // the receive says closed.
            (first, mb.recv())
        });
        // Whenever this drop lands, the first receive times out (the
        // actor's own address) and the second says closed.
        drop(addr);
        let (first, then) = h.join().unwrap();
        assert_eq!(
            first,
            Err(smarm::RecvTimeoutError::Timeout),
            "its own address kept it open"
        );
        assert_eq!(then, Err(RecvError));
    });
}

#[test]
fn a_kill_racing_the_spawn_of_a_reservation_is_never_lost() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        for _ in 0..50 {
            let (_addr, r) = ActorBuilder::new().reserve_on::<_, ()>(&rt).unwrap();
            let victim = r.actor_ref();
            // The kill and the spawn run at once on the two workers; the
            // body parks for good (it keeps its own address), so only the
            // kill can end it: a kill that neither side saw would hang.
            let killer = rt.spawn(move || victim.kill());
            let h = r
                .spawn_on(&rt, |mut mb: Mailbox<()>| {
                    let _me = mb.addr();
                    mb.recv()
                })
                .unwrap();
            killer.join().unwrap();
            assert!(h.join().unwrap_err().is_killed());
        }
    });
}
