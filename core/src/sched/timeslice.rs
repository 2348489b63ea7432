//! Timeslices and safe points: the cycle counter's rate, deadlines,
//! `checkpoint` and the safe-point budget that sends and receives spend (the
//! module doc's "Timeslices").

#[allow(unused_imports)]
use super::*;

/// Cycles per second of the arch counter: the arch's figure, or measured
/// once (about 1 ms) against the platform clock.
pub(crate) fn cycles_per_second<P: Platform>() -> u64 {
    if let Some(hz) = <P::Arch as Arch>::cycles_per_second() {
        return hz;
    }
    // One figure per process (the counter is per machine); `core`'s atomic,
    // not loom's: a cache, not part of any protocol.
    static MEASURED: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
    // Relaxed: a cached value; racing measurers store near-equal figures.
    let hz = MEASURED.load(core::sync::atomic::Ordering::Relaxed);
    if hz != 0 {
        return hz;
    }
    let t0 = P::now_ns();
    let c0 = <P::Arch as Arch>::cycles();
    let mut t1 = t0;
    while t1.saturating_sub(t0) < 1_000_000 {
        <P::Arch as Arch>::spin_hint();
        t1 = P::now_ns();
    }
    let c1 = <P::Arch as Arch>::cycles();
    let hz = ((c1.wrapping_sub(c0) as u128 * 1_000_000_000) / (t1 - t0).max(1) as u128) as u64;
    let hz = hz.max(1);
    MEASURED.store(hz, core::sync::atomic::Ordering::Relaxed);
    hz
}

/// `d` in cycles of the arch counter.
pub(crate) fn duration_to_cycles<P: Platform>(d: Duration) -> u64 {
    let hz = cycles_per_second::<P>() as u128;
    (d.as_nanos() * hz / 1_000_000_000).min(u64::MAX as u128 / 2) as u64
}

/// The deadline `d` from now on the platform clock, in ns (saturating;
/// for ports and core's own timed waits).
#[doc(hidden)]
pub fn deadline_after<P: Platform>(d: Duration) -> u64 {
    P::now_ns().saturating_add(d.as_nanos().min(u64::MAX as u128) as u64)
}

/// `t` on the platform clock, in ns: as far from the platform's now as `t`
/// is from `Instant::now()` (a deadline already past is now). The two
/// clocks are the same monotonic clock on Linux and macOS; the
/// deterministic port's is virtual, and the distance is what carries over.
#[cfg(feature = "std")]
pub(crate) fn deadline_at<P: Platform>(t: std::time::Instant) -> u64 {
    deadline_after::<P>(t.saturating_duration_since(std::time::Instant::now()))
}

// ---------------------------------------------------------------------------
// Actor side
// ---------------------------------------------------------------------------

/// A safe point for long-running code: yields if the calling actor's
/// timeslice is spent (one read of the cycle counter). Off actors, or with
/// timeslices off, it does nothing.
#[inline]
pub fn checkpoint<P: Platform>() {
    let c = ctx::<P>();
    if c.is_null() {
        return;
    }
    // SAFETY: a non-null context is this thread's live worker context.
    unsafe {
        if !(*c).current.is_null() && slice_spent(c) {
            expire::<P>(c);
        }
    }
}

/// Whether the running actor's slice is spent (stamping its start if this
/// is the first check since the resume).
///
/// # Safety
///
/// `c` is this thread's live worker context.
#[inline(always)]
pub(crate) unsafe fn slice_spent<P: Platform>(c: *mut WorkerCtx<P>) -> bool {
    // SAFETY: contract.
    unsafe {
        let end = (*c).slice_end;
        if end == u64::MAX {
            return false; // timeslices off
        }
        let now = <P::Arch as Arch>::cycles();
        if end == 0 {
            (*c).slice_end = now.saturating_add((*c).slice_cycles);
            return false;
        }
        now >= end
    }
}

/// The safe point inside sends and receives: counts down a budget and
/// reads the cycle counter only when it runs out.
#[inline]
pub(crate) fn safe_point<P: Platform>() {
    // SAFETY: read just now, on this thread.
    unsafe { safe_point_in::<P>(ctx::<P>()) };
}

/// [`safe_point`], returning the current-worker slot as it is after it,
/// for a caller that uses it before its next switch (a receive that finds
/// a message frees the node into that worker's cache): one read of the
/// slot, and a second only when the actor yielded here (it may resume on
/// another worker).
#[inline]
pub(crate) fn safe_point_here<P: Platform>() -> *mut WorkerCtx<P> {
    let c = ctx::<P>();
    // SAFETY: read just now, on this thread.
    if unsafe { safe_point_in::<P>(c) } {
        ctx::<P>()
    } else {
        c
    }
}

/// [`safe_point`] for a caller that read the current-worker slot already;
/// `true` if the caller yielded (switched) here.
///
/// # Safety
///
/// `c` is what `ctx::<P>()` returned on this thread, with no switch since.
#[inline]
pub(crate) unsafe fn safe_point_in<P: Platform>(c: *mut WorkerCtx<P>) -> bool {
    if c.is_null() {
        return false;
    }
    // SAFETY: a non-null context is this thread's live worker context.
    unsafe {
        (*c).budget -= 1;
        if (*c).budget != 0 {
            return false;
        }
        (*c).budget = SAFE_POINT_BUDGET;
        if !(*c).current.is_null() && slice_spent(c) {
            expire::<P>(c);
            return true;
        }
    }
    false
}

/// The running actor's timeslice is spent: count it, queue the actor in
/// this worker's run-next slot, and yield.
///
/// The slot's actor would inherit the spent slice (the module doc's
/// "Timeslices") and expire at its first safe point, and so on down a
/// chain of wakes (docs/benchmarks.md, "Spent slices down a chain").
/// Queued ahead of the yielder, it waits its turn behind the queue as the
/// yielder does, and whoever runs next is popped from the queue with a
/// fresh slice: one expiry per slice, and a chain that never empties the
/// slot still gives the queue its turn.
///
/// # Safety
///
/// `c` is this thread's live worker context, running an actor.
#[cold]
pub(crate) unsafe fn expire<P: Platform>(c: *mut WorkerCtx<P>) {
    // SAFETY: contract; no reference is held across the yield.
    unsafe {
        let me = (*c).current;
        if !(*c).detached {
            let index = (*c).index;
            let w = &*(*c).worker;
            w.counters.timeslice_expiries(1);
            // The owner's take (a thief may race it: `take` gives the
            // actor to one of us). A detached context's slot belongs to
            // the thread now serving its worker: not ours to empty.
            if let Some(next) = take_slot(&w.run_next) {
                // RUNNABLE; the queue's push is the Release edge to its
                // popper.
                (*me).rt.as_ref().requeue(next, index);
            }
        }
        suspend::<P>(me, Request::Yield);
    }
}
