//! The run-next slot: one runnable actor a worker will run next (the
//! wake-slot handoff puts a woken actor there, a work-first spawn its
//! parent).
//!
//! A slot has one owner: the thread serving its worker puts and takes, one
//! thread at a time, each change of thread ordered by something else (a
//! worker's duty handed to another thread over a Release/Acquire word, a
//! thread join). Nobody else takes from it, so every transfer is a plain
//! load and store: no read-modify-write per message round trip that wakes
//! into the slot, on any number of workers. Other threads may only
//! [`peek`](Slot::peek), a racy hint (the idle check, dumps).
//!
//! Why no thieves: another worker's slot holds the actor its owner runs as
//! soon as its current actor switches out (by its timeslice at the
//! latest), so a thief could only move that actor away from the caches of
//! its waker — the scheduler's module doc ("A worker's run-next actor is
//! its own") has the measurements. Earlier forms let idle workers steal
//! with a swap on both sides; those swaps were most of what a second
//! worker added to a token ring's hop.

use core::ptr;

use crate::sync::{AtomicPtr, Ordering};

/// A single-value cell its owner puts to and takes from; see the
/// [module docs](self).
#[derive(Debug)]
pub struct Slot<T> {
    ptr: AtomicPtr<T>,
}

impl<T> Slot<T> {
    /// An empty slot.
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
        }
    }

    /// Puts `p` (non-null, owned by the caller) in the slot; returns the
    /// value it displaces (null if none), now owned by the caller.
    #[inline]
    pub fn put(&self, p: *mut T) -> *mut T {
        debug_assert!(!p.is_null());
        // Relaxed (both): the contract orders every put and take (one
        // thread at a time, each change of thread a happens-before edge of
        // its own), and that edge carries what the putter wrote about `p`;
        // `peek` is a hint.
        let old = self.ptr.load(Ordering::Relaxed);
        self.ptr.store(p, Ordering::Relaxed);
        old
    }

    /// Takes the value in the slot (null if empty), now owned by the caller.
    #[inline]
    pub fn take(&self) -> *mut T {
        // Relaxed: as in `put`.
        let p = self.ptr.load(Ordering::Relaxed);
        if !p.is_null() {
            // Relaxed: as in `put`; nobody else takes.
            self.ptr.store(ptr::null_mut(), Ordering::Relaxed);
        }
        p
    }

    /// A racy look at the slot, from any thread (an idle check, a dump).
    #[inline]
    pub fn peek(&self) -> *mut T {
        // Relaxed: a hint; ownership moves only through `put`/`take`.
        self.ptr.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(smarm_loom)))]
mod tests {
    use super::Slot;
    use std::boxed::Box;

    #[test]
    fn a_slot_hands_each_value_out_once() {
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
    fn a_slot_moves_to_another_thread_after_a_join() {
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
