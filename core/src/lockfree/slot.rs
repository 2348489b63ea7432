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

use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

/// A single-value handoff cell: owner puts, owner or thieves take.
#[derive(Debug)]
pub struct Slot<T> {
    ptr: AtomicPtr<T>,
    /// Puts so far (wrapping), beside `ptr` on its line: a thief that reads
    /// the same pointer twice tells "it sat there all along" from "it was
    /// taken and put again" (an actor woken over and over) by this count.
    puts: AtomicUsize,
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
            puts: AtomicUsize::new(0),
        }
    }

    /// Puts `p` (non-null, owned by the caller) in the slot; returns the
    /// value it displaces (null if none), now owned by the caller.
    #[inline]
    pub fn put(&self, p: *mut T) -> *mut T {
        debug_assert!(!p.is_null());
        // Relaxed load + store, not a fetch_add: only the owner puts (a
        // lost increment between racing putters would still change the
        // count), and thieves read it as a hint next to `peek`.
        let n = self.puts.load(Ordering::Relaxed);
        self.puts.store(n.wrapping_add(1), Ordering::Relaxed);
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

    /// A racy look at the slot and its put count: equal stamps read some
    /// time apart mean the same value sat in the slot all along (up to a
    /// wrap of the count), not that it was taken and put again.
    #[inline]
    pub fn stamp(&self) -> (*mut T, usize) {
        // Relaxed (both): a hint, as `peek` is.
        (
            self.ptr.load(Ordering::Relaxed),
            self.puts.load(Ordering::Relaxed),
        )
    }
}

#[cfg(all(test, not(smarm_loom)))]
mod tests {
    use super::Slot;
    use std::boxed::Box;

    #[test]
    fn a_stamp_tells_a_value_that_stayed_from_one_put_again() {
        let slot = Slot::new();
        let a = Box::into_raw(Box::new(1u32));
        assert!(slot.put(a).is_null());
        let first = slot.stamp();
        assert_eq!(first.0, a);
        assert_eq!(slot.stamp(), first, "nothing moved: the same stamp");
        // Taken and put again: the same pointer, a new stamp.
        assert_eq!(slot.take(), a);
        assert!(slot.put(a).is_null());
        let again = slot.stamp();
        assert_eq!(again.0, first.0);
        assert_ne!(again, first, "a put again must not look like a value that stayed");
        assert_eq!(slot.take(), a);
        // SAFETY: `a` came from `Box::into_raw` and is out of the slot.
        drop(unsafe { Box::from_raw(a) });
    }
}
