//! The striped run queue: `K` MPMC rings (stripes) with one shared overflow,
//! the churn-heavy many-core variant (`crate::sched::queue` compares the three).
//!
//! A single ring makes every worker's push and pop meet on the same two
//! counters (`head`, `tail`): with many workers churning (a yield storm) those
//! two cache lines bounce between every core. Striping splits them: worker
//! `w` pushes to and pops from stripe `w % K`, so in steady state each stripe
//! is touched by about `workers / K` workers.
//!
//! # The protocol
//!
//! 1. **Push** (`push_at(hint, v)`): push onto stripe `hint % K`. A full
//!    stripe never drops or blocks a wake: the item spills to the shared,
//!    locked overflow list (as [`RingQueue`](super::RingQueue) does). A push
//!    never looks at other stripes: a stripe is full only when the queue
//!    holds thousands of runnable actors, and then the overflow is cheap
//!    next to the work queued.
//!
//!    **One producer per stripe** ([`Striped::single_producer`], what the
//!    scheduler uses when each worker has a stripe of its own): only the
//!    stripe's owner pushes onto it (`push_own`, and its own batch steals
//!    in `pop_own`), with [`Ring::push_single`], no CAS; a push from any
//!    other thread (`push_at`) goes to the overflow, and a pop from one
//!    (`pop_at`) moves no batch. The owner's calls are ordered (one thread,
//!    or a worker's duty handed over with a Release/Acquire edge), which
//!    is `push_single`'s contract.
//! 2. **Pop** (`pop_at(hint)`): take from the own stripe `hint % K` first,
//!    then scan the other stripes in order (`hint + 1`, `hint + 2`, ...),
//!    skipping a stripe whose counters say it is empty, then the overflow.
//!    The scan is what makes striping safe for the scheduler: a runnable
//!    actor on any stripe is found by any worker that would otherwise go
//!    idle.
//!
//!    **Batch steal.** A pop that found its own stripe empty and took an
//!    item from another stripe also moves half of what that stripe still
//!    holds (at most [`STEAL_BATCH`]) onto its own stripe, oldest first,
//!    so one producer waking many actors (a fork-join) is split between
//!    the workers in one steal each rather than one steal per actor. Each
//!    moved item is popped from the victim and pushed onto the own stripe
//!    (spilling to the overflow if that is full): still one push awaiting
//!    one pop per item. A fairness round (step 3) never moves a batch: its
//!    own stripe need not be empty.
//!
//!    **Patience** (`pop_own_patient`, what the scheduler's workers use
//!    on more than one worker): a stripe holding one or two actors while
//!    its owner works is most likely a chain's next step (a spawner's
//!    child displaced from the run-next slot, a message's receiver), which
//!    its owner runs within a microsecond; a thief that takes it moves the
//!    chain to its own core, and every message of the chain then crosses
//!    cores. So before it takes from another stripe holding at most
//!    [`PATIENT_DEPTH`] items, the thief waits once (the caller's `wait`:
//!    the scheduler's is a few microseconds of the platform clock, as Go's
//!    scheduler waits before it takes another processor's next goroutine)
//!    and takes only if that stripe's pops have not passed every item it
//!    held before the wait: work its owner is not getting to. A deeper
//!    stripe is a backlog and is taken from at once. The wait is used once
//!    per pop: a later stripe in the same scan is taken from at once. A
//!    skipped item stays where it is; the next pop looks again.
//! 3. **Fairness.** A worker whose own stripe never runs dry would never
//!    look elsewhere, and a stripe that no worker owns (`K > workers`, or a
//!    stripe filled by plain threads) would starve. So every 61st pop of a
//!    stripe (counted per stripe, like `RingQueue`'s pacer) first takes from
//!    the overflow, then scans starting at a rotating stripe
//!    (`hint + 1 + n / 61`), which visits every stripe first once per `K`
//!    such rounds: an item on any stripe waits at most `61 * K` pops of any
//!    one busy stripe.
//!
//! Order is FIFO per stripe only; across stripes it is not. The scheduler
//! needs no global order, only that every pushed actor is popped exactly
//! once, which each ring and the overflow give, and that a pop finds an item
//! that is there, which the scan gives (up to the approximate `is_empty`
//! skip: an item whose push is still in flight may be missed, as the
//! [`RunQueue`] contract allows; the pusher notifies idle
//! workers after its push returns).
//!
//! The stripe a worker uses is its index (the scheduler passes it); a
//! plain OS thread (no worker) takes stripes round robin, or the overflow
//! when stripes have one producer. [`Striped`] is the
//! algorithm with explicit hints, generic over the item and the lock so the
//! unit tests and the loom model (`core/tests/loom_striped.rs`) drive it
//! directly; [`StripedQueue`] is the scheduler's run queue built on it.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::marker::PhantomData;

use super::{relax, Overflow, Pacer, RunQueue, Runnable};
use crate::lockfree::ring::Ring;
use crate::seam::platform::{Platform, RawLock};
use crate::sync::{AtomicUsize, Ordering};

/// The deepest stripe a patient thief waits on before it takes from it
/// (protocol step 2, "Patience"): a stripe holding more is a backlog,
/// taken at once.
pub const PATIENT_DEPTH: usize = 2;

/// Most stripes a [`StripedQueue`] makes (one per worker up to this).
pub const MAX_STRIPES: usize = 16;

/// Most items one batch steal moves onto the thief's stripe (protocol step
/// 2), besides the one it returns.
pub const STEAL_BATCH: usize = 32;

/// Keeps each stripe's pop counter and ring header off its neighbours'
/// cache lines (128: x86 adjacent-line prefetch pairs; Apple's line size).
#[repr(align(128))]
struct Stripe<T> {
    ring: Ring<T>,
    /// Pops that started at this stripe: paces the fairness round.
    pace: Pacer,
}

/// `K` rings and a shared overflow, with explicit stripe hints (see the
/// [module docs](self)). `K` is a power of two.
pub struct Striped<T, L: RawLock> {
    stripes: Box<[Stripe<T>]>,
    /// `K - 1`.
    mask: usize,
    overflow: Overflow<T, L>,
    /// One producer per stripe (its owner; protocol step 1): owners push
    /// without a CAS, everyone else onto the overflow.
    single: bool,
}

impl<T, L: RawLock> Striped<T, L> {
    /// `stripes` stripes (rounded up to a power of two, at least 1) sharing
    /// about `capacity` ring slots (each stripe gets `capacity / stripes`,
    /// at least 2) before items spill to the overflow.
    pub fn new(capacity: usize, stripes: usize) -> Self {
        Self::build(capacity, stripes, false)
    }

    /// [`new`](Self::new) with one producer per stripe: each stripe is
    /// pushed onto by its owner alone, through [`push_own`](Self::push_own)
    /// and [`pop_own`](Self::pop_own)'s batch steals, without a CAS;
    /// [`push_at`](Self::push_at) goes to the overflow.
    pub fn single_producer(capacity: usize, stripes: usize) -> Self {
        Self::build(capacity, stripes, true)
    }

    fn build(capacity: usize, stripes: usize, single: bool) -> Self {
        let k = stripes.max(1).next_power_of_two();
        let each = (capacity / k).max(2);
        let stripes: Vec<Stripe<T>> = (0..k)
            .map(|_| Stripe {
                ring: Ring::with_capacity(each),
                pace: Pacer::new(),
            })
            .collect();
        Striped {
            stripes: stripes.into_boxed_slice(),
            mask: k - 1,
            overflow: Overflow::new(),
            single,
        }
    }

    /// Number of stripes (`K`).
    pub fn stripes(&self) -> usize {
        self.stripes.len()
    }

    /// Protocol step 1 from any thread: pushes `v` onto stripe `hint % K`,
    /// spilling to the overflow when that stripe is full; onto the overflow
    /// when each stripe has one producer. `relax` yields the OS thread (see
    /// [`Ring::push`]).
    #[inline]
    pub fn push_at(&self, hint: usize, v: T, relax: &mut dyn FnMut()) {
        if self.single {
            self.overflow.push(v);
        } else if let Err(v) = self.stripes[hint & self.mask].ring.push(v, relax) {
            self.overflow.push(v);
        }
    }

    /// Protocol step 1 from stripe `own % K`'s owner: as
    /// [`push_at`](Self::push_at), but with one producer per stripe the push
    /// lands on the own stripe without a CAS ([`Ring::push_single`]).
    ///
    /// # Safety
    ///
    /// With one producer per stripe: the caller is stripe `own`'s owner, no
    /// other `push_own` or `pop_own` for that stripe runs concurrently, and
    /// each earlier one happens-before this call.
    #[inline]
    pub unsafe fn push_own(&self, own: usize, v: T, relax: &mut dyn FnMut()) {
        // SAFETY: contract.
        if let Err(v) = unsafe { self.push_stripe(own, v, relax) } {
            self.overflow.push(v);
        }
    }

    /// Pushes onto stripe `own % K` as its owner; `Err(v)` when it is full.
    ///
    /// # Safety
    ///
    /// As for [`push_own`](Self::push_own).
    #[inline]
    unsafe fn push_stripe(&self, own: usize, v: T, relax: &mut dyn FnMut()) -> Result<(), T> {
        let ring = &self.stripes[own & self.mask].ring;
        if self.single {
            // SAFETY: contract: the stripe's one producer.
            unsafe { ring.push_single(v, relax) }
        } else {
            ring.push(v, relax)
        }
    }

    /// Protocol steps 2 and 3 from any thread: the stripe `hint % K`, then
    /// the others, then the overflow; every 61st pop of that stripe starts
    /// with the overflow and a rotating stripe instead. With one producer
    /// per stripe it moves no batch (only an owner pushes onto a stripe).
    #[inline]
    pub fn pop_at(&self, hint: usize, relax: &mut dyn FnMut()) -> Option<T> {
        let steal = !self.single;
        self.pop_from(hint, steal, relax, None)
    }

    /// [`pop_at`](Self::pop_at) from stripe `own % K`'s owner, whose batch
    /// steals move items onto its own stripe.
    ///
    /// # Safety
    ///
    /// As for [`push_own`](Self::push_own).
    #[inline]
    pub unsafe fn pop_own(&self, own: usize, relax: &mut dyn FnMut()) -> Option<T> {
        self.pop_from(own, true, relax, None)
    }

    /// [`pop_own`](Self::pop_own) with a thief's patience (protocol step
    /// 2, "Patience"): before it takes from another stripe that holds at
    /// most [`PATIENT_DEPTH`] items it calls `wait` once, and it leaves
    /// that stripe alone if pops there have passed every item it held
    /// before the wait.
    ///
    /// # Safety
    ///
    /// As for [`push_own`](Self::push_own).
    #[inline]
    pub unsafe fn pop_own_patient(
        &self,
        own: usize,
        relax: &mut dyn FnMut(),
        wait: &mut dyn FnMut(),
    ) -> Option<T> {
        self.pop_from(own, true, relax, Some(wait))
    }

    /// `pop_at`, `pop_own` and `pop_own_patient`: `steal` says whether a
    /// batch steal may push onto stripe `hint`: only its owner's may when
    /// it has one producer; `wait`, when given, is the patience (used once
    /// per call).
    #[inline]
    fn pop_from(
        &self,
        hint: usize,
        steal: bool,
        relax: &mut dyn FnMut(),
        mut wait: Option<&mut dyn FnMut()>,
    ) -> Option<T> {
        let own = hint & self.mask;
        // The pacer's plain loads and stores spare the stripe's owner a
        // locked read-modify-write (`Pacer`'s doc).
        let start = if let Some(round) = self.stripes[own].pace.tick() {
            if let Some(v) = self.overflow.pop() {
                return Some(v);
            }
            own.wrapping_add(1).wrapping_add(round)
        } else {
            own
        };
        // Patience only for a pop whose own stripe is asked first (and was
        // empty when it scans on): a fairness round's owner has work.
        if start != own {
            wait = None;
        }
        for i in 0..self.stripes.len() {
            let s = start.wrapping_add(i) & self.mask;
            let ring = &self.stripes[s].ring;
            // The own stripe is always asked (its pop waits out a producer
            // caught mid-publish); another stripe only when its counters
            // say it holds something, so an idle scan costs loads, not the
            // empty check's fence, per stripe.
            if s != own && ring.is_empty() {
                continue;
            }
            if s != own && owner_keeps_up(ring, &mut wait) {
                continue;
            }
            if let Some(v) = ring.pop(relax) {
                // Step 2's batch steal: the own stripe was asked first
                // (i > 0 and no fairness round) and was empty.
                if steal && i > 0 && start == own {
                    // SAFETY: with one producer per stripe, `steal` is set
                    // only by `pop_own`, whose caller owns stripe `own`
                    // under the same contract as `push_own`.
                    unsafe { self.steal_batch(s, own, relax) };
                }
                return Some(v);
            }
        }
        self.overflow.pop()
    }

    /// Protocol step 2's batch steal: moves half of stripe `from`'s items (at most
    /// [`STEAL_BATCH`]) onto stripe `to`, oldest first. Out of line: the
    /// pop that calls it already found its own stripe empty.
    ///
    /// # Safety
    ///
    /// As for [`push_own`](Self::push_own), with `to` as `own`.
    #[cold]
    #[inline(never)]
    unsafe fn steal_batch(&self, from: usize, to: usize, relax: &mut dyn FnMut()) {
        let from = &self.stripes[from].ring;
        for _ in 0..(from.len() / 2).min(STEAL_BATCH) {
            // A pop's Acquire pairs with the victim's push; the push onto
            // `to` is the Release edge to whoever pops the item next.
            let Some(v) = from.pop(relax) else { break };
            // SAFETY: contract.
            if let Err(v) = unsafe { self.push_stripe(to, v, relax) } {
                self.overflow.push(v);
                break;
            }
        }
    }

    /// Approximate number of items (sum of the stripes and the overflow).
    pub fn len(&self) -> usize {
        // Approximate by contract (see `RunQueue::len`).
        self.stripes.iter().map(|s| s.ring.len()).sum::<usize>() + self.overflow.len()
    }

    /// Approximate number of items on stripe `hint % K` and the overflow:
    /// what a worker on that stripe sees without reading the others.
    pub fn len_at(&self, hint: usize) -> usize {
        // Approximate by contract (see `RunQueue::len`).
        self.stripes[hint & self.mask].ring.len() + self.overflow.len()
    }

    /// `len() == 0` (approximate, as `len` is).
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Step 2's patience for another worker's stripe `ring`: when it holds at
/// most [`PATIENT_DEPTH`] items and `wait` is still unused, calls it (once
/// per pop) and says whether the stripe's pops got past every item it held
/// before the wait (a wrapping compare of the two counters): its owner
/// keeps up, so the thief leaves it.
fn owner_keeps_up<T>(ring: &Ring<T>, wait: &mut Option<&mut dyn FnMut()>) -> bool {
    let (head, tail) = ring.tickets();
    if tail.wrapping_sub(head) > PATIENT_DEPTH {
        return false;
    }
    let Some(wait) = wait.take() else {
        return false;
    };
    wait();
    ring.tickets().0.wrapping_sub(tail) as isize >= 0
}

/// The striped run queue: `Striped` with the calling worker's index as the
/// stripe hint (plain threads go round robin, or to the overflow when each
/// worker has a stripe of its own and is its one producer), one stripe per
/// worker (a power of two, up to `MAX_STRIPES`). With one stripe (one worker) every
/// push and pop uses stripe 0 without asking which worker calls (the
/// default, [`AutoQueue`](super::AutoQueue), takes the plain ring there).
pub struct StripedQueue<P: Platform> {
    inner: Striped<Runnable, P::Lock>,
    /// Round-robin stripe for pushes and pops from plain OS threads.
    rr: AtomicUsize,
    _p: PhantomData<fn() -> P>,
}

impl<P: Platform> StripedQueue<P> {
    /// A queue with exactly `stripes` stripes (rounded up to a power of
    /// two) sharing about `capacity` ring slots, for any number of workers
    /// (pushes claim their tickets with a CAS).
    pub fn with_stripes(capacity: usize, stripes: usize) -> Self {
        StripedQueue {
            inner: Striped::new(capacity, stripes),
            rr: AtomicUsize::new(0),
            _p: PhantomData,
        }
    }

    /// A queue for a runtime of `workers` workers: one stripe each (a power
    /// of two, up to `MAX_STRIPES`). With no more workers than stripes,
    /// each stripe has one producer, its worker (plain threads push onto
    /// the overflow), and the workers' pushes need no CAS.
    pub fn for_workers(capacity: usize, workers: usize) -> Self {
        let stripes = workers.clamp(1, MAX_STRIPES);
        let single = workers <= stripes.next_power_of_two();
        StripedQueue {
            inner: if single {
                Striped::single_producer(capacity, stripes)
            } else {
                Striped::new(capacity, stripes)
            },
            rr: AtomicUsize::new(0),
            _p: PhantomData,
        }
    }

    /// Number of stripes.
    pub fn stripes(&self) -> usize {
        self.inner.stripes()
    }

    /// The calling worker's stripe; round robin for a plain thread; 0
    /// when there is one stripe.
    #[inline]
    fn hint(&self) -> usize {
        if self.inner.mask == 0 {
            return 0;
        }
        match crate::sched::current_worker::<P>() {
            Some(w) => w,
            None => {
                // Relaxed load + store: a spreading hint only; a lost
                // increment puts two pushes on one stripe.
                let n = self.rr.load(Ordering::Relaxed);
                self.rr.store(n.wrapping_add(1), Ordering::Relaxed);
                n
            }
        }
    }
}

impl<P: Platform> RunQueue<P> for StripedQueue<P> {
    const NAME: &'static str = "striped";

    fn with_capacity(capacity: usize, workers: usize) -> Self {
        Self::for_workers(capacity, workers)
    }

    #[inline]
    fn push(&self, actor: Runnable) {
        self.inner.push_at(self.hint(), actor, &mut relax::<P>())
    }

    #[inline]
    fn pop(&self) -> Option<Runnable> {
        self.inner.pop_at(self.hint(), &mut relax::<P>())
    }

    #[inline]
    unsafe fn push_worker(&self, actor: Runnable, worker: usize) {
        // SAFETY: forwarded contract: the thread serving `worker`, the only
        // one that pushes onto its stripe when stripes have one producer
        // (`for_workers`: each worker has a stripe of its own).
        unsafe { self.inner.push_own(worker, actor, &mut relax::<P>()) }
    }

    #[inline]
    unsafe fn pop_worker(&self, worker: usize) -> Option<Runnable> {
        // SAFETY: as in `push_worker`.
        unsafe { self.inner.pop_own(worker, &mut relax::<P>()) }
    }

    #[inline]
    unsafe fn pop_worker_patient(&self, worker: usize, wait: &mut dyn FnMut()) -> Option<Runnable> {
        // SAFETY: as in `push_worker`.
        unsafe { self.inner.pop_own_patient(worker, &mut relax::<P>(), wait) }
    }

    #[inline]
    fn len(&self) -> usize {
        self.inner.len()
    }

    #[inline]
    fn depth_hint(&self, worker: usize) -> usize {
        self.inner.len_at(worker)
    }
}
