//! `Select::ready`: an actor waits on its mailbox and a socket's readiness
//! at once; exactly one arm is taken and the other source is left intact;
//! a caller that may not wait gets `NotHere`; a kill out of such a select
//! leaves nothing behind in the descriptor's record. (The host's port
//! only: the deterministic port has no poller.)
#![cfg(not(feature = "sim"))]

use std::io::{ErrorKind, Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use smarm_tests::smarm::io::{Interest, WaitError};
use smarm_tests::smarm::unix::net::UnixStream;
use smarm_tests::smarm::{self, ActorState, JoinError, Mailbox, RecvError, Runtime, Select};
use smarm_tests::{eventually, with_timeout};

#[derive(Debug)]
enum Ev {
    Msg(Result<u32, RecvError>),
    Readable(Result<(), WaitError>),
    Idle,
}

/// One non-blocking read of `s`: `None` on `WouldBlock`.
fn try_read(s: &UnixStream, buf: &mut [u8]) -> Option<usize> {
    match s.try_io(|s| (&*s).read(buf)) {
        Ok(n) => Some(n),
        Err(e) if e.kind() == ErrorKind::WouldBlock => None,
        Err(e) => panic!("read failed: {e}"),
    }
}

/// An actor serves its mailbox and a stream until both end; the driver
/// alternates messages and writes, each answered before the next, so both
/// arms must wake the parked actor, in order.
#[test]
fn an_actor_serves_its_mailbox_and_a_socket_with_one_select() {
    with_timeout(60, || {
        for workers in [1, 2] {
            let rt = Runtime::builder().workers(workers).build().unwrap();
            let (a, b) = UnixStream::pair().unwrap();
            let (ack_tx, ack_rx) = mpsc::channel::<String>();
            let (addr, h) = rt.spawn_actor(move |mut mb: Mailbox<u32>| {
                let reg = a.registration().unwrap();
                let mut buf = [0u8; 64];
                let (mut mb_open, mut sock_open) = (true, true);
                while mb_open || sock_open {
                    let ticket = reg.ticket();
                    if sock_open {
                        match try_read(&a, &mut buf) {
                            Some(0) => {
                                sock_open = false;
                                continue;
                            }
                            Some(n) => {
                                ack_tx.send(format!("bytes {:?}", &buf[..n])).unwrap();
                                continue;
                            }
                            None => {}
                        }
                    }
                    let mut sel = Select::new();
                    if mb_open {
                        sel = sel.recv(&mut mb, Ev::Msg);
                    }
                    if sock_open {
                        sel = sel.ready(reg, Interest::READABLE, ticket, Ev::Readable);
                    }
                    match sel.wait() {
                        Ev::Msg(Ok(v)) => ack_tx.send(format!("msg {v}")).unwrap(),
                        Ev::Msg(Err(RecvError)) => mb_open = false,
                        Ev::Readable(r) => r.unwrap(),
                        Ev::Idle => unreachable!("no timeout arm"),
                    }
                }
            });
            for i in 0..50u8 {
                addr.send(u32::from(i)).unwrap();
                assert_eq!(ack_rx.recv().unwrap(), format!("msg {i}"));
                (&b).write_all(&[i]).unwrap();
                assert_eq!(ack_rx.recv().unwrap(), format!("bytes {:?}", [i]));
            }
            drop(addr);
            drop(b);
            h.join().unwrap();
        }
    });
}

/// Both ready at once: the select takes one; a message not taken is still
/// queued, data not read is still in the socket; each arm wins often.
#[test]
fn both_ready_exactly_one_taken_the_other_intact() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        let (_addr, h) = rt.spawn_actor(move |mut mb: Mailbox<u32>| {
            let me = mb.addr();
            let reg = a.registration().unwrap();
            let mut buf = [0u8; 8];
            let mut counts = [0u32; 2];
            for i in 0..200u32 {
                let ticket = reg.ticket();
                assert_eq!(try_read(&a, &mut buf), None, "the socket starts empty");
                if i % 50 == 0 {
                    // No edge since the ticket: the arm is not ready.
                    let ev = Select::new()
                        .ready(reg, Interest::READABLE, ticket, Ev::Readable)
                        .timeout(Duration::from_millis(5), || Ev::Idle)
                        .wait();
                    assert!(matches!(ev, Ev::Idle), "{ev:?}");
                }
                (&b).write_all(&[i as u8]).unwrap();
                // Wait for the poller to deliver the edge (the arm alone).
                let r = Select::new().ready(reg, Interest::READABLE, ticket, |r| r).wait();
                assert_eq!(r, Ok(()));
                // Readiness is not taken: the same ticket is ready again,
                // now alongside a message.
                me.send(i).unwrap();
                match Select::new()
                    .recv(&mut mb, Ev::Msg)
                    .ready(reg, Interest::READABLE, ticket, Ev::Readable)
                    .wait()
                {
                    Ev::Msg(Ok(v)) => {
                        assert_eq!(v, i);
                        counts[0] += 1;
                    }
                    Ev::Readable(Ok(())) => {
                        counts[1] += 1;
                        assert_eq!(mb.try_recv(), Ok(i), "the message not taken");
                    }
                    other => panic!("unexpected {other:?}"),
                }
                assert!(mb.try_recv().is_err(), "a message taken twice or left twice");
                assert_eq!(try_read(&a, &mut buf), Some(1), "the data not read");
                assert_eq!(buf[0], i as u8);
            }
            counts
        });
        let counts = h.join().unwrap();
        assert!(counts[0] >= 40 && counts[1] >= 40, "one arm starved: {counts:?}");
    });
}

/// A caller that may not wait on the registration (here an actor inside
/// `blocking`, off the workers) finds the arm ready at once with
/// `NotHere`, instead of waiting on a poller nobody drives for it; a plain
/// thread cannot register at all.
#[test]
fn a_caller_off_the_runtime_gets_not_here() {
    with_timeout(60, || {
        let (a, _b) = UnixStream::pair().unwrap();
        let e = a.registration().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        let rt = Runtime::builder().workers(1).build().unwrap();
        let r = rt.block_on(move || {
            let reg = a.registration().unwrap();
            let ticket = reg.ticket();
            smarm::blocking(|| Select::new().ready(reg, Interest::READABLE, ticket, |r| r).wait())
        });
        assert_eq!(r, Err(WaitError::NotHere));
    });
}

/// A kill unwinds an actor out of a select parked on a readiness arm: its
/// entry leaves the descriptor's record with it, so the record, recycled
/// for the next registration, has no stale waiter (registration asserts
/// it) and the next reader is woken by its data.
#[test]
fn a_kill_out_of_a_readiness_select_leaves_the_record_clean() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (a, _b) = UnixStream::pair().unwrap();
        let h = rt.spawn(move || {
            let reg = a.registration().unwrap();
            let ticket = reg.ticket();
            let mut buf = [0u8; 1];
            assert_eq!(try_read(&a, &mut buf), None);
            let _ = Select::new().ready(reg, Interest::READABLE, ticket, |r| r).wait();
            unreachable!("the select returned");
        });
        eventually(30, "the actor parks in its select", || {
            rt.dump()
                .actors
                .iter()
                .any(|i| i.id == h.id() && i.state == ActorState::WaitingChannel)
        });
        h.actor_ref().kill();
        assert!(matches!(h.join(), Err(JoinError::Killed { .. })));
        // The killed actor's stream is closed and its record free: the
        // next registration takes it.
        let (c, d) = UnixStream::pair().unwrap();
        let reader = rt.spawn(move || {
            let mut buf = [0u8; 2];
            (&c).read_exact(&mut buf).unwrap();
            buf
        });
        eventually(30, "the reader parks", || {
            rt.dump()
                .actors
                .iter()
                .any(|i| i.id == reader.id() && matches!(i.state, ActorState::WaitingIo { .. }))
        });
        (&d).write_all(b"ok").unwrap();
        assert_eq!(&reader.join().unwrap(), b"ok");
    });
}
