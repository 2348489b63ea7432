//! `Select` from plain threads on the std test platform (asm-free: Miri
//! runs these): every source kind, exactly one taken, the timeout, closed
//! arms, and a select woken by a sender on another thread.

use std::thread;
use std::time::Duration;

use super::Select;
use crate::msg::channel::{bounded, channel, oneshot, RecvError};
use crate::msg::mailbox::detached;
use crate::seam::test_platform::{with_timeout, StdPlatform as P};

#[derive(Debug, PartialEq)]
enum Ev {
    A(Result<u64, RecvError>),
    B(Result<u64, RecvError>),
    Idle,
}

#[test]
fn one_of_two_ready_taken_the_other_intact() {
    let (mut mb, addr) = detached::<u64, P>();
    let (tx, mut rx) = channel::<u64, P>();
    addr.send(1).unwrap();
    tx.send(2).unwrap();
    let ev = Select::<Ev, P>::new()
        .recv(&mut mb, Ev::A)
        .recv(&mut rx, Ev::B)
        .wait();
    match ev {
        Ev::A(Ok(1)) => assert_eq!(rx.try_recv(), Ok(2)),
        Ev::B(Ok(2)) => assert_eq!(mb.try_recv(), Ok(1)),
        other => panic!("unexpected {other:?}"),
    }
    assert!(mb.try_recv().is_err() && rx.try_recv().is_err());
}

#[test]
fn timeout_takes_nothing_and_a_ready_arm_beats_it() {
    let (tx, mut rx) = bounded::<u64, P>(1);
    let (_otx, mut orx) = oneshot::<u64, P>();
    let ev = Select::<Ev, P>::new()
        .recv(&mut rx, Ev::A)
        .recv(&mut orx, Ev::B)
        .timeout(Duration::from_millis(2), || Ev::Idle)
        .wait();
    assert_eq!(ev, Ev::Idle);
    tx.send(5).unwrap();
    let ev = Select::<Ev, P>::new()
        .recv(&mut rx, Ev::A)
        .timeout(Duration::ZERO, || Ev::Idle)
        .wait();
    assert_eq!(ev, Ev::A(Ok(5)));
    // The bounded channel's slot was freed by the select's take.
    tx.try_send(6).unwrap();
}

#[test]
fn a_closed_arm_is_ready() {
    let (tx, mut rx) = channel::<u64, P>();
    let (_keep, mut other) = channel::<u64, P>();
    drop(tx);
    let ev = Select::<Ev, P>::new()
        .recv(&mut other, Ev::A)
        .recv(&mut rx, Ev::B)
        .wait();
    assert_eq!(ev, Ev::B(Err(RecvError)));
}

#[test]
fn a_waiting_select_is_woken_by_any_source() {
    with_timeout(60, || {
        for which in 0..2u64 {
            let (mut mb, addr) = detached::<u64, P>();
            let (tx, mut rx) = channel::<u64, P>();
            let h = thread::spawn(move || {
                let ev = Select::<Ev, P>::new()
                    .recv(&mut mb, Ev::A)
                    .recv(&mut rx, Ev::B)
                    .wait();
                (ev, mb.try_recv().is_err(), rx.try_recv().is_err())
            });
            if which == 0 {
                addr.send(10).unwrap();
            } else {
                tx.send(20).unwrap();
            }
            let (ev, mb_empty, rx_empty) = h.join().unwrap();
            let want = if which == 0 { Ev::A(Ok(10)) } else { Ev::B(Ok(20)) };
            assert_eq!(ev, want);
            assert!(mb_empty && rx_empty);
        }
    });
}
