//! Which thread serves a worker, and the debug builds' check of it.
//!
//! A worker's owner-only state belongs to the one thread serving it: the
//! run-next slot (plain loads and stores), the worker's own part of the
//! run queue (owner pushes and pops), its counters (one writer). The duty
//! moves between threads only at a hand-off (a blocking call, or a
//! detached unwind): the old thread gives it away in `hand_off` and from
//! then on touches none of that state, not even through a wake that
//! `schedule` would route to "this worker"; its successor takes the duty
//! in `run_worker`, after the hand-off's Release/Acquire word.
//!
//! A thread that goes on acting as a worker it gave away races its
//! successor on owner-only state, and the run-next slot then can hand one
//! actor to two threads (a retiring thread that took the worker loop's
//! timer turn once did exactly that). Nothing in release builds notices
//! until two stacks share one actor. So debug builds record, per worker,
//! the context of the thread serving it ([`Server`]) and check it at
//! every owner-only access: the slot's puts and takes, the queue's owner
//! pushes and pops, each turn of the worker loop. A stray access aborts
//! the process at once with the worker's index, whatever the timing: the
//! old thread clears the record *before* it wakes its successor, so it
//! can never read its own context there again. Release builds keep no
//! record and check nothing.
//!
//! Ordering: the record is a diagnostic and uses Relaxed atomics. The
//! clear happens before the successor's claim (the hand-off word's
//! Release/Acquire, or the thread spawn), so the two stores are ordered
//! in the record's modification order, and by coherence every later load
//! on the old thread reads the clear or a successor's claim, never the
//! old thread's own context.

#[allow(unused_imports)]
use super::*;

/// The context of the thread serving one worker (null: none yet, or a
/// hand-off under way). Debug builds only; an empty type otherwise.
pub(crate) struct Server {
    #[cfg(debug_assertions)]
    ctx: core::sync::atomic::AtomicPtr<()>,
}

impl Server {
    pub(crate) const fn new() -> Self {
        Server {
            #[cfg(debug_assertions)]
            ctx: core::sync::atomic::AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The thread whose worker context is `ctx` serves this worker from
    /// now on (the start of `run_worker`).
    #[inline(always)]
    pub(crate) fn claim(&self, ctx: *mut ()) {
        #[cfg(debug_assertions)]
        // Relaxed: module doc, "Ordering".
        self.ctx.store(ctx, core::sync::atomic::Ordering::Relaxed);
        #[cfg(not(debug_assertions))]
        let _ = ctx;
    }

    /// Nobody serves this worker until a successor claims it: `hand_off`,
    /// before it wakes the successor, and a worker loop that finished.
    #[inline(always)]
    pub(crate) fn clear(&self) {
        #[cfg(debug_assertions)]
        // Relaxed: module doc, "Ordering".
        self.ctx
            .store(ptr::null_mut(), core::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the thread with worker context `ctx` serves this worker
    /// (debug builds; release builds keep no record and say yes).
    #[inline(always)]
    pub(crate) fn serves(&self, ctx: *const ()) -> bool {
        #[cfg(debug_assertions)]
        {
            // Relaxed: module doc, "Ordering".
            !ctx.is_null() && ptr::eq(self.ctx.load(core::sync::atomic::Ordering::Relaxed), ctx)
        }
        #[cfg(not(debug_assertions))]
        {
            let _ = ctx;
            true
        }
    }
}

/// The abort of a failed check (cold, out of line): worker `index` (if
/// known) had its `what` used by a thread not serving it.
#[cold]
#[inline(never)]
fn stray<P: Platform>(index: Option<usize>, what: &str) -> ! {
    let who = match index {
        Some(i) => alloc::format!("worker {i}'s"),
        None => alloc::string::String::from("a worker's"),
    };
    P::abort(&alloc::format!(
        "smarm: {who} {what} used by a thread that does not serve that worker \
         (owner-only: the duty moves between threads only at a hand-off)"
    ))
}

/// Debug builds: aborts unless the calling thread serves worker `w` (its
/// current worker context is the one `w` records; a detached context still
/// serves where no thread took the duty over). `what`: the state touched,
/// for the message.
#[inline(always)]
pub(crate) fn check<P: Platform>(w: &WorkerShared, what: &str) {
    // The context read stays inside the debug branch: it is an opaque
    // call that a release build must not pay for nothing.
    if cfg!(debug_assertions) {
        check_ctx(w, ctx::<P>(), what);
    }
}

/// [`check`] for the thread whose worker context is `c` (null: none).
#[inline(always)]
pub(crate) fn check_ctx<P: Platform>(w: &WorkerShared, c: *mut WorkerCtx<P>, what: &str) {
    if cfg!(debug_assertions) && !w.server.serves(c.cast_const().cast()) {
        // SAFETY: a non-null context is its thread's live worker context.
        let index = (!c.is_null() && ptr::eq(unsafe { (*c).worker }, w)).then(|| unsafe { (*c).index });
        stray::<P>(index, what);
    }
}
