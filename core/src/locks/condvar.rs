//! [`Condvar`]: `std::sync::Condvar`'s API over this layer's [`Mutex`],
//! waiting by parking (an actor) or futex-waiting (a thread).
//!
//! # Words
//!
//! | word      | meaning                                                      |
//! |-----------|--------------------------------------------------------------|
//! | `waiting` | waiters listed (a mirror of the list's length, stored under its lock, SeqCst) |
//! | `waiters` | the wait list ([`super::waitlist`]); a marked ticket was taken by its timer (expired), not by a notify |
//!
//! # Protocol (numbered as in the code)
//!
//! Wait:
//! 1. `C1` under the list lock, append, then store the length into
//!    `waiting` (SeqCst). This comes *before* the mutex is released, so a
//!    notify that follows the release (ordered by the mutex) finds us;
//! 2. `C2` release the mutex (the caller's guard is given up without its
//!    drop: no poison check, no second unlock);
//! 3. `C3` sleep until the entry is taken (`W2`–`W3`) or the deadline
//!    passes: a thread's futex wait ends at it; for an actor a timer pokes
//!    the wait, taking the entry as a notify would and marking it expired;
//! 4. `C4` past the deadline with the entry still listed: remove it,
//!    timed out. Taken: notified, unless the timer marked it;
//! 5. `C5` re-lock the mutex and return a guard with the original guard's
//!    poison record (`Err` if the mutex is poisoned meanwhile).
//!
//! Notify:
//! 1. `N1` load `waiting` (SeqCst); 0: nobody to wake, return;
//! 2. `N2` `notify_one`: under the list lock pop the oldest entry and store
//!    the length, then wake it. `notify_all`: the same for every entry
//!    listed before the call (tickets below the one the call saw next),
//!    one per list-lock round; a waiter that waits again at once is not
//!    woken twice by one call.
//!
//! `C1` against `N1`: a waiter's store and a notifier's load are both
//! SeqCst, and with std's usage (the condition changed under the mutex,
//! the notify after it) the mutex orders them anyway: the notify sees the
//! waiter, or the waiter saw the changed condition before waiting.
//!
//! A waiter unwound out of `C3` (a kill, a shutdown cancellation)
//! withdraws (`W4`): if a `notify_one` took its entry, the notification
//! goes on to the next waiter. It does not re-lock: its guard was given up
//! at `C2`, so a killed waiter neither waits for the mutex nor poisons it.
//!
//! Spurious wakes: `wait` returns only once notified (or, for the timed
//! waits, at the deadline); std allows spurious returns, so callers loop
//! regardless (`wait_while` does).

use core::fmt;
use core::time::Duration;

use super::mutex::{Mutex, MutexGuard};
use super::poison::{LockResult, PoisonError};
use super::waitlist::{me, WaitList, Withdraw};
use crate::sched;
use crate::sched::timer::Poke;
use crate::seam::lock::Mutex as ListLock;
use crate::seam::platform::Platform;
use crate::sync::{AtomicUsize, Ordering, LOOM};

/// A condition variable: wait (releasing a [`Mutex`]) until notified,
/// with `std::sync::Condvar`'s API. An actor waiting parks (its worker
/// runs other actors); a plain thread blocks. Actors and threads may wait
/// on and notify the same condition variable.
pub struct Condvar<P: Platform> {
    pub(super) waiting: AtomicUsize,
    pub(super) waiters: ListLock<P::Lock, WaitList<()>>,
}

/// Whether a timed wait returned because its time ran out.
#[derive(Debug, PartialEq, Eq, Copy, Clone)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// `true` if the wait ended at its deadline (the condition may hold
    /// anyway: check it).
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

/// An actor's timed wait: the timer's poke takes the entry and marks it
/// expired (`C3`).
pub(super) struct Expire<P: Platform> {
    pub(super) cv: *const Condvar<P>,
    pub(super) ticket: u64,
}

// SAFETY: `cv` is only dereferenced in `poke`, which runs while the wait
// that armed the timer is in progress: `park_until` drops its armed timer
// (cancelled, or its poke returned) before it returns or unwinds, and the
// wait borrows the condvar throughout, so the condvar is alive. The rest of
// the condvar is `Sync`.
unsafe impl<P: Platform> Send for Expire<P> {}
// SAFETY: as above.
unsafe impl<P: Platform> Sync for Expire<P> {}

impl<P: Platform> Poke for Expire<P> {
    fn poke(&self) {
        // SAFETY: alive while the timer can fire (above).
        let cv = unsafe { &*self.cv };
        let e = {
            let mut list = cv.waiters.lock();
            let e = list.remove(self.ticket);
            if e.is_some() {
                list.mark(self.ticket);
                cv.waiting.store(list.len(), Ordering::SeqCst);
            }
            e
        };
        if let Some(e) = e {
            e.waiter.wake();
        }
    }
}

impl<P: Platform> Condvar<P> {
    /// A condition variable nobody waits on.
    pub fn new() -> Self {
        let c = Condvar {
            waiting: AtomicUsize::new(0),
            waiters: ListLock::new(WaitList::new()),
        };
        if LOOM {
            // loom treats initial values as non-SeqCst stores (see `chan`).
            c.waiting.store(0, Ordering::SeqCst);
        }
        c
    }

    /// Releases `guard`'s mutex and waits until notified, then locks it
    /// again (`Err` holds the guard if the mutex got poisoned).
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T, P>) -> LockResult<MutexGuard<'a, T, P>> {
        self.wait_until(guard, None).0
    }

    /// Waits while `condition` holds (checked under the lock first, then
    /// after every wake).
    pub fn wait_while<'a, T, F>(
        &self,
        mut guard: MutexGuard<'a, T, P>,
        mut condition: F,
    ) -> LockResult<MutexGuard<'a, T, P>>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            guard = self.wait(guard)?;
        }
        Ok(guard)
    }

    /// [`wait`](Self::wait) for at most `dur`.
    pub fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T, P>,
        dur: Duration,
    ) -> LockResult<(MutexGuard<'a, T, P>, WaitTimeoutResult)> {
        let (r, timed_out) = self.wait_until(guard, Some(sched::deadline_after::<P>(dur)));
        let t = WaitTimeoutResult(timed_out);
        match r {
            Ok(g) => Ok((g, t)),
            Err(e) => Err(PoisonError::new((e.into_inner(), t))),
        }
    }

    /// [`wait_while`](Self::wait_while) for at most `dur` in all:
    /// `timed_out()` says the condition still held at the deadline.
    pub fn wait_timeout_while<'a, T, F>(
        &self,
        mut guard: MutexGuard<'a, T, P>,
        dur: Duration,
        mut condition: F,
    ) -> LockResult<(MutexGuard<'a, T, P>, WaitTimeoutResult)>
    where
        F: FnMut(&mut T) -> bool,
    {
        let deadline = sched::deadline_after::<P>(dur);
        loop {
            if !condition(&mut *guard) {
                return Ok((guard, WaitTimeoutResult(false)));
            }
            if P::now_ns() >= deadline {
                return Ok((guard, WaitTimeoutResult(true)));
            }
            let (r, timed_out) = self.wait_until(guard, Some(deadline));
            guard = match r {
                Ok(g) => g,
                Err(e) => return Err(PoisonError::new((e.into_inner(), WaitTimeoutResult(timed_out)))),
            };
        }
    }

    /// Wakes one waiter (the one waiting longest), if any.
    pub fn notify_one(&self) {
        // N1. SeqCst: pairs with C1's store.
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        // N2.
        let e = {
            let mut list = self.waiters.lock();
            let e = list.pop();
            self.waiting.store(list.len(), Ordering::SeqCst);
            e
        };
        if let Some(e) = e {
            e.waiter.wake();
        }
    }

    /// Wakes every waiter waiting when the call began.
    pub fn notify_all(&self) {
        // N1. SeqCst: pairs with C1's store.
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        // N2, one entry per list-lock round.
        let mut limit = None;
        loop {
            let e = {
                let mut list = self.waiters.lock();
                let limit = *limit.get_or_insert(list.next_ticket());
                let e = match list.front() {
                    Some(f) if f.ticket < limit => list.pop(),
                    _ => None,
                };
                self.waiting.store(list.len(), Ordering::SeqCst);
                e
            };
            match e {
                Some(e) => e.waiter.wake(),
                None => return,
            }
        }
    }

    /// `C1`–`C5`; also says whether the wait timed out.
    fn wait_until<'a, T>(
        &self,
        guard: MutexGuard<'a, T, P>,
        deadline: Option<u64>,
    ) -> (LockResult<MutexGuard<'a, T, P>>, bool) {
        let mutex: &'a Mutex<T, P> = guard.lock;
        let record = guard.poison;
        let (w, me) = me::<P>();
        // C1.
        let ticket = {
            let mut list = self.waiters.lock();
            let t = list.push(w, (), false);
            // SeqCst: pairs with N1's load.
            self.waiting.store(list.len(), Ordering::SeqCst);
            t
        };
        // C2.
        core::mem::forget(guard);
        // SAFETY: the guard we forgot held the lock; we release it for it.
        unsafe { mutex.raw_unlock() };
        let withdraw = Withdraw::new(move || self.withdraw(ticket));
        // C3–C4.
        let timed_out = loop {
            match deadline {
                None => me.sleep::<P>(),
                Some(d) if P::now_ns() < d => me.sleep_until::<P>(d, Expire { cv: self, ticket }),
                Some(_) => break self.outcome(ticket, true).unwrap_or(true),
            }
            if let Some(expired) = self.outcome(ticket, false) {
                break expired;
            }
        };
        withdraw.disarm();
        // C5.
        mutex.raw_lock();
        (MutexGuard::relocked(mutex, record), timed_out)
    }

    /// `W3`/`C4`: `None` while `ticket` is listed (unless `give_up`: then
    /// it leaves the list, timed out); else whether its timer took it.
    fn outcome(&self, ticket: u64, give_up: bool) -> Option<bool> {
        let mut list = self.waiters.lock();
        if !list.contains(ticket) {
            return Some(list.unmark(ticket));
        }
        if !give_up {
            return None;
        }
        list.remove(ticket);
        self.waiting.store(list.len(), Ordering::SeqCst);
        Some(true)
    }

    /// `W4`: leaves the list; a `notify_one` spent on us goes on.
    pub(super) fn withdraw(&self, ticket: u64) {
        let notified = {
            let mut list = self.waiters.lock();
            if list.remove(ticket).is_some() {
                self.waiting.store(list.len(), Ordering::SeqCst);
                false
            } else {
                !list.unmark(ticket)
            }
        };
        if notified {
            self.notify_one();
        }
    }
}

impl<P: Platform> Default for Condvar<P> {
    fn default() -> Self {
        Condvar::new()
    }
}

impl<P: Platform> fmt::Debug for Condvar<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}
