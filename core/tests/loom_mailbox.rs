//! Loom models of the mailbox park protocol (`smarm_core::mailbox`), driven
//! from plain threads (thread waiters: the receiver futex-waits on its own
//! word), with the real mailbox code over loom's atomics and cells:
//! - a send racing the receiver's park;
//! - two senders racing one park;
//! - a receiver taking several messages, so a withdraw that loses to a
//!   sender is followed by another wait (the race that needed `WAKING`);
//! - a send racing the receiver's close;
//! - two sends and the sender's address drop racing the close's drain
//!   (close vs drop);
//! - the last address's drop racing the receiver's park (the mailbox
//!   closes: the receive must end, not sleep);
//! - a bounded mailbox's blocked sender racing the receive that frees its
//!   slot.
//!
//! Each asserts conservation: every message received, returned, or dropped
//! exactly once. A lost wake shows up as a loom deadlock.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_mailbox`
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use smarm_core::mailbox::{detached, detached_bounded, SendError};

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP as LoomPlat;

/// Counts drops, so a message dropped by a close is accounted for.
struct Token(Arc<AtomicUsize>);

impl Drop for Token {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// One push+pop on the queue before the race, as a running system has.
fn warm_up<M: Send + 'static>(
    mb: &mut smarm_core::mailbox::Mailbox<M, LoomPlat>,
    addr: &smarm_core::mailbox::Addr<M, LoomPlat>,
    m: M,
) {
    assert!(addr.send(m).is_ok());
    assert!(mb.try_recv().is_ok());
}

/// `senders` threads each send `each` messages; the receiver takes them all.
fn senders_vs_receiver(senders: u32, each: u32) {
    loom::model(move || {
        let (mut mb, addr) = detached::<u32, LoomPlat>();
        warm_up(&mut mb, &addr, 7);
        let hs: Vec<_> = (0..senders)
            .map(|s| {
                let addr = addr.clone();
                thread::spawn(move || {
                    for i in 0..each {
                        addr.send(s * 100 + i).unwrap();
                    }
                })
            })
            .collect();
        let mut got: Vec<u32> = (0..senders * each).map(|_| mb.recv().unwrap()).collect();
        for h in hs {
            h.join().unwrap();
        }
        assert!(mb.try_recv().is_err(), "a message was duplicated");
        got.sort();
        let mut want: Vec<u32> = (0..senders)
            .flat_map(|s| (0..each).map(move |i| s * 100 + i))
            .collect();
        want.sort();
        assert_eq!(got, want);
    });
}

#[test]
fn send_racing_park() {
    senders_vs_receiver(1, 1);
}

#[test]
fn two_senders_racing_one_park() {
    senders_vs_receiver(2, 1);
}

#[test]
fn repeated_waits_after_a_lost_withdraw() {
    senders_vs_receiver(1, 2);
}

#[test]
fn send_racing_close() {
    loom::model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let (mut mb, addr) = detached::<Token, LoomPlat>();
        warm_up(&mut mb, &addr, Token(Arc::new(AtomicUsize::new(0))));
        let d = dropped.clone();
        // The last reference to the shared half is dropped here, after the
        // join: loom cannot see the fences inside `alloc::sync::Arc`.
        let keep = addr.clone();
        let sender = thread::spawn(move || match addr.send(Token(d)) {
            Ok(()) => None,
            Err(SendError(t)) => Some(t),
        });
        let received = mb.try_recv().ok();
        drop(mb); // the close
        let returned = sender.join().unwrap();
        // Exactly one fate: received, returned, or dropped by the close
        // (queued and then dropped, with the queue's memory).
        let fates = received.is_some() as usize + returned.is_some() as usize;
        let what = (received.is_some(), returned.is_some());
        drop(received);
        drop(returned);
        drop(keep);
        // The shared half (and anything queued) is gone once both ends are.
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "leaked or dropped twice (received, returned) = {what:?}"
        );
        assert!(fates <= 1);
    });
}

/// Close vs drop: a sender sends two messages and drops its address while
/// the receiver takes at most one and closes. The close drains what is
/// queued; a send that lands after the drain is dropped with the shared
/// half when the last address goes. Each message ends exactly once:
/// received, handed back, or dropped (never leaked, never dropped twice).
#[test]
fn close_vs_sends_and_addr_drop() {
    loom::model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let (mut mb, addr) = detached::<Token, LoomPlat>();
        warm_up(&mut mb, &addr, Token(Arc::new(AtomicUsize::new(0))));
        // The last reference is dropped after the join (see
        // `send_racing_close`); the sender's own clone races the close.
        let keep = addr.clone();
        let d = dropped.clone();
        let sender = thread::spawn(move || {
            let mut back = 0;
            for _ in 0..2 {
                if let Err(SendError(t)) = addr.send(Token(d.clone())) {
                    drop(t);
                    back += 1;
                }
            }
            drop(addr);
            back
        });
        let received = mb.try_recv().is_ok() as usize;
        drop(mb); // the close
        let returned = sender.join().unwrap();
        assert!(received + returned <= 2);
        drop(keep);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            2,
            "a message leaked or was dropped twice (received {received}, returned {returned})"
        );
    });
}

/// The only address sends one message and is dropped while the receiver
/// drains and parks: the drop is a waker (`D1`–`D2` against `R1`–`R2`), so
/// the receive ends with `Err` instead of sleeping forever (a loom
/// deadlock).
#[test]
fn last_addr_drop_racing_park() {
    loom::model(|| {
        let (mut mb, addr) = detached::<u32, LoomPlat>();
        warm_up(&mut mb, &addr, 7);
        let sender = thread::spawn(move || {
            addr.send(1).unwrap();
            drop(addr);
        });
        let mut got = Vec::new();
        while let Ok(m) = mb.recv() {
            got.push(m);
        }
        sender.join().unwrap();
        assert_eq!(got, [1], "drained, then closed");
    });
}

/// A bounded mailbox of one slot: the second send blocks until the
/// receiver's take frees the slot (`B2`–`B3` against `F1`–`F2`); both
/// arrive, in order, and nobody sleeps beside a free slot.
#[test]
fn bounded_blocked_sender_racing_receive() {
    loom::model(|| {
        let (mut mb, addr) = detached_bounded::<u32, LoomPlat>(1);
        warm_up(&mut mb, &addr, 7);
        let sender = thread::spawn(move || {
            addr.send(1).unwrap();
            addr.send(2).unwrap();
        });
        let got = [mb.recv(), mb.recv()];
        sender.join().unwrap();
        assert_eq!(got, [Ok(1), Ok(2)]);
    });
}
