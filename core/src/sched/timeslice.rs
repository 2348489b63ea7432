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
        slice_spent_at(c, <P::Arch as Arch>::cycles())
    }
}

/// [`slice_spent`] with the cycle counter read (`now`), timeslices on.
///
/// # Safety
///
/// `c` is this thread's live worker context.
#[inline(always)]
unsafe fn slice_spent_at<P: Platform>(c: *mut WorkerCtx<P>, now: u64) -> bool {
    // SAFETY: contract.
    unsafe {
        let end = (*c).slice_end;
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
        // The last budget again; the read below (on an actor: off one
        // there is nothing to preempt) sets the next one.
        (*c).budget = (*c).budget_len;
        if !(*c).current.is_null() && budget_spent(c) {
            expire::<P>(c);
            return true;
        }
    }
    false
}

/// A safe point's budget ran out: reads the cycle counter, sets the next
/// budget ([`next_budget`]) and says whether the running actor's slice is
/// spent (stamping its start if this is the first read since the resume).
///
/// # Safety
///
/// `c` is this thread's live worker context.
#[inline]
unsafe fn budget_spent<P: Platform>(c: *mut WorkerCtx<P>) -> bool {
    // SAFETY: contract.
    unsafe {
        let end = (*c).slice_end;
        if end == u64::MAX {
            // Timeslices off: nothing to read the counter for.
            (*c).budget = SAFE_POINT_BUDGET_MAX;
            return false;
        }
        let now = <P::Arch as Arch>::cycles();
        let len = next_budget(
            (*c).budget_len,
            now.wrapping_sub((*c).last_read),
            (*c).slice_cycles / u64::from(CLOCK_READ_SHARE),
        );
        (*c).last_read = now;
        (*c).budget_len = len;
        (*c).budget = len;
        slice_spent_at(c, now)
    }
}

/// The budget after one of `len` safe points that took `gap` cycles, for a
/// read every `target` cycles or so: doubled (at most
/// [`SAFE_POINT_BUDGET_MAX`]) when the gap was under half the target,
/// halved (at least 1) when it was over the target, else kept. A gap that
/// spans other actors' turns (the counter is the worker's) only makes the
/// budget smaller: reads come sooner, never later.
#[inline]
pub(crate) fn next_budget(len: u32, gap: u64, target: u64) -> u32 {
    if gap < target / 2 {
        (len * 2).min(SAFE_POINT_BUDGET_MAX)
    } else if gap > target {
        (len / 2).max(1)
    } else {
        len
    }
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
            serve::check::<P>(w, "run-next slot");
            w.counters.timeslice_expiries(1);
            // The slot holds the partner this actor woke in its turn and
            // nothing is queued here: the partner runs now with a fresh
            // slice and the yielder waits in the slot (`YieldBehind`), so
            // a producer and the consumer it keeps waking stay on this
            // worker, which its own slot keeps them on.
            let next = w.run_next.peek();
            if !next.is_null()
                && ptr::eq(next, (*c).woke)
                && (*me).rt.as_ref().nothing_queued_here((*c).index)
            {
                (*c).slice_end = 0;
                suspend::<P>(c, me, Request::YieldBehind);
                return;
            }
            // Else both go to the queue, the slot's actor first. A
            // detached context's slot belongs to the thread now serving
            // its worker: not ours to empty.
            if let Some(next) = take_slot(&w.run_next) {
                // RUNNABLE; the queue's push is the Release edge to its
                // popper.
                (*me).rt.as_ref().requeue(next, index);
            }
        }
        suspend::<P>(c, me, Request::Yield);
    }
}

#[cfg(all(test, not(smarm_loom)))]
mod tests {
    use super::{next_budget, SAFE_POINT_BUDGET_MAX};
    use alloc::vec;

    #[test]
    fn a_budget_doubles_while_reads_come_fast_up_to_the_max() {
        let target = 1_000;
        let mut len = 1;
        let mut seen = vec![len];
        while len < SAFE_POINT_BUDGET_MAX {
            len = next_budget(len, 100, target);
            seen.push(len);
        }
        assert_eq!(seen, [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(
            next_budget(SAFE_POINT_BUDGET_MAX, 0, target),
            SAFE_POINT_BUDGET_MAX
        );
    }

    #[test]
    fn a_budget_halves_once_reads_come_late_down_to_one() {
        let target = 1_000;
        assert_eq!(next_budget(64, 1_001, target), 32);
        assert_eq!(next_budget(2, u64::MAX, target), 1);
        assert_eq!(
            next_budget(1, u64::MAX, target),
            1,
            "every safe point reads at worst"
        );
    }

    #[test]
    fn a_budget_near_the_target_stays() {
        let target = 1_000;
        for gap in [500, 750, 1_000] {
            assert_eq!(next_budget(8, gap, target), 8, "gap {gap}");
        }
        // No target (a slice shorter than the share's divisor in cycles):
        // every gap is over it.
        assert_eq!(next_budget(8, 1, 0), 4);
    }
}
