//! The runtime-wide level behind the per-worker [`NodeCache`]s: full class
//! lists ([`Magazine`]s) that one worker's cache spilled, waiting for a
//! worker whose cache ran dry (see [`node_cache`](super::node_cache),
//! *Magazines*).
//!
//! A one-way flow of messages (a producer on one worker, its consumer on
//! another) otherwise costs a global `malloc` on the producer's side and a
//! `free` on the consumer's for every message once the caches have settled
//! (one empty, one full). With the depot the consumer's cache hands its
//! full list over, [`NodeCache::CLASS_CAP`] blocks in one lock round, and
//! the producer's takes it: the blocks go round instead.
//!
//! Bounded: it keeps at most a cap of magazines per class, the larger of a
//! count (`min`) and what fits in a byte budget per class (`class_bytes`:
//! more magazines of small blocks than of large ones); a magazine beyond
//! that is freed to the global allocator (after the lock is released). So
//! a burst of queued messages up to the budget comes back and goes round
//! again without the allocator (a sender that queues 32,000 `u64`s before
//! its receivers run: 16-byte nodes, 512 KiB), and a larger one gives the
//! rest of its memory back.
//!
//! The arrays the magazines come in go round as well: a cache that loads a
//! magazine is left with an empty array ([`EmptyMagazine`]) beyond its
//! spare, which it gives here ([`NodeDepot::put_empty`]), and a cache that
//! spills gets one back for its next spill ([`NodeDepot::put`]'s answer).
//! The depot holds at most as many arrays, full and empty together, as it
//! may hold full magazines over all classes (the sum of the class caps):
//! so a burst that comes back through the depot finds an array for each of
//! its magazines when it spills again, and an empty array beyond that is
//! freed.
//!
//! [`NodeCache`]: super::node_cache::NodeCache
//! [`NodeCache::CLASS_CAP`]: super::node_cache::NodeCache::CLASS_CAP

use alloc::vec::Vec;

use super::node_cache::{EmptyMagazine, Magazine, NodeCache, CLASSES};
use crate::seam::lock::Mutex;
use crate::seam::platform::RawLock;
use crate::sync::{AtomicUsize, Ordering};

#[cfg(all(test, not(smarm_loom)))]
mod tests;

/// What the depot's lock guards.
struct Held {
    /// Full magazines by class.
    full: [Vec<Magazine>; CLASSES],
    /// Empty arrays, of any class.
    empty: Vec<EmptyMagazine>,
}

/// Spilled magazines by class, shared by a runtime's workers.
pub struct NodeDepot<L: RawLock> {
    store: Mutex<L, Held>,
    /// Magazines held over all classes, readable without the lock.
    held: AtomicUsize,
    /// The fewest magazines a class may keep.
    min: usize,
    /// The bytes of blocks a class may keep, if that is more magazines.
    class_bytes: usize,
    /// The most arrays held, in full magazines and empty: the sum of the
    /// classes' caps.
    arrays: usize,
}

impl<L: RawLock> NodeDepot<L> {
    /// An empty depot keeping up to `cap` magazines per class.
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub fn new(cap: usize) -> Self {
        Self::with_budget(cap, 0)
    }

    /// An empty depot keeping per class up to `min` magazines, or as many
    /// as fit in `class_bytes` of blocks if that is more, and empty
    /// arrays while the arrays held (full and empty) are fewer than the
    /// sum of those caps.
    pub fn with_budget(min: usize, class_bytes: usize) -> Self {
        let arrays = (0..CLASSES).map(|c| Self::class_cap(min, class_bytes, c)).sum();
        NodeDepot {
            store: Mutex::new(Held {
                full: core::array::from_fn(|_| Vec::new()),
                // Room for all up front: a burst coming back through the
                // depot then allocates nothing (a Vec's growth would).
                empty: Vec::with_capacity(arrays),
            }),
            held: AtomicUsize::new(0),
            min,
            class_bytes,
            arrays,
        }
    }

    /// The most magazines kept of class `class`.
    pub fn cap(&self, class: usize) -> usize {
        Self::class_cap(self.min, self.class_bytes, class)
    }

    fn class_cap(min: usize, class_bytes: usize, class: usize) -> usize {
        let magazine = NodeCache::CLASS_CAP * NodeCache::class_size(class);
        min.max(class_bytes / magazine)
    }

    /// Keeps `m` for a later [`take`](Self::take), or frees its blocks when
    /// its class already has [`cap`](Self::cap) magazines; either way hands
    /// out an empty array if one is kept (for the spilling cache's next
    /// spill: [`NodeCache::stock`]).
    #[cold]
    pub fn put(&self, m: Magazine) -> Option<EmptyMagazine> {
        let cap = self.cap(m.class());
        let (spare, empty) = {
            let mut held = self.store.lock();
            let list = &mut held.full[m.class()];
            let spare = if list.len() < cap {
                list.push(m);
                // Relaxed: written under the lock; `take` reads it only as
                // a hint and takes the lock before trusting it.
                self.held.fetch_add(1, Ordering::Relaxed);
                None
            } else {
                Some(m)
            };
            (spare, held.empty.pop())
        };
        // Freed outside the lock: a walk over CLASS_CAP blocks.
        drop(spare);
        empty
    }

    /// Keeps an empty array for a later [`put`](Self::put)'s caller, or
    /// frees it when the depot holds its most arrays (the sum of the class
    /// caps, full magazines and empty arrays together).
    #[cold]
    pub fn put_empty(&self, e: EmptyMagazine) {
        let spare = {
            let mut held = self.store.lock();
            // Relaxed: `held` changes only under the lock, which we hold.
            let full = self.held.load(Ordering::Relaxed);
            if full + held.empty.len() < self.arrays {
                held.empty.push(e);
                None
            } else {
                Some(e)
            }
        };
        drop(spare);
    }

    /// A magazine of class `class`, if one is kept.
    #[cold]
    pub fn take(&self, class: usize) -> Option<Magazine> {
        // Relaxed: a hint (see `put`). A put racing this check is missed
        // once; the caller allocates from the global allocator instead,
        // and the next dry cache finds the magazine.
        if self.held.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let m = self.store.lock().full[class].pop()?;
        // Relaxed: as in `put`.
        self.held.fetch_sub(1, Ordering::Relaxed);
        Some(m)
    }

    /// Magazines held over all classes (a hint outside the lock).
    pub fn held(&self) -> usize {
        // Relaxed: a statistic (see `put`).
        self.held.load(Ordering::Relaxed)
    }

    /// Empty arrays held.
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub fn empties(&self) -> usize {
        self.store.lock().empty.len()
    }
}

impl<L: RawLock> core::fmt::Debug for NodeDepot<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NodeDepot")
            .field("held", &self.held())
            .field("min", &self.min)
            .field("class_bytes", &self.class_bytes)
            .finish()
    }
}
