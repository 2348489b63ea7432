//! Poisoning, as `std::sync`'s: a lock whose guard is dropped while its
//! holder unwinds (a panic, or a kill or shutdown cancellation of an actor)
//! is marked poisoned, and later acquisitions say so with a
//! [`PoisonError`] that still carries the guard.
//!
//! # The flag
//!
//! | `failed` | meaning                                                   |
//! |----------|-----------------------------------------------------------|
//! | `false`  | no holder unwound (or `clear_poison` reset it)             |
//! | `true`   | a guard was dropped by a holder that started unwinding after it locked |
//!
//! 1. Locking records whether the caller is already unwinding
//!    (`Guard::panicking`: a lock taken inside a destructor during an
//!    unwind does not poison when that same unwind drops it).
//! 2. Dropping the guard sets `failed` if the holder is unwinding now and
//!    was not at step 1.
//! 3. Every acquisition reports `failed` (the guard comes either way).
//!
//! The flag is read and written under the lock it belongs to (steps 2 and
//! 3), whose own Release/Acquire orders it; `is_poisoned` reads it without
//! the lock, a snapshot (std's flag is the same).

use core::fmt;

use crate::seam::platform::Platform;
use crate::sync::{AtomicBool, Ordering};

/// A lock was poisoned: a holder unwound while holding it. The guard (or
/// value) is inside: [`into_inner`](Self::into_inner) takes it to carry on
/// anyway, as with `std::sync::PoisonError`.
pub struct PoisonError<T> {
    guard: T,
}

impl<T> PoisonError<T> {
    /// Wraps `guard` (as std's, for code that builds its own errors).
    pub fn new(guard: T) -> PoisonError<T> {
        PoisonError { guard }
    }

    /// The guard (or value) the acquisition produced.
    pub fn into_inner(self) -> T {
        self.guard
    }

    /// A reference to the guard inside.
    pub fn get_ref(&self) -> &T {
        &self.guard
    }

    /// A mutable reference to the guard inside.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> fmt::Debug for PoisonError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoisonError").finish_non_exhaustive()
    }
}

impl<T> fmt::Display for PoisonError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("poisoned lock: another task failed inside")
    }
}

impl<T> core::error::Error for PoisonError<T> {}

/// Why a `try_lock` (`try_read`, `try_write`) did not return a clean guard.
pub enum TryLockError<T> {
    /// The lock was free, but poisoned: the guard is inside.
    Poisoned(PoisonError<T>),
    /// The lock is held (or, for `try_read`, a writer waits): it would have
    /// to wait.
    WouldBlock,
}

impl<T> From<PoisonError<T>> for TryLockError<T> {
    fn from(e: PoisonError<T>) -> TryLockError<T> {
        TryLockError::Poisoned(e)
    }
}

impl<T> fmt::Debug for TryLockError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryLockError::Poisoned(e) => f.debug_tuple("Poisoned").field(e).finish(),
            TryLockError::WouldBlock => f.write_str("WouldBlock"),
        }
    }
}

impl<T> fmt::Display for TryLockError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryLockError::Poisoned(e) => fmt::Display::fmt(e, f),
            TryLockError::WouldBlock => f.write_str("try_lock failed because the operation would block"),
        }
    }
}

impl<T> core::error::Error for TryLockError<T> {}

/// What a blocking acquisition returns: the guard, or the guard inside a
/// [`PoisonError`].
pub type LockResult<G> = Result<G, PoisonError<G>>;

/// What a non-blocking acquisition returns.
pub type TryLockResult<G> = Result<G, TryLockError<G>>;

/// A lock's poison flag (the module doc's table).
pub(crate) struct Flag {
    failed: AtomicBool,
}

/// What a guard remembers for its drop: whether its holder was already
/// unwinding when it locked (step 1).
#[derive(Clone, Copy)]
pub(crate) struct Guard {
    panicking: bool,
}

impl Flag {
    pub(crate) fn new() -> Flag {
        Flag {
            failed: AtomicBool::new(false),
        }
    }

    /// Step 1 and 3: the record for a guard about to be made, as an error
    /// if the lock is poisoned.
    pub(crate) fn guard<P: Platform>(&self) -> LockResult<Guard> {
        let g = Guard {
            panicking: P::panicking(),
        };
        if self.get() {
            Err(PoisonError::new(g))
        } else {
            Ok(g)
        }
    }

    /// Step 3 for acquisitions that keep no record (read guards,
    /// `into_inner`, `get_mut`).
    pub(crate) fn borrow(&self) -> LockResult<()> {
        if self.get() {
            Err(PoisonError::new(()))
        } else {
            Ok(())
        }
    }

    /// Step 2: a guard with record `g` is being dropped.
    pub(crate) fn done<P: Platform>(&self, g: &Guard) {
        if !g.panicking && P::panicking() {
            // Relaxed: written under the lock, whose release orders it
            // before the next holder's read (module doc).
            self.failed.store(true, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> bool {
        // Relaxed: under the lock, or a snapshot (module doc).
        self.failed.load(Ordering::Relaxed)
    }

    pub(crate) fn clear(&self) {
        // Relaxed: as `get`.
        self.failed.store(false, Ordering::Relaxed);
    }
}

/// `result` with its guard (or the guard inside its error) mapped by `f`.
pub(crate) fn map_result<T, U>(result: LockResult<T>, f: impl FnOnce(T) -> U) -> LockResult<U> {
    match result {
        Ok(t) => Ok(f(t)),
        Err(e) => Err(PoisonError::new(f(e.into_inner()))),
    }
}
