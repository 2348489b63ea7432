//! An idle worker's looks and waits: what counts as work before it sleeps
//! (`Shared::has_work`), its spin (`Shared::spin_for_work`), and a thief's
//! grace before it takes another worker's run-next actor (`steal_grace`),
//! kept out of the worker loop's file (the waits out of line too).

#[allow(unused_imports)]
use super::*;

/// How long a thief waits before taking another worker's run-next slot, in
/// ns of the platform clock, so an actor just woken by a running actor
/// stays on its waker's worker (and cache) when that worker is about to run
/// it anyway (Go waits ~3 µs). A time, not a spin count: one `pause` takes
/// from a few ns to ~40 ns depending on the CPU (38 ns on an AMD EPYC VM,
/// where the earlier grace of 2,000 spins waited 77 µs).
const STEAL_GRACE_NS: u64 = 5_000;

/// Spins between two reads of the clock in the steal grace.
const STEAL_GRACE_SPINS: u32 = 16;

/// Waits [`STEAL_GRACE_NS`] of the platform clock, spinning, without
/// touching the victim's slot line meanwhile (its owner writes it at every
/// wake). Not on a seeded schedule: one thread runs at a time there, so
/// waiting lets no owner act (and each read of the simulated clock is a
/// step of it).
#[cold]
pub(super) fn steal_grace<P: Platform>() {
    if P::SEEDED_SCHEDULE {
        return;
    }
    let start = P::now_ns();
    while P::now_ns().saturating_sub(start) < STEAL_GRACE_NS {
        for _ in 0..STEAL_GRACE_SPINS {
            <P::Arch as Arch>::spin_hint();
        }
    }
}

impl<P: Platform, Q: RunQueue<P>> Shared<P, Q> {
    /// Work for an idle worker: the queue, a run-next slot whose owner has
    /// no work in hand (its own, or one `find_work` may steal), or the
    /// runtime's end. A working owner's slot does not count: that owner
    /// runs it, so a thief sleeps rather than wait on it.
    pub(crate) fn has_work(&self) -> bool {
        !self.queue.is_empty()
            // Relaxed (all): a probe; the idle protocol's fences order it.
            || self
                .core
                .workers
                .iter()
                .any(|w| !w.run_next.peek().is_null() && !w.working.load(Ordering::Relaxed))
            || self.core.finished.load(Ordering::Relaxed)
    }

    /// Before an idle worker sleeps: watches the run queue for up to
    /// [`IDLE_SPIN_NS`] (or until the timer `deadline`, if earlier), so a
    /// wake from another thread that comes soon finds it awake: no futex
    /// wake for the waker, no wake-up latency for the sleeper. One worker
    /// of the runtime spins at a time (the others sleep at once), so a
    /// mostly idle runtime burns at most one core for that long per idle
    /// period. Returns whether work turned up (the caller then does not
    /// sleep). Only the queue: another worker's run-next slot is its own
    /// next turn (a work-first parent, a woken partner), which a spinner
    /// that stole it at every turn would drag between the workers — as a
    /// sleeper is not woken for it, a spinner leaves it too. Out of line:
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
