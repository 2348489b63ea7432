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
