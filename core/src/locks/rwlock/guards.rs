//! [`RwLock`]'s guards: shared and exclusive access, released on drop
//! (`U1`, `U2` of the parent module's protocol).

use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

use super::RwLock;
use crate::locks::poison::{self, LockResult};
use crate::seam::platform::Platform;

/// Shared access to an [`RwLock`]'s value; unlocks on drop.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T, P: Platform> {
    lock: &'a RwLock<T, P>,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`.
unsafe impl<T: Sync, P: Platform> Sync for RwLockReadGuard<'_, T, P> {}

/// Exclusive access to an [`RwLock`]'s value; unlocks on drop (poisoning
/// the lock if dropped by an unwind that began after locking).
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T, P: Platform> {
    lock: &'a RwLock<T, P>,
    poison: poison::Guard,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`.
unsafe impl<T: Sync, P: Platform> Sync for RwLockWriteGuard<'_, T, P> {}

impl<'a, T, P: Platform> RwLockReadGuard<'a, T, P> {
    /// # Safety
    ///
    /// The caller holds a read lock on `lock` and hands it to the guard.
    pub(super) unsafe fn new(lock: &'a RwLock<T, P>) -> LockResult<Self> {
        poison::map_result(lock.poison.borrow(), |()| RwLockReadGuard {
            lock,
            _not_send: PhantomData,
        })
    }
}

impl<'a, T, P: Platform> RwLockWriteGuard<'a, T, P> {
    /// # Safety
    ///
    /// The caller holds `lock`'s write lock and hands it to the guard.
    pub(super) unsafe fn new(lock: &'a RwLock<T, P>) -> LockResult<Self> {
        poison::map_result(lock.poison.guard::<P>(), |poison| RwLockWriteGuard {
            lock,
            poison,
            _not_send: PhantomData,
        })
    }
}

impl<T, P: Platform> Deref for RwLockReadGuard<'_, T, P> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a read lock is held: no `&mut` to the value exists.
        self.lock.data.with(|p| unsafe { &*p })
    }
}

impl<T, P: Platform> Deref for RwLockWriteGuard<'_, T, P> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the write lock is held: nobody else reads or writes.
        self.lock.data.with(|p| unsafe { &*p })
    }
}

impl<T, P: Platform> DerefMut for RwLockWriteGuard<'_, T, P> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the write lock is held exclusively.
        self.lock.data.with_mut(|p| unsafe { &mut *p })
    }
}

impl<T, P: Platform> Drop for RwLockReadGuard<'_, T, P> {
    fn drop(&mut self) {
        // SAFETY: the guard holds a read lock.
        unsafe { self.lock.read_unlock() }
    }
}

impl<T, P: Platform> Drop for RwLockWriteGuard<'_, T, P> {
    fn drop(&mut self) {
        self.lock.poison.done::<P>(&self.poison);
        // SAFETY: the guard holds the write lock.
        unsafe { self.lock.write_unlock() }
    }
}

impl<T: fmt::Debug, P: Platform> fmt::Debug for RwLockReadGuard<'_, T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: fmt::Debug, P: Platform> fmt::Debug for RwLockWriteGuard<'_, T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
