//! [`Async`]: any non-blocking descriptor, waited on the runtime's poller
//! by an actor and with `poll(2)` by a plain thread.
//!
//! Every socket type in [`net`](crate::net) is an `Async` around std's
//! socket in non-blocking mode. An operation makes its call; when the call
//! says `WouldBlock` (`EAGAIN`), the caller waits for readiness and calls
//! again:
//!
//! - an actor on a runtime's worker parks (its worker runs other actors)
//!   on the descriptor's registration with that runtime, made at the first
//!   wait (`smarm_core::io::Registration`);
//! - a plain thread, an actor inside `blocking`, blocks in `poll(2)`;
//! - an actor of another runtime than the one the descriptor was
//!   registered with waits in `poll(2)` inside `blocking` (its worker's
//!   duty passes to another thread meanwhile).
//!
//! A deadline (a read or write timeout) bounds the wait: it parks with a
//! timer, never blocks the worker; when it passes the operation returns
//! [`io::ErrorKind::TimedOut`].

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use smarm_core::io::{Interest, RegisterError, Registration, Ticket, WaitError};
use smarm_core::poll::PollError;
use smarm_core::Platform;

/// A timeout setting, in nanoseconds (0: none).
#[derive(Debug, Default)]
pub(crate) struct Timeout(AtomicU64);

impl Timeout {
    pub(crate) fn set(&self, d: Option<Duration>) -> io::Result<()> {
        let ns = match d {
            None => 0,
            Some(d) if d.is_zero() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "cannot set a 0 duration timeout",
                ))
            }
            Some(d) => d.as_nanos().clamp(1, u64::MAX as u128) as u64,
        };
        // Relaxed: a setting, read by the next operation.
        self.0.store(ns, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn get(&self) -> Option<Duration> {
        // Relaxed: as in `set`.
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }
}

/// A non-blocking descriptor (a socket, a pipe, ...) whose operations
/// park the calling actor instead of blocking its worker.
pub struct Async<P: Platform, T: AsRawFd> {
    // Declared first: dropped (deregistered) before `inner` closes the fd.
    reg: OnceLock<Result<Registration<P>, PollError>>,
    inner: T,
}

impl<P: Platform, T: AsRawFd + std::fmt::Debug> std::fmt::Debug for Async<P, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Async").field("inner", &self.inner).finish()
    }
}

/// Sets `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns; results checked.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        if flags & libc::O_NONBLOCK == 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Deadline on the platform clock for a timeout from now.
fn deadline<P: Platform>(t: Option<Duration>) -> Option<u64> {
    t.map(|d| P::now_ns().saturating_add(d.as_nanos().min(u64::MAX as u128) as u64))
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the operation timed out")
}

/// Blocks the calling thread until `fd` is ready for `interest` or the
/// deadline (platform clock) passes.
fn poll_fd<P: Platform>(fd: RawFd, interest: Interest, deadline: Option<u64>) -> io::Result<()> {
    let events = match interest {
        Interest::READABLE => libc::POLLIN,
        Interest::WRITABLE => libc::POLLOUT,
        _ => libc::POLLIN | libc::POLLOUT,
    };
    loop {
        let timeout = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_sub(P::now_ns());
                if left == 0 {
                    return Err(timed_out());
                }
                left.div_ceil(1_000_000).min(i32::MAX as u64) as i32
            }
        };
        let mut pfd = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout) };
        if n > 0 {
            return Ok(());
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        // A timeout (re-checked above against the platform clock) or EINTR.
    }
}

impl<P: Platform, T: AsRawFd> Async<P, T> {
    /// Wraps `inner`, putting its descriptor in non-blocking mode.
    pub fn new(inner: T) -> io::Result<Self> {
        set_nonblocking(inner.as_raw_fd())?;
        Ok(Self::new_nonblocking(inner))
    }

    /// Wraps `inner` for a `From` conversion, which cannot fail: if the
    /// descriptor cannot be made non-blocking (it is not open), its calls
    /// block (or fail) as they would have.
    pub(crate) fn new_or_blocking(inner: T) -> Self {
        let _ = set_nonblocking(inner.as_raw_fd());
        Self::new_nonblocking(inner)
    }

    /// Wraps `inner`, whose descriptor is non-blocking already.
    pub(crate) fn new_nonblocking(inner: T) -> Self {
        Async {
            reg: OnceLock::new(),
            inner,
        }
    }

    /// The wrapped value.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped value (its descriptor stays non-blocking).
    pub fn into_inner(self) -> T {
        let Async { reg, inner, .. } = self;
        drop(reg);
        inner
    }

    /// The descriptor's registration with the calling actor's runtime
    /// (made now if it is not yet), for a `Select::ready` arm: take its
    /// [`ticket`](Registration::ticket) before a non-blocking call
    /// ([`try_io`](Self::try_io)), and select on it with that ticket when
    /// the call says `WouldBlock`.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::Unsupported`] for a caller that is no actor on a
    /// runtime's worker (a plain thread, an actor inside `blocking`), or
    /// where the platform has no poller or the OS refuses the descriptor
    /// (a regular file): such a caller waits with the blocking calls.
    pub fn registration(&self) -> io::Result<&Registration<P>> {
        if smarm_core::current_id::<P>().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a descriptor is registered from an actor on a runtime's worker only",
            ));
        }
        self.reg().as_ref().map_err(|e| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the descriptor cannot be registered with the runtime's poller: {e}"),
            )
        })
    }

    /// Runs `op` on the wrapped value once, without waiting: a call that
    /// would block returns `WouldBlock` (the descriptor is non-blocking).
    /// See [`registration`](Self::registration) for how to wait.
    pub fn try_io<R>(&self, op: impl FnOnce(&T) -> io::Result<R>) -> io::Result<R> {
        op(&self.inner)
    }

    /// The registration (made at the first call; an actor's only).
    fn reg(&self) -> &Result<Registration<P>, PollError> {
        self.reg
            .get_or_init(|| match Registration::new(self.inner.as_raw_fd()) {
                Ok(r) => Ok(r),
                Err(RegisterError::Poll(e)) => Err(e),
                // Callers are actors (`current_id`); never reached, and a
                // poll-less wait is right for it anyway.
                Err(_) => Err(PollError::Unsupported),
            })
    }

    /// For an actor: registers now, before the call that will start
    /// something (a connect), and returns the ticket to wait with. `None`
    /// for a plain thread or where there is no poller.
    pub(crate) fn register_now(&self) -> Option<Ticket> {
        smarm_core::current_id::<P>()?;
        self.reg().as_ref().ok().map(Registration::ticket)
    }

    /// Waits first (for `interest` after `ticket`, from
    /// [`register_now`](Self::register_now) before the call that started
    /// the operation), then runs `op` as [`io_with`](Self::io_with) does.
    pub(crate) fn wait_then_io<R>(
        &self,
        interest: Interest,
        timeout: Option<Duration>,
        ticket: Option<Ticket>,
        op: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        let dl = deadline::<P>(timeout);
        self.wait(interest, ticket, dl)?;
        self.io_loop(interest, timeout, dl, op)
    }

    /// The registration's ticket, if it is registered (taken before a
    /// call: see `smarm_core::io::Registration::ticket`).
    fn ticket(&self) -> Option<Ticket> {
        self.reg
            .get()
            .and_then(|r| r.as_ref().ok())
            .map(Registration::ticket)
    }

    /// Waits until the descriptor may be ready for `interest` after
    /// `ticket` (taken before the call that said `WouldBlock`), or the
    /// deadline (platform clock) passes: see the module doc for who waits
    /// how. May return early: call, and wait again on `WouldBlock`.
    fn wait(&self, interest: Interest, ticket: Option<Ticket>, deadline_ns: Option<u64>) -> io::Result<()> {
        if smarm_core::current_id::<P>().is_some() {
            let reg = self.reg();
            // No poller here (or the OS refused this descriptor: a regular
            // file is always ready), or another runtime's actor: below.
            if let Ok(reg) = reg {
                // Registered after the call began (just now, or by another
                // caller meanwhile): its ticket could not be taken, so call
                // again with one (the registration reports a readiness that
                // holds already).
                let Some(ticket) = ticket else {
                    return Ok(());
                };
                match reg.wait(interest, ticket, deadline_ns) {
                    Ok(()) => return Ok(()),
                    Err(WaitError::TimedOut) => return Err(timed_out()),
                    Err(_) => {}
                }
            }
            let fd = self.inner.as_raw_fd();
            return smarm_core::blocking::<P, _>(|| poll_fd::<P>(fd, interest, deadline_ns));
        }
        poll_fd::<P>(self.inner.as_raw_fd(), interest, deadline_ns)
    }

    /// Runs `op` until it does not return `WouldBlock` (or `Interrupted`),
    /// waiting for `interest` in between, for at most `timeout`.
    pub fn io_with<R>(
        &self,
        interest: Interest,
        timeout: Option<Duration>,
        op: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        self.io_loop(interest, timeout, None, op)
    }

    /// [`io_with`](Self::io_with)'s loop; `dl`: the deadline if it has been
    /// read already (else it is, at the first wait).
    fn io_loop<R>(
        &self,
        interest: Interest,
        timeout: Option<Duration>,
        mut dl: Option<u64>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            let ticket = self.ticket();
            match op(&self.inner) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => {
                    // A call that completed is a safe point: a loop whose
                    // calls never block (connects, reads of a socket that
                    // always has data) yields when its timeslice is spent,
                    // instead of holding its worker (and the poll that
                    // would wake its peers) until it waits.
                    smarm_core::checkpoint::<P>();
                    return r;
                }
            }
            if dl.is_none() && timeout.is_some() {
                dl = deadline::<P>(timeout);
            }
            self.wait(interest, ticket, dl)?;
        }
    }

    /// Runs a read-side `op` (see [`io_with`](Self::io_with)), no timeout.
    pub fn read_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.io_with(Interest::READABLE, None, op)
    }

    /// Runs a write-side `op` (see [`io_with`](Self::io_with)), no timeout.
    pub fn write_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.io_with(Interest::WRITABLE, None, op)
    }
}

impl<P: Platform, T: AsRawFd> AsRawFd for Async<P, T> {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl<P: Platform, T: AsRawFd + AsFd> AsFd for Async<P, T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}
