//! [`Semaphore`]: counted permits, tokio's API in blocking form: an actor
//! that waits for permits parks, a thread blocks.
//!
//! # The state word
//!
//! | bits             | meaning                                               |
//! |------------------|-------------------------------------------------------|
//! | `CLOSED` (1)     | closed: acquisitions fail from now on                 |
//! | `QUEUED` (2)     | the wait list is not empty (written under its lock)   |
//! | `PERMIT` (4) × n | n permits are free                                    |
//!
//! # Protocol (numbered as in the code)
//!
//! Acquire `n`:
//! 1. `A1` fast path: subtract `n` permits (CAS loop, Acquire) if at least
//!    `n` are free, `QUEUED` is clear and `CLOSED` is clear;
//! 2. `A2` (`W1`) under the list lock, in one CAS loop: fail if `CLOSED`;
//!    take as `A1` if `QUEUED` is clear; else set `QUEUED`, and append
//!    `(ticket, waiter, n)`;
//! 3. `A3` sleep until taken off the list (`W2`–`W3`); then, under the
//!    list lock, a marked ticket means the permits were granted (`G1`),
//!    an unmarked one that the semaphore was closed.
//!
//! Release `n` (a permit's drop, `add_permits`):
//! 1. `G0` add `n` permits (CAS loop, Release); if `QUEUED` was set, `G1`;
//! 2. `G1` grant, oldest first, one entry per list-lock round: while the
//!    front entry's `n` permits are free, subtract them (Acquire), pop the
//!    entry, mark its ticket granted, and (unlocked) wake it. `QUEUED` is
//!    cleared when the list empties.
//!
//! Close: set `CLOSED`, then pop and wake every entry (unmarked: they
//! fail). A waiter checks `CLOSED` under the list lock before it appends,
//! so it either sees it or is popped by the close.
//!
//! A withdrawing waiter (`W4`) still listed leaves the list and, since the
//! front may have changed, runs `G1`; one already granted gives its
//! permits back (`G0`, which grants them on).
//!
//! # Fairness: FIFO hand-off
//!
//! Permits go to waiters in arrival order and nobody takes permits while
//! anyone waits (`A1` checks `QUEUED`), so a large `acquire_many` is not
//! starved by a stream of small ones (as tokio's). The cost is a hand-off:
//! a released permit waits for its grantee to run.

use core::fmt;

use super::waitlist::{me, WaitList, Withdraw};
use crate::seam::lock::Mutex as ListLock;
use crate::seam::platform::Platform;
use crate::sync::{AtomicUsize, Ordering, LOOM};

/// `state` bit: closed.
const CLOSED: usize = 1;
/// `state` bit: someone is on the wait list.
const QUEUED: usize = 2;
/// `state` unit: one free permit.
const PERMIT: usize = 4;

/// A counting semaphore whose waiters park (actors) or block (threads):
/// `acquire` takes a permit, waiting while none is free, and the
/// [`SemaphorePermit`] gives it back on drop. Permits are granted in
/// arrival order (the module doc's "Fairness").
pub struct Semaphore<P: Platform> {
    state: AtomicUsize,
    pub(super) waiters: ListLock<P::Lock, WaitList<usize>>,
}

/// Permits held from a [`Semaphore`]; released when dropped.
#[must_use = "the permits are released as soon as this is dropped"]
pub struct SemaphorePermit<'a, P: Platform> {
    sem: &'a Semaphore<P>,
    permits: u32,
}

/// The semaphore was closed (`acquire` on a closed semaphore).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireError(());

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("semaphore closed")
    }
}

impl core::error::Error for AcquireError {}

/// Why a `try_acquire` got no permit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryAcquireError {
    /// The semaphore was closed.
    Closed,
    /// Not enough permits are free now (or others wait for them first).
    NoPermits,
}

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TryAcquireError::Closed => "semaphore closed",
            TryAcquireError::NoPermits => "no permits available",
        })
    }
}

impl core::error::Error for TryAcquireError {}

impl<P: Platform> Semaphore<P> {
    /// The most permits a semaphore holds (`usize::MAX >> 3`, as tokio's).
    pub const MAX_PERMITS: usize = usize::MAX >> 3;

    /// A semaphore with `permits` free permits.
    ///
    /// # Panics
    ///
    /// If `permits` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS).
    pub fn new(permits: usize) -> Self {
        assert!(
            permits <= Self::MAX_PERMITS,
            "a semaphore holds at most {} permits",
            Self::MAX_PERMITS
        );
        let s = Semaphore {
            state: AtomicUsize::new(permits * PERMIT),
            waiters: ListLock::new(WaitList::new()),
        };
        if LOOM {
            // loom treats initial values as non-SeqCst stores (see `chan`).
            s.state.store(permits * PERMIT, Ordering::SeqCst);
        }
        s
    }

    /// Permits free now (a snapshot).
    pub fn available_permits(&self) -> usize {
        self.state.load(Ordering::Relaxed) / PERMIT
    }

    /// Adds `n` permits, granting them to waiters first.
    ///
    /// # Panics
    ///
    /// If the total would exceed [`MAX_PERMITS`](Self::MAX_PERMITS).
    pub fn add_permits(&self, n: usize) {
        self.release(n);
    }

    /// One permit, waiting for it if none is free; `Err` once closed.
    pub fn acquire(&self) -> Result<SemaphorePermit<'_, P>, AcquireError> {
        self.acquire_many(1)
    }

    /// `n` permits at once, waiting for them; `Err` once closed.
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS) (it could never be
    /// granted).
    pub fn acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_, P>, AcquireError> {
        let want = n as usize;
        assert!(
            want <= Self::MAX_PERMITS,
            "acquire_many({n}): more than a semaphore can hold"
        );
        match self.take(want) {
            Ok(()) => {}
            Err(TryAcquireError::Closed) => return Err(AcquireError(())),
            Err(TryAcquireError::NoPermits) => self.acquire_contended(want)?,
        }
        Ok(SemaphorePermit {
            sem: self,
            permits: n,
        })
    }

    /// One permit if one is free now and nobody waits.
    pub fn try_acquire(&self) -> Result<SemaphorePermit<'_, P>, TryAcquireError> {
        self.try_acquire_many(1)
    }

    /// `n` permits if they are free now and nobody waits.
    pub fn try_acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_, P>, TryAcquireError> {
        self.take(n as usize)?;
        Ok(SemaphorePermit {
            sem: self,
            permits: n,
        })
    }

    /// Closes the semaphore: waiting and later acquisitions fail; held
    /// permits stay valid (their release still adds to the count).
    pub fn close(&self) {
        // Release: nothing to publish beyond the flag; the list lock orders
        // the pops below after every append that missed the flag.
        self.state.fetch_or(CLOSED, Ordering::Release);
        loop {
            let e = {
                let mut list = self.waiters.lock();
                let e = list.pop();
                self.clear_if_empty(&list);
                e
            };
            match e {
                Some(e) => e.waiter.wake(),
                None => return,
            }
        }
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.state.load(Ordering::Relaxed) & CLOSED != 0
    }

    /// `A1`.
    #[inline]
    fn take(&self, n: usize) -> Result<(), TryAcquireError> {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & CLOSED != 0 {
                return Err(TryAcquireError::Closed);
            }
            if s & QUEUED != 0 || s / PERMIT < n {
                return Err(TryAcquireError::NoPermits);
            }
            // Acquire: pairs with the Release of `G0` (what the previous
            // holders did happens before this one's use).
            match self
                .state
                .compare_exchange_weak(s, s - n * PERMIT, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => s = now,
            }
        }
    }

    /// `A2`–`A3`.
    #[cold]
    fn acquire_contended(&self, n: usize) -> Result<(), AcquireError> {
        let (w, me) = me::<P>();
        // A2.
        let ticket = {
            let mut list = self.waiters.lock();
            if self.take_or_mark(n)? {
                return Ok(());
            }
            list.push(w, n, false)
        };
        let withdraw = Withdraw::new(move || self.withdraw(ticket, n));
        // A3.
        let granted = loop {
            me.sleep::<P>();
            let mut list = self.waiters.lock();
            if !list.contains(ticket) {
                break list.unmark(ticket);
            }
        };
        withdraw.disarm();
        if granted {
            Ok(())
        } else {
            Err(AcquireError(()))
        }
    }

    /// `A2`'s CAS loop (caller holds the list lock): `Ok(true)` if it took
    /// the permits, `Ok(false)` once `QUEUED` is set (then the caller lists
    /// itself), `Err` if closed.
    fn take_or_mark(&self, n: usize) -> Result<bool, AcquireError> {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & CLOSED != 0 {
                return Err(AcquireError(()));
            }
            let (to, took) = if s & QUEUED == 0 && s / PERMIT >= n {
                (s - n * PERMIT, true)
            } else if s & QUEUED == 0 {
                (s | QUEUED, false)
            } else {
                return Ok(false);
            };
            // Acquire: taking permits pairs with `G0`'s Release; setting
            // QUEUED needs none (the releaser reads it in this word's
            // modification order, then takes the list lock).
            match self
                .state
                .compare_exchange(s, to, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Ok(took),
                Err(now) => s = now,
            }
        }
    }

    /// `G0`: gives `n` permits back, then grants (`G1`) if anyone waits.
    fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let free = s / PERMIT;
            assert!(
                n <= Self::MAX_PERMITS - free,
                "adding {n} permits to {free} would pass Semaphore::MAX_PERMITS"
            );
            // Release: what the holder did happens before the next taker's
            // Acquire (`A1`, `A2`, `G1`).
            match self
                .state
                .compare_exchange_weak(s, s + n * PERMIT, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        if s & QUEUED != 0 {
            self.grant();
        }
    }

    /// `G1`.
    fn grant(&self) {
        loop {
            let e = {
                let mut list = self.waiters.lock();
                let Some(need) = list.front().map(|e| e.want) else {
                    self.clear_if_empty(&list);
                    return;
                };
                if !self.take_for(need) {
                    return;
                }
                let e = list.pop();
                if let Some(e) = &e {
                    list.mark(e.ticket);
                }
                self.clear_if_empty(&list);
                e
            };
            if let Some(e) = e {
                e.waiter.wake();
            }
        }
    }

    /// `G1`'s subtraction for a listed waiter (caller holds the list lock;
    /// `QUEUED` is set, so `A1` takes nothing meanwhile).
    fn take_for(&self, n: usize) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        while s / PERMIT >= n {
            // Acquire: pairs with `G0`'s Release; the grantee is ordered
            // after us by its wake.
            match self
                .state
                .compare_exchange_weak(s, s - n * PERMIT, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Clears `QUEUED` if the list is empty (caller holds the list lock).
    fn clear_if_empty(&self, list: &WaitList<usize>) {
        if list.is_empty() {
            // Relaxed: QUEUED is only written under the list lock.
            self.state.fetch_and(!QUEUED, Ordering::Relaxed);
        }
    }

    /// `W4`: leaves the list (then grants: the front may have changed), or
    /// gives back permits granted to us.
    pub(super) fn withdraw(&self, ticket: u64, n: usize) {
        let granted = {
            let mut list = self.waiters.lock();
            let listed = list.remove(ticket).is_some();
            self.clear_if_empty(&list);
            !listed && list.unmark(ticket)
        };
        if granted {
            self.release(n);
        } else {
            self.grant();
        }
    }
}

impl<P: Platform> SemaphorePermit<'_, P> {
    /// How many permits this holds.
    pub fn num_permits(&self) -> usize {
        self.permits as usize
    }

    /// Drops the permits without releasing them (the semaphore shrinks).
    pub fn forget(mut self) {
        self.permits = 0;
    }
}

impl<P: Platform> Drop for SemaphorePermit<'_, P> {
    fn drop(&mut self) {
        self.sem.release(self.permits as usize);
    }
}

impl<P: Platform> fmt::Debug for SemaphorePermit<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

impl<P: Platform> fmt::Debug for Semaphore<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("permits", &self.available_permits())
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}
