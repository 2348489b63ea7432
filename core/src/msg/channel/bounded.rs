//! The bounded MPSC channel: [`bounded`], [`BoundedSender`],
//! [`BoundedReceiver`]. At most `cap` messages are queued; a send on a full
//! channel waits (an actor parks, a thread blocks) until the receiver frees
//! a slot, and `try_send` says `Full` instead.
//!
//! Messages travel exactly as on the unbounded channel ([`super::chan`]:
//! same queue, same receiver park protocol). On top of it:
//!
//! # Words
//!
//! | word      | meaning                                                            |
//! |-----------|--------------------------------------------------------------------|
//! | `len`     | slots taken, `0..=cap`: messages queued plus sends that reserved a slot and have not pushed yet |
//! | `blocked` | senders on the wait list (a mirror of its length, written under its lock) |
//! | `waiters` | the wait list: `(ticket, Waiter)` in arrival order, under a short [`Mutex`] |
//!
//! # Protocol (numbered as in the code)
//!
//! Sender:
//! 1. `B1` reserve: CAS `len` from `n < cap` to `n + 1` (SeqCst); on
//!    success push the message (`S2`–`S3` of the unbounded channel), done;
//! 2. `B2` otherwise, under the lock: if `RX_GONE`, fail; else append
//!    `(ticket, waiter)` and store the list's length into `blocked`
//!    (SeqCst);
//! 3. `B3` re-check: reserve again (`B1`'s CAS). On success deregister and
//!    push; if the ticket was already gone from the list, a waker spent a
//!    wake on us that we did not need: pass it to the next waiter (else
//!    that waiter could sleep beside a free slot until the receiver takes
//!    our message: late, though not lost);
//! 4. `B4` wait (park, or futex-wait); then deregister (a spurious wake
//!    leaves the ticket listed) and start over at `B1`.
//!
//! Receiver, after each message it takes:
//! 1. `F1` frees the slot: `len -= 1` (SeqCst);
//! 2. `F2` loads `blocked` (SeqCst); if non-zero, under the lock pops the
//!    oldest waiter, then (unlocked) wakes it.
//!
//! `B2`–`B3` and `F1`–`F2` are a Dekker pair (the mailbox's, on other
//! words): either the sender's re-check sees the freed slot, or the receiver
//! sees the sender listed. So a sender sleeps only on a full channel, and
//! every slot freed while senders are listed wakes the oldest of them, who
//! retries (or, having got a slot without the wake, hands the wake on): no
//! lost wake-ups. Waking is FIFO; a sender arriving meanwhile may still take
//! the freed slot first (it then queues a message, whose receipt frees the
//! next slot and wakes the next waiter).
//!
//! Receiver drop: sets `RX_GONE` (SeqCst), then under the lock takes the
//! whole list and wakes every sender, who then fails with the value. A
//! sender checks `RX_GONE` under the same lock before it lists itself, so it
//! either sees the flag or is on the list the receiver takes.
//!
//! The lock guards a few `VecDeque` operations only; it is taken by senders
//! on a full channel and by the receiver when `blocked` says someone waits,
//! never on the fast paths. The list's buffer grows to the most senders
//! ever blocked at once and is reused: blocking allocates nothing in steady
//! state (a thread waiter allocates its wake word).

use alloc::collections::VecDeque;
use core::fmt;

use super::chan::{cancelled, Chan};
use super::{Arc, CapacityError, RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};
use crate::msg::wait::Waiter;
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::seam::lock::Mutex;
use crate::seam::platform::Platform;
use crate::sync::{AtomicUsize, Ordering, LOOM};
use core::time::Duration;

/// Senders blocked on a full channel, oldest first.
struct WaitList {
    queue: VecDeque<(u64, Waiter)>,
    next_ticket: u64,
}

/// The shared state of a bounded channel.
struct Bounded<T, P: Platform> {
    chan: Chan<T>,
    cap: usize,
    len: AtomicUsize,
    blocked: AtomicUsize,
    waiters: Mutex<P::Lock, WaitList>,
}

/// What a blocked sender's wait ended with.
enum Slot {
    /// `B3` reserved a slot: push now.
    Reserved,
    /// The receiver is gone (or the caller is a cancelled actor).
    Closed,
    /// Woken (or spuriously): try again from `B1`.
    Retry,
}

/// The sending half of a bounded channel: clone it, share it, send from
/// actors and plain threads alike. The channel disconnects when the last
/// sender is dropped.
pub struct BoundedSender<T, P: Platform> {
    shared: Arc<Bounded<T, P>>,
}

/// The receiving half of a bounded channel (one per channel; receive with
/// `&mut`). Dropping it fails the waiting and later sends and drops the
/// queued messages.
pub struct BoundedReceiver<T, P: Platform> {
    shared: Arc<Bounded<T, P>>,
}

/// A new channel holding at most `cap` messages.
///
/// # Panics
///
/// If `cap` is 0 ([`try_bounded`] returns [`CapacityError`] instead).
pub fn bounded<T: Send, P: Platform>(cap: usize) -> (BoundedSender<T, P>, BoundedReceiver<T, P>) {
    match try_bounded::<T, P>(cap) {
        Ok(pair) => pair,
        Err(e) => panic!("{e}"),
    }
}

/// A new channel holding at most `cap` messages; `cap` 0 is an error
/// (rendezvous channels are not provided).
#[allow(clippy::type_complexity)]
pub fn try_bounded<T: Send, P: Platform>(
    cap: usize,
) -> Result<(BoundedSender<T, P>, BoundedReceiver<T, P>), CapacityError> {
    if cap == 0 {
        return Err(CapacityError);
    }
    let b = Bounded {
        chan: Chan::new::<P>(),
        cap,
        len: AtomicUsize::new(0),
        blocked: AtomicUsize::new(0),
        waiters: Mutex::new(WaitList {
            queue: VecDeque::new(),
            next_ticket: 0,
        }),
    };
    if LOOM {
        // loom treats initial values as non-SeqCst stores (see `chan`).
        b.len.store(0, Ordering::SeqCst);
        b.blocked.store(0, Ordering::SeqCst);
    }
    let shared = Arc::new(b);
    Ok((
        BoundedSender {
            shared: shared.clone(),
        },
        BoundedReceiver { shared },
    ))
}

impl<T, P: Platform> Bounded<T, P> {
    /// `B1` / `B3`: takes a slot if one is free.
    #[inline]
    fn try_reserve(&self) -> bool {
        // SeqCst (load and CAS): the sender's second half of the Dekker
        // pair (`B3` after `B2`'s store).
        let mut n = self.len.load(Ordering::SeqCst);
        while n < self.cap {
            match self
                .len
                .compare_exchange_weak(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
        false
    }

    /// `F1`–`F2`: the receiver took a message.
    #[inline]
    fn release_slot(&self) {
        // F1. SeqCst: the receiver's first half of the Dekker pair.
        self.len.fetch_sub(1, Ordering::SeqCst);
        // F2. SeqCst: its second half.
        if self.blocked.load(Ordering::SeqCst) != 0 {
            self.wake_one_sender();
        }
    }

    #[cold]
    fn wake_one_sender(&self) {
        let w = Self::pop_waiter(&self.blocked, &mut self.waiters.lock());
        // Woken outside the lock: an actor wake touches the run queues.
        if let Some(w) = w {
            w.wake();
        }
    }

    /// The oldest waiter, off the list (caller holds the lock).
    fn pop_waiter(blocked: &AtomicUsize, list: &mut WaitList) -> Option<Waiter> {
        let (_, w) = list.queue.pop_front()?;
        // SeqCst: as every `blocked` store (`B2`); lowering it early only
        // costs a receiver a lock round that finds nobody.
        blocked.store(list.queue.len(), Ordering::SeqCst);
        Some(w)
    }

    /// `B2`–`B4` for a sender that found the channel full.
    #[cold]
    fn wait_for_slot(&self) -> Slot {
        if cancelled::<P>() {
            return Slot::Closed;
        }
        let w = Waiter::current::<P>();
        let thread = match &w {
            Waiter::Thread(t) => Some(t.clone()),
            Waiter::Actor(_) => None,
        };
        // B2.
        let ticket = {
            let mut list = self.waiters.lock();
            // Under the lock: the receiver's drop sets RX_GONE before it
            // takes the lock to empty the list, so a drop we do not see
            // here comes after our unlock and finds us listed.
            if self.chan.rx_gone() {
                return Slot::Closed;
            }
            let t = list.next_ticket;
            list.next_ticket += 1;
            list.queue.push_back((t, w));
            // SeqCst: the sender's first half of the Dekker pair.
            self.blocked.store(list.queue.len(), Ordering::SeqCst);
            t
        };
        // Deregisters on every way out of the wait, unwinding included (an
        // actor cancelled at shutdown unwinds from its park): a dead entry
        // left listed would swallow a wake meant for a live sender.
        let listed = Listed { b: self, ticket };
        // B3.
        if self.try_reserve() {
            core::mem::forget(listed);
            self.deregister(ticket, true);
            return Slot::Reserved;
        }
        // B4.
        match thread {
            Some(t) => Waiter::Thread(t).wait::<P>(None),
            None => sched::park::<P>(crate::actor::WAIT_CHANNEL),
        }
        drop(listed);
        Slot::Retry
    }

    /// Takes `ticket` off the list if it is still there. If it is not, a
    /// waker took it: when we `reserved` a slot without that wake, the wake
    /// goes on to the next waiter.
    fn deregister(&self, ticket: u64, reserved: bool) {
        let pass_on = {
            let mut list = self.waiters.lock();
            if let Some(i) = list.queue.iter().position(|(t, _)| *t == ticket) {
                let stale = list.queue.remove(i);
                self.blocked.store(list.queue.len(), Ordering::SeqCst);
                drop(stale);
                None
            } else if reserved {
                Self::pop_waiter(&self.blocked, &mut list)
            } else {
                None
            }
        };
        if let Some(w) = pass_on {
            w.wake();
        }
    }
}

/// A sender's ticket on the wait list; dropping it deregisters (`B4`).
struct Listed<'a, T, P: Platform> {
    b: &'a Bounded<T, P>,
    ticket: u64,
}

impl<T, P: Platform> Drop for Listed<'_, T, P> {
    fn drop(&mut self) {
        self.b.deregister(self.ticket, false);
    }
}

impl<T, P: Platform> BoundedSender<T, P> {
    /// Sends `v`, waiting while the channel is full (an actor parks; a
    /// plain thread blocks). Fails, handing `v` back, when the receiver is
    /// dropped — before or while waiting — or at once when the caller is an
    /// actor that runtime shutdown is cancelling and the channel is full.
    pub fn send(&self, mut v: T) -> Result<(), SendError<T>> {
        let b = &*self.shared;
        loop {
            match self.try_send(v) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(x)) => return Err(SendError(x)),
                Err(TrySendError::Full(x)) => v = x,
            }
            match b.wait_for_slot() {
                Slot::Reserved => {
                    b.chan.push::<P>(v);
                    return Ok(());
                }
                Slot::Closed => return Err(SendError(v)),
                Slot::Retry => {}
            }
        }
    }

    /// Sends `v` if a slot is free now; never waits.
    #[inline]
    pub fn try_send(&self, v: T) -> Result<(), TrySendError<T>> {
        let b = &*self.shared;
        if b.chan.rx_gone() {
            return Err(TrySendError::Disconnected(v));
        }
        // B1.
        if !b.try_reserve() {
            return Err(TrySendError::Full(v));
        }
        b.chan.push::<P>(v);
        Ok(())
    }

    /// The channel's capacity.
    pub fn capacity(&self) -> usize {
        self.shared.cap
    }

    /// Whether the receiver was dropped (a later send would fail).
    pub fn is_closed(&self) -> bool {
        self.shared.chan.rx_gone()
    }
}

impl<T, P: Platform> Clone for BoundedSender<T, P> {
    fn clone(&self) -> Self {
        self.shared.chan.add_sender();
        BoundedSender {
            shared: self.shared.clone(),
        }
    }
}

impl<T, P: Platform> Drop for BoundedSender<T, P> {
    fn drop(&mut self) {
        self.shared.chan.drop_sender();
    }
}

impl<T, P: Platform> fmt::Debug for BoundedSender<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundedSender")
            .field("capacity", &self.shared.cap)
            .finish_non_exhaustive()
    }
}

impl<T, P: Platform> BoundedReceiver<T, P> {
    /// The next message, waiting while the channel is empty; frees its slot
    /// (waking the oldest blocked sender). `Err(RecvError)` once every
    /// sender is dropped and the queue is drained (or for a cancelled
    /// actor, which must not park).
    pub fn recv(&mut self) -> Result<T, RecvError> {
        // SAFETY: `&mut self`: this receiver is the queue's only consumer.
        let v = unsafe { self.shared.chan.recv::<P>() }?;
        self.shared.release_slot();
        Ok(v)
    }

    /// The next message, waiting at most `timeout` (freeing its slot):
    /// `Timeout` if none came, `Disconnected` if none will come.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<T, RecvTimeoutError>
    where
        T: Send + 'static,
    {
        self.recv_deadline(sched::deadline_after::<P>(timeout))
    }

    /// [`recv_timeout`](Self::recv_timeout) with a deadline in ns on the
    /// platform's monotonic clock.
    pub fn recv_deadline(&mut self, deadline_ns: u64) -> Result<T, RecvTimeoutError>
    where
        T: Send + 'static,
    {
        let shared = self.shared.clone();
        // SAFETY: `&mut self`: this receiver is the queue's only consumer.
        let v = unsafe {
            self.shared.chan.recv_deadline::<P, _>(deadline_ns, || {
                PokeWith(shared.clone(), |b: &Arc<Bounded<T, P>>| b.chan.wake_receiver())
            })
        }?;
        self.shared.release_slot();
        Ok(v)
    }

    /// The next message if one is here now (freeing its slot).
    #[inline]
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        // SAFETY: as in `recv`.
        let v = unsafe { self.shared.chan.try_recv::<P>() }?;
        self.shared.release_slot();
        Ok(v)
    }

    /// The channel's capacity.
    pub fn capacity(&self) -> usize {
        self.shared.cap
    }
}

impl<T, P: Platform> Drop for BoundedReceiver<T, P> {
    fn drop(&mut self) {
        let b = &*self.shared;
        // SAFETY: the receiver is the only consumer; this is its drop.
        unsafe { b.chan.close_rx::<P>() };
        let waiting = {
            let mut list = b.waiters.lock();
            b.blocked.store(0, Ordering::SeqCst);
            core::mem::take(&mut list.queue)
        };
        for (_, w) in waiting {
            w.wake();
        }
    }
}

impl<T, P: Platform> fmt::Debug for BoundedReceiver<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundedReceiver")
            .field("capacity", &self.shared.cap)
            .finish_non_exhaustive()
    }
}
