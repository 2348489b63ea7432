//! A channel's receiver registration ([`WaiterSlot`]): one tagged pointer
//! to the waiting actor or thread, put by the receiver and taken by
//! exactly one waker (`chan`'s `R1`, `S3`, `D2`). A registration is a
//! counted [`Waiter`] (the slot owns its reference) or a lent actor (no
//! reference: the channel's pin keeps the actor alive;
//! `crate::actor::lent`).

use core::ptr;

use alloc::sync::Arc;

use crate::actor::{Actor, ActorArc};
use crate::msg::wait::{ThreadWaiter, Waiter};
use crate::sync::{AtomicPtr, Ordering, LOOM};

/// The low bit of a slot pointer: set for a thread waiter, clear for an
/// actor (both pointees are aligned to at least 4).
const THREAD_TAG: usize = 1;

/// The second bit: set for a lent actor registration (no reference).
const LENT_TAG: usize = 2;

const _: () = assert!(core::mem::align_of::<Actor>() > (THREAD_TAG | LENT_TAG));
const _: () = assert!(core::mem::align_of::<ThreadWaiter>() > THREAD_TAG);

/// One registration, held as a tagged pointer: null, a [`Waiter`] whose
/// reference the slot owns (swapping it out transfers that ownership), or
/// a lent actor.
pub(super) struct WaiterSlot {
    ptr: AtomicPtr<u8>,
    /// The pinned actor (an `ActorArc::into_raw`, or null): the actor whose
    /// receives register lent, with the reference the slot (so its
    /// channel) holds to it until its drop. Read and written by the
    /// receiver only (a handle moved to another thread carries a
    /// happens-before edge with it), and by the drop.
    pin: AtomicPtr<Actor>,
}

/// A registration taken out of a [`WaiterSlot`].
pub(super) enum Registration {
    /// Counted: its reference is ours.
    Counted(Waiter),
    /// Lent: the actor, alive while the channel that pins it is.
    Lent(*const Actor),
}

impl Registration {
    /// Wakes the registered waiter (the lent one as `crate::actor::lent`
    /// says).
    ///
    /// # Safety
    ///
    /// A lent registration's channel (its pin) outlives this call: the
    /// caller reaches the slot through that channel.
    pub(super) unsafe fn wake(self) {
        match self {
            Registration::Counted(w) => w.wake(),
            Registration::Lent(a) => {
                // SAFETY: contract.
                if let Some(a) = unsafe { crate::actor::wake_lent(a) } {
                    crate::actor::schedule(a);
                }
            }
        }
    }
}

impl WaiterSlot {
    pub(super) fn new() -> Self {
        let s = WaiterSlot {
            ptr: AtomicPtr::new(ptr::null_mut()),
            pin: AtomicPtr::new(ptr::null_mut()),
        };
        if LOOM {
            // loom treats an atomic's initial value as a non-SeqCst store;
            // the Dekker pairs need the latest store to be a SeqCst one.
            s.ptr.store(ptr::null_mut(), Ordering::SeqCst);
        }
        s
    }

    fn encode(w: Registration) -> *mut u8 {
        match w {
            Registration::Lent(a) => a.cast_mut().cast::<u8>().map_addr(|p| p | LENT_TAG),
            Registration::Counted(Waiter::Actor(a)) => ActorArc::into_raw(a).cast_mut().cast(),
            Registration::Counted(Waiter::Thread(t)) => Arc::into_raw(t)
                .cast_mut()
                .cast::<u8>()
                .map_addr(|a| a | THREAD_TAG),
        }
    }

    /// # Safety
    ///
    /// `p` is non-null and came from [`encode`](Self::encode); the caller
    /// owns the reference it carries (it swapped it out of the slot).
    unsafe fn decode(p: *mut u8) -> Registration {
        if p.addr() & LENT_TAG != 0 {
            Registration::Lent(p.map_addr(|a| a & !LENT_TAG).cast::<Actor>())
        } else if p.addr() & THREAD_TAG != 0 {
            let t = p.map_addr(|a| a & !THREAD_TAG).cast::<ThreadWaiter>();
            // SAFETY: from `Arc::into_raw` of an `Arc<ThreadWaiter>` (the
            // tag says so), its reference now ours (contract).
            Registration::Counted(Waiter::Thread(unsafe { Arc::from_raw(t) }))
        } else {
            // SAFETY: as above, for an `ActorArc`.
            Registration::Counted(Waiter::Actor(unsafe { ActorArc::from_raw(p.cast::<Actor>()) }))
        }
    }

    /// `R1`: registers `w`, dropping a stale registration of the caller's
    /// left from an earlier, spuriously ended wait.
    pub(super) fn put(&self, w: Registration) {
        // SeqCst: the receiver's first half of the Dekker pairs (module
        // doc); its Release part publishes the registration to `take`.
        let old = self.ptr.swap(Self::encode(w), Ordering::SeqCst);
        if !old.is_null() {
            // SAFETY: swapped out, so its reference is ours.
            drop(unsafe { Self::decode(old) });
        }
    }

    /// Whether the receiving actor `a` registers lent: it is the pinned
    /// actor, or becomes it now (the first actor to wait on the channel).
    ///
    /// # Safety
    ///
    /// The receiver (single consumer), `a` the running actor.
    #[inline]
    pub(super) unsafe fn pinned(&self, a: *const Actor) -> bool {
        // Relaxed (both): only the receiver writes `pin` (field doc).
        let p = self.pin.load(Ordering::Relaxed);
        if p.cast_const() == a {
            return true;
        }
        if !p.is_null() {
            return false;
        }
        // SAFETY: `a` runs, so its worker holds a reference; the pin takes
        // one of its own, given back in the drop.
        let r = unsafe { ActorArc::clone_from_ptr(a) };
        self.pin
            .store(ActorArc::into_raw(r).cast_mut(), Ordering::Relaxed);
        true
    }

    /// Whether a registration is present (`S3` / `D2`: SeqCst, the waker's
    /// second half of the Dekker pairs).
    pub(super) fn is_set(&self) -> bool {
        !self.ptr.load(Ordering::SeqCst).is_null()
    }

    /// Takes the registration, if it is still there: the caller then owns
    /// it (to wake it, or to drop it when withdrawing).
    pub(super) fn take(&self) -> Option<Registration> {
        // SeqCst, though AcqRel would do (Acquire pairs with the Release of
        // `put`'s swap, the waiter's contents): every write of the slot is
        // SeqCst so that loom, whose SeqCst loads may skip a newer SeqCst
        // store to return an older non-SeqCst one, checks the Dekker pairs
        // as the hardware runs them. The same instruction either way on
        // x86-64 (`xchg`) and AArch64 (`swpal`).
        let p = self.ptr.swap(ptr::null_mut(), Ordering::SeqCst);
        // SAFETY: swapped out, so its reference is ours.
        (!p.is_null()).then(|| unsafe { Self::decode(p) })
    }
}

impl Drop for WaiterSlot {
    fn drop(&mut self) {
        drop(self.take());
        // Relaxed: `&mut self`; the handles' drops ordered everything else.
        let p = self.pin.load(Ordering::Relaxed);
        if !p.is_null() {
            // SAFETY: the pin's reference, ours to give back; no waker can
            // reach a lent registration any more.
            drop(unsafe { ActorArc::from_raw(p) });
        }
    }
}
