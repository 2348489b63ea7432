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
//! - [`panic`]: the panic hook that names the panicking actor.
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
#[cold]
pub fn abort(msg: &str) -> ! {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{msg}");
    std::process::abort()
}

#[cfg(test)]
mod tests;
