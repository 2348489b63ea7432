//! The unbounded MPSC channel: [`channel`], [`Sender`], [`Receiver`].
//!
//! A send never waits: it is the mailbox's send (one swap, one store, one
//! load when the receiver is busy). The protocol is in [`super::chan`].

use core::fmt;
use core::time::Duration;

use super::chan::{CachedChan, Chan};
use super::{RecvError, RecvTimeoutError, SendError, TryRecvError};
use crate::actor::WAIT_CHANNEL;
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::sched::WorkerBlocks;
use crate::seam::platform::Platform;
use crate::sync::block_arc::BlockArc;

/// The channel both halves share: its block and its queue's nodes come
/// from the calling worker's block cache and go back to the cache of the
/// worker that drops it last (the global allocator on a plain thread), as
/// a mailbox's shared half does; a channel made per actor or per request
/// costs no `malloc` on a worker.
type SharedRef<T, P> = BlockArc<CachedChan<T, P>, WorkerBlocks<P>>;

/// The sending half of an unbounded channel: clone it, share it, send from
/// actors and plain threads alike. The channel disconnects when the last
/// sender is dropped.
pub struct Sender<T, P: Platform> {
    chan: SharedRef<T, P>,
}

/// The receiving half of an unbounded channel (one per channel; move it
/// anywhere, receive with `&mut`). Dropping it makes later sends fail and
/// drops the queued messages.
pub struct Receiver<T, P: Platform> {
    chan: SharedRef<T, P>,
}

/// A new unbounded channel.
///
/// Sends never wait; messages from one sender arrive in the order sent
/// (see the [module docs](super) for the whole contract).
pub fn channel<T: Send, P: Platform>() -> (Sender<T, P>, Receiver<T, P>) {
    let chan = BlockArc::new(|| CachedChan::new(Chan::new::<P>()));
    (Sender { chan: chan.clone() }, Receiver { chan })
}

impl<T, P: Platform> Sender<T, P> {
    /// Sends `v`; never waits. Fails, handing `v` back, when the receiver
    /// was dropped. A receiver that was waiting is woken (an actor receiver
    /// runs next on the sending worker).
    #[inline]
    pub fn send(&self, v: T) -> Result<(), SendError<T>> {
        if self.chan.rx_gone() {
            return Err(SendError(v));
        }
        self.chan.push::<P>(v);
        Ok(())
    }

    /// Whether the receiver was dropped (a later send would fail).
    pub fn is_closed(&self) -> bool {
        self.chan.rx_gone()
    }
}

impl<T, P: Platform> Clone for Sender<T, P> {
    fn clone(&self) -> Self {
        self.chan.add_sender();
        Sender {
            chan: self.chan.clone(),
        }
    }
}

impl<T, P: Platform> Drop for Sender<T, P> {
    fn drop(&mut self) {
        self.chan.drop_sender();
    }
}

impl<T, P: Platform> fmt::Debug for Sender<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T, P: Platform> Receiver<T, P> {
    /// The next message, waiting while the channel is empty (an actor
    /// parks; a plain thread blocks). `Err(RecvError)` once every sender is
    /// dropped and the queue is drained — or at once for an actor that
    /// runtime shutdown is cancelling, which must not park.
    pub fn recv(&mut self) -> Result<T, RecvError> {
        // SAFETY: `&mut self`: this receiver is the queue's only consumer.
        unsafe { self.chan.recv::<P>(WAIT_CHANNEL) }
    }

    /// The next message, waiting at most `timeout`: `Timeout` if none came
    /// (senders remain), `Disconnected` if none will come.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<T, RecvTimeoutError>
    where
        T: Send + 'static,
    {
        self.recv_deadline_ns(sched::deadline_after::<P>(timeout))
    }

    /// [`recv_timeout`](Self::recv_timeout) with a deadline instead of a
    /// timeout.
    #[cfg(feature = "std")]
    pub fn recv_deadline(&mut self, deadline: std::time::Instant) -> Result<T, RecvTimeoutError>
    where
        T: Send + 'static,
    {
        self.recv_deadline_ns(sched::deadline_at::<P>(deadline))
    }

    /// [`recv_timeout`](Self::recv_timeout) with a deadline in ns on the
    /// platform's monotonic clock (for ports).
    #[doc(hidden)]
    pub fn recv_deadline_ns(&mut self, deadline_ns: u64) -> Result<T, RecvTimeoutError>
    where
        T: Send + 'static,
    {
        let chan = &self.chan;
        let poke = || PokeWith(chan.clone(), |c: &SharedRef<T, P>| c.wake_receiver());
        // SAFETY: as in `recv`.
        unsafe { chan.recv_deadline_with::<P, _>(WAIT_CHANNEL, deadline_ns, poke, |c| c.try_recv::<P>()) }
    }

    /// The next message if one is here now: `Empty` if not (senders
    /// remain), `Disconnected` if none will come.
    #[inline]
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        // SAFETY: as in `recv`.
        unsafe { self.chan.try_recv::<P>() }
    }
}

impl<T, P: Platform> Receiver<T, P> {
    /// The MPSC core (for select's registrations).
    pub(crate) fn chan(&self) -> &Chan<T> {
        &self.chan
    }
}

impl<T, P: Platform> Drop for Receiver<T, P> {
    fn drop(&mut self) {
        // SAFETY: the receiver is the only consumer; this is its drop.
        unsafe { self.chan.close_rx::<P>() }
    }
}

impl<T, P: Platform> fmt::Debug for Receiver<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}
