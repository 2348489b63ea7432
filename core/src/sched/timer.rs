//! Timers: deadlines for sleeping actors and timed waits (`sleep`,
//! `recv_timeout`, `join_deadline`), kept in one binary heap per runtime
//! under its own lock, fired by the workers. Timer traffic never touches the
//! run queue's synchronisation: arming takes the timer lock, firing takes it
//! once per batch of due timers.
//!
//! # Why a heap
//!
//! A binary heap of `(deadline, seq)` gives exact ordering (equal deadlines
//! fire in arming order), `O(log n)` arm and fire, and one cache-friendly
//! array. A hierarchical wheel arms in `O(1)` but rounds deadlines to its
//! tick and cascades; the `timer_heap` bench compares the heap against an
//! ordered-map alternative side by side. Cancellation is lazy: a cancelled
//! entry stays in the heap until it reaches the top or the heap compacts
//! (when cancelled entries outnumber live ones), so cancelling is one CAS and
//! no lock.
//!
//! # One entry, one wake (the park invariant)
//!
//! A timed wait has two registrations that could end it: the wait's own
//! (a mailbox's waiter cell, a channel's waiter slot, a join slot) and the
//! timer entry. The timer never wakes the actor directly: when it fires it
//! *pokes* the wait, doing what a sender does — taking the wait's
//! registration with the same CAS or swap — so exactly one party (a sender
//! or the timer) owns the registration and wakes the actor once. A `sleep`
//! has no other registration: its entry is the registration.
//!
//! The entry's state word decides between the timer and the waiter:
//!
//! | value       | meaning                                                 |
//! |-------------|---------------------------------------------------------|
//! | `ARMED`     | in the heap, neither fired nor cancelled                |
//! | `FIRING`    | the timer won: it is poking the target right now        |
//! | `FIRED`     | the poke has returned                                   |
//! | `CANCELLED` | the waiter won: the timer will skip it                  |
//!
//! The waiter cancels with a CAS `ARMED → CANCELLED`; if that fails the
//! timer is poking, and the waiter waits for `FIRED` (a few instructions)
//! before it returns, so a poke can never land on a *later* registration
//! of the same waiter.

use alloc::collections::BinaryHeap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cmp::Ordering as CmpOrdering;

use crate::seam::lock::Mutex;
use crate::seam::platform::{Platform, RawLock};
use crate::sync::{fence, AtomicU32, AtomicU64, AtomicUsize, Backoff, Ordering, LOOM};

/// Entry state: in the heap, live.
pub const ARMED: u32 = 0;
/// Entry state: the timer is poking the target.
pub const FIRING: u32 = 1;
/// Entry state: the poke has returned.
pub const FIRED: u32 = 2;
/// Entry state: the waiter withdrew it.
pub const CANCELLED: u32 = 3;

/// "No timer armed" in [`Timers::next`].
pub const NEVER: u64 = u64::MAX;

/// What a firing timer does to the wait it belongs to: take the wait's
/// registration, exactly as a sender would, and wake whoever it held.
pub trait Poke: Send + Sync {
    /// Ends the wait (takes the registration, if still there, and wakes).
    fn poke(&self);
}

/// A [`Poke`] made of a shared wait object and the function that takes its
/// registration (a sender's wake path).
pub struct PokeWith<A>(pub A, pub fn(&A));

impl<A: Send + Sync> Poke for PokeWith<A> {
    fn poke(&self) {
        (self.1)(&self.0)
    }
}

/// One armed deadline and what it pokes (one allocation: the target is
/// stored inline, unsized behind the `Arc`).
pub struct TimerEntry<T: ?Sized = dyn Poke> {
    state: AtomicU32,
    target: T,
}

/// A new, armed entry poking `target`.
pub fn entry<T: Poke + 'static>(target: T) -> Arc<TimerEntry> {
    Arc::new(TimerEntry {
        state: AtomicU32::new(ARMED),
        target,
    })
}

impl TimerEntry {
    /// The waiter's withdrawal: `true` if the timer will never poke; `false`
    /// if it fired, in which case the poke has returned when this does.
    pub fn cancel<P: Platform>(&self) -> bool {
        // AcqRel against the timer's CAS in `fire`: exactly one of the two
        // leaves ARMED.
        match self
            .state
            .compare_exchange(ARMED, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(_) => {
                self.wait_fired::<P>();
                false
            }
        }
    }

    /// Whether the timer has fired (its poke may still be running).
    pub fn has_fired(&self) -> bool {
        // Acquire: pairs with the Release store of FIRED (or the AcqRel CAS
        // into FIRING): what the poke did is visible once we see FIRED.
        self.state.load(Ordering::Acquire) != ARMED
    }

    /// Waits until a poke in flight has returned.
    pub fn wait_fired<P: Platform>(&self) {
        let mut backoff = Backoff::new();
        // Acquire: pairs with the Release store of FIRED in `fire`.
        while self.state.load(Ordering::Acquire) == FIRING {
            // The firing worker is between two instructions unless its
            // thread was preempted: spin, then give the CPU away.
            if backoff.snooze() {
                P::yield_thread();
            }
        }
    }
}

/// One heap item: ordered by deadline, then by arming order.
struct Item<T> {
    deadline: u64,
    seq: u64,
    value: T,
}

impl<T> PartialEq for Item<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.deadline, self.seq) == (o.deadline, o.seq)
    }
}
impl<T> Eq for Item<T> {}
impl<T> PartialOrd for Item<T> {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Item<T> {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        // Reversed: `BinaryHeap` is a max-heap; we want the earliest on top.
        (o.deadline, o.seq).cmp(&(self.deadline, self.seq))
    }
}

/// The timer structure: a min-heap of `(deadline, arming order)`. Pure data
/// (no atomics), so it is tested against a model directly (and under Miri).
pub struct TimerHeap<T> {
    heap: BinaryHeap<Item<T>>,
    seq: u64,
}

impl<T> Default for TimerHeap<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> TimerHeap<T> {
    /// An empty heap.
    pub fn new() -> Self {
        TimerHeap {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// Arms `value` for `deadline`; entries with equal deadlines fire in
    /// the order they were armed.
    pub fn push(&mut self, deadline: u64, value: T) {
        let seq = self.seq;
        self.seq += 1;
        self.heap.push(Item { deadline, seq, value });
    }

    /// The earliest deadline, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.heap.peek().map(|i| i.deadline)
    }

    /// Removes every entry due at `now` (deadline `<= now`), earliest first
    /// (ties in arming order), handing each to `f`.
    pub fn pop_due(&mut self, now: u64, mut f: impl FnMut(u64, T)) {
        while self.heap.peek().is_some_and(|i| i.deadline <= now) {
            if let Some(i) = self.heap.pop() {
                f(i.deadline, i.value);
            }
        }
    }

    /// Keeps only the entries `keep` accepts (compaction of cancelled ones).
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.heap.retain(|i| keep(&i.value));
    }

    /// Entries in the heap (cancelled ones included until compacted).
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// `len() == 0`.
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// A runtime's timers: the heap under its own lock, the earliest deadline
/// readable without it, and which idle worker sleeps until that deadline.
#[doc(hidden)]
pub struct Timers<L: RawLock> {
    heap: Mutex<L, TimerHeap<Arc<TimerEntry>>>,
    /// The earliest armed deadline ([`NEVER`] if none). Written under the
    /// lock, read without it.
    next: AtomicU64,
    /// Cancelled entries still in the heap (a compaction hint).
    cancelled: AtomicUsize,
    /// The idle worker that sleeps until `next` (its index + 1), or 0.
    sleeper: AtomicUsize,
}

impl<L: RawLock> Default for Timers<L> {
    fn default() -> Self {
        Self::new()
    }
}

impl<L: RawLock> Timers<L> {
    /// No timers armed, no worker sleeping until one.
    pub fn new() -> Self {
        let t = Timers {
            heap: Mutex::new(TimerHeap::new()),
            next: AtomicU64::new(NEVER),
            cancelled: AtomicUsize::new(0),
            sleeper: AtomicUsize::new(0),
        };
        if LOOM {
            // loom treats an atomic's initial value as a non-SeqCst store;
            // the Dekker pair in `arm` needs the latest store to be SeqCst.
            t.next.store(NEVER, Ordering::SeqCst);
            t.sleeper.store(0, Ordering::SeqCst);
        }
        t
    }

    /// The earliest armed deadline, [`NEVER`] if none (SeqCst: the idle
    /// protocol's re-check, see [`Timers::arm`]).
    pub fn next(&self) -> u64 {
        self.next.load(Ordering::SeqCst)
    }

    /// Whether a timer may be due at `now` (a Relaxed hint for the workers'
    /// periodic check: a stale value delays the check to the next turn or
    /// to the idle path, which re-reads with SeqCst).
    #[inline]
    pub fn maybe_due(&self, now: impl FnOnce() -> u64) -> bool {
        let n = self.next.load(Ordering::Relaxed);
        n != NEVER && now() >= n
    }

    /// Arms `entry` for `deadline`. Returns, when this deadline became the earliest while a
    /// worker sleeps until a later one, that worker's index: the caller
    /// must wake it so it sleeps until the new deadline instead.
    ///
    /// The Dekker pair with an idle worker: we store `next` (SeqCst, under
    /// the lock) and then load `sleeper` (SeqCst); the worker stores
    /// `sleeper` (its claim) and then, once on the idle list, loads `next`.
    /// Either it sees the earlier deadline, or we see its claim and wake it.
    pub fn arm(&self, deadline: u64, entry: &Arc<TimerEntry>) -> Option<usize> {
        let earliest = {
            let mut heap = self.heap.lock();
            // Relaxed: a hint. It may run transiently "negative" (wrapped)
            // when a fire counts down an entry before its canceller counted
            // it up; `min` turns that into one early compaction.
            let dead = self.cancelled.load(Ordering::Relaxed).min(heap.len());
            if dead > 64 && dead * 2 > heap.len() {
                heap.retain(|e| e.state.load(Ordering::Relaxed) != CANCELLED);
                self.cancelled.store(0, Ordering::Relaxed);
            }
            heap.push(deadline, entry.clone());
            let earliest = deadline < self.next.load(Ordering::Relaxed);
            if earliest {
                self.next.store(deadline, Ordering::SeqCst);
            }
            earliest
        };
        if !earliest {
            return None;
        }
        // Our half of the Dekker pair: the store of `next` above, a full
        // fence, then the load of `sleeper` (the claimant's half: its CAS,
        // the idle protocol's fence, then its load of `next`).
        fence(Ordering::SeqCst);
        match self.sleeper.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s - 1),
        }
    }

    /// Counts a cancellation (for compaction).
    pub fn cancelled_one(&self) {
        // Relaxed: a compaction hint only.
        self.cancelled.fetch_add(1, Ordering::Relaxed);
    }

    /// Fires every timer due at `now`; returns how many poked. Runs the
    /// pokes outside the lock. A worker that finds the lock taken leaves
    /// the firing to its holder.
    pub fn fire(&self, now: u64) -> u64 {
        let mut due: Vec<Arc<TimerEntry>> = Vec::new();
        {
            let Some(mut heap) = self.heap.try_lock() else {
                return 0;
            };
            heap.pop_due(now, |_, e| due.push(e));
            let n = heap.next_deadline().unwrap_or(NEVER);
            self.next.store(n, Ordering::SeqCst);
        }
        let mut fired = 0;
        for e in due {
            // AcqRel: pairs with the waiter's CAS in `cancel` (one wins).
            if e.state
                .compare_exchange(ARMED, FIRING, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                e.target.poke();
                // Release: pairs with the waiter's Acquire loads
                // (`wait_fired`, `has_fired`): the poke is complete.
                e.state.store(FIRED, Ordering::Release);
                fired += 1;
            } else {
                // Relaxed: a compaction hint.
                self.cancelled.fetch_sub(1, Ordering::Relaxed);
            }
        }
        fired
    }

    /// An idle worker `i` claims the role of sleeping until the earliest
    /// deadline (and being woken when an earlier one is armed). Returns
    /// whether it got the role; everyone else sleeps without a deadline.
    pub fn claim(&self, i: usize) -> bool {
        // SeqCst: the worker's first half of the Dekker pair in `arm`.
        self.sleeper
            .compare_exchange(0, i + 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Worker `i` gives up the role (it woke up).
    pub fn release(&self, i: usize) {
        let _ = self
            .sleeper
            .compare_exchange(i + 1, 0, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Whether a claimant sleeping until `deadline` must not sleep: an
    /// earlier timer was armed since it read the deadline.
    pub fn changed(&self, deadline: u64) -> bool {
        self.next() < deadline
    }
}

#[cfg(test)]
mod tests;
