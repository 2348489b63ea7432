//! The mailbox driven from plain OS threads on the std test platform
//! (asm-free: Miri runs these, with small counts). A detached mailbox has
//! no actor, so its receiver takes the thread-waiter path (`Waiter::Thread`:
//! register, re-check, futex-wait, withdraw); senders are threads too.
//! Covered: FIFO, selective receive and the save queue (also timed),
//! blocking and timed receives, a timer's poke, close (dropping the mailbox) against dropping
//! the addresses, and close racing senders, with every message dropped
//! exactly once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use std::vec::Vec;

use super::detached;
use crate::seam::test_platform::{with_timeout, Counted, StdPlatform as P};

/// Messages per sender in the threaded tests.
const N: u64 = if cfg!(miri) { 12 } else { 2000 };
const SECS: u64 = 60;
const LONG: Duration = Duration::from_secs(30);

fn drops() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

#[test]
fn fifo_and_empty() {
    let (mut mb, addr) = detached::<u64, P>();
    assert_eq!(mb.try_recv(), None);
    assert_eq!(mb.recv_timeout(Duration::ZERO), None);
    for i in 0..8 {
        addr.send(i).unwrap();
    }
    let got: Vec<u64> = core::iter::from_fn(|| mb.try_recv()).collect();
    assert_eq!(got, (0..8).collect::<Vec<_>>());
    assert!(!addr.is_closed());
}

#[test]
fn selective_receive_keeps_the_others_in_order() {
    let (mut mb, addr) = detached::<u64, P>();
    for i in 0..6 {
        addr.send(i).unwrap();
    }
    assert_eq!(mb.try_recv_matching(|&m| m == 3), Some(3));
    assert_eq!(mb.saved(), 3, "0, 1, 2 were skipped into the save queue");
    assert_eq!(mb.try_recv_matching(|&m| m == 9), None);
    assert_eq!(mb.saved(), 5, "everything is saved now");
    addr.send(6).unwrap();
    assert_eq!(mb.recv_matching(|&m| m == 6), 6);
    assert_eq!(
        mb.try_recv_matching(|&m| m == 1),
        Some(1),
        "a match found in the save queue"
    );
    let rest: Vec<u64> = core::iter::from_fn(|| mb.try_recv()).collect();
    assert_eq!(rest, [0, 2, 4, 5], "arrival order kept");
    assert_eq!(mb.saved(), 0);
}

#[test]
fn selective_receive_with_a_timeout() {
    with_timeout(SECS, || {
        let (mut mb, addr) = detached::<u64, P>();
        for i in [1, 2, 3] {
            addr.send(i).unwrap();
        }
        // No match: it times out and loses nothing.
        assert_eq!(
            mb.recv_matching_timeout(Duration::from_millis(2), |&m| m >= 10),
            None
        );
        assert_eq!(mb.saved(), 3);
        // A match already here is taken at once, even with no time left.
        assert_eq!(mb.recv_matching_timeout(Duration::ZERO, |&m| m == 2), Some(2));
        // A match that comes while it waits ends the wait; the others
        // that came meanwhile are saved behind the earlier ones.
        let h = thread::spawn(move || {
            let got = mb.recv_matching_timeout(LONG, |&m| m == 20);
            let rest: Vec<u64> = core::iter::from_fn(|| mb.try_recv()).collect();
            (got, rest)
        });
        // (20 last: everything sent is in the mailbox when it matches.)
        addr.send(10).unwrap();
        addr.send(30).unwrap();
        addr.send(20).unwrap();
        let (got, rest) = h.join().unwrap();
        assert_eq!(got, Some(20));
        assert_eq!(rest, [1, 3, 10, 30], "arrival order kept");
    });
}

#[test]
fn recv_timeout_expires_and_a_later_message_still_arrives() {
    let (mut mb, addr) = detached::<u64, P>();
    assert_eq!(mb.recv_timeout(Duration::from_millis(2)), None);
    addr.send(1).unwrap();
    assert_eq!(mb.recv_timeout(Duration::from_millis(2)), Some(1));
}

#[test]
fn blocked_thread_receiver_woken_by_send() {
    with_timeout(SECS, || {
        let (mut mb, addr) = detached::<u64, P>();
        let h = thread::spawn(move || {
            let a = mb.recv();
            let b = mb.recv_timeout(LONG);
            (a, b)
        });
        addr.send(1).unwrap();
        addr.send(2).unwrap();
        assert_eq!(h.join().unwrap(), (1, Some(2)));
    });
}

#[test]
fn poke_ends_a_wait_without_a_message() {
    // What a receive timer does: take the registration and wake. The
    // receiver re-checks, finds nothing and waits again until its deadline.
    with_timeout(SECS, || {
        let (mut mb, addr) = detached::<u64, P>();
        let h = thread::spawn(move || mb.recv_timeout(Duration::from_millis(5)));
        addr.__poke();
        addr.__poke();
        assert_eq!(h.join().unwrap(), None);
    });
}

#[test]
fn senders_on_threads_fifo_per_sender() {
    with_timeout(SECS, || {
        let (mut mb, addr) = detached::<(u64, u64), P>();
        let senders: Vec<_> = (0..2)
            .map(|p| {
                let addr = addr.clone();
                thread::spawn(move || {
                    for i in 0..N {
                        addr.send((p, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(addr);
        let mut next = [0u64; 2];
        for _ in 0..2 * N {
            let (p, i) = mb.recv_timeout(LONG).expect("a message is on its way");
            assert_eq!(i, next[p as usize], "per-sender FIFO");
            next[p as usize] += 1;
        }
        assert_eq!(mb.try_recv(), None, "nothing twice");
        for h in senders {
            h.join().unwrap();
        }
    });
}

#[test]
fn close_drops_queued_and_fails_later_sends() {
    let d = drops();
    let (mut mb, addr) = detached::<Counted, P>();
    for i in 0..5 {
        addr.send(Counted(i, d.clone())).unwrap();
    }
    // One message in the save queue, three in the queue.
    assert_eq!(mb.try_recv_matching(|m| m.0 == 1).map(|m| m.0), Some(1));
    assert_eq!(d.load(Ordering::SeqCst), 1);
    drop(mb);
    assert_eq!(
        d.load(Ordering::SeqCst),
        5,
        "close dropped the saved and the queued"
    );
    assert!(addr.is_closed());
    let back = addr.send(Counted(9, d.clone())).unwrap_err().0;
    assert_eq!(back.0, 9, "a send to a closed mailbox hands its message back");
    drop(back);
    drop(addr);
    assert_eq!(d.load(Ordering::SeqCst), 6);
}

#[test]
fn addresses_dropped_first_then_the_mailbox() {
    let d = drops();
    let (mut mb, addr) = detached::<Counted, P>();
    let a2 = addr.clone();
    addr.send(Counted(0, d.clone())).unwrap();
    a2.send(Counted(1, d.clone())).unwrap();
    drop(addr);
    drop(a2);
    assert_eq!(
        mb.try_recv().map(|m| m.0),
        Some(0),
        "messages outlive their senders"
    );
    drop(mb);
    assert_eq!(d.load(Ordering::SeqCst), 2);
}

#[test]
fn close_racing_senders_drops_every_message_once() {
    with_timeout(SECS, || {
        let d = drops();
        let sent = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let (mut mb, addr) = detached::<Counted, P>();
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let (addr, d, sent, refused) = (addr.clone(), d.clone(), sent.clone(), refused.clone());
                thread::spawn(move || {
                    for i in 0..N {
                        if addr.send(Counted(i, d.clone())).is_err() {
                            // Handed back and dropped here; the rest would fail too.
                            refused.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        sent.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        drop(addr);
        for _ in 0..3 {
            assert!(mb.recv_timeout(LONG).is_some(), "a message is on its way");
        }
        // Close while the senders may still be sending.
        drop(mb);
        for h in senders {
            h.join().unwrap();
        }
        // Every handle is gone now: each accepted message was received, or
        // dropped by the close, or (a send racing it) with the last
        // address; each refused one by its sender. Exactly once each.
        let (sent, refused) = (sent.load(Ordering::SeqCst), refused.load(Ordering::SeqCst));
        assert!(refused <= 2, "at most one refused send per sender");
        assert_eq!(
            d.load(Ordering::SeqCst),
            sent + refused,
            "a message lost or dropped twice"
        );
    });
}
