//! The one place core takes its synchronisation primitives from.
//!
//! Every atomic, fence, spin hint and interior-mutability cell used by the
//! concurrent structures comes through this module, so a loom build
//! (`RUSTFLAGS="--cfg smarm_loom"`) swaps them all for loom's checked types at
//! once. Outside loom these are zero-cost re-exports of `core`'s types.
//!
//! `UnsafeCell` follows loom's shape (`with` / `with_mut` taking closures over
//! raw pointers) so the same code compiles under both.
//!
//! Layer 0: imports nothing (under loom, the types are loom's).

#[cfg(not(smarm_loom))]
mod imp {
    pub use core::sync::atomic::{
        fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };

    /// A spin-loop hint (`pause` / `isb`), a no-op scheduling point under loom.
    #[inline(always)]
    pub fn spin_hint() {
        core::hint::spin_loop();
    }

    /// `core::cell::UnsafeCell` with loom's closure-based access API.
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub struct UnsafeCell<T: ?Sized>(core::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        /// Wraps `value`.
        #[inline(always)]
        pub const fn new(value: T) -> Self {
            Self(core::cell::UnsafeCell::new(value))
        }

        /// Unwraps the value.
        #[inline(always)]
        pub fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }

    impl<T: ?Sized> UnsafeCell<T> {
        /// Runs `f` with a shared raw pointer to the contents.
        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` with a mutable raw pointer to the contents.
        #[inline(always)]
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// True when running under loom (lets shared code shrink capacities).
    pub const LOOM: bool = false;
}

#[cfg(smarm_loom)]
mod imp {
    pub use loom::sync::atomic::{
        fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };

    /// Under loom a spin is a yield, so a model never spins forever.
    #[inline(always)]
    pub fn spin_hint() {
        loom::thread::yield_now();
    }

    /// loom's checked cell.
    #[derive(Debug)]
    pub struct UnsafeCell<T>(loom::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        /// Wraps `value`.
        pub fn new(value: T) -> Self {
            Self(loom::cell::UnsafeCell::new(value))
        }

        /// Unwraps the value.
        pub fn into_inner(self) -> T {
            self.0.into_inner()
        }

        /// Runs `f` with a shared raw pointer to the contents (checked).
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            self.0.with(f)
        }

        /// Runs `f` with a mutable raw pointer to the contents (checked).
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            self.0.with_mut(f)
        }
    }

    impl<T: Default> Default for UnsafeCell<T> {
        fn default() -> Self {
            Self::new(T::default())
        }
    }

    /// True when running under loom (lets shared code shrink capacities).
    pub const LOOM: bool = true;
}

pub use imp::*;

/// `Arc` and `Weak` over a block from a named allocator (exported only for
/// core's loom models and tests: the `internals` feature or a loom build).
#[cfg(any(feature = "internals", smarm_loom))]
#[doc(hidden)]
pub mod block_arc;
#[cfg(not(any(feature = "internals", smarm_loom)))]
pub(crate) mod block_arc;

/// Exponential backoff for waits that must eventually give the CPU away.
///
/// Spins `2^n` hints for `n` up to [`Backoff::SPIN_LIMIT`], then reports that
/// the caller should yield its thread (the caller owns the yield, since core
/// does not know the OS). Under loom every step is already a yield.
#[derive(Debug, Default)]
pub struct Backoff {
    step: u32,
}

impl Backoff {
    /// Beyond this many doublings, [`Backoff::snooze`] asks for a thread yield.
    pub const SPIN_LIMIT: u32 = 6;

    /// A fresh backoff.
    pub const fn new() -> Self {
        Self { step: 0 }
    }

    /// Spins a little longer each call; returns `true` once the caller should
    /// yield its OS thread instead of spinning (a preempted peer needs the CPU).
    #[inline]
    pub fn snooze(&mut self) -> bool {
        if self.step <= Self::SPIN_LIMIT {
            for _ in 0..(1u32 << self.step) {
                spin_hint();
            }
            self.step += 1;
            false
        } else {
            spin_hint();
            true
        }
    }

    /// Starts over.
    pub fn reset(&mut self) {
        self.step = 0;
    }
}

/// An `UnsafeCell` that stays `core`'s even under loom, for state that a
/// loom model never reaches (an actor's saved context lives across asm
/// switches, which loom cannot model). Same closure API as [`UnsafeCell`],
/// plus [`RawCell::get`] for code that spans a context switch.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct RawCell<T: ?Sized>(core::cell::UnsafeCell<T>);

impl<T> RawCell<T> {
    /// Wraps `value`.
    #[inline(always)]
    pub const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }
}

impl<T: ?Sized> RawCell<T> {
    /// Runs `f` with a shared raw pointer to the contents.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a mutable raw pointer to the contents.
    #[inline(always)]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }

    /// The raw pointer itself.
    #[inline(always)]
    pub fn get(&self) -> *mut T {
        self.0.get()
    }
}
