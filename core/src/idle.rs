//! The idle protocol: how a worker with nothing to run goes to sleep, and
//! how the one who publishes work wakes it, with no lost wake-up and no
//! syscall when nobody sleeps.
//!
//! State: `sleepers` (workers between announcing and leaving a sleep),
//! `epoch` (the futex word: bumped by every wake), `notified` (a wake was
//! issued and its sleeper has not yet taken it).
//!
//! Sleeper (a worker that found no work), [`Idle::sleep`]:
//! 1. read `epoch` → `e`;
//! 2. `sleepers += 1` (SeqCst), then a SeqCst fence;
//! 3. re-check every source of work; if any has work: `sleepers -= 1`, clear
//!    `notified`, return;
//! 4. futex-wait while `epoch == e`;
//! 5. `sleepers -= 1`, clear `notified`; return (the caller searches again).
//!
//! Notifier (after publishing work with at least Release), [`Idle::notify_one`]:
//! 1. SeqCst fence;
//! 2. if `sleepers == 0`: return — no syscall when nobody sleeps;
//! 3. if `notified` was already set: return — a wake is in flight;
//! 4. `epoch += 1`, futex-wake one.
//!
//! Why no wake is lost: steps S2–S3 and N-publish–N2 are a Dekker pair
//! (each side stores, fences SeqCst, then loads the other's location), so
//! either the sleeper's re-check sees the work or the notifier sees
//! `sleepers > 0`. In the second case the epoch bump happens after the
//! sleeper read `e` (S1 precedes S2), so its futex-wait either sees the new
//! epoch and returns at once or is sleeping and gets the wake. A wake
//! suppressed at N3 is covered by the one in flight: the woken worker calls
//! [`Idle::notify_one`] again when it finds more work than it takes (the
//! scheduler's "chain" wake), so work never waits on a sleeping worker while
//! another sleeper could take it... only until the running workers come back
//! to the queue.

use core::marker::PhantomData;

use crate::platform::Futex;
use crate::sync::{fence, AtomicBool, AtomicU32, Ordering};

/// Idle-worker bookkeeping for one runtime.
pub struct Idle<F: Futex> {
    sleepers: AtomicU32,
    epoch: AtomicU32,
    notified: AtomicBool,
    _futex: PhantomData<fn() -> F>,
}

impl<F: Futex> Default for Idle<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Futex> Idle<F> {
    /// Nobody asleep.
    pub fn new() -> Self {
        Idle {
            sleepers: AtomicU32::new(0),
            epoch: AtomicU32::new(0),
            notified: AtomicBool::new(false),
            _futex: PhantomData,
        }
    }

    /// Workers currently announced as sleeping.
    pub fn sleepers(&self) -> u32 {
        self.sleepers.load(Ordering::SeqCst)
    }

    /// Sleeps until woken (or `deadline_ns`), unless `has_work` finds work
    /// after the sleep is announced. Returns `false` if it did not sleep.
    pub fn sleep(&self, has_work: impl Fn() -> bool, deadline_ns: Option<u64>) -> bool {
        // S1. Acquire: pairs with the Release bump in `notify_one`, so work
        // published before a bump we observe is visible after we wake.
        let e = self.epoch.load(Ordering::Acquire);
        // S2.
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // S3.
        if has_work() {
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            // A notifier may have counted on us: we are awake, so its wake
            // is served; clear the throttle or later wakes would be muted.
            self.notified.store(false, Ordering::Relaxed);
            return false;
        }
        // S4.
        F::wait(&self.epoch, e, deadline_ns);
        // S5.
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        // Relaxed: a hint that throttles wakes; correctness rests on epoch.
        self.notified.store(false, Ordering::Relaxed);
        true
    }

    /// Wakes one sleeping worker if any sleeps and no wake is in flight.
    /// Returns whether a wake was issued (a syscall was made).
    #[inline]
    pub fn notify_one(&self) -> bool {
        // N1: orders the caller's publish before the load of `sleepers`.
        fence(Ordering::SeqCst);
        // N2.
        if self.sleepers.load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.notify_slow()
    }

    #[cold]
    fn notify_slow(&self) -> bool {
        // N3. Relaxed: the flag only throttles; the epoch bump below is
        // what a sleeper's futex-wait observes.
        if self.notified.swap(true, Ordering::Relaxed) {
            return false;
        }
        // N4. Release: pairs with the Acquire epoch load in `sleep` (S1).
        self.epoch.fetch_add(1, Ordering::Release);
        F::wake_one(&self.epoch);
        true
    }

    /// Wakes every sleeper (shutdown).
    pub fn notify_all(&self) {
        fence(Ordering::SeqCst);
        // Release: pairs with the Acquire epoch load in `sleep` (S1).
        self.epoch.fetch_add(1, Ordering::Release);
        F::wake_all(&self.epoch);
    }
}
