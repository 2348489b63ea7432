//! A channel's receiver registration ([`WaiterSlot`]): one tagged pointer
//! to the waiting actor or thread, put by the receiver and taken by
//! exactly one waker (`chan`'s `R1`, `S3`, `D2`).

use core::ptr;

use alloc::sync::Arc;

use crate::actor::{Actor, ActorArc};
use crate::msg::wait::{ThreadWaiter, Waiter};
use crate::sync::{AtomicPtr, Ordering, LOOM};

/// The low bit of a slot pointer: set for a thread waiter, clear for an
/// actor (both pointees are aligned to at least 4).
const THREAD_TAG: usize = 1;

const _: () = assert!(core::mem::align_of::<Actor>() > THREAD_TAG);
const _: () = assert!(core::mem::align_of::<ThreadWaiter>() > THREAD_TAG);

/// One registration, held as a tagged `Arc` pointer: null, or a [`Waiter`]
/// whose reference the slot owns. Swapping it out transfers that ownership.
pub(super) struct WaiterSlot {
    ptr: AtomicPtr<u8>,
}

impl WaiterSlot {
    pub(super) fn new() -> Self {
        let s = WaiterSlot {
            ptr: AtomicPtr::new(ptr::null_mut()),
        };
        if LOOM {
            // loom treats an atomic's initial value as a non-SeqCst store;
            // the Dekker pairs need the latest store to be a SeqCst one.
            s.ptr.store(ptr::null_mut(), Ordering::SeqCst);
        }
        s
    }

    fn encode(w: Waiter) -> *mut u8 {
        match w {
            Waiter::Actor(a) => ActorArc::into_raw(a).cast_mut().cast(),
            Waiter::Thread(t) => Arc::into_raw(t)
                .cast_mut()
                .cast::<u8>()
                .map_addr(|a| a | THREAD_TAG),
        }
    }

    /// # Safety
    ///
    /// `p` is non-null and came from [`encode`](Self::encode); the caller
    /// owns the reference it carries (it swapped it out of the slot).
    unsafe fn decode(p: *mut u8) -> Waiter {
        if p.addr() & THREAD_TAG != 0 {
            let t = p.map_addr(|a| a & !THREAD_TAG).cast::<ThreadWaiter>();
            // SAFETY: from `Arc::into_raw` of an `Arc<ThreadWaiter>` (the
            // tag says so), its reference now ours (contract).
            Waiter::Thread(unsafe { Arc::from_raw(t) })
        } else {
            // SAFETY: as above, for an `ActorArc`.
            Waiter::Actor(unsafe { ActorArc::from_raw(p.cast::<Actor>()) })
        }
    }

    /// `R1`: registers `w`, dropping a stale registration of the caller's
    /// left from an earlier, spuriously ended wait.
    pub(super) fn put(&self, w: Waiter) {
        // SeqCst: the receiver's first half of the Dekker pairs (module
        // doc); its Release part publishes the registration to `take`.
        let old = self.ptr.swap(Self::encode(w), Ordering::SeqCst);
        if !old.is_null() {
            // SAFETY: swapped out, so its reference is ours.
            drop(unsafe { Self::decode(old) });
        }
    }

    /// Whether a registration is present (`S3` / `D2`: SeqCst, the waker's
    /// second half of the Dekker pairs).
    pub(super) fn is_set(&self) -> bool {
        !self.ptr.load(Ordering::SeqCst).is_null()
    }

    /// Takes the registration, if it is still there: the caller then owns
    /// it (to wake it, or to drop it when withdrawing).
    pub(super) fn take(&self) -> Option<Waiter> {
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
    }
}
