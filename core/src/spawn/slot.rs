//! The join slot and the body, in one allocation: where an actor's result
//! (or its panic) waits for whoever joins it, and the closure the actor
//! runs until it starts.
//!
//! # The cell
//!
//! A spawn allocates one [`BodyCell`]: the [`JoinSlot`] first, then the
//! body. Two owners share it from the start: the join handle (a
//! [`SlotRef`]) and the actor's entry (`crate::actor::Entry`), which runs
//! the body (moving it out of the cell) or drops it unrun, and then
//! completes the slot and lets its reference go. A join timer takes one
//! more while it is armed. The reference count is the slot's own (`refs`,
//! no weak count): it starts at two, so a spawn pays no atomic
//! read-modify-write to share the cell, and the last owner to let go frees
//! it. The body is gone by then (the entry's reference is let go only
//! after it), so freeing drops the slot alone.
//!
//! # The slot's state word
//!
//! A one-shot handshake:
//!
//! | value         | meaning                                         |
//! |---------------|-------------------------------------------------|
//! | `EMPTY`       | no result, nobody waiting                       |
//! | `WAIT_REG`    | no result; `waiter` holds a registration: a parked-or-parking actor, or a select's waiter (an actor or a thread) |
//! | `WAIT_THREAD` | no result; an OS thread sleeps on this word     |
//! | `DONE`        | `result` is written (`None`: the body never ran to the end) |
//!
//! 1. The joiner, finding no result, writes `waiter` (registrations) and
//!    CASes `EMPTY → WAIT_*` (Release). If the CAS finds `DONE`, it takes
//!    the result.
//! 2. The finishing actor writes `result` and swaps in `DONE` (AcqRel). The
//!    old value says whom to wake: the `waiter`, or futex sleepers.
//!
//! Each side publishes before it reads the other's: no wake is lost.

use alloc::sync::Arc;
use core::alloc::Layout;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use core::ptr::{self, NonNull};

use crate::actor::exit::JoinError;
use crate::actor::ActorArc;
use crate::msg::wait::Waiter;
use crate::sched::{block_alloc, block_free};
use crate::seam::platform::Platform;
use crate::sync::{AtomicU32, AtomicUsize, Ordering, RawCell, UnsafeCell, LOOM};

pub(super) const EMPTY: u32 = 0;
pub(super) const WAIT_REG: u32 = 1;
pub(super) const WAIT_THREAD: u32 = 2;
pub(super) const DONE: u32 = 3;

/// Where one actor's outcome waits for its joiner (the head of its
/// [`BodyCell`]).
pub(crate) struct JoinSlot<T> {
    /// The owners of the cell (module doc): the handle, the entry until it
    /// has completed the slot, join timers.
    refs: AtomicUsize,
    /// Frees the cell (its layout depends on the body's type).
    free: unsafe fn(NonNull<JoinSlot<T>>),
    pub(super) state: AtomicU32,
    waiter: UnsafeCell<Option<Waiter>>,
    /// `None` once `DONE`: the body never ran to the end (dropped unrun at
    /// shutdown, or its harness was torn down); the joiner reports that.
    result: UnsafeCell<Option<Result<T, JoinError>>>,
}

// SAFETY: `waiter` and `result` are handed from one side to the other
// through the state word's Release/Acquire handshake (module doc); each is
// written by one side and read by the other only after the handoff. The
// rest are atomics and a plain function pointer.
unsafe impl<T: Send> Send for JoinSlot<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for JoinSlot<T> {}

/// The one allocation of a spawn: the slot first (so a pointer to the cell
/// is a pointer to its slot), then the body.
#[repr(C)]
pub(crate) struct BodyCell<T, F> {
    slot: JoinSlot<T>,
    /// Moved out by the entry's run, or dropped by the entry unrun; never
    /// touched by anyone else, and gone before the entry lets the cell go.
    body: RawCell<ManuallyDrop<F>>,
}

impl<T> JoinSlot<T> {
    /// Step 2: stores the outcome (`None`: the body never ran to the end);
    /// returns a parked actor joiner to wake (a thread is woken here).
    pub(crate) fn complete<F: crate::seam::platform::Futex>(
        &self,
        r: Option<Result<T, JoinError>>,
    ) -> Option<ActorArc> {
        // SAFETY: only the finishing side writes `result`, once, before DONE.
        self.result.with_mut(|p| unsafe { *p = r });
        // AcqRel: Release publishes `result` to the joiner's Acquire load of
        // DONE; Acquire makes the joiner's `waiter` write visible.
        match self.state.swap(DONE, Ordering::AcqRel) {
            // SAFETY: the joiner wrote `waiter` before its Release CAS into
            // WAIT_REG, which our Acquire swap observed; it no longer
            // touches it.
            WAIT_REG => match self.waiter.with_mut(|p| unsafe { (*p).take() }) {
                Some(Waiter::Actor(a)) => Some(a),
                Some(w) => {
                    w.wake();
                    None
                }
                None => None,
            },
            WAIT_THREAD => {
                F::wake_all(&self.state);
                None
            }
            _ => None,
        }
    }

    /// A join timer's poke: takes the actor registration (if the result
    /// has not taken it) and wakes the joiner.
    pub(super) fn poke(s: &SlotRef<T>) {
        // AcqRel: Acquire sees the joiner's `waiter` write (before its
        // Release CAS into WAIT_REG); one of this CAS and `complete`'s
        // swap takes the registration.
        if s.state
            .compare_exchange(WAIT_REG, EMPTY, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // SAFETY: our CAS took the registration; the joiner writes
            // `waiter` again only once this poke has returned.
            if let Some(w) = s.waiter.with_mut(|p| unsafe { (*p).take() }) {
                w.wake();
            }
        }
    }

    /// Registers `w` (step 1): `false` if the result is already in.
    ///
    /// # Safety
    ///
    /// The caller is the handle's only user and nothing is registered.
    pub(super) unsafe fn register(&self, w: Waiter) -> bool {
        // SAFETY: contract: the slot is not WAIT_REG, so nobody else reads
        // `waiter` (a timer's poke that emptied it has returned).
        self.waiter.with_mut(|p| unsafe { *p = Some(w) });
        // Release: publishes `waiter` to the Acquire swap in `complete`.
        if self
            .state
            .compare_exchange(EMPTY, WAIT_REG, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // DONE already: take our registration back.
            // SAFETY: the CAS failed, so `complete` never read `waiter`.
            drop(self.waiter.with_mut(|p| unsafe { (*p).take() }));
            return false;
        }
        true
    }

    /// Takes a registration back; `false` if `complete` (or a poke) took
    /// it first.
    pub(super) fn withdraw(&self) -> bool {
        // AcqRel: as in `poke`.
        let won = self
            .state
            .compare_exchange(WAIT_REG, EMPTY, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            // SAFETY: our CAS took the registration back.
            drop(self.waiter.with_mut(|p| unsafe { (*p).take() }));
        }
        won
    }

    pub(super) fn is_done(&self) -> bool {
        // Acquire: pairs with the AcqRel swap in `complete`.
        self.state.load(Ordering::Acquire) == DONE
    }

    /// The outcome, once `DONE`: a body that never ran to the end is
    /// reported as cancelled (`id`, `name`: the actor's).
    pub(super) fn take(&self, id: u64, name: &Option<Arc<str>>) -> Result<T, JoinError> {
        debug_assert!(self.is_done());
        // SAFETY: DONE was observed with Acquire, so `result` is written and
        // the finishing side is done with it; the handle is the only taker.
        self.result
            .with_mut(|p| unsafe { (*p).take() })
            .unwrap_or_else(|| Err(JoinError::cancelled(id, name)))
    }
}

/// One owner's reference to a [`BodyCell`], seen as its slot (the handle,
/// the entry's completer, an armed join timer).
pub(crate) struct SlotRef<T> {
    slot: NonNull<JoinSlot<T>>,
    _owns: PhantomData<JoinSlot<T>>,
}

// SAFETY: a shared reference to a `Sync` slot; the last owner frees it on
// whichever thread lets go (the slot is `Send`).
unsafe impl<T: Send> Send for SlotRef<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SlotRef<T> {}

impl<T> SlotRef<T> {
    /// Takes over the reference `slot` carries.
    ///
    /// # Safety
    ///
    /// `slot` is the head of a live cell, and the caller owns one of the
    /// references counted in its `refs`, which it gives to the result.
    unsafe fn from_raw(slot: NonNull<JoinSlot<T>>) -> Self {
        SlotRef {
            slot,
            _owns: PhantomData,
        }
    }
}

impl<T> Deref for SlotRef<T> {
    type Target = JoinSlot<T>;

    fn deref(&self) -> &JoinSlot<T> {
        // SAFETY: our reference keeps the cell alive.
        unsafe { self.slot.as_ref() }
    }
}

impl<T> Clone for SlotRef<T> {
    fn clone(&self) -> Self {
        // Relaxed: a new reference from one we hold; nothing to order (as
        // `Arc::clone`). Never near overflow: the handle, the entry, and
        // the join timers the handle's waits armed and the timer wheel
        // has not dropped yet.
        self.refs.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the reference just counted is the new value's.
        unsafe { SlotRef::from_raw(self.slot) }
    }
}

impl<T> Drop for SlotRef<T> {
    fn drop(&mut self) {
        // Release: our uses of the cell happen before whoever frees it;
        // that owner's Acquire load below reads the end of the release
        // sequence every other owner's decrement belongs to, so it pairs
        // with all of them. A load rather than `Arc`'s fence: ThreadSanitizer
        // does not model fences (it reported the free racing the joiner's
        // take), and the load costs the same (a plain `mov` on x86-64, an
        // `ldar` on AArch64, once per cell).
        if self.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        self.refs.load(Ordering::Acquire);
        // SAFETY: we held the last reference; `free` is the cell's own.
        unsafe { (self.free)(self.slot) };
    }
}

/// Frees a cell whose body is gone (moved out or dropped by the entry):
/// drops the slot and gives the memory back as [`cell`] took it.
///
/// # Safety
///
/// `slot` heads a `BodyCell<T, F>` from [`cell`] on platform `P`, with no
/// reference left.
unsafe fn free<P: Platform, T, F>(slot: NonNull<JoinSlot<T>>) {
    let c = slot.cast::<BodyCell<T, F>>();
    if LOOM {
        // Under loom, an untaken result (a detached actor's) and a
        // registration are dropped through their cells, as writes: the
        // model then checks that the free comes after every other owner's
        // last use (`refs`' ordering). The drop below does the same
        // without loom's bookkeeping (explicit takes here made spawn_join
        // 1.14x slower in an A/B).
        // SAFETY: no other owner is left; the cell is live until the
        // `block_free` below.
        let s = unsafe { &(*c.as_ptr()).slot };
        // SAFETY: as above.
        drop(s.result.with_mut(|p| unsafe { (*p).take() }));
        // SAFETY: as above.
        drop(s.waiter.with_mut(|p| unsafe { (*p).take() }));
    }
    // SAFETY: contract: the cell is live, initialised by `cell`, and ours
    // alone; the slot is its first field (`repr(C)`). The body is
    // `ManuallyDrop` and already gone, so this drops the slot alone.
    unsafe { ptr::drop_in_place(c.as_ptr()) };
    // SAFETY: `cell` took the block with this layout (`block_alloc`); the
    // cell is dropped and nothing refers to it any more.
    unsafe { block_free::<P>(c.cast(), Layout::new::<BodyCell<T, F>>()) };
}

/// A new cell around `body`: the handle's reference and the entry's
/// pointer (which carries the other reference). Its memory is a block of
/// the calling worker's cache (`crate::sched::block_alloc`), where the cell
/// goes back when freed on a worker: a chain of spawns that keeps a
/// thousand actors alive recycles their cells there instead of through
/// `malloc`'s bins.
pub(crate) fn cell<P: Platform, T, F>(body: F) -> (SlotRef<T>, NonNull<BodyCell<T, F>>) {
    let c = block_alloc::<P>(Layout::new::<BodyCell<T, F>>()).cast::<BodyCell<T, F>>();
    // SAFETY: a fresh block of at least the cell's size and alignment
    // (`block_alloc` rounds both up), ours alone. Written in place: a body
    // of any size is moved once, not built on the stack and copied.
    unsafe {
        c.as_ptr().write(BodyCell {
            slot: JoinSlot {
                refs: AtomicUsize::new(2),
                free: free::<P, T, F>,
                state: AtomicU32::new(EMPTY),
                waiter: UnsafeCell::new(None),
                result: UnsafeCell::new(None),
            },
            body: RawCell::new(ManuallyDrop::new(body)),
        })
    };
    // SAFETY: a live cell; one of its two references is the handle's.
    (unsafe { SlotRef::from_raw(c.cast()) }, c)
}

impl<T, F> BodyCell<T, F> {
    /// Moves the body out and hands over the entry's reference.
    ///
    /// # Safety
    ///
    /// `c` came from [`cell`]; the caller is its entry, which has neither
    /// taken the body nor given up its reference, and does neither again.
    pub(crate) unsafe fn take(c: NonNull<Self>) -> (F, SlotRef<T>) {
        // SAFETY: contract: the body is still there and only the entry
        // touches it; the entry's reference keeps the cell alive.
        let f = unsafe { ManuallyDrop::take(&mut *(*c.as_ptr()).body.get()) };
        // SAFETY: contract: the entry's reference, given once.
        (f, unsafe { SlotRef::from_raw(c.cast()) })
    }

    /// The entry's reference, for a caller that drops the body in place
    /// ([`drop_body`](Self::drop_body)) while holding it.
    ///
    /// # Safety
    ///
    /// `c` came from [`cell`]; the caller is its entry, which has not given
    /// up its reference and does not again.
    pub(crate) unsafe fn entry_ref(c: NonNull<Self>) -> SlotRef<T> {
        // SAFETY: contract: the entry's reference, given once.
        unsafe { SlotRef::from_raw(c.cast()) }
    }

    /// Drops the body in place.
    ///
    /// # Safety
    ///
    /// `c` came from [`cell`]; the caller is its entry, holding its
    /// reference (from [`entry_ref`](Self::entry_ref)) across this call,
    /// and the body is still there (never taken or dropped before).
    pub(crate) unsafe fn drop_body(c: NonNull<Self>) {
        // SAFETY: contract: the body is still there, ours alone; the held
        // reference keeps the cell alive.
        unsafe { ManuallyDrop::drop(&mut *(*c.as_ptr()).body.get()) };
    }
}

/// Loom models only: a spawn's cell with a real join handle and the real
/// completion paths, no actor behind them (`core/tests/loom_join.rs`).
#[cfg(smarm_loom)]
#[doc(hidden)]
pub mod loom_join {
    use core::marker::PhantomData;
    use core::ptr::NonNull;

    use super::{cell, BodyCell};
    use crate::actor::life::Life;
    use crate::seam::platform::Platform;
    use crate::spawn::join::{Completer, JoinHandle};

    /// The entry's side of a cell (its body is `()`).
    pub struct Finisher<T, P: Platform> {
        cell: NonNull<BodyCell<T, ()>>,
        _p: PhantomData<fn() -> P>,
    }

    // SAFETY: the entry's side moves to another thread as the entry does
    // (`Entry` is `Send`); `T: Send`.
    unsafe impl<T: Send, P: Platform> Send for Finisher<T, P> {}

    /// A cell as a spawn makes it: the handle of actor `id`, and the entry's
    /// side.
    pub fn spawned<T: Send + 'static, P: Platform>(id: u64) -> (JoinHandle<T, P>, Finisher<T, P>) {
        let (slot, cell) = cell::<P, T, ()>(());
        let h = JoinHandle {
            slot,
            id,
            life: Life::detached(id, false),
            _p: PhantomData,
        };
        (
            h,
            Finisher {
                cell,
                _p: PhantomData,
            },
        )
    }

    impl<T, P: Platform> Finisher<T, P> {
        /// The body ran and returned `v` (the harness's path).
        pub fn finish(self, v: T) {
            // SAFETY: the entry's side, used once (consumed).
            let ((), slot) = unsafe { BodyCell::take(self.cell) };
            let c = Completer::<T, P> {
                slot: Some(slot),
                _p: PhantomData,
            };
            // A thread joiner is woken inside; no actor joiner here.
            assert!(c.complete(Ok(v)).is_none());
        }

        /// The entry was dropped unrun (an `Entry`'s drop path).
        pub fn drop_unrun(self) {
            // SAFETY: as in `finish`: the entry's first and only use, the
            // body still there.
            unsafe { Completer::<T, P>::drop_unrun(self.cell) }
        }
    }
}

#[cfg(all(test, not(smarm_loom)))]
mod tests {
    use super::*;
    use crate::seam::test_platform::StdPlatform as P;
    use alloc::vec::Vec;

    /// Counts its drops.
    struct Probe<'a>(&'a core::cell::Cell<u32>);
    impl Drop for Probe<'_> {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn the_result_reaches_the_handle_and_the_cell_is_freed_once() {
        let dropped = core::cell::Cell::new(0);
        let (h, c) = cell::<P, Probe<'_>, Vec<u8>>(alloc::vec![1, 2, 3]);
        // SAFETY: the entry's first and only use.
        let (body, done) = unsafe { BodyCell::take(c) };
        assert_eq!(body, [1, 2, 3]);
        assert!(!h.is_done());
        assert!(done.complete::<P>(Some(Ok(Probe(&dropped)))).is_none());
        drop(done);
        assert!(h.is_done());
        let r = h.take(7, &None);
        assert!(r.is_ok());
        drop(r);
        assert_eq!(dropped.get(), 1);
        drop(h); // Miri: a leak or a double free fails here.
        assert_eq!(dropped.get(), 1);
    }

    #[test]
    fn a_body_dropped_unrun_completes_the_slot_with_no_result() {
        let dropped = core::cell::Cell::new(0);
        let (h, c) = cell::<P, u32, Probe<'_>>(Probe(&dropped));
        // SAFETY: the entry's first and only use: its reference, held
        // across the body's drop.
        let r = unsafe { BodyCell::entry_ref(c) };
        // SAFETY: as above.
        unsafe { BodyCell::drop_body(c) };
        assert_eq!(dropped.get(), 1);
        drop(r.complete::<P>(None));
        assert!(h.is_done());
        match h.take(7, &Some(Arc::from("w"))) {
            Err(JoinError::Cancelled { id, name }) => {
                assert_eq!(id, 7);
                assert_eq!(name.as_deref(), Some("w"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_handle_may_go_first_and_a_timer_last() {
        let dropped = core::cell::Cell::new(0);
        let (h, c) = cell::<P, Probe<'_>, ()>(());
        let timer = h.clone();
        drop(h);
        // SAFETY: the entry's first and only use.
        let ((), done) = unsafe { BodyCell::take(c) };
        assert!(done.complete::<P>(Some(Ok(Probe(&dropped)))).is_none());
        drop(done);
        // The result stays in the cell while the timer holds it.
        assert_eq!(dropped.get(), 0);
        JoinSlot::poke(&timer); // DONE: the poke finds nothing to take
        drop(timer);
        assert_eq!(dropped.get(), 1, "freeing the cell drops an untaken result");
    }
}
