//! The bounded MPSC channel: [`bounded`], [`BoundedSender`],
//! [`BoundedReceiver`]. At most `cap` messages are queued; a send on a full
//! channel waits (an actor parks, a thread blocks) until the receiver frees
//! a slot, `send_timeout` waits at most so long, and `try_send` says `Full`
//! instead.
//!
//! Messages travel exactly as on the unbounded channel ([`super::chan`]:
//! same queue, same receiver park protocol); the slots and the blocked
//! senders are [`super::bound`]'s, which bounded mailboxes share.

use core::fmt;
use core::time::Duration;

use super::bound::{Bound, Sent};
use super::chan::Chan;
use super::{
    Arc, CapacityError, RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
use crate::actor::WAIT_CHANNEL;
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::seam::platform::Platform;

/// The shared state of a bounded channel.
struct Bounded<T, P: Platform> {
    chan: Chan<T>,
    bound: Bound<P>,
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
    let shared = Arc::new(Bounded {
        chan: Chan::new::<P>(),
        bound: Bound::new(cap),
    });
    Ok((
        BoundedSender {
            shared: shared.clone(),
        },
        BoundedReceiver { shared },
    ))
}

impl<T: Send + 'static, P: Platform> Bounded<T, P> {
    /// A send that waits until `deadline` at most (`None`: no limit).
    fn send(this: &Arc<Self>, v: T, deadline: Option<u64>) -> Sent<T> {
        this.bound.send(&this.chan, v, WAIT_CHANNEL, deadline, |ticket| {
            PokeWith((this.clone(), ticket), |(b, t)| b.bound.wake_ticket(*t))
        })
    }

    /// What the receiver takes: a message, its slot freed.
    #[inline]
    fn take(&self) -> impl FnMut(&Chan<T>) -> Result<T, TryRecvError> + '_ {
        move |c| {
            // SAFETY: called only from the receiver's methods (`&mut self`:
            // the queue's only consumer).
            let v = unsafe { c.try_recv::<P>() }?;
            self.bound.release_slot();
            Ok(v)
        }
    }
}

impl<T: Send + 'static, P: Platform> BoundedSender<T, P> {
    /// Sends `v`, waiting while the channel is full (an actor parks; a
    /// plain thread blocks). Fails, handing `v` back, when the receiver is
    /// dropped — before or while waiting — or at once when the caller is an
    /// actor that runtime shutdown is cancelling and the channel is full.
    pub fn send(&self, v: T) -> Result<(), SendError<T>> {
        match Bounded::send(&self.shared, v, None) {
            Sent::Ok => Ok(()),
            Sent::Closed(v) | Sent::TimedOut(v) => Err(SendError(v)),
        }
    }

    /// Sends `v`, waiting at most `timeout` for a free slot:
    /// [`SendTimeoutError::Timeout`] if none came free in time,
    /// [`SendTimeoutError::Disconnected`] if the receiver is gone; the
    /// value is handed back either way.
    pub fn send_timeout(&self, v: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        match Bounded::send(&self.shared, v, Some(sched::deadline_after::<P>(timeout))) {
            Sent::Ok => Ok(()),
            Sent::Closed(v) => Err(SendTimeoutError::Disconnected(v)),
            Sent::TimedOut(v) => Err(SendTimeoutError::Timeout(v)),
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
        if !b.bound.try_reserve() {
            return Err(TrySendError::Full(v));
        }
        b.chan.push::<P>(v);
        Ok(())
    }
}

impl<T, P: Platform> BoundedSender<T, P> {
    /// The channel's capacity.
    pub fn capacity(&self) -> usize {
        self.shared.bound.cap()
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
            .field("capacity", &self.shared.bound.cap())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static, P: Platform> BoundedReceiver<T, P> {
    /// The next message, waiting while the channel is empty; frees its slot
    /// (waking the oldest blocked sender). `Err(RecvError)` once every
    /// sender is dropped and the queue is drained (or for a cancelled
    /// actor, which must not park).
    pub fn recv(&mut self) -> Result<T, RecvError> {
        let b = &*self.shared;
        // SAFETY: `&mut self`: this receiver is the queue's only consumer.
        unsafe { b.chan.recv_with::<P>(WAIT_CHANNEL, b.take()) }
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
        let b = &self.shared;
        let poke = || PokeWith(b.clone(), |b: &Arc<Bounded<T, P>>| b.chan.wake_receiver());
        // SAFETY: `&mut self`: this receiver is the queue's only consumer.
        unsafe {
            b.chan
                .recv_deadline_with::<P, _>(WAIT_CHANNEL, deadline_ns, poke, b.take())
        }
    }

    /// The next message if one is here now (freeing its slot).
    #[inline]
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        (self.shared.take())(&self.shared.chan)
    }
}

impl<T, P: Platform> BoundedReceiver<T, P> {
    /// The MPSC core (for select's registrations; a message a select takes
    /// goes through `try_recv`, which frees its slot).
    pub(crate) fn chan(&self) -> &Chan<T> {
        &self.shared.chan
    }

    /// The channel's capacity.
    pub fn capacity(&self) -> usize {
        self.shared.bound.cap()
    }
}

impl<T, P: Platform> Drop for BoundedReceiver<T, P> {
    fn drop(&mut self) {
        let b = &*self.shared;
        // SAFETY: the receiver is the only consumer; this is its drop.
        unsafe { b.chan.close_rx::<P>() };
        b.bound.close();
    }
}

impl<T, P: Platform> fmt::Debug for BoundedReceiver<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundedReceiver")
            .field("capacity", &self.shared.bound.cap())
            .finish_non_exhaustive()
    }
}
