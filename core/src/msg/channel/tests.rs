//! The channels from plain OS threads on the std test platform (asm-free:
//! Miri runs these, with small counts): send / recv / try_recv /
//! recv_timeout, disconnection both ways, blocking on an empty channel and
//! on a full bounded one, the rendezvous (capacity 0: a send completes only
//! when a receive takes its value; every value not taken comes back), and
//! every message dropped exactly once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use std::vec::Vec;

use super::{
    bounded, channel, oneshot, try_bounded, RecvError, RecvTimeoutError, SendError, SendTimeoutError,
    TryRecvError, TrySendError,
};
use crate::seam::test_platform::{with_timeout, Counted, StdPlatform as P};

/// Messages per producer in the threaded tests.
const N: u64 = if cfg!(miri) { 12 } else { 2000 };
/// Bounds every test body (a lost wake fails instead of hanging).
const SECS: u64 = 60;
/// A timed receive that must not time out (a message is on its way).
const LONG: Duration = Duration::from_secs(30);

fn drops() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

#[test]
fn unbounded_fifo_then_disconnected() {
    let (tx, mut rx) = channel::<u64, P>();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(rx.recv_timeout(Duration::ZERO), Err(RecvTimeoutError::Timeout));
    for i in 0..10 {
        tx.send(i).unwrap();
    }
    let tx2 = tx.clone();
    drop(tx);
    tx2.send(10).unwrap();
    drop(tx2);
    // Disconnected, but the queue drains first.
    let got: Vec<u64> = core::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(got, (0..=10).collect::<Vec<_>>());
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(
        rx.recv_timeout(Duration::ZERO),
        Err(RecvTimeoutError::Disconnected)
    );
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn unbounded_recv_timeout_expires() {
    let (tx, mut rx) = channel::<u64, P>();
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(2)),
        Err(RecvTimeoutError::Timeout)
    );
    // The withdrawn registration does not swallow a later message.
    tx.send(7).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_millis(2)), Ok(7));
}

#[test]
fn unbounded_receiver_drop_fails_sends_and_drops_queued() {
    let d = drops();
    let (tx, rx) = channel::<Counted, P>();
    for i in 0..5 {
        tx.send(Counted(i, d.clone())).unwrap();
    }
    assert!(!tx.is_closed());
    drop(rx);
    assert_eq!(
        d.load(Ordering::SeqCst),
        5,
        "queued messages dropped with the receiver"
    );
    assert!(tx.is_closed());
    let back = tx.send(Counted(99, d.clone())).unwrap_err().0;
    assert_eq!(back.0, 99, "the failed send hands its message back");
    drop(back);
    drop(tx);
    assert_eq!(d.load(Ordering::SeqCst), 6);
}

#[test]
fn unbounded_drop_everything_with_messages_queued() {
    // Senders gone first, then the receiver, messages never received.
    let d = drops();
    let (tx, rx) = channel::<Counted, P>();
    for i in 0..4 {
        tx.send(Counted(i, d.clone())).unwrap();
    }
    drop(tx);
    assert_eq!(d.load(Ordering::SeqCst), 0);
    drop(rx);
    assert_eq!(d.load(Ordering::SeqCst), 4);
}

#[test]
fn unbounded_threads_fifo_per_sender() {
    with_timeout(SECS, || {
        let (tx, mut rx) = channel::<(u64, u64), P>();
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let tx = tx.clone();
                thread::spawn(move || {
                    for i in 0..N {
                        tx.send((p, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut next = [0u64; 2];
        // Blocking receives: the receiver sleeps whenever it overtakes the producers.
        while let Ok((p, i)) = rx.recv() {
            assert_eq!(i, next[p as usize], "per-sender FIFO");
            next[p as usize] += 1;
        }
        assert_eq!(next, [N, N], "every message exactly once");
        for h in producers {
            h.join().unwrap();
        }
    });
}

#[test]
fn unbounded_blocked_receiver_woken_by_send_and_by_disconnect() {
    with_timeout(SECS, || {
        let (tx, mut rx) = channel::<u64, P>();
        let h = thread::spawn(move || {
            let first = rx.recv();
            let second = rx.recv();
            (first, second)
        });
        tx.send(1).unwrap();
        drop(tx);
        assert_eq!(h.join().unwrap(), (Ok(1), Err(RecvError)));
    });
}

#[test]
fn bounded_full_then_freed() {
    let (tx, mut rx) = bounded::<u64, P>(2);
    assert_eq!(tx.capacity(), 2);
    tx.try_send(1).unwrap();
    tx.send(2).unwrap();
    match tx.try_send(3) {
        Err(TrySendError::Full(3)) => {}
        other => panic!("want Full(3), got {other:?}"),
    }
    assert_eq!(rx.try_recv(), Ok(1));
    tx.try_send(3).unwrap();
    assert_eq!(rx.recv_timeout(Duration::ZERO), Ok(2));
    assert_eq!(rx.recv(), Ok(3));
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(1)),
        Err(RecvTimeoutError::Timeout)
    );
    drop(rx);
    match tx.try_send(4) {
        Err(TrySendError::Disconnected(4)) => {}
        other => panic!("want Disconnected(4), got {other:?}"),
    }
    assert!(tx.is_closed());
}

#[test]
fn bounded_blocked_sender_woken_by_recv() {
    with_timeout(SECS, || {
        let (tx, mut rx) = bounded::<u64, P>(1);
        tx.send(0).unwrap();
        // Full: this send blocks until the receive below frees the slot.
        let h = thread::spawn(move || tx.send(1).map_err(|e| e.0));
        assert_eq!(rx.recv(), Ok(0));
        assert_eq!(rx.recv_timeout(LONG), Ok(1));
        assert_eq!(h.join().unwrap(), Ok(()));
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

#[test]
fn bounded_blocked_sender_fails_when_receiver_drops() {
    with_timeout(SECS, || {
        let d = drops();
        let (tx, rx) = bounded::<Counted, P>(1);
        tx.send(Counted(0, d.clone())).unwrap();
        let d2 = d.clone();
        let h = thread::spawn(move || tx.send(Counted(1, d2)).map_err(|e| e.0 .0));
        drop(rx);
        assert_eq!(
            h.join().unwrap(),
            Err(1),
            "the blocked send fails, handing its value back"
        );
        assert_eq!(d.load(Ordering::SeqCst), 2, "both messages dropped exactly once");
    });
}

#[test]
fn bounded_threads_conserve_messages() {
    with_timeout(SECS, || {
        let (tx, mut rx) = bounded::<(u64, u64), P>(2);
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let tx = tx.clone();
                thread::spawn(move || {
                    for i in 0..N {
                        tx.send((p, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut next = [0u64; 2];
        while let Ok((p, i)) = rx.recv() {
            assert_eq!(i, next[p as usize], "per-sender FIFO");
            next[p as usize] += 1;
        }
        assert_eq!(next, [N, N]);
        for h in producers {
            h.join().unwrap();
        }
    });
}

#[test]
fn oneshot_send_then_recv() {
    let (tx, mut rx) = oneshot::<u64, P>();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(1)),
        Err(RecvTimeoutError::Timeout)
    );
    assert!(!tx.is_closed());
    tx.send(5).unwrap();
    assert_eq!(rx.try_recv(), Ok(5));
    // The one value is spent: nothing more will come.
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
}

#[test]
fn oneshot_sender_dropped() {
    let (tx, rx) = oneshot::<u64, P>();
    drop(tx);
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn oneshot_receiver_dropped_hands_value_back() {
    let d = drops();
    let (tx, rx) = oneshot::<Counted, P>();
    drop(rx);
    assert!(tx.is_closed());
    let back = tx.send(Counted(3, d.clone())).unwrap_err();
    assert_eq!(back.0, 3);
    drop(back);
    assert_eq!(d.load(Ordering::SeqCst), 1);
}

#[test]
fn oneshot_value_dropped_with_unread_receiver() {
    let d = drops();
    let (tx, rx) = oneshot::<Counted, P>();
    tx.send(Counted(1, d.clone())).unwrap();
    assert_eq!(d.load(Ordering::SeqCst), 0);
    drop(rx);
    assert_eq!(d.load(Ordering::SeqCst), 1);
}

#[test]
fn oneshot_blocked_receiver_woken_by_send_or_drop() {
    with_timeout(SECS, || {
        for send in [true, false] {
            let (tx, rx) = oneshot::<u64, P>();
            let h = thread::spawn(move || rx.recv());
            if send {
                tx.send(9).unwrap();
            } else {
                drop(tx);
            }
            let want = if send { Ok(9) } else { Err(RecvError) };
            assert_eq!(h.join().unwrap(), want);
        }
    });
}

// ---------------------------------------------------------------------------
// Rendezvous (capacity 0)
// ---------------------------------------------------------------------------

/// Spins until `cond` (a thread reached its wait; bounded by `with_timeout`).
fn until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        thread::yield_now();
    }
}

#[test]
fn zero_nobody_waiting_nothing_moves() {
    let (tx, mut rx) = try_bounded::<u64, P>(0).expect("capacity 0 is a rendezvous");
    assert_eq!((tx.capacity(), rx.capacity()), (0, 0));
    assert!(
        matches!(tx.try_send(1), Err(TrySendError::Full(1))),
        "no receiver waits"
    );
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "no sender waits");
    assert_eq!(rx.recv_timeout(Duration::ZERO), Err(RecvTimeoutError::Timeout));
    // A send that nobody takes is never buffered: it times out with its
    // value, and leaves nothing behind.
    assert!(matches!(
        tx.send_timeout(2, Duration::from_millis(2)),
        Err(SendTimeoutError::Timeout(2))
    ));
    assert!(matches!(
        tx.send_timeout(3, Duration::ZERO),
        Err(SendTimeoutError::Timeout(3))
    ));
    assert_eq!(
        rx.try_recv(),
        Err(TryRecvError::Empty),
        "a timed-out value stayed"
    );
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(2)),
        Err(RecvTimeoutError::Timeout)
    );
    drop(tx);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn zero_send_completes_only_when_received() {
    with_timeout(SECS, || {
        let (tx, mut rx) = bounded::<u64, P>(0);
        let (log, mut log_rx) = channel::<&'static str, P>();
        let h = thread::spawn(move || {
            tx.send(7).unwrap();
            log.send("sent").unwrap();
        });
        // The sender blocks in its send (listed) and stays there...
        until(|| rx.blocked_senders() == 1);
        for _ in 0..10 {
            thread::yield_now();
        }
        assert_eq!(
            log_rx.try_recv(),
            Err(TryRecvError::Empty),
            "the send completed before any receive"
        );
        // ...until a receive takes its value (`try_recv`: a sender waits).
        assert_eq!(rx.try_recv(), Ok(7));
        assert_eq!(log_rx.recv(), Ok("sent"));
        h.join().unwrap();
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

#[test]
fn zero_blocked_receive_takes_try_send_and_send() {
    with_timeout(SECS, || {
        let (tx, mut rx) = bounded::<u64, P>(0);
        let h = thread::spawn(move || (rx.recv(), rx.recv_timeout(LONG), rx));
        // `try_send` succeeds once the receiver blocks in its receive, not
        // before.
        let mut v = 1;
        loop {
            match tx.try_send(v) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    v = back;
                    thread::yield_now();
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        // A blocking send meets the timed receive (whichever comes first).
        tx.send(2).unwrap();
        let (a, b, mut rx) = h.join().unwrap();
        assert_eq!((a, b), (Ok(1), Ok(2)));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    });
}

#[test]
fn zero_send_timeout_hands_the_value_back_or_is_taken() {
    with_timeout(SECS, || {
        let d = drops();
        let (tx, mut rx) = bounded::<Counted, P>(0);
        match tx.send_timeout(Counted(1, d.clone()), Duration::from_millis(2)) {
            Err(SendTimeoutError::Timeout(v)) => assert_eq!(v.0, 1),
            other => panic!("want Timeout, got {other:?}"),
        }
        assert_eq!(d.load(Ordering::SeqCst), 1, "handed back and dropped once, here");
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
        // A timed send that a receive meets in time is taken.
        let h = thread::spawn(move || rx.recv().map(|v| v.0));
        let d2 = d.clone();
        tx.send_timeout(Counted(2, d2), LONG).unwrap();
        assert_eq!(h.join().unwrap(), Ok(2));
        assert_eq!(d.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn zero_receiver_drop_hands_blocked_senders_values_back() {
    with_timeout(SECS, || {
        let d = drops();
        let (tx, rx) = bounded::<Counted, P>(0);
        let senders: Vec<_> = (0..2)
            .map(|i| {
                let (tx, d) = (tx.clone(), d.clone());
                thread::spawn(move || match tx.send(Counted(i, d)) {
                    Err(SendError(v)) => v.0,
                    Ok(()) => panic!("sent to a dropped receiver"),
                })
            })
            .collect();
        until(|| rx.blocked_senders() == 2);
        assert_eq!(d.load(Ordering::SeqCst), 0);
        drop(rx);
        let mut back: Vec<u64> = senders.into_iter().map(|h| h.join().unwrap()).collect();
        back.sort_unstable();
        assert_eq!(back, [0, 1], "each blocked sender got its own value back");
        assert_eq!(
            d.load(Ordering::SeqCst),
            2,
            "each value dropped once, by its sender"
        );
        assert!(tx.is_closed());
        assert!(matches!(
            tx.try_send(Counted(3, d.clone())),
            Err(TrySendError::Disconnected(_))
        ));
        let back = tx.send(Counted(4, d.clone())).unwrap_err().0;
        assert_eq!(back.0, 4);
        drop(back);
        assert_eq!(d.load(Ordering::SeqCst), 4);
    });
}

#[test]
fn zero_last_sender_drop_wakes_a_blocked_receive() {
    with_timeout(SECS, || {
        let (tx, mut rx) = bounded::<u64, P>(0);
        let tx2 = tx.clone();
        let h = thread::spawn(move || {
            let first = rx.recv();
            (first, rx.try_recv())
        });
        drop(tx);
        drop(tx2);
        assert_eq!(
            h.join().unwrap(),
            (Err(RecvError), Err(TryRecvError::Disconnected))
        );
    });
}

#[test]
fn zero_threads_conserve_messages_fifo_per_sender() {
    with_timeout(SECS, || {
        let (tx, mut rx) = bounded::<(u64, u64), P>(0);
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let tx = tx.clone();
                thread::spawn(move || {
                    for i in 0..N {
                        tx.send((p, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut next = [0u64; 2];
        while let Ok((p, i)) = rx.recv() {
            assert_eq!(i, next[p as usize], "per-sender FIFO");
            next[p as usize] += 1;
        }
        assert_eq!(next, [N, N], "every value exactly once");
        for h in producers {
            h.join().unwrap();
        }
    });
}
