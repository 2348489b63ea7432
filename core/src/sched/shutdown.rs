//! Shutdown's side of the worker: waking the actors left parked and finishing
//! the workers.

#[allow(unused_imports)]
use super::*;

impl<P: Platform, Q: RunQueue<P>> Shared<P, Q> {
    /// Shutdown: makes every parked actor runnable (it is then cancelled
    /// at its resume point). Returns how many were woken.
    pub(crate) fn wake_parked(&self) -> usize {
        let mut parked = Vec::new();
        for s in self.core.registry.iter() {
            s.parked(&mut parked);
        }
        let mut woken = 0;
        for a in parked {
            if let Some(a) = a.wake() {
                woken += 1;
                schedule(a);
            }
        }
        woken
    }

    /// Marks the runtime finished and releases every waiting thread.
    pub(crate) fn finish(&self) {
        let core = &self.core;
        core.finished.store(true, Ordering::SeqCst);
        core.idle.notify_all();
        let spares = core::mem::take(&mut *core.spares.lock());
        for s in spares {
            // Release: pairs with the spare's Acquire load.
            s.word.store(SPARE_EXIT, Ordering::Release);
            P::wake_one(&s.word);
        }
    }
}
