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
//!
//! A slot made with [`Slot::owner_only`] has no thieves (a one-worker
//! runtime: nobody to steal): one thread at a time puts and takes, each
//! change of thread ordered by something else (a worker's duty handed to
//! another thread, a join), and every transfer is a plain load and store
//! instead of a locked swap: two read-modify-writes fewer per message
//! round trip that wakes into the slot.

use core::ptr;

use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

/// A single-value handoff cell: owner puts, owner or thieves take.
#[derive(Debug)]
pub struct Slot<T> {
    ptr: AtomicPtr<T>,
    /// Puts so far (wrapping), beside `ptr` on its line: a thief that reads
    /// the same pointer twice tells "it sat there all along" from "it was
    /// taken and put again" (an actor woken over and over) by this count.
    /// It counts in twos (always even); the odd [`OWNER_ONLY`] marks a
    /// slot without thieves ([`Slot::owner_only`]), which keeps no count
    /// (only thieves read it). The mode thus costs no extra field: the
    /// slot stays two words, and the mode is read from the line the
    /// operation touches anyway.
    puts: AtomicUsize,
}

/// `puts` of a slot without thieves (odd: a counting slot's `puts` is
/// always even).
const OWNER_ONLY: usize = 1;

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Slot<T> {
    /// An empty slot that thieves may take from while the owner puts and
    /// takes.
    pub fn new() -> Self {
        Slot {
            ptr: AtomicPtr::new(ptr::null_mut()),
            puts: AtomicUsize::new(0),
        }
    }

    /// An empty slot without thieves: `put` and `take` are plain loads and
    /// stores. `peek` and `stamp` stay racy hints from any thread
    /// (`stamp`'s count does not move: no thief compares it).
    ///
    /// # Safety
    ///
    /// Only one thread at a time calls `put` and `take`, and a later caller
    /// on another thread is ordered after the earlier one by a
    /// happens-before edge of its own (a Release/Acquire handoff, a thread
    /// join). Two racing calls could hand one value to both callers (or
    /// lose one): callers that own what the slot returns would then free
    /// it twice.
    pub unsafe fn owner_only() -> Self {
        Slot {
            ptr: AtomicPtr::new(ptr::null_mut()),
            puts: AtomicUsize::new(OWNER_ONLY),
        }
    }

    /// Puts `p` (non-null, owned by the caller) in the slot; returns the
    /// value it displaces (null if none), now owned by the caller.
    #[inline]
    pub fn put(&self, p: *mut T) -> *mut T {
        debug_assert!(!p.is_null());
        // Relaxed: the mode never changes; the count is a hint (below).
        let n = self.puts.load(Ordering::Relaxed);
        if n == OWNER_ONLY {
            // Relaxed: the contract orders every put and take (one thread
            // at a time, each change of thread a happens-before edge of
            // its own), and that edge carries what the putter wrote about
            // `p`; `peek` is a hint.
            let old = self.ptr.load(Ordering::Relaxed);
            self.ptr.store(p, Ordering::Relaxed);
            return old;
        }
        // Relaxed load (above) + store, not a fetch_add: only the owner
        // puts (a lost increment between racing putters would still
        // change the count), and thieves read it as a hint next to `peek`.
        // In twos: it stays even, never `OWNER_ONLY`.
        self.puts.store(n.wrapping_add(2), Ordering::Relaxed);
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
        let p = self.ptr.load(Ordering::Relaxed);
        if p.is_null() {
            return ptr::null_mut();
        }
        // Relaxed: the mode never changes.
        if self.puts.load(Ordering::Relaxed) == OWNER_ONLY {
            // The probe's value is the one to take: nobody else takes, and
            // the contract orders it after its put (as in `put`).
            self.ptr.store(ptr::null_mut(), Ordering::Relaxed);
            return p;
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

    #[test]
    fn an_owner_only_slot_hands_each_value_out_once() {
        // SAFETY: one thread uses it.
        let slot: Slot<u32> = unsafe { Slot::owner_only() };
        let a = Box::into_raw(Box::new(1u32));
        let b = Box::into_raw(Box::new(2u32));
        assert!(slot.take().is_null(), "empty at first");
        assert!(slot.put(a).is_null());
        assert_eq!(slot.peek(), a);
        assert_eq!(slot.put(b), a, "a put hands back the value it displaces");
        assert_eq!(slot.take(), b);
        assert!(slot.take().is_null(), "taken once, then empty");
        assert!(slot.peek().is_null());
        // SAFETY: both came from `Box::into_raw` and are out of the slot.
        unsafe {
            drop(Box::from_raw(a));
            drop(Box::from_raw(b));
        }
    }

    #[test]
    fn an_owner_only_slot_moves_to_another_thread_after_a_join() {
        // SAFETY: the spawned thread's put is ordered before our take by
        // the join.
        let slot = std::sync::Arc::new(unsafe { Slot::owner_only() });
        let a = Box::into_raw(Box::new(7u32)) as usize;
        let s2 = slot.clone();
        // The first owner puts; the join orders its store before ours.
        std::thread::spawn(move || assert!(s2.put(a as *mut u32).is_null()))
            .join()
            .unwrap();
        let p = slot.take();
        assert_eq!(p as usize, a);
        // SAFETY: from `Box::into_raw`, out of the slot.
        assert_eq!(*unsafe { Box::from_raw(p) }, 7);
    }
}
