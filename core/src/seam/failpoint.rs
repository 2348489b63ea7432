//! Test-only failpoints: named places inside the concurrent protocols where a
//! test can stretch a race window.
//!
//! With the `failpoints` feature off (the default) [`hit`] is an empty
//! `#[inline(always)]` function and the sites cost nothing. With it on, each
//! site loads one process-wide hook (Relaxed-cheap when none is installed)
//! and calls it with the [`Site`]. What the hook does is the test's choice:
//! the soak binary spins or yields the OS thread for a random while (widening
//! the window between, say, a ring slot's claim and its publish), and the
//! deterministic port (`smarm-sim`) makes every site a point where its seeded
//! policy may switch to another worker thread.
//!
//! # Hook contract
//!
//! A hook runs on whatever thread reached the site, possibly on an actor's
//! stack, possibly while the runtime holds one of its short locks or has
//! half-published a ring slot. It may delay, spin, or yield the OS thread
//! (`sched_yield`, a port's `yield_thread`): every place in core that waits
//! on another thread's progress backs off to `Platform::yield_thread`, so a
//! delayed thread is always eventually waited for, never deadlocked on. It
//! must not call back into the runtime (send, spawn, park) and must not
//! panic.

/// Where a failpoint sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Site {
    /// Between a ring push's ticket claim (its CAS) and the publish of the
    /// value (the cell's sequence store): consumers that reach the cell
    /// meanwhile must wait, not skip it or report the ring empty. On a
    /// one-producer ring (`Ring::push_single`, no claim), between the
    /// publish and the move of `tail`: consumers may take the value first.
    RingClaimed,
    /// Just before a worker moves a parking actor RUNNING -> PARKED: a
    /// waker that runs now finds RUNNING and must leave a NOTIFIED mark.
    BeforeParkCas,
    /// Just after the RUNNING -> PARKED CAS succeeded: the registration owns
    /// the actor; a waker may resume it on another worker from here on.
    AfterParkCas,
    /// Inside a receive on a mailbox or channel, between registering the
    /// receiver's waiter and re-checking the queue and the senders (the
    /// receiver's half of the Dekker pair with a sender or the last
    /// sender's drop).
    RecvRegistered,
    /// Inside a mailbox's or channel's close (its receiver's drop), between
    /// marking the receiver gone and draining what was queued: racing
    /// senders must fail or have their message dropped with the queue,
    /// never lost silently.
    RecvClose,
    /// Inside an actor's end, before each of its exit hooks runs (the
    /// hooks are already closed to newcomers): whoever an earlier hook
    /// told of the exit (a monitor, a linked actor) may act now, before the
    /// later hooks ran.
    ExitHook,
}

impl Site {
    /// Every site, for tests that count or filter.
    pub const ALL: [Site; 6] = [
        Site::RingClaimed,
        Site::BeforeParkCas,
        Site::AfterParkCas,
        Site::RecvRegistered,
        Site::RecvClose,
        Site::ExitHook,
    ];

    /// A short stable name ("ring.claimed", ...).
    pub fn name(self) -> &'static str {
        match self {
            Site::RingClaimed => "ring.claimed",
            Site::BeforeParkCas => "park.before_cas",
            Site::AfterParkCas => "park.after_cas",
            Site::RecvRegistered => "recv.registered",
            Site::RecvClose => "recv.close",
            Site::ExitHook => "exit.hook",
        }
    }
}

#[cfg(feature = "failpoints")]
mod imp {
    use super::Site;
    use core::sync::atomic::{AtomicPtr, Ordering};

    /// The installed hook as a type-erased `fn(Site)` (null: none).
    static HOOK: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

    pub fn set_hook(hook: Option<fn(Site)>) -> Option<fn(Site)> {
        let new = hook.map_or(core::ptr::null_mut(), |f| f as *mut ());
        // AcqRel: Release publishes nothing but the pointer itself (a fn
        // item needs no initialisation); Acquire pairs with a previous
        // set_hook so the old value returned is the one installed.
        let old = HOOK.swap(new, Ordering::AcqRel);
        if old.is_null() {
            None
        } else {
            // SAFETY: every non-null value stored was a `fn(Site)` cast to a
            // data pointer just above; fn pointers round-trip through
            // `*mut ()` on every platform Rust supports.
            Some(unsafe { core::mem::transmute::<*mut (), fn(Site)>(old) })
        }
    }

    #[inline(always)]
    pub fn hit(site: Site) {
        // Relaxed: the pointer is to code, which needs no synchronisation;
        // a site that misses a just-installed hook simply does not fire.
        let h = HOOK.load(Ordering::Relaxed);
        if !h.is_null() {
            // SAFETY: as in `set_hook`: non-null values are `fn(Site)`s.
            let f = unsafe { core::mem::transmute::<*mut (), fn(Site)>(h) };
            f(site);
        }
    }
}

/// Installs `hook` process-wide (or removes it with `None`) and returns the
/// previous one. Only with the `failpoints` feature.
#[cfg(feature = "failpoints")]
pub fn set_hook(hook: Option<fn(Site)>) -> Option<fn(Site)> {
    imp::set_hook(hook)
}

/// Reaches the failpoint `site`: calls the installed hook, if any. Compiles
/// to nothing without the `failpoints` feature.
#[inline(always)]
pub fn hit(site: Site) {
    #[cfg(feature = "failpoints")]
    imp::hit(site);
    #[cfg(not(feature = "failpoints"))]
    let _ = site;
}

/// Whether failpoints are compiled in.
pub const ENABLED: bool = cfg!(feature = "failpoints");
