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

use super::{detached, detached_bounded};
use crate::msg::channel::{RecvError, RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use crate::seam::test_platform::{with_timeout, Counted, StdPlatform as P};

/// Messages per sender in the threaded tests.
const N: u64 = if cfg!(miri) { 12 } else { 2000 };
const SECS: u64 = 60;
const LONG: Duration = Duration::from_secs(30);

fn drops() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// The dump's per-actor bytes use `SharedLayout`, a mirror of the shared
/// half without its platform: a field added to one and not the other, or
/// a platform-sized field, fails here.
#[test]
fn the_layout_mirror_has_the_shared_halfs_size() {
    use core::mem::size_of;
    assert_eq!(
        size_of::<super::SharedLayout>(),
        size_of::<super::Shared<(), P>>()
    );
    assert_eq!(
        size_of::<super::SharedLayout>(),
        size_of::<super::Shared<[u64; 4], P>>()
    );
}

#[test]
fn fifo_and_empty() {
    let (mut mb, addr) = detached::<u64, P>();
    assert_eq!(mb.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(mb.recv_timeout(Duration::ZERO), Err(RecvTimeoutError::Timeout));
    for i in 0..8 {
        addr.send(i).unwrap();
    }
    let got: Vec<u64> = core::iter::from_fn(|| mb.try_recv().ok()).collect();
    assert_eq!(got, (0..8).collect::<Vec<_>>());
    assert!(!addr.is_closed());
}

#[test]
fn selective_receive_keeps_the_others_in_order() {
    let (mut mb, addr) = detached::<u64, P>();
    for i in 0..6 {
        addr.send(i).unwrap();
    }
    assert_eq!(mb.try_recv_matching(|&m| m == 3), Ok(3));
    assert_eq!(mb.saved(), 3, "0, 1, 2 were skipped into the save queue");
    assert_eq!(mb.try_recv_matching(|&m| m == 9), Err(TryRecvError::Empty));
    assert_eq!(mb.saved(), 5, "everything is saved now");
    addr.send(6).unwrap();
    assert_eq!(mb.recv_matching(|&m| m == 6), Ok(6));
    assert_eq!(
        mb.try_recv_matching(|&m| m == 1),
        Ok(1),
        "a match found in the save queue"
    );
    let rest: Vec<u64> = core::iter::from_fn(|| mb.try_recv().ok()).collect();
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
            Err(RecvTimeoutError::Timeout)
        );
        assert_eq!(mb.saved(), 3);
        // A match already here is taken at once, even with no time left.
        assert_eq!(mb.recv_matching_timeout(Duration::ZERO, |&m| m == 2), Ok(2));
        // A match that comes while it waits ends the wait; the others
        // that came meanwhile are saved behind the earlier ones.
        let h = thread::spawn(move || {
            let got = mb.recv_matching_timeout(LONG, |&m| m == 20);
            let rest: Vec<u64> = core::iter::from_fn(|| mb.try_recv().ok()).collect();
            (got, rest)
        });
        // (20 last: everything sent is in the mailbox when it matches.)
        addr.send(10).unwrap();
        addr.send(30).unwrap();
        addr.send(20).unwrap();
        let (got, rest) = h.join().unwrap();
        assert_eq!(got, Ok(20));
        assert_eq!(rest, [1, 3, 10, 30], "arrival order kept");
    });
}

#[test]
fn recv_timeout_expires_and_a_later_message_still_arrives() {
    let (mut mb, addr) = detached::<u64, P>();
    assert_eq!(
        mb.recv_timeout(Duration::from_millis(2)),
        Err(RecvTimeoutError::Timeout)
    );
    addr.send(1).unwrap();
    assert_eq!(mb.recv_timeout(Duration::from_millis(2)), Ok(1));
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
        assert_eq!(h.join().unwrap(), (Ok(1), Ok(2)));
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
        assert_eq!(h.join().unwrap(), Err(RecvTimeoutError::Timeout));
        drop(addr);
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
        assert!(mb.try_recv().is_err(), "nothing twice");
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
    assert_eq!(mb.try_recv_matching(|m| m.0 == 1).map(|m| m.0), Ok(1));
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
        Ok(0),
        "messages outlive their senders"
    );
    assert_eq!(mb.try_recv().map(|m| m.0), Ok(1));
    assert_eq!(
        mb.try_recv().map(|m| m.0),
        Err(TryRecvError::Disconnected),
        "every address gone and drained: closed"
    );
    assert_eq!(
        mb.recv().map(|m| m.0),
        Err(RecvError),
        "a closed mailbox's recv does not wait"
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
            assert!(mb.recv_timeout(LONG).is_ok(), "a message is on its way");
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

#[test]
fn the_last_address_dropped_ends_a_waiting_receive() {
    with_timeout(SECS, || {
        let (mut mb, addr) = detached::<u64, P>();
        let a2 = addr.clone();
        let h = thread::spawn(move || {
            let mut got = Vec::new();
            while let Ok(m) = mb.recv() {
                got.push(m);
            }
            (got, mb)
        });
        addr.send(1).unwrap();
        drop(addr);
        a2.send(2).unwrap();
        // The receiver may be parked now: the last drop must wake it.
        drop(a2);
        let (got, mut mb) = h.join().unwrap();
        assert_eq!(got, [1, 2], "drained before it said closed");
        // A new address reconnects it.
        let a3 = mb.addr();
        a3.send(3).unwrap();
        assert_eq!(mb.recv(), Ok(3));
        assert_eq!(
            mb.recv_timeout(Duration::from_millis(1)),
            Err(RecvTimeoutError::Timeout)
        );
        drop(a3);
        assert_eq!(mb.recv_timeout(LONG), Err(RecvTimeoutError::Disconnected));
        assert_eq!(mb.recv_matching(|_| true), Err(RecvError));
    });
}

#[test]
fn a_weak_address_does_not_keep_the_mailbox_open() {
    let (mut mb, addr) = detached::<u64, P>();
    let weak = addr.downgrade();
    drop(addr);
    assert_eq!(mb.try_recv(), Err(TryRecvError::Disconnected));
    // Upgraded, it sends (and the mailbox reconnects while it lives).
    let up = weak.upgrade().expect("the mailbox is alive");
    up.send(5).unwrap();
    assert_eq!(mb.try_recv(), Ok(5));
    assert_eq!(mb.try_recv(), Err(TryRecvError::Empty));
    drop(up);
    assert_eq!(mb.try_recv(), Err(TryRecvError::Disconnected));
    drop(mb);
    assert!(weak.upgrade().is_none(), "gone with the last handle");
}

#[test]
fn a_bounded_mailbox_holds_at_most_its_capacity() {
    let (mut mb, addr) = detached_bounded::<u64, P>(2);
    assert_eq!(addr.capacity(), Some(2));
    addr.send(1).unwrap();
    addr.try_send(2).unwrap();
    assert_eq!(addr.try_send(3), Err(TrySendError::Full(3)));
    assert_eq!(
        addr.send_timeout(3, Duration::from_millis(2)),
        Err(SendTimeoutError::Timeout(3))
    );
    // A notice takes a slot even when none is free.
    addr.send_notice(9).unwrap();
    assert_eq!(mb.try_recv(), Ok(1));
    assert_eq!(
        addr.try_send(3),
        Err(TrySendError::Full(3)),
        "2 and 9 still hold both slots"
    );
    // Selective receive frees the slots of what it skips.
    assert_eq!(mb.try_recv_matching(|&m| m == 9), Ok(9));
    addr.try_send(3).unwrap();
    addr.try_send(4).unwrap();
    assert_eq!(addr.try_send(5), Err(TrySendError::Full(5)));
    let got: Vec<u64> = core::iter::from_fn(|| mb.try_recv().ok()).collect();
    assert_eq!(got, [2, 3, 4]);
    drop(mb);
    assert_eq!(addr.try_send(6), Err(TrySendError::Disconnected(6)));
    assert_eq!(
        addr.send_timeout(6, Duration::ZERO),
        Err(SendTimeoutError::Disconnected(6))
    );
}

#[test]
fn blocked_senders_wake_in_turn_and_lose_nothing() {
    with_timeout(SECS, || {
        let (mut mb, addr) = detached_bounded::<(u64, u64), P>(1);
        let senders: Vec<_> = (0..3)
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
        let mut next = [0u64; 3];
        while let Ok((p, i)) = mb.recv() {
            assert_eq!(i, next[p as usize], "per-sender FIFO");
            next[p as usize] += 1;
        }
        assert_eq!(next, [N; 3], "every message, then closed");
        for h in senders {
            h.join().unwrap();
        }
    });
}

#[test]
fn dropping_a_bounded_mailbox_fails_its_blocked_senders() {
    with_timeout(SECS, || {
        let d = drops();
        let (mb, addr) = detached_bounded::<Counted, P>(1);
        addr.send(Counted(0, d.clone())).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let a2 = addr.clone();
        let d2 = d.clone();
        let h = thread::spawn(move || {
            tx.send(()).unwrap();
            a2.send(Counted(1, d2)).map_err(|e| e.0 .0)
        });
        rx.recv().unwrap();
        drop(mb);
        assert_eq!(
            h.join().unwrap(),
            Err(1),
            "the blocked send failed with its message"
        );
        assert_eq!(
            d.load(Ordering::SeqCst),
            2,
            "the queued one dropped with the mailbox"
        );
    });
}
