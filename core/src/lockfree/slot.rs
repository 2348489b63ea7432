//! The run-next slot: one runnable actor a worker will run next (the
//! wake-slot handoff puts a woken actor there), which an idle worker may
//! steal on its last pass.
//!
//! The slot is one `AtomicPtr`; every transfer is a `swap`, so each value
//! put in is taken out exactly once: by the owner's [`Slot::take`], by a
//! thief's [`Slot::take`], or returned (displaced) by the next
//! [`Slot::put`]. The owner and any number of thieves may race; the loom
//! model `core/tests/loom_slot.rs` checks conservation under every
//! interleaving. The fairness rules (the owner's cap on consecutive slot
//! runs, the thief's grace period) live in the scheduler.

use core::ptr;

use crate::sync::{AtomicPtr, Ordering};

/// A single-value handoff cell: owner puts, owner or thieves take.
#[derive(Debug)]
pub struct Slot<T> {
    ptr: AtomicPtr<T>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Slot<T> {
    /// An empty slot.
    pub fn new() -> Self {
        Slot {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Puts `p` (non-null, owned by the caller) in the slot; returns the
    /// value it displaces (null if none), now owned by the caller.
    #[inline]
    pub fn put(&self, p: *mut T) -> *mut T {
        debug_assert!(!p.is_null());
        // AcqRel: Release publishes what the putter wrote about `p` to the
        // Acquire swap in `take`; Acquire takes ownership of the displaced
        // value (published by its own putter's Release).
        self.ptr.swap(p, Ordering::AcqRel)
    }

    /// Takes the value in the slot (null if empty), now owned by the caller.
    #[inline]
    pub fn take(&self) -> *mut T {
        // Relaxed probe first: an empty slot costs no RMW (the common case
        // for thieves, and for the owner after the slot was drained).
        if self.ptr.load(Ordering::Relaxed).is_null() {
            return ptr::null_mut();
        }
        // Acquire: pairs with the AcqRel swap in `put`.
        self.ptr.swap(ptr::null_mut(), Ordering::Acquire)
    }

    /// A racy look at the slot (for an idle check or a thief's probe).
    #[inline]
    pub fn peek(&self) -> *mut T {
        // Relaxed: a hint; ownership moves only through `put`/`take`.
        self.ptr.load(Ordering::Relaxed)
    }
}
