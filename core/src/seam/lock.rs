//! Locks built once on the platform's primitives.
//!
//! [`FutexLock`] is a three-state futex mutex (after Drepper, "Futexes Are
//! Tricky", mutex #2; the same shape as std's `sys/sync/mutex/futex.rs`):
//!
//! | state | meaning                              |
//! |-------|--------------------------------------|
//! | 0     | unlocked                             |
//! | 1     | locked, nobody sleeping              |
//! | 2     | locked, a thread may be sleeping     |
//!
//! 1. `lock`: CAS 0 → 1; on failure spin a little, then swap in 2 and sleep
//!    while the word is 2, until a swap of 2 returns 0.
//! 2. `unlock`: swap in 0; if the old value was 2, wake one sleeper.
//!
//! Never recursive. [`Mutex`] wraps any [`RawLock`] with a guard.
//!
//! [`PollLock`] is for sections that are short and rarely contended (the
//! registry's shards): its unlock is a plain Release store, not a swap, so
//! nobody can sleep on it; a waiter spins with backoff, then yields its OS
//! thread between tries.

use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

use crate::seam::platform::{Futex, Platform, RawLock};
use crate::sync::{AtomicBool, AtomicU32, Backoff, Ordering, UnsafeCell};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// A non-recursive lock on a futex word: no syscall when uncontended.
pub struct FutexLock<F: Futex> {
    state: AtomicU32,
    _futex: PhantomData<fn() -> F>,
}

impl<F: Futex> FutexLock<F> {
    #[cold]
    fn lock_contended(&self) {
        // Spin briefly: the holder's section is short (once under loom,
        // where each spin is a yield that multiplies the explored states).
        let spins = if crate::sync::LOOM { 1 } else { 100 };
        for _ in 0..spins {
            crate::sync::spin_hint();
            if self.state.load(Ordering::Relaxed) == UNLOCKED
                // Acquire: synchronises with the Release swap in `unlock`.
                && self
                    .state
                    .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
        }
        // Acquire: as above. Swapping in CONTENDED (not LOCKED) keeps the
        // "someone may sleep" mark for the unlock that follows ours.
        while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            F::wait(&self.state, CONTENDED, None);
        }
    }
}

// SAFETY: `lock` returns only after a CAS/swap took the word from UNLOCKED
// (Acquire); `unlock` stores UNLOCKED with Release and wakes a sleeper if one
// may exist, so no unlock is missed by a sleeper (it re-checks the word
// atomically with its sleep in `Futex::wait`).
unsafe impl<F: Futex> RawLock for FutexLock<F> {
    fn new() -> Self {
        FutexLock {
            state: AtomicU32::new(UNLOCKED),
            _futex: PhantomData,
        }
    }

    #[inline]
    fn lock(&self) {
        // Acquire: synchronises with the Release swap in `unlock`.
        if self
            .state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        // Acquire: synchronises with the Release swap in `unlock`.
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        // Release: publishes the section to the next Acquire in `lock`.
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            F::wake_one(&self.state);
        }
    }
}

/// A lock whose unlock is one plain store: no locked instruction, and no
/// sleeper to wake, because a waiter never sleeps. It spins with backoff
/// and then yields its OS thread between tries (`Platform::yield_thread`),
/// so a holder preempted mid-section costs its waiters yields, never a
/// lost wake. Meant for short sections that are rarely contended (an
/// uncontended `lock` + `unlock` is one CAS, where [`FutexLock`] takes a
/// CAS and a swap); a long hold (a dump walking a big shard) keeps its
/// waiters yielding meanwhile.
pub struct PollLock<P: Platform> {
    held: AtomicBool,
    _p: PhantomData<fn() -> P>,
}

impl<P: Platform> PollLock<P> {
    #[cold]
    fn lock_contended(&self) {
        let mut backoff = Backoff::new();
        loop {
            // Relaxed: only a hint that the CAS below may succeed.
            if !self.held.load(Ordering::Relaxed) && self.try_lock() {
                return;
            }
            // Under loom one yield per try (a backoff's spins would each
            // be a yield, multiplying the explored branches).
            if crate::sync::LOOM || backoff.snooze() {
                P::yield_thread();
            }
        }
    }
}

// SAFETY: `lock` and `try_lock` return holding the lock only after a CAS
// took the flag from false (Acquire), and `unlock` stores false with
// Release: each section happens-before the next holder's, and two CASes
// from false cannot both succeed.
unsafe impl<P: Platform> RawLock for PollLock<P> {
    fn new() -> Self {
        PollLock {
            held: AtomicBool::new(false),
            _p: PhantomData,
        }
    }

    #[inline]
    fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        // Acquire: synchronises with the Release store in `unlock`.
        self.held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        // Release: publishes the section to the next Acquire CAS.
        self.held.store(false, Ordering::Release);
    }
}

/// A value guarded by a [`RawLock`].
pub struct Mutex<L: RawLock, T> {
    lock: L,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `lock`; T moves between threads.
unsafe impl<L: RawLock, T: Send> Send for Mutex<L, T> {}
// SAFETY: as above: `&Mutex` only gives `&mut T` under the lock.
unsafe impl<L: RawLock, T: Send> Sync for Mutex<L, T> {}

impl<L: RawLock, T> Mutex<L, T> {
    /// Wraps `value`.
    pub fn new(value: T) -> Self {
        Mutex {
            lock: L::new(),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks, returning a guard that unlocks on drop.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, L, T> {
        self.lock.lock();
        MutexGuard { mutex: self }
    }

    /// Locks if the lock is free now, without waiting.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, L, T>> {
        // `then`, not `then_some`: a guard built eagerly for a failed try
        // would unlock someone else's lock when dropped.
        self.lock.try_lock().then(|| MutexGuard { mutex: self })
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

/// Proof of holding a [`Mutex`]'s lock.
pub struct MutexGuard<'a, L: RawLock, T> {
    mutex: &'a Mutex<L, T>,
}

impl<L: RawLock, T> Deref for MutexGuard<'_, L, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no `&mut` to the value exists.
        self.mutex.value.with(|p| unsafe { &*p })
    }
}

impl<L: RawLock, T> DerefMut for MutexGuard<'_, L, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively.
        self.mutex.value.with_mut(|p| unsafe { &mut *p })
    }
}

impl<L: RawLock, T> Drop for MutexGuard<'_, L, T> {
    fn drop(&mut self) {
        // SAFETY: this guard was created by a successful `lock`.
        unsafe { self.mutex.lock.unlock() }
    }
}

#[cfg(all(test, not(smarm_loom)))]
mod tests {
    use super::{Mutex, PollLock};
    use crate::seam::test_platform::StdPlatform;
    use std::sync::Arc;

    /// Four threads increment one counter under a `PollLock`, each many
    /// times, so most locks find it held and take the contended path
    /// (spins, then thread yields): no increment is lost.
    #[test]
    fn poll_lock_counts_under_contention() {
        let per = if cfg!(miri) { 50 } else { 20_000 };
        let m = Arc::new(Mutex::<PollLock<StdPlatform>, u64>::new(0));
        let ts: std::vec::Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..per {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 4 * per);
    }
}
