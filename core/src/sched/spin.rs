//! An idle worker's spin before it sleeps (`Shared::spin_for_work`),
//! kept out of the worker loop's file and out of line.

#[allow(unused_imports)]
use super::*;

impl<P: Platform, Q: RunQueue<P>> Shared<P, Q> {
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
