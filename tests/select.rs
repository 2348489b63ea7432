//! `Select`: several sources at once (mailbox, channels of every kind,
//! joins, a timeout), exactly one taken, the others intact; from actors
//! and plain threads; also on the deterministic port over seeds.
use std::time::Duration;

use smarm_tests::smarm::{self, Mailbox, RecvError, Runtime, Select};
use smarm_tests::with_timeout;

#[derive(Debug, PartialEq)]
enum Ev {
    Mb(Result<u32, RecvError>),
    Ch(Result<u32, RecvError>),
    One(Result<u32, RecvError>),
    Done,
    Idle,
}

#[test]
fn two_ready_sources_exactly_one_taken_the_other_intact() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (_addr, h) = rt.spawn_actor(|mut mb: Mailbox<u32>| {
            let me = mb.addr();
            let (tx, mut rx) = smarm::channel::<u32>();
            let mut counts = [0u32; 2];
            for i in 0..200 {
                me.send(i).unwrap();
                tx.send(1000 + i).unwrap();
                let ev = Select::new().recv(&mut mb, Ev::Mb).recv(&mut rx, Ev::Ch).wait();
                // The one not taken is still there, and only it.
                match ev {
                    Ev::Mb(Ok(v)) => {
                        assert_eq!(v, i);
                        counts[0] += 1;
                        assert_eq!(rx.try_recv(), Ok(1000 + i), "the other arm's message");
                    }
                    Ev::Ch(Ok(v)) => {
                        assert_eq!(v, 1000 + i);
                        counts[1] += 1;
                        assert_eq!(mb.try_recv(), Ok(i), "the other arm's message");
                    }
                    other => panic!("unexpected {other:?}"),
                }
                assert!(
                    mb.try_recv().is_err() && rx.try_recv().is_err(),
                    "taken twice or left twice"
                );
            }
            counts
        });
        let counts = h.join().unwrap();
        assert_eq!(counts[0] + counts[1], 200);
        // Fairness: with both ready every time, each arm wins often.
        assert!(counts[0] >= 40 && counts[1] >= 40, "one arm starved: {counts:?}");
    });
}

#[test]
fn an_actor_parks_until_any_source_is_ready() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, rx) = smarm::channel::<u32>();
        let (otx, orx) = smarm::oneshot::<u32>();
        let (btx, brx) = smarm::bounded::<u32>(1);
        let (addr, h) = rt.spawn_actor(move |mut mb: Mailbox<u32>| {
            let (mut rx, mut orx, mut brx) = (rx, Some(orx), brx);
            let mut seen = Vec::new();
            for _ in 0..4 {
                let mut sel = Select::new()
                    .recv(&mut mb, Ev::Mb)
                    .recv(&mut rx, Ev::Ch)
                    .recv(&mut brx, |r| Ev::Ch(r.map(|v| v + 100)));
                // A oneshot whose value was taken stays ready (closed):
                // select on it only while its value is pending.
                if let Some(o) = orx.as_mut() {
                    sel = sel.recv(o, Ev::One);
                }
                let ev = sel.wait();
                if matches!(ev, Ev::One(_)) {
                    orx = None;
                }
                seen.push(ev);
            }
            seen
        });
        // One source at a time, each after the actor has surely parked or
        // not: the outcome is the same either way.
        tx.send(1).unwrap();
        otx.send(2).unwrap();
        addr.send(3).unwrap();
        btx.send(4).unwrap();
        let mut seen = h.join().unwrap();
        seen.sort_by_key(|e| format!("{e:?}"));
        assert_eq!(
            seen,
            [Ev::Ch(Ok(1)), Ev::Ch(Ok(104)), Ev::Mb(Ok(3)), Ev::One(Ok(2))]
        );
    });
}

#[test]
fn the_timeout_fires_only_when_nothing_is_ready_and_takes_nothing() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let (tx, mut rx) = smarm::channel::<u32>();
            let (_otx, mut orx) = smarm::oneshot::<u32>();
            let t0 = smarm::now_ns();
            let ev = Select::new()
                .recv(&mut rx, Ev::Ch)
                .recv(&mut orx, Ev::One)
                .timeout(Duration::from_millis(5), || Ev::Idle)
                .wait();
            assert_eq!(ev, Ev::Idle);
            assert!(smarm::now_ns() - t0 >= 4_000_000, "fired early");
            // Ready beats an expired timeout.
            tx.send(9).unwrap();
            let ev = Select::new()
                .recv(&mut rx, Ev::Ch)
                .timeout(Duration::ZERO, || Ev::Idle)
                .wait();
            assert_eq!(ev, Ev::Ch(Ok(9)));
        });
    });
}

#[test]
fn closed_sources_and_finished_joins_are_ready() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        rt.block_on(|| {
            let (tx, mut rx) = smarm::channel::<u32>();
            drop(tx);
            let (_keep, mut rx2) = smarm::channel::<u32>();
            let ev = Select::new().recv(&mut rx2, Ev::Mb).recv(&mut rx, Ev::Ch).wait();
            assert_eq!(ev, Ev::Ch(Err(RecvError)), "a closed, drained channel is ready");
            let (otx, mut orx) = smarm::oneshot::<u32>();
            drop(otx);
            assert_eq!(
                Select::new()
                    .recv(&mut orx, Ev::One)
                    .recv(&mut rx2, Ev::Ch)
                    .wait(),
                Ev::One(Err(RecvError))
            );
            // A join arm: ready when the actor finishes; join then returns.
            let (gtx, grx) = smarm::oneshot::<()>();
            let mut worker = smarm::spawn(move || {
                grx.recv().unwrap();
                7
            });
            let ev = Select::new()
                .recv(&mut rx2, Ev::Ch)
                .join(&mut worker, || Ev::Done)
                .timeout(Duration::from_millis(1), || Ev::Idle)
                .wait();
            assert_eq!(ev, Ev::Idle, "not finished yet");
            gtx.send(()).unwrap();
            let ev = Select::new()
                .recv(&mut rx2, Ev::Ch)
                .join(&mut worker, || Ev::Done)
                .wait();
            assert_eq!(ev, Ev::Done);
            assert_eq!(worker.join().unwrap(), 7);
        });
    });
}

#[test]
fn selective_receive_arm_leaves_the_rest_in_order() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<u32>| {
            let (_tx, mut rx) = smarm::channel::<u32>();
            let got = Select::new()
                .recv_matching(&mut mb, |&m| m % 2 == 0, Ev::Mb)
                .recv(&mut rx, Ev::Ch)
                .wait();
            let rest: Vec<u32> = (0..3).map(|_| mb.recv().unwrap()).collect();
            (got, rest)
        });
        for m in [1, 3, 4, 5] {
            addr.send(m).unwrap();
        }
        let (got, rest) = h.join().unwrap();
        assert_eq!(got, Ev::Mb(Ok(4)));
        assert_eq!(rest, [1, 3, 5]);
    });
}

#[test]
fn a_plain_thread_selects_too() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, mut rx) = smarm::channel::<u32>();
        let (_tx2, mut rx2) = smarm::channel::<u32>();
        let sender = rt.spawn(move || {
            smarm::yield_now();
            tx.send(5).unwrap();
        });
        let ev = Select::new().recv(&mut rx2, Ev::Mb).recv(&mut rx, Ev::Ch).wait();
        assert_eq!(ev, Ev::Ch(Ok(5)));
        sender.join().unwrap();
    });
}

#[test]
fn racing_senders_on_two_sources_lose_nothing() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        const N: u32 = 300;
        let (tx, rx) = smarm::channel::<u32>();
        let (addr, h) = rt.spawn_actor(move |mut mb: Mailbox<u32>| {
            let mut rx = rx;
            let (mut from_mb, mut from_ch) = (Vec::new(), Vec::new());
            let (mut mb_open, mut ch_open) = (true, true);
            while mb_open || ch_open {
                match Select::new().recv(&mut mb, Ev::Mb).recv(&mut rx, Ev::Ch).wait() {
                    Ev::Mb(Ok(v)) => from_mb.push(v),
                    Ev::Ch(Ok(v)) => from_ch.push(v),
                    Ev::Mb(Err(_)) => mb_open = false,
                    Ev::Ch(Err(_)) => ch_open = false,
                    other => panic!("unexpected {other:?}"),
                }
                if !mb_open && ch_open {
                    // Only the channel is left: a closed arm stays ready,
                    // so wait on the channel alone.
                    while let Ok(v) = rx.recv() {
                        from_ch.push(v);
                    }
                    ch_open = false;
                } else if mb_open && !ch_open {
                    while let Ok(v) = mb.recv() {
                        from_mb.push(v);
                    }
                    mb_open = false;
                }
            }
            (from_mb, from_ch)
        });
        let a = rt.spawn(move || (0..N).for_each(|i| addr.send(i).unwrap()));
        let b = rt.spawn(move || (0..N).for_each(|i| tx.send(i).unwrap()));
        a.join().unwrap();
        b.join().unwrap();
        let (from_mb, from_ch) = h.join().unwrap();
        assert_eq!(
            from_mb,
            (0..N).collect::<Vec<_>>(),
            "mailbox: lost, duplicated or reordered"
        );
        assert_eq!(
            from_ch,
            (0..N).collect::<Vec<_>>(),
            "channel: lost, duplicated or reordered"
        );
    });
}
