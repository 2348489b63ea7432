//! [`Mutex`]: `std::sync::Mutex`'s API and poisoning, waiting by parking
//! (an actor) or futex-waiting (a thread) on the layer's wait list
//! ([`super::waitlist`]).
//!
//! # The state word
//!
//! | bit          | meaning                                                  |
//! |--------------|----------------------------------------------------------|
//! | `LOCKED` (1) | held                                                     |
//! | `QUEUED` (2) | the wait list is not empty (written under its lock only) |
//!
//! # Protocol (numbered as in the code)
//!
//! Lock:
//! 1. `L1` fast path: CAS `0 → LOCKED` (Acquire);
//! 2. `L2` otherwise: CAS in `LOCKED` whenever it is clear, `QUEUED` or
//!    not (barging); a thread spins a little first, an actor does not (on
//!    one worker the holder cannot run while it spins);
//! 3. `L3` (`W1`) under the list lock, in one CAS loop on the word: take
//!    the lock if `LOCKED` is clear, else set `QUEUED` if clear; then
//!    append. A waiter that was woken before and lost the lock to a barger
//!    goes to the front instead, marked *starving*;
//! 4. `L4` (`W2`–`W3`) sleep until the entry is taken off the list; a
//!    marked ticket means `U2` handed the lock over: done. Else start over
//!    at `L2`.
//!
//! Unlock:
//! 1. `U1` fast path: CAS `LOCKED → 0` (Release): nobody listed;
//! 2. `U2` otherwise (`QUEUED`), under the list lock: if the front waiter
//!    is starving, pop it and mark its ticket, leaving `LOCKED` set (the
//!    lock is now its: the list lock orders our section before its);
//!    otherwise clear `LOCKED` (Release) and pop the front. `QUEUED` is
//!    cleared if the list is now empty. Then, unlocked, wake it. One
//!    unlock, one wake.
//!
//! A withdrawing waiter (`W4`: a kill or shutdown cancellation unwinds an
//! actor out of `L4`) removes its entry; if an unlock took it already, the
//! wake goes to the next waiter (a pop and wake), or, if the lock was
//! handed to it, it unlocks (`U1`–`U2`): a waiter behind a killed one is
//! never left asleep beside a free lock.
//!
//! No lost wake: `L3`'s CAS sets `QUEUED` only while `LOCKED` is set, in
//! the word the holder's `U1` CAS must then fail on, and `QUEUED` stays set
//! while the waiter is listed; `U2` takes the list lock after reading
//! `QUEUED`, so its pop comes after the append.
//!
//! # Fairness: barging, bounded
//!
//! A released lock is free for whoever CASes first: the woken waiter, a
//! running actor, a thread. So an actor that unlocks and locks again keeps
//! the lock without a switch: no lock convoy (a strict hand-off costs a
//! switch per acquisition under contention, and the lock idles until the
//! next waiter runs). Waiters are woken oldest first, one per contended
//! unlock. A woken waiter may lose to a barger once: it then goes back to
//! the front, starving, and the next unlock hands the lock to it directly.
//! Without that bound, an actor holding the lock across a yield on one
//! worker would re-lock before its woken waiter ever ran, for ever (as
//! Go's and parking_lot's mutexes, which switch to hand-off after a wait of
//! 1 ms and 0.5 ms; here the trigger is one lost race, not a clock).
//! Measured in `examples/lock_fairness.rs` (README, "Locks").

use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

use super::poison::{self, LockResult, TryLockError, TryLockResult};
use super::waitlist::{me, WaitList, Withdraw};
use crate::sched;
use crate::seam::lock::Mutex as ListLock;
use crate::seam::platform::Platform;
use crate::sync::{spin_hint, AtomicU32, Ordering, UnsafeCell, LOOM};

/// `state` bit: held.
const LOCKED: u32 = 1;
/// `state` bit: someone is on the wait list.
const QUEUED: u32 = 2;

/// Spins of a thread in `L2` before it lists itself.
const SPINS: u32 = if LOOM { 0 } else { 100 };

/// A mutual-exclusion lock whose waiters park (an actor: its worker runs
/// other actors meanwhile) or block (a plain thread), with
/// `std::sync::Mutex`'s API and poisoning. Hold its guard across a safe
/// point (a send, a receive, a yield) freely: another actor locking it
/// parks instead of blocking the worker the holder needs.
pub struct Mutex<T, P: Platform> {
    state: AtomicU32,
    poison: poison::Flag,
    pub(super) waiters: ListLock<P::Lock, WaitList<bool>>,
    data: UnsafeCell<T>,
}

// SAFETY: the value moves with the mutex; everything else is atomics and
// the list lock, which the platform's raw lock makes shareable.
unsafe impl<T: Send, P: Platform> Send for Mutex<T, P> {}
// SAFETY: `&Mutex` hands out `&mut T` only to the holder of the lock, one
// at a time (the protocol above), so `T: Send` suffices, as for std's.
unsafe impl<T: Send, P: Platform> Sync for Mutex<T, P> {}

/// Proof of holding a [`Mutex`]: derefs to the value, unlocks on drop (and
/// poisons the mutex if dropped by an unwind that began after locking).
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T, P: Platform> {
    pub(super) lock: &'a Mutex<T, P>,
    pub(super) poison: poison::Guard,
    /// Not `Send`, as std's guard.
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`.
unsafe impl<T: Sync, P: Platform> Sync for MutexGuard<'_, T, P> {}

impl<T, P: Platform> Mutex<T, P> {
    /// A new, unlocked mutex holding `value`.
    pub fn new(value: T) -> Self {
        let m = Mutex {
            state: AtomicU32::new(0),
            poison: poison::Flag::new(),
            waiters: ListLock::new(WaitList::new()),
            data: UnsafeCell::new(value),
        };
        if LOOM {
            // loom treats initial values as non-SeqCst stores (see `chan`).
            m.state.store(0, Ordering::SeqCst);
        }
        m
    }

    /// Locks, waiting while another holds it (an actor parks, a thread
    /// blocks). `Err` holds the guard if the mutex is poisoned. Locking a
    /// mutex the caller already holds never returns.
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T, P>> {
        self.raw_lock();
        // SAFETY: just locked.
        unsafe { MutexGuard::new(self) }
    }

    /// Locks if the mutex is free now, without waiting.
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T, P>> {
        if self.raw_try_lock() {
            // SAFETY: just locked.
            Ok(unsafe { MutexGuard::new(self) }?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Whether a holder unwound while holding the lock (a snapshot).
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poison flag (after the value was checked or repaired).
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// Unwraps the value (`Err` still holds it if poisoned).
    pub fn into_inner(self) -> LockResult<T> {
        let Mutex { poison, data, .. } = self;
        poison::map_result(poison.borrow(), |()| data.into_inner())
    }

    /// The value, through `&mut` (no locking needed).
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        // SAFETY: `&mut self`: no guard exists.
        let v = self.data.with_mut(|p| unsafe { &mut *p });
        poison::map_result(self.poison.borrow(), |()| v)
    }

    /// `L1`–`L4`: returns holding the lock.
    #[inline]
    pub(super) fn raw_lock(&self) {
        // L1. Acquire: pairs with the Release of `U1`/`U2`.
        if self
            .state
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    /// `L2`'s CAS: takes the lock if it is free, waiters or not.
    #[inline]
    fn raw_try_lock(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & LOCKED == 0 {
            // Acquire: pairs with the Release of `U1`/`U2`.
            match self
                .state
                .compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    #[cold]
    fn lock_contended(&self) {
        // Woken once and lost the lock to a barger: starving.
        let mut starving = false;
        loop {
            // L2.
            if self.raw_try_lock() || self.spin() {
                return;
            }
            let (w, me) = me::<P>();
            // L3.
            let ticket = {
                let mut list = self.waiters.lock();
                if self.take_or_mark() {
                    return;
                }
                list.push(w, starving, starving)
            };
            let withdraw = Withdraw::new(move || self.withdraw(ticket));
            // L4.
            let handed = loop {
                me.sleep::<P>();
                let mut list = self.waiters.lock();
                if !list.contains(ticket) {
                    break list.unmark(ticket);
                }
            };
            withdraw.disarm();
            if handed {
                return;
            }
            starving = true;
        }
    }

    /// `L2` for a thread: spins a little, in case the holder is about to
    /// release. Actors do not spin (the holder may need this worker).
    // Under loom `SPINS` is 0 (returned on at once), so the loop's range
    // is empty there by design.
    #[cfg_attr(smarm_loom, allow(clippy::reversed_empty_ranges))]
    fn spin(&self) -> bool {
        if SPINS == 0 || sched::current_actor::<P>().is_some() {
            return false;
        }
        for _ in 0..SPINS {
            spin_hint();
            if self.state.load(Ordering::Relaxed) & LOCKED == 0 && self.raw_try_lock() {
                return true;
            }
        }
        false
    }

    /// `L3`'s CAS loop (caller holds the list lock): `true` if it took the
    /// lock, `false` if `QUEUED` is set and the caller must list itself.
    fn take_or_mark(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let (to, took) = if s & LOCKED == 0 {
                (s | LOCKED, true)
            } else if s & QUEUED == 0 {
                (s | QUEUED, false)
            } else {
                return false;
            };
            // Acquire: when it takes the lock, pairs with the unlock's
            // Release. Setting QUEUED needs no ordering of its own: the
            // unlocker reads it in this word's modification order and then
            // takes the list lock, which orders the rest.
            match self
                .state
                .compare_exchange(s, to, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return took,
                Err(now) => s = now,
            }
        }
    }

    /// `U1`–`U2`.
    ///
    /// # Safety
    ///
    /// The caller holds the lock (a guard it gives up, or `Condvar::wait`).
    #[inline]
    pub(super) unsafe fn raw_unlock(&self) {
        // U1. Release: publishes the section to the next `L1`/`L2`/`L3`.
        if self
            .state
            .compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.unlock_contended();
        }
    }

    /// `U2`: hands the lock to a starving front waiter, or frees it and
    /// wakes the front.
    #[cold]
    fn unlock_contended(&self) {
        let e = {
            let mut list = self.waiters.lock();
            let handed = list.front().is_some_and(|f| f.want);
            if !handed {
                // Release: as in U1. QUEUED stays (under the list lock).
                self.state.fetch_and(!LOCKED, Ordering::Release);
            }
            let e = list.pop();
            if let (true, Some(e)) = (handed, &e) {
                // LOCKED stays set for it. The list lock orders our section
                // before its (it reads the mark under the list lock).
                list.mark(e.ticket);
            }
            self.clear_if_empty(&list);
            e
        };
        if let Some(e) = e {
            e.waiter.wake();
        }
    }

    /// A withdrawal's pass-on: wakes the front waiter (the lock is not
    /// ours to hand over).
    fn wake_one(&self) {
        let e = {
            let mut list = self.waiters.lock();
            let e = list.pop();
            self.clear_if_empty(&list);
            e
        };
        if let Some(e) = e {
            e.waiter.wake();
        }
    }

    /// Clears `QUEUED` if the list is empty (caller holds the list lock).
    fn clear_if_empty(&self, list: &WaitList<bool>) {
        if list.is_empty() {
            // Relaxed: QUEUED is only written under the list lock.
            self.state.fetch_and(!QUEUED, Ordering::Relaxed);
        }
    }

    /// `W4`: leaves the list; passes a wake spent on us on, or unlocks a
    /// lock handed to us.
    pub(super) fn withdraw(&self, ticket: u64) {
        let (woken, handed) = {
            let mut list = self.waiters.lock();
            let listed = list.remove(ticket).is_some();
            self.clear_if_empty(&list);
            (!listed, !listed && list.unmark(ticket))
        };
        if handed {
            // SAFETY: `U2` handed the lock to this registration: it is ours.
            unsafe { self.raw_unlock() }
        } else if woken {
            self.wake_one();
        }
    }
}

impl<'a, T, P: Platform> MutexGuard<'a, T, P> {
    /// # Safety
    ///
    /// The caller holds `lock`'s lock and hands it to the guard.
    unsafe fn new(lock: &'a Mutex<T, P>) -> LockResult<MutexGuard<'a, T, P>> {
        poison::map_result(lock.poison.guard::<P>(), |poison| MutexGuard {
            lock,
            poison,
            _not_send: PhantomData,
        })
    }

    /// A guard for a lock re-taken by `Condvar::wait` with the record of
    /// the guard it gave up.
    pub(super) fn relocked(lock: &'a Mutex<T, P>, poison: poison::Guard) -> LockResult<Self> {
        let g = MutexGuard {
            lock,
            poison,
            _not_send: PhantomData,
        };
        if lock.poison.get() {
            Err(poison::PoisonError::new(g))
        } else {
            Ok(g)
        }
    }
}

impl<T, P: Platform> Deref for MutexGuard<'_, T, P> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock: no `&mut` to the value exists.
        self.lock.data.with(|p| unsafe { &*p })
    }
}

impl<T, P: Platform> DerefMut for MutexGuard<'_, T, P> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively.
        self.lock.data.with_mut(|p| unsafe { &mut *p })
    }
}

impl<T, P: Platform> Drop for MutexGuard<'_, T, P> {
    fn drop(&mut self) {
        self.lock.poison.done::<P>(&self.poison);
        // SAFETY: the guard holds the lock.
        unsafe { self.lock.raw_unlock() }
    }
}

impl<T: fmt::Debug, P: Platform> fmt::Debug for MutexGuard<'_, T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: fmt::Display, P: Platform> fmt::Display for MutexGuard<'_, T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

impl<T: fmt::Debug, P: Platform> fmt::Debug for Mutex<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(g) => d.field("data", &&*g),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get()).finish_non_exhaustive()
    }
}

impl<T: Default, P: Platform> Default for Mutex<T, P> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T, P: Platform> From<T> for Mutex<T, P> {
    fn from(value: T) -> Self {
        Mutex::new(value)
    }
}
