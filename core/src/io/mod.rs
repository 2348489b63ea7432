//! Layer 6, IO readiness: [`Registration`], a descriptor registered with
//! the calling actor's runtime, on which an actor parks until the
//! descriptor is readable or writable (its worker runs other actors
//! meanwhile). The socket types a user names (`net::TcpStream`, ...) are
//! the ports' (they need std), built on this. The protocol (readiness vs a
//! deadline vs a kill, exactly one wake) is in the scheduler's `io` module;
//! the poller is the port's [`Poller`](crate::poll::Poller).
//!
//! The caller drives the descriptor itself, non-blocking: it takes a
//! [`Ticket`] ([`Registration::ticket`]), makes the call (`read`,
//! `accept`, ...), and only when that returns `EAGAIN` does it
//! [`wait`](Registration::wait) with the ticket, then calls again. The
//! ticket says which edges the call may have missed: the wait returns at
//! once if the descriptor became ready since it was taken. The wait may
//! also return without the descriptor being ready (a spurious edge): the
//! call returns `EAGAIN` again and the caller waits again.

use alloc::sync::Arc;
use core::fmt;
use core::ptr::NonNull;

use crate::sched::io::{self as sio, IoDriver, Record, WaitOutcome};
use crate::seam::platform::Platform;
use crate::seam::poll::{PollError, READABLE, WRITABLE};

mod select;

/// The directions a wait is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest(u32);

impl Interest {
    /// Readable (or hung up, or failed).
    pub const READABLE: Interest = Interest(READABLE);
    /// Writable (or hung up, or failed).
    pub const WRITABLE: Interest = Interest(WRITABLE);
    /// Either direction.
    pub const BOTH: Interest = Interest(READABLE | WRITABLE);
}

/// Why a descriptor could not be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegisterError {
    /// The caller is not an actor on a runtime's worker (a plain thread,
    /// or an actor inside `blocking`): it has no runtime to register with.
    /// A plain thread waits on the descriptor itself (`poll(2)`).
    NotOnRuntime,
    /// The poller refused: the platform has none, or the OS said no.
    Poll(PollError),
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::NotOnRuntime => {
                f.write_str("a descriptor is registered from an actor on a runtime's worker only")
            }
            RegisterError::Poll(e) => write!(f, "registering the descriptor failed: {e}"),
        }
    }
}

/// Why a wait returned without readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// The deadline passed first.
    TimedOut,
    /// The caller is not an actor of the runtime the descriptor is
    /// registered with (a plain thread, another runtime's actor, an actor
    /// inside `blocking`): it must wait some other way.
    NotHere,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::TimedOut => f.write_str("timed out waiting for the descriptor"),
            WaitError::NotHere => {
                f.write_str("the descriptor is registered with another runtime (or the caller is no actor)")
            }
        }
    }
}

/// The readiness edges a registration had seen when it was taken (before
/// a call): see [`Registration::ticket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u32);

/// A descriptor registered with a runtime's poller, for both directions,
/// until dropped (drop it before closing the descriptor).
pub struct Registration<P: Platform> {
    driver: Arc<IoDriver<P>>,
    rec: NonNull<Record<P::Lock>>,
    fd: i32,
}

// SAFETY: the record is shared through its lock and lives as long as the
// driver, which the registration keeps alive; the fd is a plain number.
unsafe impl<P: Platform> Send for Registration<P> {}
// SAFETY: as above: every method takes the record's lock.
unsafe impl<P: Platform> Sync for Registration<P> {}

impl<P: Platform> fmt::Debug for Registration<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration").field("fd", &self.fd).finish()
    }
}

impl<P: Platform> Registration<P> {
    /// Registers `fd` (a non-blocking descriptor the caller owns and keeps
    /// open while registered) with the calling actor's runtime.
    pub fn new(fd: i32) -> Result<Self, RegisterError> {
        let driver = sio::current_driver::<P>()
            .ok_or(RegisterError::NotOnRuntime)?
            .map_err(RegisterError::Poll)?;
        let rec = driver.register(fd).map_err(RegisterError::Poll)?;
        Ok(Registration { driver, rec, fd })
    }

    /// The descriptor.
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// Whether the caller may [`wait`](Self::wait) on it: it is an actor of
    /// the runtime the descriptor is registered with.
    pub fn can_wait(&self) -> bool {
        sio::is_current::<P>(&self.driver)
    }

    /// The edges seen so far: take it before a call, and pass it to
    /// [`wait`](Self::wait) if the call returns `EAGAIN`.
    pub fn ticket(&self) -> Ticket {
        // SAFETY: `self` holds the registration (and the driver).
        Ticket(unsafe { sio::ticket(self.rec) })
    }

    /// Parks the calling actor until the descriptor may be ready for
    /// `interest` after `ticket` (taken before the caller's call that
    /// returned `EAGAIN`; at once if an edge came since), or until
    /// `deadline_ns` (the platform clock, `Platform::now_ns`). May return
    /// early (the caller calls again, and waits again on `EAGAIN`). A kill
    /// or a shutdown unwinds the actor out of the wait as out of any park.
    pub fn wait(
        &self,
        interest: Interest,
        ticket: Ticket,
        deadline_ns: Option<u64>,
    ) -> Result<(), WaitError> {
        // SAFETY: `self` holds the registration (and the driver) for the
        // whole call.
        match unsafe { sio::wait_ready::<P>(&self.driver, self.rec, interest.0, ticket.0, deadline_ns) } {
            WaitOutcome::Retry => Ok(()),
            WaitOutcome::TimedOut => Err(WaitError::TimedOut),
            WaitOutcome::NotHere => Err(WaitError::NotHere),
        }
    }
}

impl<P: Platform> Drop for Registration<P> {
    fn drop(&mut self) {
        // SAFETY: `rec` came from `register(fd)`; nobody waits on it (a
        // waiter borrows the registration); it is not used again.
        unsafe { self.driver.deregister(self.fd, self.rec) };
    }
}
