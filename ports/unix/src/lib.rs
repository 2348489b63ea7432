//! smarm-unix: what smarm's POSIX ports share, the way std's
//! `sys/pal/unix` holds what its Unix targets share.
//!
//! `smarm-linux` and `smarm-darwin` implement core's `Platform` and call
//! into this crate for every part that is the same POSIX code on both:
//!
//! - [`stack`]: actor stacks (`mmap` with a `PROT_NONE` guard page) and the
//!   page size.
//! - [`stackinfo`]: an actor stack's high-water mark, from `mincore(2)`.
//! - [`fault`]: the SIGSEGV/SIGBUS handler that reports (or recovers from)
//!   an actor's stack overflow, on a per-worker alternate signal stack.
//! - [`thread`]: worker threads (std's, with a small OS stack and the
//!   alternate signal stack), the CPU count, and the current-worker slot.
//! - [`io`] and [`net`]: descriptors and sockets whose blocking calls park
//!   the calling actor on the runtime's poller (std's names).
//! - [`panic`](mod@panic): the panic hook that names the panicking actor.
//! - [`yield_thread`] (`sched_yield`) and [`abort`] (print, then abort).
//!
//! The ports keep only what differs: the wait/wake word (futex vs
//! `os_sync`/ulock), the raw lock (core's futex lock vs `os_unfair_lock`),
//! the clock, Linux's cap on mapped stacks (`vm.max_map_count`), Darwin's
//! worker QoS class. This crate implements no `Platform` itself; where the
//! shared code needs the port, it is generic over `P: Platform`.
//!
//! Where POSIX systems differ in a detail (a mapping flag, the signal
//! context's register names), the difference is a `cfg` here, next to the
//! code it changes, as in std.
#![cfg(unix)]
#![warn(missing_docs)]

pub mod fault;
pub mod io;
pub mod net;
pub mod panic;
pub mod stack;
pub mod stackinfo;
pub mod thread;

pub use stack::page_size;

/// Gives up the rest of the OS thread's time slice (`sched_yield`).
pub fn yield_thread() {
    // SAFETY: sched_yield has no preconditions (and cannot fail on Linux
    // or Darwin).
    unsafe { libc::sched_yield() };
}

/// Prints `msg` to stderr and aborts. A closed or failing stderr is ignored
/// (`eprintln!` would panic there, and this must not: we are aborting).
/// With the `log` feature the message is also an error record (target
/// `smarm`) first; stderr gets it all the same, since a logger that
/// buffers would lose it to the abort.
#[cold]
pub fn abort(msg: &str) -> ! {
    #[cfg(feature = "log")]
    log::error!(target: "smarm", "{msg}");
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{msg}");
    std::process::abort()
}

/// How serious a [`report`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Something went wrong but the runtime carries on (a failed OS call
    /// treated as spurious).
    Warn,
    /// An actor failed (its panic).
    Error,
}

/// Reports one line the runtime has to say on its own (not through a
/// return value): an actor's panic, a failed OS call it works around.
///
/// Without the `log` feature: a line on stderr (a closed or failing stderr
/// is ignored). With it, a `log` record (target `smarm`, the level of
/// `severity`) instead, when a logger is installed that takes it
/// (`log::log_enabled!`); with no logger (or one that filters it out) the
/// line still goes to stderr, so a warning is never silently lost.
pub fn report(severity: Severity, line: core::fmt::Arguments<'_>) {
    #[cfg(feature = "log")]
    {
        let level = match severity {
            Severity::Warn => log::Level::Warn,
            Severity::Error => log::Level::Error,
        };
        if log::log_enabled!(target: "smarm", level) {
            log::log!(target: "smarm", level, "{line}");
            return;
        }
    }
    let _ = severity;
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[cfg(test)]
mod tests;

/// Exports a port's IO API with the platform filled in, as
/// [`smarm_core::port_api!`] does for the rest: `net::{TcpListener,
/// TcpStream, UdpSocket}`, `unix::net::{UnixListener, UnixStream,
/// UnixDatagram}`, `io::{Async, Interest, Registration, Ticket,
/// WaitError}`. Expanded once in each POSIX
/// port's root.
#[macro_export]
macro_rules! io_api {
    ($platform:ty) => {
        /// Sockets with std's names whose blocking calls park the calling
        /// actor on the runtime's poller (see `smarm_unix::net`).
        pub mod net {
            /// A TCP listener (`std::net::TcpListener`'s methods).
            pub type TcpListener = $crate::net::TcpListener<$platform>;
            /// A TCP stream (`std::net::TcpStream`'s methods).
            pub type TcpStream = $crate::net::TcpStream<$platform>;
            /// A UDP socket (`std::net::UdpSocket`'s methods).
            pub type UdpSocket = $crate::net::UdpSocket<$platform>;
            /// The iterator of `TcpListener::incoming`.
            pub type Incoming<'a> = $crate::net::Incoming<'a, $platform>;
            pub use $crate::net::ToSocketAddrs;
        }
        /// Unix-specific IO.
        pub mod unix {
            /// Unix-domain sockets (`std::os::unix::net`'s methods).
            pub mod net {
                /// A Unix-domain listener.
                pub type UnixListener = $crate::net::unix::UnixListener<$platform>;
                /// A Unix-domain stream.
                pub type UnixStream = $crate::net::unix::UnixStream<$platform>;
                /// A Unix-domain datagram socket.
                pub type UnixDatagram = $crate::net::unix::UnixDatagram<$platform>;
            }
        }
        /// Readiness of any descriptor (pipes, a child's stdout, ...).
        pub mod io {
            /// A non-blocking descriptor whose waits park the calling actor.
            pub type Async<T> = $crate::io::Async<$platform, T>;
            /// A descriptor's registration with a runtime's poller (for a
            /// `Select::ready` arm).
            pub type Registration = $crate::smarm_core_io::Registration<$platform>;
            pub use $crate::smarm_core_io::{Interest, Ticket, WaitError};
        }
    };
}

#[doc(hidden)]
pub use smarm_core::io as smarm_core_io;
