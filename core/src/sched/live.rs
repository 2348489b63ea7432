//! The live-actor count: actors spawned and not yet ended, kept in a
//! shard per worker (and one for plain threads) so that spawns and ends
//! on different workers do not pass one cache line between their cores
//! at every actor (docs/benchmarks.md, "The live count in shards").

#[allow(unused_imports)]
use super::*;

/// One shard of the live-actor count: what its worker (or plain threads,
/// for the last shard) spawned, and what ended on it. Both only grow
/// (wrapping); an actor is counted in its spawner's `spawned` and in the
/// `ended` of the worker it ends on, often another.
#[derive(Default)]
pub(crate) struct LiveShard {
    spawned: AtomicUsize,
    ended: AtomicUsize,
}

impl<P: Platform> RtCore<P> {
    /// A spawn from shard `shard` (a worker's index; the workers' count
    /// for plain threads).
    #[inline]
    pub(crate) fn count_spawn(&self, shard: usize) {
        // SeqCst: see `live`.
        self.live_shards[shard].spawned.fetch_add(1, Ordering::SeqCst);
    }

    /// An actor's end on worker `shard`.
    #[inline]
    pub(crate) fn count_end(&self, shard: usize) {
        // SeqCst: see `live`.
        self.live_shards[shard].ended.fetch_add(1, Ordering::SeqCst);
    }

    /// Actors spawned and not yet ended: every shard's `ended`, then every
    /// shard's `spawned`, summed (wrapping). Every update is a SeqCst RMW
    /// and every read here a SeqCst load, and an actor's spawn happens
    /// before its end (as a spawn made by an actor happens before that
    /// actor's own end), so each end this read counts has its spawn
    /// counted too: the result never dips below zero, and it is at least
    /// the number of actors alive between the two passes (one alive then
    /// was spawned before the second pass and ends after the first), so
    /// zero means none was. Of two ends racing to be the last, the later
    /// in SeqCst's order reads both (each reads after its own RMW), so a
    /// shutdown that waits for zero is told.
    pub(crate) fn live(&self) -> usize {
        let sum = |count: fn(&LiveShard) -> &AtomicUsize| {
            self.live_shards
                .iter()
                .fold(0usize, |sum, s| sum.wrapping_add(count(s).load(Ordering::SeqCst)))
        };
        // In this order (see above).
        let ended = sum(|s| &s.ended);
        sum(|s| &s.spawned).wrapping_sub(ended)
    }
}
