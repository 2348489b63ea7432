//! The ring run queue's algorithm ([`WorkerRing`]): an MPMC ring with a
//! locked overflow and, on a one-worker runtime, the worker's own FIFO in
//! front of them.
//!
//! # Why the worker's own FIFO
//!
//! On one worker every yield is a push and a pop of the run queue, and a
//! woken actor that displaces another from the run-next slot is a push.
//! The ring is multi-producer multi-consumer, so each push and pop is a
//! locked compare-and-swap on its counters (the yield storm's profile: the
//! ring's push and pop were a fifth of its samples, most of them on the
//! two CASes), although on one worker only one thread ever pops and the
//! worker is the only thread that pushes often. With the own FIFO the
//! worker's pushes and pops are plain memory operations; threads that
//! serve no worker (a `Runtime::spawn` from the main thread, a send from a
//! plain thread, an actor back from a blocking call) still push onto the
//! ring, which the worker pops.
//!
//! # The protocol
//!
//! 1. **Outside push** ([`push`](WorkerRing::push)): onto the ring, or the
//!    overflow if the ring is full; any thread.
//! 2. **Worker push** ([`push_owner`](WorkerRing::push_owner)): with the
//!    own FIFO (`owned`), onto its back; else as 1. Then the FIFO's length
//!    is published (Relaxed) for [`len`](WorkerRing::len)'s readers.
//! 3. **Worker pop** ([`pop_owner`](WorkerRing::pop_owner)): with the own
//!    FIFO, its front, else the ring, else the overflow; every 61st pop
//!    (the pacer shared with 4) takes the overflow, then the ring first, so
//!    an actor pushed from outside waits at most 61 pops while the worker
//!    keeps its FIFO full (a yield storm never empties it). Without the own
//!    FIFO: as 4.
//! 4. **Shared pop** ([`pop`](WorkerRing::pop)): the ring, else the
//!    overflow; every 61st pop the overflow first, so spilled items cannot
//!    starve behind a ring kept full. It never looks at the own FIFO, which
//!    only its owner may touch.
//!
//! **Ownership.** The own FIFO is an `UnsafeCell` without a lock: the
//! owner calls (2, 3) are `unsafe`, and their contract is the scheduler's
//! invariant for `Shared::push` — the caller is the thread serving the
//! runtime's one worker. A worker's duty moves between threads only
//! through a handoff with a Release/Acquire edge (`Shared::hand_off`, a
//! thread's start), so consecutive owner calls are ordered even when their
//! threads differ, and the runtime's teardown drains the FIFO only after
//! its worker threads have been joined.
//!
//! **Idle.** The worker sleeps only after its own pop found nothing, so its
//! FIFO is empty whenever it sleeps; work that arrives while it sleeps is
//! an outside push onto the ring, and the idle protocol's Dekker pair
//! (push, fence, read the sleeper count) is the ring's as before. The
//! FIFO's published length makes [`len`](WorkerRing::len) count it for
//! dumps and the monitor (a hint, as every queue length is).

use alloc::collections::VecDeque;

use super::{Overflow, Pacer};
use crate::lockfree::ring::Ring;
use crate::seam::platform::RawLock;
use crate::sync::{AtomicUsize, Ordering, UnsafeCell};

#[cfg(all(test, not(smarm_loom)))]
mod tests;

/// Actors the worker's own FIFO has room for from the start (64 pointers,
/// 512 bytes per one-worker runtime), so a runtime's first yields and
/// expiries allocate nothing; it grows, and keeps its size, past that.
const OWN_START: usize = 64;

/// An MPMC ring with an overflow list and, when `owned`, the one worker's
/// own FIFO in front (see the [module docs](self)).
pub struct WorkerRing<T, L: RawLock> {
    ring: Ring<T>,
    overflow: Overflow<T, L>,
    /// Takes the overflow (and, owned, the ring) first every 61st pop.
    pace: Pacer,
    /// Whether the own FIFO is in use (a one-worker runtime's queue).
    owned: bool,
    /// The worker's own FIFO: only the owner calls touch it.
    own: UnsafeCell<VecDeque<T>>,
    /// `own`'s length, stored by the owner after each change.
    own_len: AtomicUsize,
}

// SAFETY: items move between threads (`T: Send`); the ring and the overflow
// are shared structures; `own` is touched only through the owner calls,
// whose contract makes them one thread at a time with each call ordered
// before the next (module docs, "Ownership").
unsafe impl<T: Send, L: RawLock> Sync for WorkerRing<T, L> {}

impl<T, L: RawLock> WorkerRing<T, L> {
    /// About `capacity` ring slots before outside pushes spill to the
    /// overflow; `owned`: the worker's pushes and pops use its own FIFO
    /// (only for a queue that one worker serves).
    pub fn new(capacity: usize, owned: bool) -> Self {
        WorkerRing {
            ring: Ring::with_capacity(capacity),
            overflow: Overflow::new(),
            pace: Pacer::new(),
            owned,
            own: UnsafeCell::new(if owned {
                VecDeque::with_capacity(OWN_START)
            } else {
                VecDeque::new()
            }),
            own_len: AtomicUsize::new(0),
        }
    }

    /// Protocol step 1: any thread's push. `relax` yields the OS thread
    /// (see [`Ring::push`]).
    #[inline]
    pub fn push(&self, v: T, relax: &mut dyn FnMut()) {
        if let Err(v) = self.ring.push(v, relax) {
            self.overflow.push(v);
        }
    }

    /// Protocol step 4: any thread's pop (the ring and the overflow only).
    #[inline]
    pub fn pop(&self, relax: &mut dyn FnMut()) -> Option<T> {
        if self.pace() {
            if let Some(v) = self.overflow.pop() {
                return Some(v);
            }
        }
        self.pop_shared(relax)
    }

    /// The ring, then the overflow: a pop's shared part.
    #[inline]
    fn pop_shared(&self, relax: &mut dyn FnMut()) -> Option<T> {
        self.ring.pop(relax).or_else(|| self.overflow.pop())
    }

    /// Protocol step 2: the worker's push.
    ///
    /// # Safety
    ///
    /// If the queue is `owned`, the caller is its worker's thread: no other
    /// owner call runs concurrently, and the previous one happens-before
    /// this one (module docs, "Ownership").
    #[inline]
    pub unsafe fn push_owner(&self, v: T, relax: &mut dyn FnMut()) {
        if !self.owned {
            return self.push(v, relax);
        }
        let n = self.own.with_mut(|q| {
            // SAFETY: the contract makes this the only access to `own`.
            let q = unsafe { &mut *q };
            q.push_back(v);
            q.len()
        });
        // Relaxed: a length hint for other threads; the owner reads its
        // own stores in order.
        self.own_len.store(n, Ordering::Relaxed);
    }

    /// Protocol step 3: the worker's pop.
    ///
    /// # Safety
    ///
    /// As for [`push_owner`](Self::push_owner).
    #[inline]
    pub unsafe fn pop_owner(&self, relax: &mut dyn FnMut()) -> Option<T> {
        if !self.owned {
            return self.pop(relax);
        }
        if self.pace() {
            if let Some(v) = self.overflow.pop().or_else(|| self.ring.pop(relax)) {
                return Some(v);
            }
        }
        let (v, n) = self.own.with_mut(|q| {
            // SAFETY: as in `push_owner`.
            let q = unsafe { &mut *q };
            (q.pop_front(), q.len())
        });
        if v.is_some() {
            // Relaxed: as in `push_owner`.
            self.own_len.store(n, Ordering::Relaxed);
            return v;
        }
        self.pop_shared(relax)
    }

    /// Counts a pop; whether it is a fairness round.
    #[inline]
    fn pace(&self) -> bool {
        self.pace.tick().is_some()
    }

    /// Items queued: the ring, the overflow and the own FIFO (approximate
    /// while others push and pop).
    #[inline]
    pub fn len(&self) -> usize {
        // Relaxed: a hint, as the ring's and the overflow's lengths are.
        self.ring.len() + self.overflow.len() + self.own_len.load(Ordering::Relaxed)
    }

    /// `len() == 0`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
