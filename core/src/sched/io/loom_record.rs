//! Loom models only: the readiness record's real protocol (`deliver`,
//! `join`, `withdraw`) with threads as its waiters
//! (`core/tests/loom_io.rs`).

use alloc::sync::Arc;

use super::{Record, Who};
use crate::seam::platform::RawLock;
use crate::sync::AtomicU32;

/// A record with no descriptor behind it.
pub struct TestRecord<L: RawLock>(Record<L>);

impl<L: RawLock> Default for TestRecord<L> {
    fn default() -> Self {
        TestRecord(Record::new())
    }
}

impl<L: RawLock> TestRecord<L> {
    /// The poller's delivery of `ready`; the waiters woken.
    pub fn deliver(&self, ready: u32) -> usize {
        self.0.deliver(ready)
    }

    /// The tick, read before a call.
    pub fn ticket(&self) -> u32 {
        self.0.ticket()
    }

    /// A waiter's check-and-join with `word` (0; set to 1 and woken
    /// with `wake` by whoever takes the entry) and the `ticket` it read
    /// before its call: `false` if an edge came since (retry).
    pub fn join(&self, word: &Arc<AtomicU32>, wake: fn(&AtomicU32), interest: u32, ticket: u32) -> bool {
        self.0.join(Who::Thread(word.clone(), wake), interest, ticket)
    }

    /// The waiter's (`wake`: the timer's) withdrawal of `word`'s entry.
    pub fn withdraw(&self, word: &Arc<AtomicU32>, wake: bool) -> bool {
        self.0.withdraw(Arc::as_ptr(word) as usize, wake)
    }

    /// Waiters still in the record.
    pub fn waiters(&self) -> usize {
        self.0.state.lock().waiters.len()
    }
}
