//! An idle worker's looks and waits: what counts as work before it sleeps
//! (`Shared::has_work`), its spin (`Shared::spin_for_work`) and its
//! patience before a steal (`steal_patience`), kept out of the worker
//! loop's file (the spin out of line too).

#[allow(unused_imports)]
use super::*;

/// How long an idle worker keeps looking for work before it sleeps, in
/// ns of the platform clock (`Shared::spin_for_work`). A wake from another
/// thread that lands within it costs no futex wake and no sleeper's wake-up
/// latency (tens of µs on a VM); an idle period costs at most this much
/// CPU.
const IDLE_SPIN_NS: u64 = 10_000;

/// Looks for work between two reads of the clock while spinning.
const IDLE_SPIN_CHECKS: u32 = 32;

impl<P: Platform, Q: RunQueue<P>> Shared<P, Q> {
    /// Work for idle worker `index`: the queue, its own run-next slot (what
    /// its timers or a shutdown sweep woke while it was idle: it must not
    /// sleep on that), or the runtime's end. Other workers' slots do not
    /// count: only their owners take from them.
    pub(crate) fn has_work(&self, index: usize) -> bool {
        !self.queue.is_empty()
            // Relaxed (both): a probe; the idle protocol's fences order it
            // (and the slot is this thread's own).
            || !self.core.workers[index].run_next.peek().is_null()
            || self.core.finished.load(Ordering::Relaxed)
    }

    /// Before an idle worker sleeps: watches the run queue for up to
    /// [`IDLE_SPIN_NS`] (or until the timer `deadline`, if earlier), so a
    /// wake from another thread that comes soon finds it awake: no futex
    /// wake for the waker, no wake-up latency for the sleeper. One worker
    /// of the runtime spins at a time (the others sleep at once), so a
    /// mostly idle runtime burns at most one core for that long per idle
    /// period. Returns whether work turned up (the caller then does not
    /// sleep). Only the queue: the spinner's own slot is empty (it found
    /// no work), and other workers' slots are theirs alone. Out of line:
    /// the worker loop's code stays as it was.
    #[cold]
    #[inline(never)]
    pub(super) fn spin_for_work(&self, deadline: u64) -> bool {
        // Relaxed: a probe, as in `has_work`.
        let has_work = || !self.queue.is_empty() || self.core.finished.load(Ordering::Relaxed);
        let core = &self.core;
        // Relaxed: a heuristic; nothing is published through the flag (the
        // work itself is found through `has_work`'s reads).
        if core.spinning.swap(true, Ordering::Relaxed) {
            return false;
        }
        let end = P::now_ns().saturating_add(IDLE_SPIN_NS).min(deadline);
        let found = 'spin: loop {
            for _ in 0..IDLE_SPIN_CHECKS {
                if has_work() {
                    break 'spin true;
                }
                <P::Arch as Arch>::spin_hint();
            }
            if P::now_ns() >= end {
                break false;
            }
        };
        // Relaxed: as above.
        core.spinning.store(false, Ordering::Relaxed);
        found
    }
}

/// How long a worker whose own part of the queue is empty waits, in ns of
/// the platform clock, before it takes one or two actors queued on another
/// worker's part (the striped queue's "Patience"): their owner, still
/// working, mostly runs them within a microsecond, and a chain taken to
/// another core sends every later message across cores. Go waits ~3 µs
/// before it steals another processor's next goroutine, for the same
/// reason. Not on a seeded port (one thread runs at a time there, so the
/// owner cannot catch up during the wait).
const STEAL_PATIENCE_NS: u64 = 3_000;

/// Most clock reads in one such wait (eight spin hints apart): the bound
/// should the clock not advance.
const STEAL_PATIENCE_READS: u32 = 1_024;

/// The wait of `STEAL_PATIENCE_NS` (the striped queue's patience, called
/// by `Shared::pop_queue` through the queue). Bounded in clock reads too,
/// should a platform's clock stand still (a test platform's). None on a
/// seeded port: nobody pops during it there, so the thief takes as it
/// would without patience.
#[cold]
#[inline(never)]
pub(super) fn steal_patience<P: Platform>() {
    if P::SEEDED_SCHEDULE {
        return;
    }
    let end = P::now_ns().saturating_add(STEAL_PATIENCE_NS);
    for _ in 0..STEAL_PATIENCE_READS {
        for _ in 0..8 {
            <P::Arch as Arch>::spin_hint();
        }
        if P::now_ns() >= end {
            break;
        }
    }
}
