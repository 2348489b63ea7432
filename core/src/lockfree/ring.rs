//! A bounded multi-producer multi-consumer ring: Dmitry Vyukov's bounded
//! MPMC queue (<https://www.1024cores.net/home/lock-free-algorithms/queues/bounded-mpmc-queue>),
//! with the "stalled consumer" fixed.
//!
//! # The algorithm
//!
//! The ring is an array of `capacity` cells (a power of two) and two
//! ever-increasing ticket counters: `tail` (the enqueue counter) and `head`
//! (the dequeue counter). Ticket `pos` lives in cell `pos & mask`, and each
//! cell carries a sequence number saying whose turn it is:
//!
//! | cell sequence     | meaning                                            |
//! |-------------------|----------------------------------------------------|
//! | `pos`             | empty, waiting for the producer of ticket `pos`    |
//! | `pos + 1`         | full, waiting for the consumer of ticket `pos`     |
//! | `pos + capacity`  | released, empty for the producer of the next lap   |
//!
//! A producer claims ticket `pos` with a CAS on `tail` once the cell reads
//! `pos`, writes the value and publishes it by storing `pos + 1` (Release). A
//! consumer claims ticket `pos` with a CAS on `head` once the cell reads
//! `pos + 1`, reads the value and releases the cell by storing
//! `pos + capacity` (Release). The sequence numbers, not the counters, carry
//! the data from thread to thread; the counters only hand out tickets.
//!
//! # The stalled consumer
//!
//! A consumer preempted between its CAS on `head` and its release store
//! freezes one cell at `pos + 1`. Traffic continues around it, and once the
//! producers lap the ring they find that cell "a lap behind". The classic
//! queue reports Full there, although the ring may hold a single item. With
//! `STALL_FIX = true` (the default) [`Ring::push`] handles a lap-behind cell
//! this way:
//!
//! 1. `fence(SeqCst)`, so the counter loads below are not satisfied before the
//!    cell's sequence load and, with the SeqCst CAS by which every consumer
//!    claims its ticket, see every claim ordered before the fence.
//! 2. Load the enqueue counter, *then* the dequeue counter. Reading `tail`
//!    first can only under-estimate occupancy (`head` may move on in between),
//!    never over-estimate it, so Full is never reported spuriously.
//! 3. If `tail - head >= capacity`, the ring truly holds `capacity` items (a
//!    claimed-but-unpublished producer ticket counts as an item): return
//!    `Err(value)`.
//! 4. Otherwise a consumer has claimed the cell and not yet released it: a
//!    transient stall. Back off (spin `2^n` hints, then ask the caller's
//!    `relax` to yield the thread: pure spinning would starve the descheduled
//!    consumer that the producer is waiting for) and retry from a fresh `tail`.
//!
//! [`Ring::pop`] has the mirror problem: a producer preempted between its CAS
//! and its publish leaves a cell that reads "empty" although `tail` has moved
//! past it. Before reporting empty, pop loads `tail` (after a SeqCst fence); if
//! a producer holds the ticket, pop waits for the publish with backoff, but
//! only for a bounded number of rounds, then returns `None`. Callers tolerate
//! that `None`: a producer re-checks for sleepers after its publish. (Items
//! published behind that ticket wait for it too: tickets are consumed in
//! order.)
//!
//! # One producer
//!
//! Where one thread at a time pushes (each earlier push happening-before
//! the next: a run-queue stripe that only its worker fills),
//! [`Ring::push_single`] skips the ticket claim: nobody else moves `tail`,
//! so the producer reads it, writes the cell once its sequence reads
//! `pos`, publishes `pos + 1` (Release) and then stores `pos + 1` into
//! `tail`. No locked instruction. Consumers are unchanged. Publishing the
//! cell before the tail only narrows what they see: a pop that finds the
//! cell unpublished and `tail` not past it reports empty (the push is
//! still in flight, as the [`RunQueue`](crate::sched::queue::RunQueue)
//! contract allows); `len` may read a tail one behind a head that already
//! took the item, which it clamps to 0. A cell a lap behind is handled as
//! in `push` (steps 1-4 above): full, or a stalled consumer waited out.
//! Mixing `push` and `push_single` on one ring is outside the contract.
//!
//! Under loom every wait round is a single yield and the pop wait is short, so
//! models stay small; tests use capacity 2 there to reach the edges. Loom
//! models a SeqCst CAS as AcqRel (only SeqCst fences are exact), so step 1's
//! guarantee is weaker under loom than on hardware: the models assert "no
//! Full below capacity" only where the producer has itself seen the claim.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::mem::MaybeUninit;

use super::CachePadded;
use crate::sync::{fence, spin_hint, AtomicUsize, Backoff, Ordering, UnsafeCell, LOOM};

#[cfg(all(test, not(smarm_loom)))]
mod tests;

/// How many backoff rounds `pop` waits for a producer caught mid-publish
/// before it reports empty. Off loom this is the backoff's spinning rounds
/// plus a few thread yields.
const POP_WAIT_ROUNDS: u32 = if LOOM { 1 } else { Backoff::SPIN_LIMIT + 5 };

/// One cell: its turn (see the module table) and its value.
struct Slot<T> {
    seq: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A bounded lock-free MPMC ring (Vyukov's bounded MPMC queue).
///
/// `STALL_FIX = true` (the default) makes `push` fail only when the ring
/// truly holds `capacity` items, even while a consumer is stalled mid-pop;
/// `STALL_FIX = false` is the classic queue, kept for comparison (benches,
/// and the loom model that shows the bug). See the [module docs](self).
///
/// `Ring<T>` is `Send + Sync` when `T: Send`.
pub struct Ring<T, const STALL_FIX: bool = true> {
    /// The dequeue counter: the next ticket a consumer will claim.
    head: CachePadded<AtomicUsize>,
    /// The enqueue counter: the next ticket a producer will claim.
    tail: CachePadded<AtomicUsize>,
    /// `capacity` cells; ticket `pos` lives in `slots[pos & mask]`.
    slots: Box<[Slot<T>]>,
    /// `capacity - 1`.
    mask: usize,
}

// SAFETY: the ring owns its items, so sending the ring sends them: `T: Send`
// is all that is needed.
unsafe impl<T: Send, const STALL_FIX: bool> Send for Ring<T, STALL_FIX> {}

// SAFETY: through `&Ring` items only move in and out by value (`T: Send`),
// and a cell's value is touched only by the one thread holding its ticket,
// with the cell's sequence (Release/Acquire) ordering the hand-off between
// the producer and the consumer of each ticket.
unsafe impl<T: Send, const STALL_FIX: bool> Sync for Ring<T, STALL_FIX> {}

impl<T, const STALL_FIX: bool> Ring<T, STALL_FIX> {
    /// A ring for `cap` items, rounded up to a power of two, at least 2.
    ///
    /// # Panics
    ///
    /// If the rounded capacity overflows `usize`.
    pub fn with_capacity(cap: usize) -> Self {
        let cap = cap
            .max(2)
            .checked_next_power_of_two()
            .expect("ring capacity overflows usize");
        let slots: Vec<Slot<T>> = (0..cap)
            .map(|i| Slot {
                seq: AtomicUsize::new(i),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Self {
            head: CachePadded(AtomicUsize::new(0)),
            tail: CachePadded(AtomicUsize::new(0)),
            slots: slots.into_boxed_slice(),
            mask: cap - 1,
        }
    }

    /// The number of items the ring can hold.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Appends `v`; `Err(v)` only when the ring truly holds `capacity` items.
    ///
    /// While a consumer is stalled mid-pop on the cell this push needs, push
    /// waits for it (with `STALL_FIX`), spinning with backoff and calling
    /// `relax` whenever the backoff says the thread should yield. Core does
    /// not know the OS: the caller passes e.g. `sched_yield`.
    pub fn push(&self, v: T, relax: &mut dyn FnMut()) -> Result<(), T> {
        let mut backoff = Backoff::new();
        // Relaxed: only a guess at the next ticket, validated by the cell's
        // sequence below and by the CAS.
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = self.slot(pos);
            // Acquire: synchronizes with the Release store in `take` that
            // freed this cell, so that consumer's read of the previous lap's
            // value happens-before our write.
            let seq = slot.seq.load(Ordering::Acquire);
            let dif = seq.wrapping_sub(pos) as isize;
            if dif == 0 {
                // SeqCst on success: the claim joins the total order that
                // pop's empty check (fence + tail load) is ordered against.
                // Relaxed on failure: the value read is only a fresh guess.
                match self.tail.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        crate::seam::failpoint::hit(crate::seam::failpoint::Site::RingClaimed);
                        slot.value.with_mut(|p| {
                            // SAFETY: the CAS made ticket `pos` ours alone, and
                            // the Acquire above ordered the previous consumer's
                            // read before this write.
                            unsafe { p.write(MaybeUninit::new(v)) }
                        });
                        // Release: synchronizes with the Acquire sequence load
                        // in `claim`, publishing the value to its consumer.
                        slot.seq.store(pos.wrapping_add(1), Ordering::Release);
                        return Ok(());
                    }
                    Err(current) => pos = current,
                }
            } else if dif < 0 {
                // The cell still holds (or is still being emptied of) the
                // item from ticket `pos - capacity`.
                if !STALL_FIX {
                    return Err(v);
                }
                match self.lap_behind(pos, &mut backoff, relax) {
                    Some(fresh) => pos = fresh,
                    None => return Err(v),
                }
            } else {
                // Another producer took `pos`: reload. The hint eases the
                // contention, and under loom makes this a yield, after which a
                // stale counter read cannot repeat. Relaxed: a guess, as above.
                spin_hint();
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// [`push`](Self::push) for a ring with one producer at a time: the
    /// ticket needs no CAS (module docs, "One producer").
    ///
    /// # Safety
    ///
    /// No other push (this one or [`push`](Self::push)) runs on this ring
    /// concurrently, and each earlier push happens-before this one.
    pub unsafe fn push_single(&self, v: T, relax: &mut dyn FnMut()) -> Result<(), T> {
        let mut backoff = Backoff::new();
        // Relaxed: the caller is the only producer, and earlier pushes (its
        // own, or another's ordered before this call) wrote `tail` last.
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = self.slot(pos);
            // Acquire: as in `push`, pairs with the Release store in `take`
            // that freed the cell.
            let seq = slot.seq.load(Ordering::Acquire);
            if seq == pos {
                slot.value.with_mut(|p| {
                    // SAFETY: ticket `pos` is ours (the one producer, and
                    // `tail` says nobody published it), and the Acquire above
                    // ordered the previous consumer's read before this write.
                    unsafe { p.write(MaybeUninit::new(v)) }
                });
                // Release: pairs with the Acquire sequence load in `claim`,
                // publishing the value to its consumer.
                slot.seq.store(pos.wrapping_add(1), Ordering::Release);
                // The one-producer push's own window (the value published,
                // `tail` not yet moved): a consumer may take it meanwhile.
                crate::seam::failpoint::hit(crate::seam::failpoint::Site::RingClaimed);
                // Release: keeps the publish above ahead of the new tail for
                // any reader that acquires the tail; nothing relies on that
                // for the value (the cell's sequence carries it): consumers
                // read the counter after a SeqCst fence only to tell empty
                // from in flight, `len` as a hint, and the next producer
                // (ordered after us by the contract) reads what it wrote.
                self.tail.store(pos.wrapping_add(1), Ordering::Release);
                return Ok(());
            }
            // A cell a lap behind: full, or a consumer stalled mid-pop (no
            // other producer can have moved past `pos`).
            debug_assert!(
                (seq.wrapping_sub(pos) as isize) < 0,
                "a second producer on a one-producer ring"
            );
            if !STALL_FIX {
                return Err(v);
            }
            match self.lap_behind(pos, &mut backoff, relax) {
                Some(fresh) => pos = fresh,
                None => return Err(v),
            }
        }
    }

    /// The stalled-consumer check (module docs, steps 1-4): `None` when the
    /// ring is truly full, else a fresh ticket guess after backing off if the
    /// cell at `pos` is frozen by a consumer mid-pop.
    #[cold]
    fn lap_behind(&self, pos: usize, backoff: &mut Backoff, relax: &mut dyn FnMut()) -> Option<usize> {
        fence(Ordering::SeqCst);
        // Relaxed (both): ordered by the fence above; `tail` is loaded first
        // so that occupancy is never over-estimated (module docs, step 2).
        let enq = self.tail.load(Ordering::Relaxed);
        let deq = self.head.load(Ordering::Relaxed);
        if occupancy(enq, deq) >= self.capacity() {
            return None;
        }
        if enq == pos {
            // Our cell is frozen by a stalled consumer: give it time.
            wait(backoff, relax);
        }
        // Otherwise `pos` was stale: retry at once from the fresh ticket.
        Some(enq)
    }

    /// Removes the oldest item; `None` when the ring is empty.
    ///
    /// Before reporting empty, pop checks the counters. A producer caught
    /// between claiming its ticket and publishing is waited for a bounded
    /// time, with backoff (calling `relax` when the thread should yield);
    /// after that `None` may be returned although an item is about to
    /// appear. Callers tolerate this because the producer re-checks for
    /// sleepers after its publish.
    pub fn pop(&self, relax: &mut dyn FnMut()) -> Option<T> {
        let pos = self.claim(relax)?;
        // SAFETY: `claim` returned ticket `pos` to us alone, published and
        // not yet taken.
        Some(unsafe { self.take(pos) })
    }

    /// Claims the oldest published ticket (the CAS on `head`), or `None`.
    fn claim(&self, relax: &mut dyn FnMut()) -> Option<usize> {
        let mut backoff = Backoff::new();
        let mut rounds = 0;
        // Relaxed: only a guess at the next ticket, validated by the cell's
        // sequence below and by the CAS.
        let mut pos = self.head.load(Ordering::Relaxed);
        loop {
            let slot = self.slot(pos);
            // Acquire: synchronizes with the Release publish in `push`, so the
            // producer's write of the value happens-before our read in `take`.
            let seq = slot.seq.load(Ordering::Acquire);
            let dif = seq.wrapping_sub(pos.wrapping_add(1)) as isize;
            if dif == 0 {
                // SeqCst on success: a claim must be visible to a producer's
                // occupancy check (`lap_behind`) once it precedes that
                // check's fence. Relaxed on failure: only a fresh guess.
                match self.head.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some(pos),
                    Err(current) => pos = current,
                }
            } else if dif < 0 {
                // Nothing published at `pos` yet. Empty, or a producer holds
                // the ticket and has not published: the counters tell.
                fence(Ordering::SeqCst);
                // Relaxed: ordered by the fence above, which orders it after
                // every SeqCst tail claim that precedes the fence.
                let enq = self.tail.load(Ordering::Relaxed);
                if (enq.wrapping_sub(pos) as isize) <= 0 || rounds == POP_WAIT_ROUNDS {
                    return None;
                }
                rounds += 1;
                wait(&mut backoff, relax);
                // Relaxed: a guess, as above.
                pos = self.head.load(Ordering::Relaxed);
            } else {
                // Another consumer took `pos`: reload, after a hint as in
                // `push`. Relaxed: a guess.
                spin_hint();
                pos = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// Moves the value of ticket `pos` out and releases its cell.
    ///
    /// # Safety
    ///
    /// The caller holds ticket `pos` from a successful `claim` (the value is
    /// published) and has not taken it yet.
    unsafe fn take(&self, pos: usize) -> T {
        let slot = self.slot(pos);
        let v = slot.value.with(|p| {
            // SAFETY: per the contract the cell is initialised and ours alone;
            // the Acquire in `claim` ordered the producer's write before this.
            unsafe { p.read().assume_init() }
        });
        // Release: synchronizes with the Acquire sequence load in `push` of
        // the next lap, so our read happens-before its write.
        slot.seq
            .store(pos.wrapping_add(self.capacity()), Ordering::Release);
        v
    }

    /// Approximate number of items: the enqueue counter minus the dequeue
    /// counter, clamped to `0..=capacity`. Items being pushed count, items
    /// being popped do not.
    pub fn len(&self) -> usize {
        let (deq, enq) = self.tickets();
        occupancy(enq, deq).min(self.capacity())
    }

    /// Whether [`len`](Self::len) is 0 (approximate, as `len` is).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dequeue and enqueue counters (`head`, `tail`): how many pops and
    /// pushes have claimed a ticket so far. A probe for heuristics (a
    /// thief's patience: has anyone popped past what it saw?), no
    /// synchronisation; compare them with wrapping arithmetic. `head` is
    /// read first, so `tail - head` is rarely negative.
    #[inline]
    pub fn tickets(&self) -> (usize, usize) {
        // Relaxed (both): a snapshot for heuristics (`len`, a thief's
        // patience); whoever acts on it pops, and that pop's own Acquire
        // orders the item.
        (
            self.head.load(Ordering::Relaxed),
            self.tail.load(Ordering::Relaxed),
        )
    }

    #[inline]
    fn slot(&self, pos: usize) -> &Slot<T> {
        &self.slots[pos & self.mask]
    }
}

/// `enq - deq` on wrapping tickets, 0 when `deq` was read ahead of `enq`.
#[inline]
fn occupancy(enq: usize, deq: usize) -> usize {
    let d = enq.wrapping_sub(deq) as isize;
    d.max(0) as usize
}

/// One backoff round. Under loom a round is one yield (a loom scheduling
/// point) so models stay small and never spin.
#[inline]
fn wait(backoff: &mut Backoff, relax: &mut dyn FnMut()) {
    if LOOM {
        spin_hint();
    } else if backoff.snooze() {
        relax();
    }
}

impl<T, const STALL_FIX: bool> Drop for Ring<T, STALL_FIX> {
    fn drop(&mut self) {
        if !core::mem::needs_drop::<T>() {
            return;
        }
        // Relaxed (all): `&mut self` means no push or pop is in flight and
        // whatever handed us the ring ordered their effects before this.
        let mut pos = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        while pos != tail {
            let slot = self.slot(pos);
            // Drop only published cells: robust even if a panic abandoned a
            // claimed ticket.
            if slot.seq.load(Ordering::Relaxed) == pos.wrapping_add(1) {
                slot.value.with_mut(|p| {
                    // SAFETY: the cell is published (sequence `pos + 1`) and
                    // its ticket unclaimed, so it holds an initialised value
                    // nobody else can reach any more.
                    unsafe { (*p).assume_init_drop() }
                });
            }
            pos = pos.wrapping_add(1);
        }
    }
}

impl<T, const STALL_FIX: bool> fmt::Debug for Ring<T, STALL_FIX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .field("stall_fix", &STALL_FIX)
            .finish()
    }
}

/// A pop ticket claimed by [`Ring::test_claim_pop`], not yet released.
#[cfg(all(test, not(smarm_loom)))]
#[derive(Debug)]
pub(crate) struct PopTicket(usize);

/// A push ticket claimed by [`Ring::test_claim_push`], not yet published.
#[cfg(all(test, not(smarm_loom)))]
#[derive(Debug)]
pub(crate) struct PushTicket(usize);

/// Test hooks that stop an operation between its claim and its release.
/// A ticket must go back to the ring that issued it (tests only).
#[cfg(all(test, not(smarm_loom)))]
impl<T, const STALL_FIX: bool> Ring<T, STALL_FIX> {
    /// A consumer stalled mid-pop: claims the oldest item (the CAS on `head`)
    /// without releasing its cell. Finish with [`Ring::test_finish_pop`].
    pub(crate) fn test_claim_pop(&self) -> Option<PopTicket> {
        self.claim(&mut || {}).map(PopTicket)
    }

    /// Takes the item of a ticket from [`Ring::test_claim_pop`] on this ring
    /// and releases its cell.
    pub(crate) fn test_finish_pop(&self, t: PopTicket) -> T {
        // SAFETY: the ticket came from `claim` on this ring (the hooks'
        // contract) and `PopTicket` is not `Clone`, so it is taken once.
        unsafe { self.take(t.0) }
    }

    /// A producer stalled mid-push: claims a ticket (the CAS on `tail`)
    /// without publishing. `None` if the ticket's cell is not free.
    pub(crate) fn test_claim_push(&self) -> Option<PushTicket> {
        // Relaxed / Acquire / SeqCst: as in `push`.
        let pos = self.tail.load(Ordering::Relaxed);
        if self.slot(pos).seq.load(Ordering::Acquire) != pos {
            return None;
        }
        self.tail
            .compare_exchange(pos, pos + 1, Ordering::SeqCst, Ordering::Relaxed)
            .ok()
            .map(|_| PushTicket(pos))
    }

    /// Publishes `v` under a ticket from [`Ring::test_claim_push`].
    pub(crate) fn test_finish_push(&self, t: PushTicket, v: T) {
        let slot = self.slot(t.0);
        slot.value.with_mut(|p| {
            // SAFETY: the ticket is ours alone (from the CAS in
            // `test_claim_push` on this ring) and its cell was free.
            unsafe { p.write(MaybeUninit::new(v)) }
        });
        // Release: synchronizes with the Acquire in `claim`, as in `push`.
        slot.seq.store(t.0 + 1, Ordering::Release);
    }
}
