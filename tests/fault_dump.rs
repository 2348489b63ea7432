//! The runtime dump: every live actor with its name, state, what it waits
//! on, mailbox depth and worker.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm_tests::smarm::{self, ActorBuilder, ActorInfo, ActorState, Dump, Mailbox, Runtime};
use smarm_tests::{eventually, with_timeout};

#[test]
fn dump_shows_each_actor_state() {
    with_timeout(60, || {
        let rt = Runtime::builder()
            .workers(2)
            .mailbox_depths(true)
            .build()
            .unwrap();
        // Parked in a join while its mailbox fills up.
        let (gate_tx, gate_rx) = smarm::oneshot::<()>();
        let (inbox, h_inbox) = rt.spawn_actor_named("inbox", move |mut mb: Mailbox<u32>| {
            let gate = smarm::spawn(move || gate_rx.recv().unwrap());
            gate.join().unwrap();
            (0..3).map(|_| mb.recv().unwrap()).sum::<u32>()
        });
        for i in 1..=3 {
            inbox.send(i).unwrap();
        }
        // Parked on an empty mailbox.
        let (idle, h_idle) = rt.spawn_actor_named("idle", |mut mb: Mailbox<()>| mb.recv().unwrap());
        // Sleeping.
        let h_sleepy = rt.spawn_named("sleepy", || smarm::sleep(Duration::from_secs(3600)));
        // Running (spinning on a worker, no safe point).
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let h_spin = rt.spawn_named("spin", move || {
            while !s.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
        });
        // In a blocking call.
        let (btx, brx) = std::sync::mpsc::channel::<()>();
        let h_block = rt.spawn_named("io", move || {
            smarm::blocking(move || brx.recv_timeout(Duration::from_secs(30)).unwrap())
        });
        let want = [
            ("inbox", ActorState::WaitingJoin),
            ("idle", ActorState::WaitingMailbox),
            ("sleepy", ActorState::Sleeping),
            ("spin", ActorState::Running),
            ("io", ActorState::Blocking),
        ];
        eventually(20, "every actor in its expected state", || {
            let d = rt.dump();
            want.iter().all(|(n, st)| {
                d.actors
                    .iter()
                    .any(|a| a.name.as_deref() == Some(n) && a.state == *st)
            })
        });
        let d = rt.dump();
        let find = |n: &str| named(&d, n);
        assert_eq!(find("inbox").mailbox_depth, Some(3));
        assert_eq!(find("idle").mailbox_depth, Some(0));
        assert_eq!(find("sleepy").mailbox_depth, None, "no mailbox");
        assert!(find("spin").worker.is_some(), "a running actor shows its worker");
        // Stacks: the builder's size, and a high-water mark above zero
        // (each has run at least its entry) within it.
        for a in &d.actors {
            assert_eq!(a.stack_size, rt.stack_size());
            if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
                assert!(a.stack_touched.is_some(), "mincore works natively: {a:?}");
            }
            if let Some(t) = a.stack_touched {
                assert!(t > 0 && t <= a.stack_size, "{a:?}");
            }
        }
        let text = d.to_string();
        assert!(
            text.contains("actor") && text.contains("\"inbox\" [parked in a join] mailbox: 3 queued"),
            "{text}"
        );
        assert!(text.contains("worker 0:"), "{text}");

        // Release everything; the dump empties.
        gate_tx.send(()).unwrap();
        assert_eq!(h_inbox.join().unwrap(), 6);
        idle.send(()).unwrap();
        h_idle.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        h_spin.join().unwrap();
        btx.send(()).unwrap();
        h_block.join().unwrap();
        h_sleepy.actor_ref().kill();
        assert!(h_sleepy.join().unwrap_err().is_killed());
        eventually(20, "no live actors in the dump", || rt.dump().actors.is_empty());
    });
}

/// The actor named `name` in dump `d`.
fn named<'a>(d: &'a Dump, name: &str) -> &'a ActorInfo {
    d.actors
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("{name} is in the dump"))
}

/// The depth of a named actor's mailbox in a fresh dump.
fn depth_of(rt: &Runtime, name: &str) -> Option<u64> {
    named(&rt.dump(), name).mailbox_depth
}

#[test]
fn mailbox_depths_are_counted_only_when_the_builder_asks() {
    with_timeout(60, || {
        for on in [false, true] {
            let rt = Runtime::builder().workers(2).mailbox_depths(on).build().unwrap();
            // Spawned, and reserved then spawned (the two ways a mailbox is
            // made); each waits on a gate while its mailbox fills.
            let (gate_tx, gate_rx) = smarm::oneshot::<()>();
            let (gate2_tx, gate2_rx) = smarm::oneshot::<()>();
            let (inbox, h) = rt.spawn_actor_named("inbox", move |mut mb: Mailbox<u64>| {
                gate_rx.recv().unwrap();
                (0..400).map(|_| mb.recv().unwrap()).sum::<u64>()
            });
            let (rinbox, rh) = rt.block_on(move || {
                let (addr, r) = ActorBuilder::new().name("reserved").reserve::<u64>().unwrap();
                let h = r
                    .spawn(move |mut mb: Mailbox<u64>| {
                        gate2_rx.recv().unwrap();
                        (0..5).map(|_| mb.recv().unwrap()).sum::<u64>()
                    })
                    .unwrap();
                (addr, h)
            });
            for i in 0..5 {
                rinbox.send(i).unwrap();
            }
            // Four senders at once: every send counted, none lost to a race.
            let senders: Vec<_> = (0..4)
                .map(|_| {
                    let a = inbox.clone();
                    rt.spawn(move || {
                        for i in 0..100 {
                            a.send(i).unwrap();
                        }
                    })
                })
                .collect();
            for s in senders {
                s.join().unwrap();
            }
            if on {
                assert_eq!(depth_of(&rt, "inbox"), Some(400), "four senders' 400 messages");
                assert_eq!(depth_of(&rt, "reserved"), Some(5), "a reserved actor's mailbox");
            } else {
                assert_eq!(depth_of(&rt, "inbox"), None, "not counted by default");
                assert_eq!(depth_of(&rt, "reserved"), None, "not counted by default");
            }
            gate_tx.send(()).unwrap();
            gate2_tx.send(()).unwrap();
            // Nothing is lost either way.
            assert_eq!(h.join().unwrap(), 4 * (0..100).sum::<u64>());
            assert_eq!(rh.join().unwrap(), (0..5).sum::<u64>());
        }
    });
}

#[test]
fn a_mailboxs_depth_drops_with_each_message_its_actor_takes() {
    // A receive counts what it takes (the receiving `Mailbox` keeps its
    // own copy of whether depths are counted): five sent, two taken, the
    // dump says three; the rest taken, it says none.
    with_timeout(60, || {
        let rt = Runtime::builder()
            .workers(1)
            .mailbox_depths(true)
            .build()
            .unwrap();
        let (gate_tx, gate_rx) = smarm::oneshot::<()>();
        let (inbox, h) = rt.spawn_actor_named("taker", move |mut mb: Mailbox<u32>| {
            let first = mb.recv().unwrap() + mb.recv().unwrap();
            gate_rx.recv().unwrap();
            let mut rest = 0;
            // Ends when the last address is dropped.
            while let Ok(n) = mb.recv() {
                rest += n;
            }
            (first, rest)
        });
        for i in 1..=5 {
            inbox.send(i).unwrap();
        }
        eventually(20, "two taken, three queued", || {
            depth_of(&rt, "taker") == Some(3)
        });
        gate_tx.send(()).unwrap();
        eventually(20, "all taken, waiting on an empty mailbox", || {
            let d = rt.dump();
            let a = named(&d, "taker");
            a.mailbox_depth == Some(0) && a.state == ActorState::WaitingMailbox
        });
        drop(inbox);
        assert_eq!(h.join().unwrap(), (3, 12));
    });
}
