//! The part every MPSC channel and every mailbox shares: the message
//! queue, the receiver's one-pointer waiter slot, the sender count and the
//! receiver's park protocol.
//!
//! # Words
//!
//! | word      | value                | meaning                                              |
//! |-----------|----------------------|------------------------------------------------------|
//! | `rx`      | null                 | the receiver is not waiting (or is withdrawing)      |
//! | `rx`      | a tagged [`Waiter`]  | the receiver's registration; whoever swaps it out owns it and wakes it |
//! | `rx`      | a lent actor         | the pinned actor's registration, holding no reference (`crate::actor::lent`) |
//! | `state`   | bit `RX_GONE` (2)    | the receiver was dropped (set once)                  |
//! | `state`   | bit `COUNTED` (4)    | a mailbox whose sends are counted for dumps (set before it is shared) |
//! | `senders` | n                    | live sender handles; 0: disconnected (a mailbox's receiver may make a new address and reconnect it) |
//!
//! # Protocol (numbered as in the code)
//!
//! Receiver, finding the queue empty and `senders` non-zero:
//! 1. `R1` swaps its [`Waiter`] into `rx` (SeqCst);
//! 2. `R2` re-checks: the queue with a SeqCst load of its tail
//!    ([`MpscQueue::is_empty_sc`]), then `senders` with a SeqCst load; if
//!    either says "don't sleep", it swaps `rx` back to null to withdraw —
//!    finding null there means a waker took the registration, whose wake will
//!    at worst make a later wait spurious;
//! 3. `R3` waits (an actor parks; a thread futex-waits on its own word), then
//!    the caller loops: pop, check `senders`, wait.
//!
//! Sender (`send`):
//! 1. `S1` if `RX_GONE`, returns the value in the error;
//! 2. `S2` pushes (a SeqCst swap of the tail);
//! 3. `S3` loads `rx` (SeqCst); if set, swaps it to null and, if it got the
//!    registration, wakes it.
//!
//! Last sender's drop:
//! 1. `D1` decrements `senders` to 0 (a SeqCst read-modify-write);
//! 2. `D2` as `S3`.
//!
//! `R1`–`R2` against `S2`–`S3`, and against `D1`–`D2`, are Dekker pairs of
//! SeqCst accesses: either the receiver's re-check sees the message (or
//! the disconnection), or the waker sees the registration. Exactly one party
//! swaps a given registration out of `rx`, so it is woken at most once (the
//! park invariant).
//!
//! Why a pointer slot and not a state word plus a cell (`IDLE → WAITING →
//! WAKING`, the mailbox's protocol before it moved onto this one): there,
//! a sender that won the `WAITING → WAKING` CAS reads the cell *after* the
//! CAS, so the receiver needs a third state to know when the cell is its
//! own again. With the pointer slot the taker owns what it swapped out; a
//! late wake lands on a stale registration (a spurious wake of the actor,
//! or an abandoned thread word).
//!
//! Every write of `rx` is SeqCst, the withdrawing and waking swaps too
//! (AcqRel would do on hardware): loom lets a SeqCst load skip a newer
//! SeqCst store to return an older non-SeqCst one, so it checks these
//! Dekker pairs only when every store to the word is SeqCst
//! (`core/tests/loom_channel.rs`).
//!
//! # Disconnection, drained
//!
//! Each sender's drop decrements `senders` (SeqCst, so Release) after its
//! last push; the decrements form one release sequence, so a receiver that
//! reads 0 with Acquire follows every push, and then finding the queue
//! empty knows no message will come: `Err`. A mailbox can be reconnected
//! (its receiver makes a new address, or a weak address is upgraded: see
//! `mailbox`); a receiver that saw the disconnection then simply sees
//! the new messages at its next receive.
//!
//! # Memory
//!
//! Nodes come from the sending worker's node cache and go back to the
//! receiving worker's ([`sched::node_alloc`] / [`sched::node_free`]): no
//! allocation per message in steady state. A receiver on a plain thread
//! that waits allocates its wake word, once per wait.

use crate::actor::{Actor, ActorArc};
use crate::lockfree::mpsc_queue::{MpscQueue, Pop};
use crate::msg::wait::Waiter;
use crate::sched::{self, WorkerCtx};
use crate::seam::platform::Platform;
use crate::sync::{AtomicU32, AtomicUsize, Backoff, Ordering, LOOM};
use core::marker::PhantomData;
use core::ops::Deref;

pub(crate) use super::popped::Popped;
use super::waiter_slot::{Registration, WaiterSlot};
use super::{RecvError, RecvTimeoutError, TryRecvError};
use crate::sched::timer::Poke;

/// `state` bit: the receiver was dropped.
const RX_GONE: u32 = 2;

/// `state` bit: sends are counted for dumps (`Builder::mailbox_depths`).
const COUNTED: u32 = 4;

pub(super) use crate::sched::unwinding as cancelled;

// ---------------------------------------------------------------------------
// The channel core
// ---------------------------------------------------------------------------

/// The shared state of an MPSC channel (bounded or not); see the module doc.
pub(crate) struct Chan<T> {
    queue: MpscQueue<T>,
    state: AtomicU32,
    senders: AtomicUsize,
    rx: WaiterSlot,
}

// `Chan<T>` is `Send + Sync` for `T: Send` by its fields: the queue is
// (values only move in and out by value), the rest are atomics.

/// A [`Chan`] as the shared half of a mailbox, an unbounded channel or a
/// bounded one owns it: at its drop the queue's nodes (the stub, and any message a send
/// racing the close left) go to the calling worker's node cache (the
/// global allocator on a plain thread), not to the global allocator, so a
/// channel or a mailbox made and dropped per actor or per request takes
/// and gives back the same nodes. Derefs to the [`Chan`].
pub(crate) struct CachedChan<T, P: Platform> {
    chan: Chan<T>,
    _p: PhantomData<fn() -> P>,
}

impl<T, P: Platform> CachedChan<T, P> {
    /// Owns `chan`, whose nodes came from `P`'s node allocator (as
    /// [`Chan::new`] and [`Chan::with_counted`] take them).
    pub(crate) fn new(chan: Chan<T>) -> Self {
        CachedChan {
            chan,
            _p: PhantomData,
        }
    }
}

impl<T, P: Platform> Deref for CachedChan<T, P> {
    type Target = Chan<T>;

    #[inline(always)]
    fn deref(&self) -> &Chan<T> {
        &self.chan
    }
}

impl<T, P: Platform> Drop for CachedChan<T, P> {
    fn drop(&mut self) {
        // SAFETY: the owner's drop: nothing uses the channel after this but
        // its own drop (`Chan`'s, which then frees no node).
        unsafe { self.chan.free_nodes::<P>() };
    }
}

impl<T> Chan<T> {
    /// A connected, empty channel with one sender.
    pub(crate) fn new<P: Platform>() -> Self {
        Self::with_counted::<P>(false)
    }

    /// [`new`](Self::new), with sends `counted` for dumps (a mailbox of a
    /// runtime built with `mailbox_depths`).
    pub(crate) fn with_counted<P: Platform>(counted: bool) -> Self {
        let state = if counted { COUNTED } else { 0 };
        // SAFETY: a fresh node from the node allocator (a `Node::layout`
        // block), exclusively ours; the queue owns it from here.
        let queue = unsafe { MpscQueue::new(sched::node_alloc::<T, P>()) };
        let c = Chan {
            queue,
            state: AtomicU32::new(state),
            senders: AtomicUsize::new(1),
            rx: WaiterSlot::new(),
        };
        if LOOM {
            // As in `WaiterSlot::new` (`senders` is a Dekker word too).
            c.state.store(state, Ordering::SeqCst);
            c.senders.store(1, Ordering::SeqCst);
        }
        c
    }

    /// `S1`: whether the receiver was dropped.
    #[inline]
    pub(crate) fn rx_gone(&self) -> bool {
        // Relaxed: a fast rejection. A drop that happened-before this call
        // is seen (coherence); a racing one may be missed, and the message
        // is then dropped with the channel.
        self.state.load(Ordering::Relaxed) & RX_GONE != 0
    }

    /// Whether sends are counted ([`with_counted`](Self::with_counted)).
    #[inline]
    pub(crate) fn counted(&self) -> bool {
        // Relaxed: set before the channel was shared, never changed.
        self.state.load(Ordering::Relaxed) & COUNTED != 0
    }

    /// `S1` and [`counted`](Self::counted) from one load (a mailbox's
    /// send): `None` if the receiver was dropped, else whether to count.
    #[inline]
    pub(crate) fn open(&self) -> Option<bool> {
        // Relaxed: as in `rx_gone` and `counted`.
        let st = self.state.load(Ordering::Relaxed);
        (st & RX_GONE == 0).then_some(st & COUNTED != 0)
    }

    /// `S2`–`S3`: queues `v` and wakes a waiting receiver.
    #[inline]
    pub(crate) fn push<P: Platform>(&self, v: T) {
        // One read of the current-worker slot for the node and the safe
        // point: nothing between them switches (a wake only queues).
        let c = sched::ctx::<P>();
        // S2 (a SeqCst swap inside).
        // SAFETY: a fresh node from the node allocator (`c` read just
        // now), exclusively ours.
        unsafe { self.queue.push(sched::node_alloc_in::<T, P>(c), v) };
        // S3.
        if self.rx.is_set() {
            self.wake_receiver();
        }
        // A safe point: an actor whose timeslice is spent yields here.
        // SAFETY: `c` read on this thread, no switch since (above).
        unsafe { sched::safe_point_in::<P>(c) };
    }

    /// `S3`'s slow path, `D2`, and a receive timer's poke: takes the
    /// registration, if any, and wakes it.
    #[cold]
    pub(crate) fn wake_receiver(&self) {
        if let Some(w) = self.rx.take() {
            // SAFETY: reached through this channel, which holds the pin.
            unsafe { w.wake() };
        }
    }

    /// A new sender handle was made (from a live one, or, for a mailbox,
    /// by its receiver or a weak address, reconnecting it).
    pub(crate) fn add_sender(&self) {
        // SeqCst, though Relaxed would do on hardware (as `Arc::clone`: the
        // decrements carry the ordering; a reconnection from 0 races a
        // receive that may see either value, and both are right, see
        // "Disconnection, drained"): `senders` is a Dekker word (`D1`
        // against `R2`), and loom checks a Dekker pair only when every
        // store to the word is SeqCst (see `WaiterSlot::take`). The same
        // instruction on x86-64 (`lock xadd`); clones are not a hot path.
        // It cannot overflow before the handles' own `Arc` count would
        // abort.
        self.senders.fetch_add(1, Ordering::SeqCst);
    }

    /// A sender handle was dropped: the last one disconnects (`D1`–`D2`).
    pub(crate) fn drop_sender(&self) {
        // D1. SeqCst: Release orders this sender's pushes before the
        // decrement (the receiver's Acquire of 0 then sees them all); the
        // last one is the waker's first half of the Dekker pair.
        if self.senders.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        // D2.
        if self.rx.is_set() {
            self.wake_receiver();
        }
    }

    /// Whether every sender is gone (`Acquire`: pairs with `D1`, so every
    /// push happened-before).
    #[inline]
    fn disconnected(&self) -> bool {
        self.senders.load(Ordering::Acquire) == 0
    }

    /// Pops the oldest message, if one is reachable now, leaving it in its
    /// node ([`MpscQueue::pop_in_place`]) until the caller takes it
    /// ([`Popped::take`]), before its next pop.
    ///
    /// # Safety
    ///
    /// Receiver only (the queue's single consumer; `&mut` on its handle);
    /// the result is taken before the next pop (one dropped untaken leaks
    /// its message and node: `Popped` has no `Drop`).
    #[inline]
    pub(crate) unsafe fn pop_in_place<P: Platform>(&self) -> Option<Popped<T, P>> {
        let mut backoff = Backoff::new();
        loop {
            // SAFETY: single consumer (contract).
            match unsafe { self.queue.pop_in_place() } {
                Pop::Data(value, spent) => return Some(Popped::new(value, spent)),
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
    /// Receiver only, as for [`pop_in_place`](Self::pop_in_place).
    #[inline]
    pub(crate) unsafe fn try_recv<P: Platform>(&self) -> Result<T, TryRecvError> {
        // SAFETY: forwarded contract.
        unsafe { self.try_recv_in_place::<P>() }.map(Popped::take)
    }

    /// [`try_recv`](Self::try_recv) with the message left in its node, as
    /// for [`pop_in_place`](Self::pop_in_place).
    ///
    /// # Safety
    ///
    /// As for [`pop_in_place`](Self::pop_in_place).
    #[inline]
    pub(crate) unsafe fn try_recv_in_place<P: Platform>(&self) -> Result<Popped<T, P>, TryRecvError> {
        // SAFETY: forwarded contract.
        if let Some(v) = unsafe { self.pop_in_place::<P>() } {
            return Ok(v);
        }
        if self.disconnected() {
            // Every push is complete and visible, so this pop is final.
            // SAFETY: forwarded contract.
            return unsafe { self.pop_in_place::<P>() }.ok_or(TryRecvError::Disconnected);
        }
        Err(TryRecvError::Empty)
    }

    /// Waits for a message; `Err` once disconnected and drained (or when a
    /// cancelled actor would have to wait). `what` says what a parked actor
    /// waits on (`WAIT_CHANNEL`, `WAIT_MAILBOX`: a hint for dumps).
    ///
    /// # Safety
    ///
    /// Receiver only, as for [`pop_in_place`](Self::pop_in_place).
    #[inline]
    pub(crate) unsafe fn recv<P: Platform>(&self, what: u8) -> Result<T, RecvError> {
        // SAFETY: forwarded contract; the message is taken at once (no
        // pop in between), with the slot read after the last switch.
        unsafe { self.recv_with::<P, _>(what, |c| c.try_recv_in_place::<P>()) }
            .map(|(m, c)| unsafe { m.take_in(c) })
    }

    /// The receive loop of every untimed receive: `take` (which pops from
    /// this channel, and may look elsewhere first: a mailbox's save queue)
    /// until it gives a value or says `Disconnected`, waiting (`R1`–`R3`)
    /// whenever it says `Empty`.
    ///
    /// # Safety
    ///
    /// Receiver only, as for [`pop_in_place`](Self::pop_in_place); `take`
    /// pops only as the receiver.
    #[inline]
    pub(crate) unsafe fn recv_with<P: Platform, V>(
        &self,
        what: u8,
        take: impl FnMut(&Self) -> Result<V, TryRecvError>,
    ) -> Result<(V, *mut WorkerCtx<P>), RecvError> {
        // A safe point: an actor whose timeslice is spent yields here.
        let c = sched::safe_point_here::<P>();
        // SAFETY: forwarded contract; `c` read after the safe point.
        unsafe { self.recv_loop::<P, V>(what, c, take) }
    }

    /// [`recv_with`](Self::recv_with) without its safe point, for a caller
    /// that passed one already (a mailbox's receive, which looks at its
    /// save queue first) and read the current-worker slot after it (`c`).
    /// With the value, the slot as it is after the last wait (read again
    /// after each: the actor may resume on another worker), for the
    /// caller's node free.
    ///
    /// # Safety
    ///
    /// As for [`recv_with`](Self::recv_with); `c` is what `sched::ctx`
    /// returned on this thread, with no switch since.
    #[inline]
    pub(crate) unsafe fn recv_loop<P: Platform, V>(
        &self,
        what: u8,
        mut c: *mut WorkerCtx<P>,
        mut take: impl FnMut(&Self) -> Result<V, TryRecvError>,
    ) -> Result<(V, *mut WorkerCtx<P>), RecvError> {
        loop {
            match take(self) {
                Ok(v) => return Ok((v, c)),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {
                    let park = |a, lent| {
                        if lent {
                            // SAFETY: `a` is the running actor (`wait`'s
                            // contract), its registration a lent one.
                            unsafe { sched::park_actor_lent::<P>(c, a, what) }
                        } else {
                            // SAFETY: as above.
                            unsafe { sched::park_actor::<P>(c, a, what) }
                        }
                    };
                    // SAFETY: forwarded contract; `park` gets the calling
                    // actor (`wait`'s contract).
                    if !unsafe { self.wait::<P>(c, None, true, park) } {
                        return Err(RecvError);
                    }
                    c = sched::ctx::<P>();
                }
            }
        }
    }

    /// Waits for a message until `deadline` (platform ns) at most; an
    /// actor's wait is ended at the deadline by a timer poking `poke()`
    /// (which must take this channel's registration: `wake_receiver`). A
    /// message racing the deadline is returned, not lost (one more `take`
    /// after the wait is withdrawn). `take` as for
    /// [`recv_with`](Self::recv_with).
    ///
    /// # Safety
    ///
    /// As for [`recv_with`](Self::recv_with).
    pub(crate) unsafe fn recv_deadline_with<P: Platform, K: Poke + 'static>(
        &self,
        what: u8,
        deadline: u64,
        poke: impl Fn() -> K,
        mut take: impl FnMut(&Self) -> Result<T, TryRecvError>,
    ) -> Result<T, RecvTimeoutError> {
        sched::safe_point::<P>();
        loop {
            match take(self) {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            if P::now_ns() >= deadline || cancelled::<P>() {
                // Withdraw (a registration a waker took is its to wake).
                drop(self.rx.take());
                return match take(self) {
                    Ok(v) => Ok(v),
                    Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                    Err(TryRecvError::Empty) => Err(RecvTimeoutError::Timeout),
                };
            }
            // SAFETY: forwarded contract; the slot read just now.
            unsafe {
                self.wait::<P>(sched::ctx::<P>(), Some(deadline), false, |_, _| {
                    sched::park_until::<P>(what, deadline, poke())
                })
            };
        }
    }

    /// A select's registration (`R1`–`R2` without the wait): `false` if a
    /// message or the disconnection is already here (then nothing stays
    /// registered), else `w` stays until [`withdraw`](Self::withdraw) or a
    /// waker takes it.
    ///
    /// # Safety
    ///
    /// Receiver only, as for [`pop_in_place`](Self::pop_in_place).
    pub(crate) unsafe fn register(&self, w: Waiter) -> bool {
        // R1.
        self.rx.put(Registration::Counted(w));
        crate::seam::failpoint::hit(crate::seam::failpoint::Site::RecvRegistered);
        // R2, as in `wait`.
        // SAFETY: single consumer (contract).
        if !unsafe { self.queue.is_empty_sc() } || self.senders.load(Ordering::SeqCst) == 0 {
            drop(self.rx.take());
            return false;
        }
        true
    }

    /// Takes a select's registration back (a waker that took it first will
    /// wake the receiver once more, harmlessly: every wait loops).
    pub(crate) fn withdraw(&self) {
        drop(self.rx.take());
    }

    /// `R1`–`R3`; an actor waits by calling `park` with itself (the
    /// running actor) and whether its registration is lent (only with
    /// `lend`, for the pinned actor: module doc), a thread until `deadline`
    /// at most. Returns `false` instead of waiting when the caller is an
    /// actor being cancelled.
    ///
    /// # Safety
    ///
    /// Receiver only, as for [`pop_in_place`](Self::pop_in_place); `park`
    /// may rely on being given the running actor. `c` is what `sched::ctx`
    /// returned on this thread, with no switch since.
    #[cold]
    unsafe fn wait<P: Platform>(
        &self,
        c: *mut WorkerCtx<P>,
        deadline: Option<u64>,
        lend: bool,
        park: impl FnOnce(*const Actor, bool),
    ) -> bool {
        // SAFETY: forwarded contract.
        let w = match unsafe { sched::current_for_wait_in::<P>(c) } {
            (_, true) => return false,
            // SAFETY: the receiver (contract).
            (Some(a), false) if lend && unsafe { self.rx.pinned(a) } => Registration::Lent(a),
            // SAFETY: the running actor is alive (its worker holds an
            // `ActorArc`); the registration takes one more reference.
            (Some(a), false) => Registration::Counted(Waiter::Actor(unsafe { ActorArc::clone_from_ptr(a) })),
            (None, false) => Registration::Counted(Waiter::thread::<P>()),
        };
        let thread = match &w {
            Registration::Counted(Waiter::Thread(t)) => Ok(t.clone()),
            Registration::Counted(Waiter::Actor(a)) => Err((ActorArc::as_ptr(a), false)),
            Registration::Lent(a) => Err((*a, true)),
        };
        // R1.
        self.rx.put(w);
        crate::seam::failpoint::hit(crate::seam::failpoint::Site::RecvRegistered);
        // R2. SeqCst loads: the receiver's second half of the Dekker pairs.
        // SAFETY: single consumer (contract).
        if !unsafe { self.queue.is_empty_sc() } || self.senders.load(Ordering::SeqCst) == 0 {
            drop(self.rx.take());
            return true;
        }
        // R3.
        match thread {
            Ok(t) => Waiter::Thread(t).wait::<P>(deadline),
            Err((me, lent)) => park(me, lent),
        }
        true
    }

    /// Gives the queue's nodes, its stub included, to the calling worker's
    /// cache (its drop would give them to the global allocator, draining a
    /// cache by one node per channel made), dropping the values still
    /// queued.
    ///
    /// # Safety
    ///
    /// For the owner's drop ([`CachedChan`]'s): nothing uses the channel
    /// after it but its own drop.
    unsafe fn free_nodes<P: Platform>(&mut self) {
        // SAFETY: `&mut self`: no push or pop in flight; no use after
        // (contract); the nodes are `node_alloc`'s blocks, which any
        // worker's cache or the global allocator takes.
        unsafe { self.queue.free_nodes_with(|n| sched::node_free::<T, P>(n)) };
    }

    /// The receiver's drop: later sends fail; what is queued is dropped now
    /// (a message whose push races this is dropped with the channel).
    ///
    /// # Safety
    ///
    /// Receiver only, as for [`pop_in_place`](Self::pop_in_place); called
    /// once, from its drop.
    pub(crate) unsafe fn close_rx<P: Platform>(&self) {
        // SeqCst: as strong as the other `state` writes (see `bounded`'s
        // module doc for the wait list that also depends on it).
        self.state.fetch_or(RX_GONE, Ordering::SeqCst);
        crate::seam::failpoint::hit(crate::seam::failpoint::Site::RecvClose);
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

    /// [`close_rx`](Self::close_rx) for a receiver whose owner is gone
    /// without dropping it (an overflow recovery abandoned its frame):
    /// nodes go to the global allocator (interchangeable with any worker's
    /// cache), since the caller may not be the receiver's worker.
    ///
    /// # Safety
    ///
    /// The receiver will never run again; the caller is the single consumer.
    pub(crate) unsafe fn close_rx_global(&self) {
        // SeqCst: as in `close_rx`.
        self.state.fetch_or(RX_GONE, Ordering::SeqCst);
        drop(self.rx.take());
        // SAFETY: single consumer (contract).
        unsafe {
            self.queue.drain(|v, node| {
                drop(v);
                crate::lockfree::mpsc_queue::Node::<T>::free_global(node);
            })
        };
    }
}
