//! The part every MPSC channel shares: the message queue, the receiver's
//! one-pointer waiter slot, the connection word and the receiver's park
//! protocol.
//!
//! # Words
//!
//! | word      | value                | meaning                                              |
//! |-----------|----------------------|------------------------------------------------------|
//! | `rx`      | null                 | the receiver is not waiting (or is withdrawing)      |
//! | `rx`      | a tagged [`Waiter`]  | the receiver's registration; whoever swaps it out owns it and wakes it |
//! | `state`   | bit `TX_GONE` (1)    | every sender was dropped (set once, by the last)     |
//! | `state`   | bit `RX_GONE` (2)    | the receiver was dropped (set once)                  |
//! | `senders` | n                    | live sender handles                                  |
//!
//! # Protocol (numbered as in the code)
//!
//! This is the mailbox's park protocol ([`crate::msg::mailbox`]'s module doc),
//! with two changes: the registration *is* the slot (a swap of one pointer
//! instead of a cell plus a `WAITING` state), and the last sender's drop is
//! a second waker.
//!
//! Receiver, finding the queue empty and `TX_GONE` clear:
//! 1. `R1` swaps its [`Waiter`] into `rx` (SeqCst);
//! 2. `R2` re-checks: the queue with a SeqCst load of its tail
//!    ([`MpscQueue::is_empty_sc`]), then `TX_GONE` with a SeqCst load; if
//!    either says "don't sleep", it swaps `rx` back to null to withdraw —
//!    finding null there means a waker took the registration, whose wake will
//!    at worst make a later wait spurious;
//! 3. `R3` waits (an actor parks; a thread futex-waits on its own word), then
//!    the caller loops: pop, check `TX_GONE`, wait.
//!
//! Sender (`send`):
//! 1. `S1` if `RX_GONE`, returns the value in the error;
//! 2. `S2` pushes (a SeqCst swap of the tail);
//! 3. `S3` loads `rx` (SeqCst); if set, swaps it to null and, if it got the
//!    registration, wakes it.
//!
//! Last sender's drop:
//! 1. `D1` sets `TX_GONE` (a SeqCst read-modify-write);
//! 2. `D2` as `S3`.
//!
//! `R1`–`R2` against `S2`–`S3`, and against `D1`–`D2`, are Dekker pairs of
//! SeqCst accesses: either the receiver's re-check sees the message (or
//! the disconnection), or the waker sees the registration. Exactly one party
//! swaps a given registration out of `rx`, so it is woken at most once (the
//! park invariant).
//!
//! Why not the mailbox's `state` + cell: there, a sender that won the
//! `WAITING → IDLE` CAS reads the cell *after* the CAS, while the receiver,
//! having seen its withdraw fail, may already be writing its next
//! registration into the same cell. With the pointer slot the taker owns
//! what it swapped out; a late wake lands on a stale registration (a
//! spurious wake of the actor, or an abandoned thread word).
//!
//! Every write of `rx` is SeqCst, the withdrawing and waking swaps too
//! (AcqRel would do on hardware): loom lets a SeqCst load skip a newer
//! SeqCst store to return an older non-SeqCst one, so it checks these
//! Dekker pairs only when every store to the word is SeqCst
//! (`core/tests/loom_channel.rs`).
//!
//! # Disconnection, drained
//!
//! Each sender's drop decrements `senders` with Release after its last push;
//! the last one's Acquire decrement therefore follows every push, and its
//! `D1` publishes them all. A receiver that reads `TX_GONE` with Acquire
//! and then finds the queue empty knows no message will come: `Err`.
//!
//! # Memory
//!
//! Nodes come from the sending worker's node cache and go back to the
//! receiving worker's ([`sched::node_alloc`] / [`sched::node_free`]): no
//! allocation per message in steady state. A receiver on a plain thread
//! that waits allocates its wake word, once per wait.

use core::ptr;

use alloc::sync::Arc;

use crate::actor::Actor;
use crate::lockfree::mpsc_queue::{MpscQueue, Pop};
use crate::msg::wait::{ThreadWaiter, Waiter};
use crate::sched;
use crate::seam::platform::Platform;
use crate::sync::{AtomicPtr, AtomicU32, AtomicUsize, Backoff, Ordering, LOOM};

use super::{RecvError, RecvTimeoutError, TryRecvError};
use crate::actor::WAIT_CHANNEL;
use crate::sched::timer::Poke;

/// `state` bit: every sender was dropped.
const TX_GONE: u32 = 1;
/// `state` bit: the receiver was dropped.
const RX_GONE: u32 = 2;

pub(super) use crate::sched::unwinding as cancelled;

// ---------------------------------------------------------------------------
// The waiter slot
// ---------------------------------------------------------------------------

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
            Waiter::Actor(a) => Arc::into_raw(a).cast_mut().cast(),
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
            // SAFETY: as above, for an `Arc<Actor>`.
            Waiter::Actor(unsafe { Arc::from_raw(p.cast::<Actor>()) })
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

// ---------------------------------------------------------------------------
// The channel core
// ---------------------------------------------------------------------------

/// The shared state of an MPSC channel (bounded or not); see the module doc.
pub(super) struct Chan<T> {
    queue: MpscQueue<T>,
    state: AtomicU32,
    senders: AtomicUsize,
    rx: WaiterSlot,
}

// `Chan<T>` is `Send + Sync` for `T: Send` by its fields: the queue is
// (values only move in and out by value), the rest are atomics.

impl<T> Chan<T> {
    /// A connected, empty channel with one sender.
    pub(super) fn new<P: Platform>() -> Self {
        // SAFETY: a fresh node from the node allocator (a `Node::layout`
        // block), exclusively ours; the queue owns it from here.
        let queue = unsafe { MpscQueue::new(sched::node_alloc::<T, P>()) };
        let c = Chan {
            queue,
            state: AtomicU32::new(0),
            senders: AtomicUsize::new(1),
            rx: WaiterSlot::new(),
        };
        if LOOM {
            // As in `WaiterSlot::new`.
            c.state.store(0, Ordering::SeqCst);
        }
        c
    }

    /// `S1`: whether the receiver was dropped.
    #[inline]
    pub(super) fn rx_gone(&self) -> bool {
        // Relaxed: a fast rejection. A drop that happened-before this call
        // is seen (coherence); a racing one may be missed, and the message
        // is then dropped with the channel.
        self.state.load(Ordering::Relaxed) & RX_GONE != 0
    }

    /// `S2`–`S3`: queues `v` and wakes a waiting receiver.
    #[inline]
    pub(super) fn push<P: Platform>(&self, v: T) {
        // S2 (a SeqCst swap inside).
        // SAFETY: a fresh node from the node allocator, exclusively ours.
        unsafe { self.queue.push(sched::node_alloc::<T, P>(), v) };
        // S3.
        if self.rx.is_set() {
            self.wake_receiver();
        }
        // A safe point: an actor whose timeslice is spent yields here.
        sched::safe_point::<P>();
    }

    /// `S3`'s slow path, `D2`, and a receive timer's poke: takes the
    /// registration, if any, and wakes it.
    #[cold]
    pub(super) fn wake_receiver(&self) {
        if let Some(w) = self.rx.take() {
            w.wake();
        }
    }

    /// A new sender handle was made from a live one.
    pub(super) fn add_sender(&self) {
        // Relaxed: as `Arc::clone`: the count is at least 1 (the handle
        // cloned from is alive) and the decrements carry the ordering. It
        // cannot overflow before the handles' own `Arc` count would abort.
        self.senders.fetch_add(1, Ordering::Relaxed);
    }

    /// A sender handle was dropped: the last one disconnects (`D1`–`D2`).
    pub(super) fn drop_sender(&self) {
        // AcqRel: Release orders this sender's pushes before the decrement;
        // the last decrement's Acquire reads the release sequence of all
        // the others, so `D1` below publishes every push ("Disconnection,
        // drained" in the module doc).
        if self.senders.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // D1. SeqCst: the waker's first half of the Dekker pair.
        self.state.fetch_or(TX_GONE, Ordering::SeqCst);
        // D2.
        if self.rx.is_set() {
            self.wake_receiver();
        }
    }

    /// Pops the oldest message, if one is reachable now.
    ///
    /// # Safety
    ///
    /// Receiver only (the queue's single consumer; `&mut` on its handle).
    #[inline]
    pub(super) unsafe fn pop<P: Platform>(&self) -> Option<T> {
        let mut backoff = Backoff::new();
        loop {
            // SAFETY: single consumer (contract).
            match unsafe { self.queue.pop() } {
                Pop::Data(v, node) => {
                    sched::node_free::<T, P>(node);
                    return Some(v);
                }
                Pop::Empty => return None,
                // A sender is between its swap and its link: two
                // instructions, unless its thread was preempted there.
                Pop::Inconsistent => {
                    if backoff.snooze() {
                        P::yield_thread();
                    }
                }
            }
        }
    }

    /// # Safety
    ///
    /// Receiver only, as for [`pop`](Self::pop).
    #[inline]
    pub(super) unsafe fn try_recv<P: Platform>(&self) -> Result<T, TryRecvError> {
        // SAFETY: forwarded contract.
        if let Some(v) = unsafe { self.pop::<P>() } {
            return Ok(v);
        }
        // Acquire: pairs with `D1` (a Release RMW): every push happened-before.
        if self.state.load(Ordering::Acquire) & TX_GONE != 0 {
            // Every push is complete and visible, so this pop is final.
            // SAFETY: forwarded contract.
            return unsafe { self.pop::<P>() }.ok_or(TryRecvError::Disconnected);
        }
        Err(TryRecvError::Empty)
    }

    /// Waits for a message; `Err` once disconnected and drained (or when a
    /// cancelled actor would have to wait).
    ///
    /// # Safety
    ///
    /// Receiver only, as for [`pop`](Self::pop).
    pub(super) unsafe fn recv<P: Platform>(&self) -> Result<T, RecvError> {
        // A safe point: an actor whose timeslice is spent yields here.
        sched::safe_point::<P>();
        loop {
            // SAFETY: forwarded contract.
            match unsafe { self.try_recv::<P>() } {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {
                    // SAFETY: forwarded contract.
                    if !unsafe { self.wait::<P>(None, || sched::park::<P>(WAIT_CHANNEL)) } {
                        return Err(RecvError);
                    }
                }
            }
        }
    }

    /// Waits for a message until `deadline` (platform ns) at most; an
    /// actor's wait is ended at the deadline by a timer poking `poke()`
    /// (which must take this channel's registration: `wake_receiver`). A
    /// message racing the deadline is returned, not lost (one more pop
    /// after the wait is withdrawn).
    ///
    /// # Safety
    ///
    /// Receiver only, as for [`pop`](Self::pop).
    pub(super) unsafe fn recv_deadline<P: Platform, K: Poke + 'static>(
        &self,
        deadline: u64,
        poke: impl Fn() -> K,
    ) -> Result<T, RecvTimeoutError> {
        sched::safe_point::<P>();
        loop {
            // SAFETY: forwarded contract.
            match unsafe { self.try_recv::<P>() } {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            if P::now_ns() >= deadline || cancelled::<P>() {
                // Withdraw (a registration a waker took is its to wake).
                drop(self.rx.take());
                // SAFETY: forwarded contract.
                return match unsafe { self.try_recv::<P>() } {
                    Ok(v) => Ok(v),
                    Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                    Err(TryRecvError::Empty) => Err(RecvTimeoutError::Timeout),
                };
            }
            // SAFETY: forwarded contract.
            unsafe {
                self.wait::<P>(Some(deadline), || {
                    sched::park_until::<P>(WAIT_CHANNEL, deadline, poke())
                })
            };
        }
    }

    /// `R1`–`R3`; an actor waits by calling `park`, a thread until
    /// `deadline` at most. Returns `false` instead of waiting when the
    /// caller is an actor being cancelled.
    ///
    /// # Safety
    ///
    /// Receiver only, as for [`pop`](Self::pop).
    #[cold]
    unsafe fn wait<P: Platform>(&self, deadline: Option<u64>, park: impl FnOnce()) -> bool {
        if cancelled::<P>() {
            return false;
        }
        let w = Waiter::current::<P>();
        let thread = match &w {
            Waiter::Thread(t) => Some(t.clone()),
            Waiter::Actor(_) => None,
        };
        // R1.
        self.rx.put(w);
        // R2. SeqCst loads: the receiver's second half of the Dekker pairs.
        // SAFETY: single consumer (contract).
        if !unsafe { self.queue.is_empty_sc() } || self.state.load(Ordering::SeqCst) & TX_GONE != 0 {
            drop(self.rx.take());
            return true;
        }
        // R3.
        match thread {
            Some(t) => Waiter::Thread(t).wait::<P>(deadline),
            None => park(),
        }
        true
    }

    /// The receiver's drop: later sends fail; what is queued is dropped now
    /// (a message whose push races this is dropped with the channel).
    ///
    /// # Safety
    ///
    /// Receiver only, as for [`pop`](Self::pop); called once, from its drop.
    pub(super) unsafe fn close_rx<P: Platform>(&self) {
        // SeqCst: as strong as the other `state` writes (see `bounded`'s
        // module doc for the wait list that also depends on it).
        self.state.fetch_or(RX_GONE, Ordering::SeqCst);
        // A registration left by a `recv` that unwound while waiting.
        drop(self.rx.take());
        // SAFETY: single consumer (contract); spent nodes are ours.
        unsafe {
            self.queue.drain(|v, node| {
                sched::node_free::<T, P>(node);
                drop(v);
            })
        };
    }
}
