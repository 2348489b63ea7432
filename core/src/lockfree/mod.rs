//! Layer 2, the lock-free data structures: the MPMC [`ring`], the intrusive
//! MPSC queue ([`mpsc_queue`]) behind mailboxes and channels, the one-value
//! [`slot`], the per-worker [`node_cache`] of queue nodes and the
//! runtime-wide [`node_depot`] behind it. They know nothing of actors; each
//! runs under Miri and has its loom model.

pub mod mpsc_queue;
pub mod node_cache;
pub mod node_depot;
pub mod ring;
pub mod slot;

use core::ops::Deref;

/// Puts a value (a counter, a lock) on its own pair of cache lines
/// (adjacent-line prefetch pulls lines in 128-byte pairs on x86; 128 is
/// also Apple silicon's line size): the ring's head and tail, and the
/// scheduler's shared words that every worker writes.
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}
