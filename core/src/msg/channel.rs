//! Typed channels between actors and OS threads, in four kinds:
//!
//! | kind                          | constructor                   | senders | send when full / waiting       |
//! |-------------------------------|-------------------------------|---------|--------------------------------|
//! | unbounded MPSC                | [`unbounded()`], [`channel`]  | many    | never waits                    |
//! | bounded MPSC (backpressure)   | [`bounded()`]`(cap)`, `cap` ≥ 1 | many    | waits for a free slot          |
//! | rendezvous MPSC               | [`bounded()`]`(0)`            | many    | waits until the receiver takes the value |
//! | oneshot                       | [`oneshot()`]                 | one     | never waits (one value)        |
//!
//! The rendezvous kind (as std's `sync_channel(0)` and crossbeam's
//! `bounded(0)`) shares the bounded kind's handles ([`BoundedSender`],
//! [`BoundedReceiver`], `capacity()` 0) and holds no message: a `send`
//! completes only when the receiver takes its value; `try_send` succeeds
//! only if the receiver is blocked in a receive right now (a receiver
//! waiting in a `Select` has not committed to this channel, so `Full`);
//! `send_timeout` hands the value back if no receive took it in time; a
//! receive takes the value of the oldest waiting sender (`try_recv`: only
//! if one waits now). A `BoundedReceiver` of either kind works in a
//! `Select` (a rendezvous arm is ready when a sender waits, or every
//! sender is gone). [`try_bounded`] and [`CapacityError`] remain for
//! compatibility: no capacity is refused now.
//!
//! Every blocking call works from both sides of the runtime's edge: an actor
//! *parks* (its worker runs other actors meanwhile, never sleeping in the
//! kernel on the channel's behalf), a plain OS thread *futex-waits* on a
//! word of its own. Both go through the crate's waiter abstraction, and
//! either may wake spuriously; every wait is a loop that re-checks.
//!
//! # Semantics (as `std::sync::mpsc`)
//!
//! - A send fails, handing the value back, once the receiver is dropped.
//!   Dropping the receiver drops the messages it can still reach at once;
//!   a send racing the drop may still succeed, and its message is dropped
//!   with the channel's last handle. (Rendezvous: every send blocked at the
//!   drop, and every later one, fails with its value; only a value already
//!   handed to a receive that a kill then interrupted, whose send had
//!   succeeded, is dropped with the receiver.)
//! - After every sender is dropped the receiver drains what is queued, then
//!   gets [`RecvError`] (disconnected) from `recv`, and
//!   [`TryRecvError::Disconnected`] from `try_recv`.
//! - **FIFO per sender.** Messages whose sends are ordered (one actor or
//!   thread sending in sequence, or sends otherwise ordered by
//!   happens-before) are received in that order; sends from different
//!   senders interleave in the order their pushes reached the queue.
//! - An actor blocked in a channel call while runtime shutdown cancels it
//!   (its unwinding destructors receive or send) gets the disconnected
//!   error instead of parking: nothing can wake it any more.
//! - An actor killed while it waits in a channel call unwinds out of it,
//!   leaving no registration behind. A rendezvous sender's value goes with
//!   it (dropped as its other locals are): the receiver never takes a value
//!   from a dead sender.
//!
//! # Design
//!
//! The queued MPSC kinds are built on the mailbox's machinery
//! (the MPSC queue `lockfree::mpsc_queue`, nodes from the calling worker's node cache,
//! and the mailbox's Dekker-pair park protocol), so a message costs no
//! allocation in steady state. The protocols are documented with their
//! code: the receiver's park protocol, shared by both queued kinds, in
//! `channel/chan.rs`; the bounded kind's slot accounting and sender wait
//! list in `channel/bound.rs`; the rendezvous's lock-protected state and
//! its hand-over in `channel/zero.rs` (a rendezvous is a meeting of two
//! parties anyway: a short lock decides it); the oneshot's state word in
//! `channel/oneshot.rs`.

use core::fmt;

// A rendezvous's handles share it through an `Arc`: loom's under loom, whose
// drop loom sees synchronise the last owner with the others (the std one's
// Release/Acquire are invisible to it). The other kinds share a `BlockArc`
// from the worker's block cache, whose counts are the crate's atomics
// (loom's under loom) for the same reason.
#[cfg(not(smarm_loom))]
use alloc::sync::Arc;
#[cfg(smarm_loom)]
use loom::sync::Arc;

pub(crate) mod bound;
mod bounded;
pub(crate) mod chan;
mod oneshot;
mod popped;
mod unbounded;
mod waiter_slot;
mod zero;

pub use bounded::{bounded, try_bounded, BoundedReceiver, BoundedSender};
pub use oneshot::{oneshot, OneshotReceiver, OneshotSender};
pub use unbounded::{channel, Receiver, Sender};
// The unbounded kind under names nobody misreads (the port API's): tokio's
// handle names (its plain `Sender` is bounded) and crossbeam's constructor.
pub use unbounded::{channel as unbounded, Receiver as UnboundedReceiver, Sender as UnboundedSender};

pub use crate::seam::error::SendError;

/// Why a non-blocking send on a bounded channel did not send: the value,
/// handed back either way.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// Every slot is taken: the receiver has not caught up.
    Full(T),
    /// The receiver was dropped.
    Disconnected(T),
}

impl<T> TrySendError<T> {
    /// The value that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        }
    }

    /// Whether the channel was full (and is still connected).
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }

    /// Whether the receiver was dropped.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, TrySendError::Disconnected(_))
    }
}

impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(e: SendError<T>) -> Self {
        TrySendError::Disconnected(e.0)
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => {
                f.write_str("sending on a full channel (the value is returned in the error)")
            }
            TrySendError::Disconnected(_) => f.write_str(
                "sending on a channel whose receiver was dropped (the value is returned in the error)",
            ),
        }
    }
}

impl<T> core::error::Error for TrySendError<T> {}

/// Why a send with a timeout did not send: the value, handed back either
/// way.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// No slot came free before the deadline: the receiver has not caught
    /// up.
    Timeout(T),
    /// The receiver was dropped.
    Disconnected(T),
}

impl<T> SendTimeoutError<T> {
    /// The value that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendTimeoutError::Timeout(v) | SendTimeoutError::Disconnected(v) => v,
        }
    }

    /// Whether the deadline passed (the receiver is still there).
    pub fn is_timeout(&self) -> bool {
        matches!(self, SendTimeoutError::Timeout(_))
    }

    /// Whether the receiver was dropped.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, SendTimeoutError::Disconnected(_))
    }
}

impl<T> From<SendError<T>> for SendTimeoutError<T> {
    fn from(e: SendError<T>) -> Self {
        SendTimeoutError::Disconnected(e.0)
    }
}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
            SendTimeoutError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => {
                f.write_str("timed out sending on a full channel (the value is returned in the error)")
            }
            SendTimeoutError::Disconnected(_) => f.write_str(
                "sending on a channel whose receiver was dropped (the value is returned in the error)",
            ),
        }
    }
}

impl<T> core::error::Error for SendTimeoutError<T> {}

/// A receive on a channel that is empty and whose senders are all gone
/// (for a oneshot: the sender was dropped without sending).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty channel whose senders were all dropped")
    }
}

impl core::error::Error for RecvError {}

/// Why a non-blocking receive returned no value.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum TryRecvError {
    /// Nothing is queued now; senders remain.
    Empty,
    /// Nothing is queued and every sender was dropped: nothing will come.
    Disconnected,
}

impl From<RecvError> for TryRecvError {
    fn from(_: RecvError) -> Self {
        TryRecvError::Disconnected
    }
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => {
                f.write_str("receiving on an empty channel whose senders were all dropped")
            }
        }
    }
}

impl core::error::Error for TryRecvError {}

/// Why a receive with a timeout returned no value.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RecvTimeoutError {
    /// Nothing came before the deadline; senders remain.
    Timeout,
    /// Nothing is queued and every sender was dropped: nothing will come.
    Disconnected,
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting on a channel"),
            RecvTimeoutError::Disconnected => {
                f.write_str("receiving on an empty channel whose senders were all dropped")
            }
        }
    }
}

impl core::error::Error for RecvTimeoutError {}

/// Kept for compatibility, never returned: [`try_bounded`] once refused a
/// capacity of 0, which now makes a rendezvous channel (so `try_bounded`
/// always succeeds, and `bounded(0)` no longer panics).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct CapacityError;

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid channel capacity (never returned: a capacity of 0 makes a rendezvous channel)")
    }
}

impl core::error::Error for CapacityError {}

#[cfg(test)]
mod tests;
