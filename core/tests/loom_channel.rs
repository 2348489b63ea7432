//! Loom models of the channels (`smarm_core::channel`), the real code over a
//! loom platform: no actors (the current-worker slot is always null), so
//! every waiter is a thread waiter sleeping on a futex built from a loom
//! condvar. A lost wake-up is a deadlock, which loom reports; a value lost
//! or duplicated fails an assertion. The rendezvous models' timed send runs
//! on `ClockP`, the loom platform with a model clock that a thread moves
//! (ending timed futex waits), so an expiry races the other threads.
//!
//! ```text
//! RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom \
//!     LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_channel
//! ```
//!
//! loom's SeqCst is partial (it treats an atomic's initial value as a
//! non-SeqCst store): the channels make a SeqCst store of each protocol word
//! when built under loom, and each model sends and receives one message
//! before the race so the queue's tail was last written by a SeqCst swap,
//! as in a running system.
#![cfg(smarm_loom)]

use loom::thread;

use core::time::Duration;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use smarm_core::channel::{self, RecvError, SendError, SendTimeoutError, TryRecvError, TrySendError};

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::{ClockP, LoomP};

/// Runs `f` under loom with a preemption bound of 2 unless
/// `LOOM_MAX_PREEMPTIONS` asks for another.
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

// ---------------------------------------------------------------------------
// Unbounded
// ---------------------------------------------------------------------------

/// A receiver waiting while a sender sends two values and disconnects: the
/// push-vs-park and disconnect-vs-park races, values in order.
#[test]
fn unbounded_send_and_disconnect_vs_recv() {
    model(|| {
        let (tx, mut rx) = channel::channel::<u32, LoomP>();
        tx.send(0).unwrap();
        assert_eq!(rx.recv(), Ok(0));
        let t = thread::spawn(move || {
            tx.send(1).unwrap();
            tx.send(2).unwrap();
        });
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        assert_eq!(rx.recv(), Err(RecvError));
        t.join().unwrap();
    });
}

/// Two senders on two threads each send one value and drop: the receiver
/// gets both (each once), then the disconnection, whichever drop is last.
#[test]
fn unbounded_two_senders_disconnect() {
    model(|| {
        let (tx, mut rx) = channel::channel::<u32, LoomP>();
        tx.send(0).unwrap();
        assert_eq!(rx.recv(), Ok(0));
        let tx2 = tx.clone();
        let a = thread::spawn(move || tx.send(1).unwrap());
        let b = thread::spawn(move || tx2.send(2).unwrap());
        let mut got = [rx.recv().unwrap(), rx.recv().unwrap()];
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        assert_eq!(rx.recv(), Err(RecvError));
        a.join().unwrap();
        b.join().unwrap();
    });
}

/// The receiver dropped while a sender sends two values: each send either
/// succeeds (its value dropped with the channel, by the receiver's close or
/// by the last sender) or fails with the value back; each value is dropped
/// exactly once.
#[test]
fn unbounded_receiver_drop_vs_send() {
    model(|| {
        let token = Arc::new(());
        let (tx, rx) = channel::channel::<Arc<()>, LoomP>();
        let t2 = token.clone();
        let t = thread::spawn(move || {
            let mut back = 0;
            for _ in 0..2 {
                if let Err(SendError(v)) = tx.send(t2.clone()) {
                    assert!(Arc::ptr_eq(&v, &t2), "another value came back");
                    back += 1;
                }
            }
            back
        });
        drop(rx);
        let back = t.join().unwrap();
        assert!(back <= 2);
        assert_eq!(
            Arc::strong_count(&token),
            1,
            "a value leaked or was dropped twice"
        );
    });
}

// ---------------------------------------------------------------------------
// Bounded
// ---------------------------------------------------------------------------

/// Capacity 1: the second send waits for the receiver to free the slot
/// (full-vs-recv); then the disconnection.
#[test]
fn bounded_full_vs_recv() {
    model(|| {
        let (tx, mut rx) = channel::bounded::<u32, LoomP>(1);
        tx.send(0).unwrap();
        assert_eq!(rx.recv(), Ok(0));
        let t = thread::spawn(move || {
            tx.send(1).unwrap();
            tx.send(2).unwrap();
        });
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        assert_eq!(rx.recv(), Err(RecvError));
        t.join().unwrap();
    });
}

/// Capacity 1, full, two senders blocked on two threads: each slot the
/// receiver frees must reach a waiting sender (FIFO wake, passed on when
/// a woken sender got a slot by itself).
#[test]
fn bounded_two_blocked_senders() {
    model(|| {
        let (tx, mut rx) = channel::bounded::<u32, LoomP>(1);
        tx.send(0).unwrap();
        let tx2 = tx.clone();
        let a = thread::spawn(move || tx.send(1).unwrap());
        let b = thread::spawn(move || tx2.send(2).unwrap());
        assert_eq!(rx.recv(), Ok(0));
        let mut got = [rx.recv().unwrap(), rx.recv().unwrap()];
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        assert_eq!(rx.recv(), Err(RecvError));
        a.join().unwrap();
        b.join().unwrap();
    });
}

/// Capacity 1, full: the receiver is dropped while a sender waits for a
/// slot; the sender must be woken and fail with its value, and the queued
/// value is dropped with the channel, once.
#[test]
fn bounded_receiver_drop_vs_blocked_send() {
    model(|| {
        let token = Arc::new(());
        let (tx, rx) = channel::bounded::<Arc<()>, LoomP>(1);
        tx.send(token.clone()).unwrap();
        let t2 = token.clone();
        let t = thread::spawn(move || tx.send(t2).map_err(|SendError(v)| drop(v)));
        drop(rx);
        assert_eq!(
            t.join().unwrap(),
            Err(()),
            "the send succeeded on a full, closed channel"
        );
        assert_eq!(
            Arc::strong_count(&token),
            1,
            "a value leaked or was dropped twice"
        );
    });
}

/// Capacity 1, empty: the receiver waits while the only sender is dropped
/// (disconnect while blocked): it must wake and see the disconnection.
#[test]
fn bounded_sender_drop_vs_blocked_recv() {
    model(|| {
        let (tx, mut rx) = channel::bounded::<u32, LoomP>(1);
        tx.send(0).unwrap();
        assert_eq!(rx.recv(), Ok(0));
        let t = thread::spawn(move || drop(tx));
        assert_eq!(rx.recv(), Err(RecvError));
        t.join().unwrap();
    });
}

/// Capacity 1, full: `try_send` races the receive that frees the slot: it
/// either gets the slot or says `Full` with the value back; every value is
/// received or returned exactly once.
#[test]
fn bounded_try_send_vs_recv() {
    model(|| {
        let (tx, mut rx) = channel::bounded::<u32, LoomP>(1);
        tx.send(0).unwrap();
        let t = thread::spawn(move || match tx.try_send(1) {
            Ok(()) => None,
            Err(TrySendError::Full(v)) => Some(v),
            Err(e) => panic!("{e:?}"),
        });
        assert_eq!(rx.recv(), Ok(0));
        let back = t.join().unwrap();
        let mut seen: Vec<u32> = back.into_iter().collect();
        while let Ok(v) = rx.try_recv() {
            seen.push(v);
        }
        assert_eq!(seen, [1], "the value was lost or duplicated");
    });
}

// ---------------------------------------------------------------------------
// Rendezvous (capacity 0)
// ---------------------------------------------------------------------------

/// A send racing the receive: whichever comes first waits for the other
/// (the sender listed with its value, or the receiver registered and
/// handed the value); the send never completes before the receive began;
/// then the last sender's drop wakes the receiver.
#[test]
fn zero_send_vs_recv() {
    model(|| {
        let (tx, mut rx) = channel::bounded::<u32, LoomP>(0);
        let sent = Arc::new(AtomicBool::new(false));
        let s2 = sent.clone();
        let t = thread::spawn(move || {
            tx.send(1).unwrap();
            s2.store(true, Ordering::SeqCst);
        });
        assert!(
            !sent.load(Ordering::SeqCst),
            "the send completed before any receive"
        );
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Err(RecvError));
        t.join().unwrap();
    });
}

/// A `send_timeout` whose deadline passes (the model clock moves) racing
/// the receive: exactly one of them gets the value. The receive takes it
/// (the send succeeds), or the send hands it back (`Timeout`) and the
/// receive sees the disconnection.
#[test]
fn zero_send_timeout_expiry_vs_recv() {
    model(|| {
        let (tx, mut rx) = channel::bounded::<u32, ClockP>(0);
        let t = thread::spawn(move || match tx.send_timeout(1, Duration::from_nanos(1)) {
            Ok(()) => None,
            Err(SendTimeoutError::Timeout(v)) => Some(v),
            Err(e) => panic!("{e:?}"),
        });
        loom_platform::advance_clock(1);
        let got = rx.recv().ok();
        let back = t.join().unwrap();
        assert!(
            got.is_some() != back.is_some(),
            "received {got:?} and handed back {back:?}: the value must go exactly one way"
        );
        assert_eq!(got.or(back), Some(1));
    });
}

/// The receiver dropped while a sender waits for it: the sender must be
/// woken and fail with its own value (never dropped by the channel, never
/// sent), whether it listed itself before the drop or came after.
#[test]
fn zero_receiver_drop_vs_blocked_send() {
    model(|| {
        let token = Arc::new(());
        let (tx, rx) = channel::bounded::<Arc<()>, LoomP>(0);
        let t2 = token.clone();
        let t = thread::spawn(move || match tx.send(t2) {
            Err(SendError(v)) => v,
            Ok(()) => panic!("sent, yet the receiver never received"),
        });
        drop(rx);
        let back = t.join().unwrap();
        assert!(Arc::ptr_eq(&back, &token), "another value came back");
        drop(back);
        assert_eq!(
            Arc::strong_count(&token),
            1,
            "a value leaked or was dropped twice"
        );
    });
}

// ---------------------------------------------------------------------------
// Oneshot
// ---------------------------------------------------------------------------

/// Send vs a waiting receive.
#[test]
fn oneshot_send_vs_recv() {
    model(|| {
        let (tx, rx) = channel::oneshot::<u32, LoomP>();
        let t = thread::spawn(move || tx.send(7).unwrap());
        assert_eq!(rx.recv(), Ok(7));
        t.join().unwrap();
    });
}

/// The sender dropped unsent vs a waiting receive.
#[test]
fn oneshot_drop_vs_recv() {
    model(|| {
        let (tx, rx) = channel::oneshot::<u32, LoomP>();
        let t = thread::spawn(move || drop(tx));
        assert_eq!(rx.recv(), Err(RecvError));
        t.join().unwrap();
    });
}

/// The receiver dropped (after a `try_recv`) vs a send: the value is
/// either handed back or dropped with the channel, never lost in between.
#[test]
fn oneshot_receiver_drop_vs_send() {
    model(|| {
        let (tx, mut rx) = channel::oneshot::<Arc<()>, LoomP>();
        let token = Arc::new(());
        let t2 = token.clone();
        let t = thread::spawn(move || {
            if let Err(v) = tx.send(t2) {
                drop(v);
            }
        });
        match rx.try_recv() {
            Ok(v) => drop(v),
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => panic!("the sender sends"),
        }
        drop(rx);
        t.join().unwrap();
        assert_eq!(Arc::strong_count(&token), 1, "the value was dropped once");
    });
}
