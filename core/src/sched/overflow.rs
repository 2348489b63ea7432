//! Stack-overflow detection: the part that is the same on every OS.
//!
//! Every actor stack has a guard page at its low end (see [`RawStack`]); an
//! actor that recurses too deep touches it and the CPU faults. A port
//! installs a fault handler (SIGSEGV/SIGBUS on an alternate signal stack)
//! and asks this module one question: *does this faulting address lie in the
//! guard page of the actor running on this thread?* If so, the port prints
//! the report [`write_report`] formats and aborts; if not, it hands the fault
//! to whatever handler was there before.
//!
//! # Async-signal-safety
//!
//! Everything here may run inside a signal handler that interrupted any code
//! on the faulting thread, including the scheduler itself. So nothing here
//! allocates, takes a lock, panics or touches another thread's data:
//!
//! 1. [`Platform::current_worker`] reads this thread's current-worker slot
//!    (a plain thread-local; a port must make that read signal-safe on a
//!    thread that has used the slot before, and only ask on such threads).
//! 2. The worker's `current` field and the running actor's `stack` cell are
//!    read with volatile loads. Only this thread writes them, and a signal
//!    handler sees this thread's own earlier stores; each is a single
//!    aligned pointer or word, so the handler reads either the old or the
//!    new value, never a torn one. `current` is set just before the switch
//!    into an actor and cleared just after the switch back, and the stack
//!    is attached before the first switch and detached after the last, so
//!    while `current` is non-null the stack fields are stable.
//! 3. Formatting goes through `core::fmt` into a caller's fixed buffer,
//!    truncating rather than failing.
//!
//! # What is not seen here
//!
//! - An actor inside [`blocking`](crate::blocking) runs on a thread whose
//!   current-worker slot is cleared: its overflow is not recognised, and the
//!   fault falls through to the previous handler (a plain SIGSEGV).
//! - A fault below the guard page (a frame larger than the guard that does
//!   not touch its pages in order) is not in the guard and is not reported.
//!   Rust emits stack probes on x86_64 and aarch64, so Rust frames touch the
//!   guard first; C code needs `-fstack-clash-protection` for the same.

use core::fmt::{self, Write};
use core::ops::Range;
use core::ptr;

use crate::actor::Actor;
use crate::sched::WorkerCtx;
use crate::seam::platform::{Platform, RawStack};

/// The address ranges of one actor stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackBounds {
    /// Lowest address of the mapping: the first byte of the guard.
    pub guard_start: usize,
    /// One past the guard: the lowest usable byte.
    pub low: usize,
    /// One past the highest usable byte (the stack grows down from here).
    pub top: usize,
}

impl StackBounds {
    fn of(s: &RawStack) -> Self {
        let guard_start = s.base as usize;
        StackBounds {
            guard_start,
            low: guard_start + s.guard,
            top: guard_start + s.len,
        }
    }

    /// Usable bytes (the guard excluded).
    pub fn usable(&self) -> usize {
        self.top - self.low
    }

    /// The guard page(s): `[guard_start, low)`.
    pub fn guard(&self) -> Range<usize> {
        self.guard_start..self.low
    }
}

/// What an overflow report needs: which actor, how big its stack is, where
/// it faulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overflow<'a> {
    /// The actor's id (as [`current_id`](crate::current_id) gives it).
    pub actor: u64,
    /// The actor's name, when it has one (printed by [`write_report`]).
    /// Borrowed from the actor, which lives while it runs on this thread.
    pub name: Option<&'a str>,
    /// The stack's usable bytes (the size it was spawned with, rounded up
    /// to pages).
    pub usable: usize,
    /// The guard page the fault hit.
    pub guard: Range<usize>,
    /// The faulting address.
    pub addr: usize,
}

/// The running actor on this thread, if any (async-signal-safe: see the
/// module doc, steps 1 and 2).
#[inline]
fn running<P: Platform>() -> Option<*const Actor> {
    let c: *mut WorkerCtx<P> = P::current_worker().cast();
    if c.is_null() {
        return None;
    }
    // SAFETY: a non-null current-worker pointer is this thread's live
    // WorkerCtx (set by `run_worker`, cleared before it returns). The field
    // is written only by this thread; volatile so that the load happens
    // here (a handler may have interrupted the write's neighbours).
    let cur = unsafe { ptr::read_volatile(ptr::addr_of!((*c).current)) };
    (!cur.is_null()).then_some(cur)
}

/// The stack bounds of `a`.
///
/// # Safety
///
/// `a` is the actor running on this thread (it owns its `stack` cell).
#[inline]
unsafe fn bounds_of(a: *const Actor) -> Option<StackBounds> {
    // SAFETY: per the contract `a` is live and its stack cell is stable
    // while it runs (module doc, step 2); a volatile read of the Option
    // copies plain data (pointers and sizes), never dropping or moving it.
    unsafe {
        (*a).stack.with(|s| {
            let s = ptr::read_volatile(s.cast::<core::mem::ManuallyDrop<Option<RawStack>>>());
            s.as_ref().map(StackBounds::of)
        })
    }
}

/// The stack bounds of the actor running on this thread; `None` off actors
/// (plain threads, the scheduler loop, inside `blocking`). Cheap: one
/// thread-local read and two loads. Async-signal-safe.
pub fn current_stack<P: Platform>() -> Option<StackBounds> {
    let a = running::<P>()?;
    // SAFETY: `a` is the actor running on this thread.
    unsafe { bounds_of(a) }
}

/// Whether `addr` (a faulting address on the calling thread) lies in the
/// guard page of the actor running on this thread; if so, what the report
/// needs. Async-signal-safe: no allocation, lock or panic (module doc).
///
/// The name's borrow is valid while the actor is running, which covers a
/// signal handler that reports and aborts.
pub fn overflow_at<'a, P: Platform>(addr: usize) -> Option<Overflow<'a>> {
    let a = running::<P>()?;
    // SAFETY: `a` is the actor running on this thread.
    let b = unsafe { bounds_of(a) }?;
    if !b.guard().contains(&addr) {
        return None;
    }
    // SAFETY: `a` is live while it runs (its `Life`, which holds the name,
    // with it); `id` and `life.name` are immutable after spawn.
    let a: &'a Actor = unsafe { &*a };
    Some(Overflow {
        actor: a.id,
        name: a.life.name.as_deref(),
        usable: b.usable(),
        guard: b.guard(),
        addr,
    })
}

/// Opts the calling actor in (`true`) or out of overflow recovery: an
/// overflow then ends just this actor with
/// [`ExitReason::StackOverflow`](crate::ExitReason::StackOverflow) (its
/// joiner sees `JoinError::StackOverflow`, monitors and supervisors see the
/// reason) instead of aborting the process. Returns `false` off actors.
///
/// What it costs, and why it is opt-in (docs/overflow.md): the frames on
/// the overflowed stack are abandoned without unwinding, so everything they
/// own leaks (heap memory, `Arc` counts, channel senders that then never
/// disconnect) and a lock they hold stays locked; the stack itself is
/// never reused or unmapped (its memory may have been lent to other threads
/// by a scope that would have waited in its destructor). Opt in only for
/// actors that hold no locks across deep recursion and may leak.
pub fn recover_overflow<P: Platform>(on: bool) -> bool {
    let Some(a) = crate::sched::current_actor::<P>() else {
        return false;
    };
    // SAFETY: the running actor is alive while it runs.
    let a: &Actor = unsafe { &*a };
    // Relaxed: read by this thread's own fault handler (same thread).
    a.life
        .recover_overflow
        .store(on, core::sync::atomic::Ordering::Relaxed);
    true
}

/// For a port's fault handler, after [`overflow_at`] found a guard-page
/// hit: if the running actor opted in to recovery, the stack pointer at
/// which the handler should resume this thread in [`overflow_exit`] (16-byte
/// aligned, on the worker's own thread stack below the scheduler's saved
/// frame, which is unused while the actor runs). `None`: abort as usual.
/// Async-signal-safe (loads only).
pub fn recovery_sp<P: Platform>() -> Option<usize> {
    let a = running::<P>()?;
    // SAFETY: `a` is the actor running on this thread; `life` and the
    // flag are read-only here; `sched_sp` was written by this thread when
    // the actor was last resumed.
    unsafe {
        let life = &*ptr::addr_of!((*a).life);
        // Relaxed: written by this thread (`recover_overflow`).
        if !life.recover_overflow.load(core::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let sched = ptr::read_volatile((*a).sched_sp.get()) as usize;
        // Leave room for the switch's saved frame and a little slack.
        Some((sched - 512) & !15)
    }
}

/// Where a port's fault handler resumes the thread (with the stack pointer
/// from [`recovery_sp`]) after an opted-in actor overflowed: in normal
/// context, on the worker's stack. Completes the actor's join with
/// `JoinError::StackOverflow`, runs its exit hooks (monitors, links,
/// supervisors), and switches to its worker, which retires the actor and
/// abandons its stack. Never returns.
pub extern "C" fn overflow_exit<P: Platform>() -> ! {
    let c: *mut WorkerCtx<P> = P::current_worker().cast();
    let Some(a) = running::<P>() else {
        P::abort("smarm: overflow recovery without a running actor")
    };
    // Clearing `current` first makes the hooks below run as worker code (a
    // send's safe point cannot switch the dead actor).
    // SAFETY: `a` is the actor that faulted here (its worker holds an `ActorArc`);
    // its abandoned frames stay mapped, so the registered completer is
    // valid; nothing runs on its stack any more.
    unsafe {
        (*c).current = ptr::null();
        let actor: &Actor = &*a;
        let (lo, hi) = actor.life.stack();
        let stack_size = hi - lo;
        let err = crate::actor::exit::JoinError::StackOverflow {
            id: actor.id,
            name: actor.life.name.clone(),
            stack_size,
        };
        // Its mailbox's owner (in the abandoned frames) never drops it:
        // close it here, so sends fail instead of vanishing.
        if let Some(mb) = (*actor.life.mailbox.get()).as_ref() {
            mb.close();
        }
        actor.life.end(err.reason());
        let wake = match (*actor.abort_join.get()).take() {
            Some(mut j) => j.as_mut().abort(err),
            None => None,
        };
        *actor.request.get() = crate::actor::Request::Overflowed(wake);
        let to = *actor.sched_sp.get();
        // Sanitizers: the actor's fiber ends here, as at a normal exit (we
        // already run on the worker's stack, below `to`; see crate::actor::sanitizer).
        crate::actor::sanitizer::actor_to_worker(actor, true);
        <P::Arch as crate::seam::arch::Arch>::switch(to);
    }
    P::abort("smarm: an actor ended by overflow recovery was resumed")
}

/// A `fmt::Write` over a fixed buffer that truncates instead of failing.
struct Buf<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl Write for Buf<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// A size as "128 KiB" when a whole number of KiB, else "N bytes".
struct Size(usize);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1024) {
            write!(f, "{} KiB", self.0 / 1024)
        } else {
            write!(f, "{} bytes", self.0)
        }
    }
}

/// Formats the two-line overflow report into `buf` (truncated if it does
/// not fit; 256 bytes is plenty without a name) and returns the bytes
/// written. Async-signal-safe: `core::fmt` into the caller's buffer.
///
/// ```text
/// smarm: actor 42 has overflowed its stack (128 KiB usable; raise Builder::stack_size)
/// smarm: fault at 0x7f0c2a1ff0f8 in the guard page 0x7f0c2a1ff000..0x7f0c2a200000; aborting
/// ```
///
/// With a name: `smarm: actor 42 "parser" has overflowed its stack (...)`.
pub fn write_report(o: &Overflow<'_>, buf: &mut [u8]) -> usize {
    let mut w = Buf { buf, len: 0 };
    let _ = write!(w, "smarm: actor {}", o.actor);
    if let Some(name) = o.name {
        let _ = write!(w, " {name:?}");
    }
    let _ = write!(
        w,
        " has overflowed its stack ({} usable; raise Builder::stack_size)\n\
         smarm: fault at {:#x} in the guard page {:#x}..{:#x}; aborting\n",
        Size(o.usable),
        o.addr,
        o.guard.start,
        o.guard.end
    );
    w.len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(o: &Overflow<'_>, cap: usize) -> std::string::String {
        let mut buf = std::vec![0u8; cap];
        let n = write_report(o, &mut buf);
        std::string::String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    fn sample(name: Option<&str>) -> Overflow<'_> {
        Overflow {
            actor: 42,
            name,
            usable: 128 * 1024,
            guard: 0x1000..0x2000,
            addr: 0x1ff8,
        }
    }

    #[test]
    fn report_names_the_actor_and_size() {
        let s = report(&sample(None), 256);
        assert_eq!(
            s,
            "smarm: actor 42 has overflowed its stack (128 KiB usable; raise Builder::stack_size)\n\
             smarm: fault at 0x1ff8 in the guard page 0x1000..0x2000; aborting\n"
        );
    }

    #[test]
    fn report_prints_a_name_when_present() {
        let s = report(&sample(Some("parser")), 256);
        assert!(
            s.starts_with("smarm: actor 42 \"parser\" has overflowed its stack"),
            "{s}"
        );
    }

    #[test]
    fn report_truncates_into_a_small_buffer() {
        let s = report(&sample(None), 20);
        assert_eq!(s, "smarm: actor 42 has ");
    }

    #[test]
    fn odd_sizes_print_in_bytes() {
        let mut o = sample(None);
        o.usable = 1000;
        assert!(report(&o, 256).contains("(1000 bytes usable;"));
    }
}
