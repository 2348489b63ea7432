//! The run queue behind a trait, so one binary can hold several variants and
//! a bench can compare them side by side (`Runtime<P, RingQueue<P>>` vs
//! `Runtime<P, MutexQueue<P>>`).
//!
//! - [`AutoQueue`] (the default): a [`RingQueue`] for a one-worker runtime,
//!   a [`StripedQueue`] for more. On a 16-core machine the one shared ring
//!   makes every worker's push and pop meet on two cache lines, and a yield
//!   storm on 2 to 16 workers ran 3 to 8 times slower on it than on the
//!   stripes; on one worker the stripes' extra indirection costs about a
//!   tenth of a yield (docs/benchmarks.md, "Run queues on many cores").
//! - [`RingQueue`]: the bounded MPMC [`Ring`](crate::lockfree::ring::Ring)
//!   plus an unbounded overflow list under the platform lock. A full ring
//!   never drops or blocks a wake: the push spills to the overflow. Pops
//!   take from the ring and, when it is empty (or every 61st pop, so spilled
//!   actors cannot starve behind a ring kept full), from the overflow. On a
//!   one-worker runtime the worker's own pushes and pops use a FIFO of its
//!   own in front, without atomics (`owned.rs`).
//! - [`MutexQueue`]: a `VecDeque` under the platform lock; the simple
//!   baseline that the ring must beat.
//! - [`StripedQueue`]: `K` rings (one per worker, up to 16) with a shared
//!   overflow; each worker pushes to and pops from its own stripe and scans
//!   the others before going idle (the churn-heavy many-core option; the
//!   protocol is in [`striped`]). With no more workers than stripes a
//!   stripe's worker is its only producer and pushes without a CAS; other
//!   threads push onto the overflow.

use alloc::collections::VecDeque;
use core::marker::PhantomData;

use crate::actor::ActorArc;
use crate::seam::lock::Mutex;
use crate::seam::platform::{Platform, RawLock};
use crate::sync::{AtomicUsize, Ordering};

pub mod owned;
pub mod striped;
#[cfg(all(test, not(smarm_loom)))]
mod tests;

#[cfg(any(test, feature = "internals", smarm_loom))]
pub use owned::WorkerRing;
#[cfg(any(test, feature = "internals", smarm_loom))]
pub use striped::Striped;
pub use striped::StripedQueue;

/// What the scheduler queues: a runnable actor.
pub type Runnable = ActorArc;

/// A multi-producer multi-consumer queue of runnable actors.
///
/// # Contract
///
/// Every pushed actor is popped exactly once (none lost, none duplicated);
/// `push` never blocks on a consumer and never fails; a `push` that returns
/// happens-before the `pop` that returns the same actor (Release/Acquire),
/// so an actor's saved state written before the push is visible to the worker
/// that pops it. `pop` may return `None` while a concurrent push is still
/// in flight: the pusher notifies idle workers after its push returns.
pub trait RunQueue<P: Platform>: Send + Sync + 'static {
    /// The variant's name, for bench and report output.
    const NAME: &'static str;
    /// A queue for a runtime of `workers` workers, sized for about
    /// `capacity` runnable actors before spilling.
    fn with_capacity(capacity: usize, workers: usize) -> Self;
    /// Appends a runnable actor.
    fn push(&self, actor: Runnable);
    /// Takes the oldest runnable actor, if any.
    fn pop(&self) -> Option<Runnable>;
    /// [`push`](Self::push) from the thread serving worker `worker` (a
    /// variant may keep a worker's own pushes apart from other threads', or
    /// push without a CAS where that worker is the only producer).
    ///
    /// # Safety
    ///
    /// The caller is the thread serving worker `worker` of this queue's
    /// runtime, and a worker's duty moves between threads only through a
    /// handoff with a Release/Acquire edge (`Shared::push`'s invariant).
    #[inline]
    unsafe fn push_worker(&self, actor: Runnable, worker: usize) {
        let _ = worker;
        self.push(actor)
    }
    /// [`pop`](Self::pop) from the thread serving worker `worker`; it may
    /// also take what [`push_worker`](Self::push_worker) kept apart.
    ///
    /// # Safety
    ///
    /// As for [`push_worker`](Self::push_worker) (after the worker threads
    /// are joined, any `worker` index will do).
    #[inline]
    unsafe fn pop_worker(&self, worker: usize) -> Option<Runnable> {
        let _ = worker;
        self.pop()
    }
    /// [`pop_worker`](Self::pop_worker) for a worker about to go idle,
    /// with a thief's patience: a queue that keeps each worker's actors
    /// apart may call `wait` (once) before it takes a short run of another
    /// worker's actors, and then leave them if their owner took them in
    /// the meantime (the striped queue's step 2, "Patience"). By default
    /// the plain `pop_worker`.
    ///
    /// # Safety
    ///
    /// As for [`pop_worker`](Self::pop_worker).
    #[inline]
    unsafe fn pop_worker_patient(&self, worker: usize, wait: &mut dyn FnMut()) -> Option<Runnable> {
        let _ = wait;
        // SAFETY: forwarded contract.
        unsafe { self.pop_worker(worker) }
    }
    /// Approximate length (for counters and idle checks).
    fn len(&self) -> usize;
    /// `len() == 0`.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The queue depth worker `worker`'s counters record after its pop:
    /// [`len`](Self::len) by default. A variant whose `len` reads every
    /// worker's counters (the striped queue) reports what that worker's own
    /// part holds instead, so a pop does not read lines of every core.
    fn depth_hint(&self, worker: usize) -> usize {
        let _ = worker;
        self.len()
    }
}

/// The ring run queue (the default on one worker): an MPMC ring with an
/// overflow list, and on a one-worker runtime the worker's own FIFO in
/// front (`sched/queue/owned.rs`).
pub struct RingQueue<P: Platform> {
    inner: owned::WorkerRing<Runnable, P::Lock>,
    _p: PhantomData<fn() -> P>,
}

fn relax<P: Platform>() -> impl FnMut() {
    || P::yield_thread()
}

/// Pops between two fairness rounds (the ring's and each stripe's): 61,
/// a prime, so the rounds do not fall into step with a periodic pattern
/// of pushes.
pub(crate) const FAIRNESS: usize = 61;

/// Paces the fairness rounds: [`tick`](Self::tick) once per pop says which
/// pops are rounds, every [`FAIRNESS`]th, the first at the 61st.
///
/// A countdown, not a count taken modulo 61: the modulo of a running count
/// compiled to a multiply-high, two shifts, a multiply and a subtraction
/// on every pop, a dependent chain that was ~4% of a one-worker yield
/// storm's samples (`pop_owner` 7%, most of it on that chain).
///
/// Relaxed loads and stores, no read-modify-write: the pacer only says
/// which pop takes a round, so a tick lost to a racing pop (two pops that
/// read the same value) merely shifts the next round by one pop, and every
/// pop is spared a locked instruction on a line that several threads may
/// share. Every value stored is in `0..FAIRNESS`, whatever the race.
pub(crate) struct Pacer {
    /// Pops left before the next round.
    left: AtomicUsize,
    /// Rounds taken so far (a rotation for the striped queue's scan).
    rounds: AtomicUsize,
}

impl Pacer {
    pub(crate) fn new() -> Self {
        Pacer {
            left: AtomicUsize::new(FAIRNESS - 1),
            rounds: AtomicUsize::new(0),
        }
    }

    /// Counts a pop: `Some(r)` when it is the fairness round numbered `r`
    /// (from 0), `None` for every other pop.
    #[inline]
    pub(crate) fn tick(&self) -> Option<usize> {
        // Relaxed: see the type's doc.
        let n = self.left.load(Ordering::Relaxed);
        if n != 0 {
            self.left.store(n - 1, Ordering::Relaxed);
            return None;
        }
        self.left.store(FAIRNESS - 1, Ordering::Relaxed);
        let r = self.rounds.load(Ordering::Relaxed);
        self.rounds.store(r.wrapping_add(1), Ordering::Relaxed);
        Some(r)
    }
}

/// Where a full ring spills: an unbounded FIFO under the platform lock, with
/// a length readable without the lock. Shared by [`RingQueue`] and
/// [`Striped`](striped::Striped); both methods are `#[cold]` (a ring full enough to spill
/// holds thousands of runnable actors).
pub(crate) struct Overflow<T, L: RawLock> {
    q: Mutex<L, VecDeque<T>>,
    /// Length of `q`, readable without its lock.
    len: AtomicUsize,
}

impl<T, L: RawLock> Overflow<T, L> {
    pub(crate) fn new() -> Self {
        Overflow {
            q: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
        }
    }

    #[cold]
    pub(crate) fn push(&self, v: T) {
        let mut o = self.q.lock();
        o.push_back(v);
        // Relaxed: written under the lock; readers use it only as a hint and
        // take the lock before trusting it.
        self.len.store(o.len(), Ordering::Relaxed);
    }

    #[cold]
    pub(crate) fn pop(&self) -> Option<T> {
        // Relaxed: a hint (see `push`); a push racing this check is found by
        // the pusher's notify or the next pop.
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut o = self.q.lock();
        let v = o.pop_front();
        // Relaxed: as in `push`.
        self.len.store(o.len(), Ordering::Relaxed);
        v
    }

    /// Approximate length (Relaxed: a hint, as in `push`).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

impl<P: Platform> RunQueue<P> for RingQueue<P> {
    const NAME: &'static str = "ring";

    fn with_capacity(capacity: usize, workers: usize) -> Self {
        RingQueue {
            inner: owned::WorkerRing::new(capacity, workers == 1),
            _p: PhantomData,
        }
    }

    #[inline]
    fn push(&self, actor: Runnable) {
        self.inner.push(actor, &mut relax::<P>())
    }

    #[inline]
    fn pop(&self) -> Option<Runnable> {
        self.inner.pop(&mut relax::<P>())
    }

    #[inline]
    unsafe fn push_worker(&self, actor: Runnable, _worker: usize) {
        // SAFETY: forwarded contract (the thread serving a worker, the
        // only one when the queue is owned).
        unsafe { self.inner.push_owner(actor, &mut relax::<P>()) }
    }

    #[inline]
    unsafe fn pop_worker(&self, _worker: usize) -> Option<Runnable> {
        // SAFETY: as in `push_worker`.
        unsafe { self.inner.pop_owner(&mut relax::<P>()) }
    }

    #[inline]
    fn len(&self) -> usize {
        // Approximate by contract.
        self.inner.len()
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

/// The default run queue: [`RingQueue`] when the runtime has one worker,
/// [`StripedQueue`] (one stripe per worker, batch steals) when it has more.
/// On 16 cores the one shared ring made a yield storm on 2 to 16 workers 3
/// to 8 times slower than the stripes; on one worker the stripes' extra
/// indirection costs about a tenth of a yield. The variant is chosen once,
/// at build, so each push and pop pays one predictable branch.
// The ring variant is inline and large: one per runtime, and boxing it would
// add a pointer chase to every push and pop on one worker.
#[allow(clippy::large_enum_variant)]
pub enum AutoQueue<P: Platform> {
    /// One worker.
    Ring(RingQueue<P>),
    /// Two or more workers.
    Striped(StripedQueue<P>),
}

impl<P: Platform> RunQueue<P> for AutoQueue<P> {
    const NAME: &'static str = "auto";

    fn with_capacity(capacity: usize, workers: usize) -> Self {
        if workers <= 1 {
            AutoQueue::Ring(RingQueue::with_capacity(capacity, workers))
        } else {
            AutoQueue::Striped(StripedQueue::with_capacity(capacity, workers))
        }
    }

    #[inline]
    fn push(&self, actor: Runnable) {
        match self {
            AutoQueue::Ring(q) => q.push(actor),
            AutoQueue::Striped(q) => q.push(actor),
        }
    }

    #[inline]
    fn pop(&self) -> Option<Runnable> {
        match self {
            AutoQueue::Ring(q) => q.pop(),
            AutoQueue::Striped(q) => q.pop(),
        }
    }

    #[inline]
    unsafe fn push_worker(&self, actor: Runnable, worker: usize) {
        match self {
            // SAFETY: forwarded contract.
            AutoQueue::Ring(q) => unsafe { q.push_worker(actor, worker) },
            // SAFETY: forwarded contract.
            AutoQueue::Striped(q) => unsafe { q.push_worker(actor, worker) },
        }
    }

    #[inline]
    unsafe fn pop_worker(&self, worker: usize) -> Option<Runnable> {
        match self {
            // SAFETY: forwarded contract.
            AutoQueue::Ring(q) => unsafe { q.pop_worker(worker) },
            // SAFETY: forwarded contract.
            AutoQueue::Striped(q) => unsafe { q.pop_worker(worker) },
        }
    }

    #[inline]
    unsafe fn pop_worker_patient(&self, worker: usize, wait: &mut dyn FnMut()) -> Option<Runnable> {
        match self {
            // SAFETY: forwarded contract (one ring: nobody to wait for).
            AutoQueue::Ring(q) => unsafe { q.pop_worker(worker) },
            // SAFETY: forwarded contract.
            AutoQueue::Striped(q) => unsafe { q.pop_worker_patient(worker, wait) },
        }
    }

    #[inline]
    fn len(&self) -> usize {
        match self {
            AutoQueue::Ring(q) => q.len(),
            AutoQueue::Striped(q) => q.len(),
        }
    }

    #[inline]
    fn depth_hint(&self, worker: usize) -> usize {
        match self {
            AutoQueue::Ring(q) => q.depth_hint(worker),
            AutoQueue::Striped(q) => q.depth_hint(worker),
        }
    }
}

/// The baseline run queue: a deque under the platform's lock.
pub struct MutexQueue<P: Platform> {
    q: Mutex<P::Lock, VecDeque<Runnable>>,
    len: AtomicUsize,
}

impl<P: Platform> RunQueue<P> for MutexQueue<P> {
    const NAME: &'static str = "mutex";

    fn with_capacity(capacity: usize, _workers: usize) -> Self {
        MutexQueue {
            q: Mutex::new(VecDeque::with_capacity(capacity)),
            len: AtomicUsize::new(0),
        }
    }

    fn push(&self, actor: Runnable) {
        let mut q = self.q.lock();
        q.push_back(actor);
        // Relaxed: written under the lock; `len` is approximate by contract.
        self.len.store(q.len(), Ordering::Relaxed);
    }

    fn pop(&self) -> Option<Runnable> {
        // Relaxed: a hint to skip the lock when empty; the lock's Acquire
        // orders the real read.
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut q = self.q.lock();
        let a = q.pop_front();
        // Relaxed: as in `push`.
        self.len.store(q.len(), Ordering::Relaxed);
        a
    }

    fn len(&self) -> usize {
        // Relaxed: approximate by contract.
        self.len.load(Ordering::Relaxed)
    }
}
