//! The bounded MPSC channel: [`bounded`], [`BoundedSender`],
//! [`BoundedReceiver`]. At most `cap` messages are queued; a send on a full
//! channel waits (an actor parks, a thread blocks) until the receiver frees
//! a slot, `send_timeout` waits at most so long, and `try_send` says `Full`
//! instead. A capacity of 0 makes a rendezvous channel: a send waits until
//! the receiver takes its value ([`super::zero`]).
//!
//! Messages travel exactly as on the unbounded channel ([`super::chan`]:
//! same queue, same receiver park protocol); the slots and the blocked
//! senders are [`super::bound`]'s, which bounded mailboxes share.
//!
//! Both kinds sit behind the same handles: each holds a [`Kind`], an enum
//! of the queue's reference (a `BlockArc` from the worker's block cache,
//! as an unbounded channel's) and the rendezvous's `Arc`, so the queue
//! kind pays one branch per call on a tag in the handle itself (no load:
//! the same branch every call, predicted).

use core::fmt;
use core::time::Duration;

use super::bound::{Bound, Sent};
use super::chan::{CachedChan, Chan, Popped};
use super::zero::Zero;
use super::{
    Arc, CapacityError, RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
use crate::actor::WAIT_CHANNEL;
use crate::msg::wait::Waiter;
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::sched::WorkerBlocks;
use crate::seam::platform::Platform;
use crate::sync::block_arc::BlockArc;

/// The shared state of a bounded channel of capacity 1 or more: its block
/// and its queue's nodes come from the calling worker's block cache and go
/// back to the cache of the worker that drops it last.
struct Bounded<T, P: Platform> {
    chan: CachedChan<T, P>,
    bound: Bound<P>,
}

type BoundedRef<T, P> = BlockArc<Bounded<T, P>, WorkerBlocks<P>>;

/// A bounded channel's kind, held by each handle.
enum Kind<T, P: Platform> {
    /// Capacity 1 or more: the queue and its slots.
    Queue(BoundedRef<T, P>),
    /// Capacity 0: the rendezvous.
    Zero(Arc<Zero<T, P>>),
}

impl<T, P: Platform> Clone for Kind<T, P> {
    fn clone(&self) -> Self {
        match self {
            Kind::Queue(b) => Kind::Queue(b.clone()),
            Kind::Zero(z) => Kind::Zero(z.clone()),
        }
    }
}

/// The sending half of a bounded channel: clone it, share it, send from
/// actors and plain threads alike. The channel disconnects when the last
/// sender is dropped.
pub struct BoundedSender<T, P: Platform> {
    kind: Kind<T, P>,
}

/// The receiving half of a bounded channel (one per channel; receive with
/// `&mut`). Dropping it fails the waiting and later sends (handing their
/// values back) and drops the queued messages.
pub struct BoundedReceiver<T, P: Platform> {
    kind: Kind<T, P>,
}

/// A new channel holding at most `cap` messages; with `cap` 0, a
/// rendezvous channel: a send waits until the receiver takes its value
/// (module doc of `smarm_core::channel`).
pub fn bounded<T: Send, P: Platform>(cap: usize) -> (BoundedSender<T, P>, BoundedReceiver<T, P>) {
    let kind = if cap == 0 {
        Kind::Zero(Arc::new(Zero::new()))
    } else {
        Kind::Queue(BlockArc::new(|| Bounded {
            chan: CachedChan::new(Chan::new::<P>()),
            bound: Bound::new(cap),
        }))
    };
    (BoundedSender { kind: kind.clone() }, BoundedReceiver { kind })
}

/// [`bounded`], kept for compatibility: it never fails now (a capacity of
/// 0 makes a rendezvous channel), so [`CapacityError`] is never returned.
#[allow(clippy::type_complexity)]
pub fn try_bounded<T: Send, P: Platform>(
    cap: usize,
) -> Result<(BoundedSender<T, P>, BoundedReceiver<T, P>), CapacityError> {
    Ok(bounded(cap))
}

impl<T: Send + 'static, P: Platform> Bounded<T, P> {
    /// A send that waits until `deadline` at most (`None`: no limit).
    fn send(this: &BoundedRef<T, P>, v: T, deadline: Option<u64>) -> Sent<T> {
        this.bound.send(&this.chan, v, WAIT_CHANNEL, deadline, |ticket| {
            PokeWith((this.clone(), ticket), |(b, t)| b.bound.wake_ticket(*t))
        })
    }

    /// What the receiver takes: a message, its slot freed.
    #[inline]
    fn take(&self) -> impl FnMut(&Chan<T>) -> Result<T, TryRecvError> + '_ {
        let mut take = self.take_in_place();
        move |c| take(c).map(Popped::take)
    }

    /// [`take`](Self::take) with the message left in its node
    /// (`Chan::pop_in_place`) until the caller takes it, before its next
    /// take.
    #[inline]
    fn take_in_place(&self) -> impl FnMut(&Chan<T>) -> Result<Popped<T, P>, TryRecvError> + '_ {
        move |c| {
            // SAFETY: called only from the receiver's methods (`&mut self`:
            // the queue's only consumer).
            let v = unsafe { c.try_recv_in_place::<P>() }?;
            self.bound.release_slot();
            Ok(v)
        }
    }
}

impl<T: Send + 'static, P: Platform> BoundedSender<T, P> {
    /// Sends `v`, waiting while the channel is full (an actor parks; a
    /// plain thread blocks); on a rendezvous channel, until the receiver
    /// takes `v`. Fails, handing `v` back, when the receiver is dropped —
    /// before or while waiting — or at once when the caller is an actor
    /// that runtime shutdown is cancelling and the send would wait.
    pub fn send(&self, v: T) -> Result<(), SendError<T>> {
        let sent = match &self.kind {
            Kind::Queue(b) => Bounded::send(b, v, None),
            Kind::Zero(z) => Zero::send(z, v, None),
        };
        match sent {
            Sent::Ok => Ok(()),
            Sent::Closed(v) | Sent::TimedOut(v) => Err(SendError(v)),
        }
    }

    /// Sends `v`, waiting at most `timeout` for a free slot (on a
    /// rendezvous channel: for the receiver to take `v`):
    /// [`SendTimeoutError::Timeout`] if none came free in time (the
    /// receiver did not take it), [`SendTimeoutError::Disconnected`] if the
    /// receiver is gone; the value is handed back either way.
    pub fn send_timeout(&self, v: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        let deadline = Some(sched::deadline_after::<P>(timeout));
        let sent = match &self.kind {
            Kind::Queue(b) => Bounded::send(b, v, deadline),
            Kind::Zero(z) => Zero::send(z, v, deadline),
        };
        match sent {
            Sent::Ok => Ok(()),
            Sent::Closed(v) => Err(SendTimeoutError::Disconnected(v)),
            Sent::TimedOut(v) => Err(SendTimeoutError::Timeout(v)),
        }
    }

    /// Sends `v` if a slot is free now; never waits. On a rendezvous
    /// channel: only if the receiver is blocked in a receive now (a
    /// receiver waiting in a `Select` has not committed to this channel:
    /// `Full`).
    #[inline]
    pub fn try_send(&self, v: T) -> Result<(), TrySendError<T>> {
        let b = match &self.kind {
            Kind::Queue(b) => b,
            Kind::Zero(z) => return z.try_send(v),
        };
        if b.chan.rx_gone() {
            return Err(TrySendError::Disconnected(v));
        }
        // B1.
        if !b.bound.try_reserve() {
            return Err(TrySendError::Full(v));
        }
        b.chan.push::<P>(v);
        Ok(())
    }
}

impl<T, P: Platform> BoundedSender<T, P> {
    /// The channel's capacity (0: a rendezvous channel).
    pub fn capacity(&self) -> usize {
        self.kind.capacity()
    }

    /// Whether the receiver was dropped (a later send would fail).
    pub fn is_closed(&self) -> bool {
        match &self.kind {
            Kind::Queue(b) => b.chan.rx_gone(),
            Kind::Zero(z) => z.is_closed(),
        }
    }
}

impl<T, P: Platform> Kind<T, P> {
    fn capacity(&self) -> usize {
        match self {
            Kind::Queue(b) => b.bound.cap(),
            Kind::Zero(_) => 0,
        }
    }
}

impl<T, P: Platform> Clone for BoundedSender<T, P> {
    fn clone(&self) -> Self {
        match &self.kind {
            Kind::Queue(b) => b.chan.add_sender(),
            Kind::Zero(z) => z.add_sender(),
        }
        BoundedSender {
            kind: self.kind.clone(),
        }
    }
}

impl<T, P: Platform> Drop for BoundedSender<T, P> {
    fn drop(&mut self) {
        match &self.kind {
            Kind::Queue(b) => b.chan.drop_sender(),
            Kind::Zero(z) => z.drop_sender(),
        }
    }
}

impl<T, P: Platform> fmt::Debug for BoundedSender<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundedSender")
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static, P: Platform> BoundedReceiver<T, P> {
    /// The next message, waiting while the channel is empty; frees its slot
    /// (waking the oldest blocked sender). On a rendezvous channel: the
    /// oldest waiting sender's value (that send then completes), waiting
    /// for a sender if none waits. `Err(RecvError)` once every sender is
    /// dropped and the queue is drained (or for a cancelled actor, which
    /// must not park).
    pub fn recv(&mut self) -> Result<T, RecvError> {
        match &self.kind {
            Kind::Queue(b) => {
                // SAFETY: `&mut self`: this receiver is the queue's only
                // consumer. The message is taken at once (no take between),
                // with the slot read after the last switch.
                unsafe { b.chan.recv_with::<P, _>(WAIT_CHANNEL, b.take_in_place()) }
                    .map(|(m, c)| unsafe { m.take_in(c) })
            }
            Kind::Zero(z) => Zero::recv(z, None).map_err(|_| RecvError),
        }
    }

    /// The next message, waiting at most `timeout` (freeing its slot):
    /// `Timeout` if none came, `Disconnected` if none will come.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_deadline_ns(sched::deadline_after::<P>(timeout))
    }

    /// [`recv_timeout`](Self::recv_timeout) with a deadline instead of a
    /// timeout.
    #[cfg(feature = "std")]
    pub fn recv_deadline(&mut self, deadline: std::time::Instant) -> Result<T, RecvTimeoutError> {
        self.recv_deadline_ns(sched::deadline_at::<P>(deadline))
    }

    /// [`recv_timeout`](Self::recv_timeout) with a deadline in ns on the
    /// platform's monotonic clock (for ports).
    #[doc(hidden)]
    pub fn recv_deadline_ns(&mut self, deadline_ns: u64) -> Result<T, RecvTimeoutError> {
        let b = match &self.kind {
            Kind::Queue(b) => b,
            Kind::Zero(z) => return Zero::recv(z, Some(deadline_ns)),
        };
        let poke = || PokeWith(b.clone(), |b: &BoundedRef<T, P>| b.chan.wake_receiver());
        // SAFETY: `&mut self`: this receiver is the queue's only consumer.
        unsafe {
            b.chan
                .recv_deadline_with::<P, _>(WAIT_CHANNEL, deadline_ns, poke, b.take())
        }
    }

    /// The next message if one is here now (freeing its slot); on a
    /// rendezvous channel, the value of a sender waiting now.
    #[inline]
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        match &self.kind {
            Kind::Queue(b) => (b.take())(&b.chan),
            Kind::Zero(z) => z.try_recv(),
        }
    }
}

impl<T, P: Platform> BoundedReceiver<T, P> {
    /// A select's registration (see `Chan::register`, `Zero::register`):
    /// `false` if the channel is ready now (nothing stays registered).
    pub(crate) fn register(&mut self, w: Waiter) -> bool {
        match &self.kind {
            // SAFETY: `&mut self`: this receiver is the queue's only consumer.
            Kind::Queue(b) => unsafe { b.chan.register(w) },
            Kind::Zero(z) => z.register(w),
        }
    }

    /// Takes a select's registration back.
    pub(crate) fn withdraw(&mut self) {
        match &self.kind {
            Kind::Queue(b) => b.chan.withdraw(),
            Kind::Zero(z) => z.withdraw(),
        }
    }

    /// The channel's capacity (0: a rendezvous channel).
    pub fn capacity(&self) -> usize {
        self.kind.capacity()
    }

    /// Senders blocked on a rendezvous channel (for tests).
    #[cfg(test)]
    pub(super) fn blocked_senders(&self) -> usize {
        match &self.kind {
            Kind::Queue(_) => 0,
            Kind::Zero(z) => z.offers(),
        }
    }
}

impl<T, P: Platform> Drop for BoundedReceiver<T, P> {
    fn drop(&mut self) {
        match &self.kind {
            Kind::Queue(b) => {
                // SAFETY: the receiver is the only consumer; this is its drop.
                unsafe { b.chan.close_rx::<P>() };
                b.bound.close();
            }
            Kind::Zero(z) => z.close_rx(),
        }
    }
}

impl<T, P: Platform> fmt::Debug for BoundedReceiver<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundedReceiver")
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}
