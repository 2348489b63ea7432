//! Actor mailboxes: a lock-free MPSC queue per actor plus a one-word park
//! protocol, so a send is one `swap`, one store and one load when the
//! receiver is busy, and wakes the receiver exactly once when it waits.
//!
//! # The receiver-state word
//!
//! | value     | meaning                                                     |
//! |-----------|-------------------------------------------------------------|
//! | `IDLE`    | the receiver is not waiting; `waiter` is the receiver's     |
//! | `WAITING` | `waiter` holds the receiver's registration; the first sender to CAS `WAITING → WAKING` owns it and wakes it |
//! | `WAKING`  | a sender owns `waiter` and is taking it; the receiver must not touch it (its wake is in flight) |
//! | `CLOSED`  | the mailbox was dropped (its actor exited): sends fail      |
//!
//! # Transitions
//!
//! ```text
//!            R2: receiver registers          S3: a sender wins the CAS
//!   IDLE ─────────────────────────▶ WAITING ─────────────────────────▶ WAKING
//!    ▲  ▲                              │                                 │
//!    │  └──── R3: receiver withdraws ──┘                                 │
//!    └───────────────── S3: the winner hands the cell back ──────────────┘
//!   (any) ── Mailbox::drop (swap) ──▶ CLOSED   (final: a WAKING owner's hand-back
//!                                              CAS fails and leaves it)
//! ```
//!
//! The park invariant at the type: while the state is `WAITING` the pending
//! park is observed in exactly one place, `waiter`; the one CAS out of
//! `WAITING` decides who owns it (the receiver withdrawing, or one sender
//! waking), so a wake is delivered at most once and, by the Dekker pair
//! below, never lost.
//!
//! # Protocol (numbered as in the code)
//!
//! Receiver, finding the queue empty, by the state it finds:
//! - `IDLE`:
//!   1. writes its `Waiter` into `waiter`;
//!   2. CAS `IDLE → WAITING` (SeqCst);
//!   3. re-checks the queue with a SeqCst load of its tail
//!      ([`MpscQueue::is_empty_sc`]); if a message is there, CAS
//!      `WAITING → IDLE` to withdraw — if that fails, a sender owns the
//!      registration and its wake is in flight;
//!   4. waits (parks, or futex-waits on a thread), then loops: pop.
//! - `WAITING`: its registration from an earlier wait is still in place (an
//!   actor resumed by a wake meant for an older registration): steps 3–4.
//! - `WAKING`: a wake is in flight to it: it parks (the wake ends the park,
//!   or has already left the actor `NOTIFIED`), then loops.
//!
//! A thread receiver never leaves `wait` with its registration in place: it
//! loops on its own futex word until woken or withdrawn.
//!
//! Sender:
//! 1. if `CLOSED`, returns the message in the error;
//! 2. pushes (a SeqCst swap of the tail);
//! 3. loads the state (SeqCst); if `WAITING`, CAS `WAITING → WAKING`; the
//!    winner takes the waiter, CASes `WAKING → IDLE` (unless the receiver
//!    closed meanwhile) and wakes it.
//!
//! Receiver 2–3 and sender 2–3 are a Dekker pair of SeqCst operations:
//! either the receiver's re-check sees the message or the sender sees
//! `WAITING`. Only the CAS winner touches `waiter`, so the wake happens once
//! (the park invariant: the pending park is observed in exactly one place).
//!
//! # Allocation
//!
//! Message nodes come from the current worker's node cache and go back to
//! the receiving worker's, so steady-state messaging on one worker
//! allocates nothing; across workers the caches' levels drift and a dry
//! one allocates now and then (docs/reliability.md, "Allocation").
//! Senders on plain OS threads use the global allocator.
//!
//! # Selective receive
//!
//! [`Mailbox::recv_matching`] takes the first message matching a predicate
//! and keeps the others, in arrival order, in a private save queue (as
//! Erlang's receive does); [`Mailbox::recv`] reads the save queue first. The
//! plain path pays one emptiness check for this.

use alloc::collections::VecDeque;
use alloc::sync::{Arc, Weak};

use crate::actor::life::{ActorRef, CloseDead, Life};
use core::fmt;
use core::marker::PhantomData;

use crate::actor::WAIT_MAILBOX;
use crate::lockfree::mpsc_queue::{MpscQueue, Pop};
use crate::msg::wait::Waiter;
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::seam::platform::Platform;
use crate::sync::{AtomicU32, Backoff, Ordering, UnsafeCell};
use core::time::Duration;

const IDLE: u32 = 0;
const WAITING: u32 = 1;
const WAKING: u32 = 2;
const CLOSED: u32 = 3;

/// The shared half of a mailbox (owned jointly by the receiver and every
/// [`Addr`]).
pub(crate) struct Shared<M> {
    queue: MpscQueue<M>,
    state: AtomicU32,
    waiter: UnsafeCell<Option<Waiter>>,
    id: u64,
    /// The owning actor's id, name, exit hooks.
    life: Arc<Life>,
}

// SAFETY: `queue` is an MPSC queue (Send+Sync for M: Send); `waiter` is
// owned by the receiver while `state` is IDLE and by the single sender whose
// CAS took it from WAITING, the handoff ordered by that CAS (see the
// protocol above).
unsafe impl<M: Send> Send for Shared<M> {}
// SAFETY: as above.
unsafe impl<M: Send> Sync for Shared<M> {}

pub use crate::seam::error::SendError;

/// An actor's mailbox: the receiving end, owned by the actor.
///
/// Dropping it (normally: the actor's exit) closes it: later sends fail
/// with the message returned; messages still queued are dropped.
pub struct Mailbox<M, P: Platform> {
    shared: Arc<Shared<M>>,
    save: VecDeque<M>,
    _p: PhantomData<fn() -> P>,
}

/// The address of an actor's mailbox: clone it, send it anywhere, send to
/// it from actors and plain threads alike.
pub struct Addr<M, P: Platform> {
    shared: Arc<Shared<M>>,
    _p: PhantomData<fn() -> P>,
}

impl<M, P: Platform> Clone for Addr<M, P> {
    fn clone(&self) -> Self {
        Addr {
            shared: self.shared.clone(),
            _p: PhantomData,
        }
    }
}

impl<M, P: Platform> fmt::Debug for Addr<M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Addr").field("actor", &self.shared.id).finish()
    }
}

/// A mailbox not bound to any actor (id 0), for models and tests that drive
/// the protocol from plain threads.
#[doc(hidden)]
#[cfg(any(test, feature = "internals", smarm_loom))]
pub fn detached<M: Send, P: Platform>() -> (Mailbox<M, P>, Addr<M, P>) {
    pair::<M, P>(Life::new(0, None, (0, 0)))
}

/// The body of an actor with a mailbox: makes the mailbox of actor `id`,
/// leaves its first address in `addr`, and returns the body that hands the
/// mailbox to `f`. Shared by every `spawn_actor`.
pub(crate) fn bind<M, P, F, T>(
    life: &Arc<Life>,
    f: F,
    addr: &mut Option<Addr<M, P>>,
) -> impl FnOnce() -> T + Send + 'static
where
    M: Send + 'static,
    P: Platform,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    life.has_mailbox();
    let (mb, a) = pair::<M, P>(life.clone());
    let dead: Weak<dyn CloseDead> = Arc::downgrade(&a.shared) as Weak<dyn CloseDead>;
    // SAFETY: the `Life` is not shared yet beyond this actor's spawn.
    unsafe { *life.mailbox.get() = Some(dead) };
    *addr = Some(a);
    move || f(mb)
}

/// A new mailbox and its first address, for the actor with id `id`.
pub(crate) fn pair<M: Send, P: Platform>(life: Arc<Life>) -> (Mailbox<M, P>, Addr<M, P>) {
    let id = life.id;
    // SAFETY: a fresh node from the node allocator (a `Node::layout`
    // block), exclusively ours; the queue owns it from here.
    let queue = unsafe { MpscQueue::new(sched::node_alloc::<M, P>()) };
    let shared = Arc::new(Shared {
        queue,
        state: AtomicU32::new(IDLE),
        waiter: UnsafeCell::new(None),
        id,
        life,
    });
    (
        Mailbox {
            shared: shared.clone(),
            save: VecDeque::new(),
            _p: PhantomData,
        },
        Addr {
            shared,
            _p: PhantomData,
        },
    )
}

/// An address that does not keep the mailbox alive (an exit trap's: see
/// `life::trap_exits_into`).
pub(crate) struct WeakAddr<M, P: Platform> {
    shared: Weak<Shared<M>>,
    _p: PhantomData<fn() -> P>,
}

impl<M, P: Platform> WeakAddr<M, P> {
    /// The address, if the mailbox's shared half is still alive.
    pub(crate) fn upgrade(&self) -> Option<Addr<M, P>> {
        self.shared.upgrade().map(|shared| Addr {
            shared,
            _p: PhantomData,
        })
    }
}

impl<M, P: Platform> Addr<M, P> {
    /// The receiving actor's `Life` (its id, exit hooks).
    pub(crate) fn life(&self) -> &Arc<Life> {
        &self.shared.life
    }

    /// A weak copy of this address.
    pub(crate) fn downgrade(&self) -> WeakAddr<M, P> {
        WeakAddr {
            shared: Arc::downgrade(&self.shared),
            _p: PhantomData,
        }
    }
}

impl<M: Send, P: Platform> Addr<M, P> {
    /// The receiving actor's id.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// Models and tests only: what a receive timer does when it fires
    /// (takes a `WAITING` registration, as a sender would, and wakes it).
    #[doc(hidden)]
    pub fn __poke(&self) {
        self.shared.wake_receiver();
    }

    /// A reference to the receiving actor (to kill, monitor or link to it).
    pub fn actor_ref(&self) -> ActorRef<P> {
        ActorRef::new(&self.shared.life)
    }

    /// Whether the receiving actor has exited (its mailbox is closed).
    pub fn is_closed(&self) -> bool {
        // Acquire: pairs with the SeqCst swap in `Mailbox::drop`.
        self.shared.state.load(Ordering::Acquire) == CLOSED
    }

    /// Sends `msg`; never blocks. Fails, returning the message, when the
    /// actor has exited. A receiver that was waiting is woken and, when the
    /// sender is an actor, runs next on the sender's worker (its run-next
    /// slot).
    #[inline]
    pub fn send(&self, msg: M) -> Result<(), SendError<M>> {
        let s = &*self.shared;
        // S1. Relaxed: a fast rejection; a close racing this send is the
        // receiver's exit, after which queued messages are dropped.
        if s.state.load(Ordering::Relaxed) == CLOSED {
            return Err(SendError(msg));
        }
        // S2 (SeqCst swap inside).
        // SAFETY: a fresh node from the node allocator, exclusively ours.
        unsafe { s.queue.push(sched::node_alloc::<M, P>(), msg) };
        s.life.count_sent();
        // S3. SeqCst: the sender's half of the Dekker pair (module doc).
        if s.state.load(Ordering::SeqCst) == WAITING {
            s.wake_receiver();
        }
        // A safe point: an actor whose timeslice is spent yields here.
        sched::safe_point::<P>();
        Ok(())
    }
}

impl<M: Send> CloseDead for Shared<M> {
    unsafe fn close_dead(&self) {
        // SeqCst: as the owner's drop (senders that see CLOSED fail).
        self.state.swap(CLOSED, Ordering::SeqCst);
        // SAFETY: the contract makes us the single consumer; nodes go to the
        // global allocator (interchangeable with any worker's cache).
        unsafe {
            self.queue.drain(|m, node| {
                drop(m);
                crate::lockfree::mpsc_queue::Node::<M>::free_global(node);
            });
        }
    }
}

impl<M> Shared<M> {
    /// The receiver takes its `WAITING` registration back (CAS to `IDLE`).
    /// `false`: a sender (or a timer) owns it and its wake is in flight.
    fn withdraw(&self) -> bool {
        // SeqCst: every write of the state word is SeqCst (module doc).
        let won = self
            .state
            .compare_exchange(WAITING, IDLE, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if won {
            // SAFETY: our CAS took the registration back.
            drop(self.waiter.with_mut(|p| unsafe { (*p).take() }));
        }
        won
    }

    /// `S3`'s slow path, and a receive timer's poke: takes the
    /// registration if it is still `WAITING` and wakes it.
    #[cold]
    fn wake_receiver(&self) {
        // SeqCst (free for an RMW on x86 and AArch64): its Acquire makes
        // the receiver's `waiter` write (before its CAS into WAITING)
        // visible, and every write to the state word stays in the SeqCst
        // order the Dekker argument uses.
        if self
            .state
            .compare_exchange(WAITING, WAKING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            // SAFETY: our CAS won the registration: `waiter` is ours until
            // we leave WAKING (the receiver never writes it in WAKING).
            let w = self.waiter.with_mut(|p| unsafe { (*p).take() });
            // SeqCst: its Release hands `waiter` back to the receiver (its
            // SeqCst state load); SeqCst as above. A failure means CLOSED,
            // which stays.
            let _ = self
                .state
                .compare_exchange(WAKING, IDLE, Ordering::SeqCst, Ordering::SeqCst);
            if let Some(w) = w {
                w.wake();
            }
        }
    }
}

impl<M: Send + 'static, P: Platform> Mailbox<M, P> {
    /// The address of this mailbox.
    pub fn addr(&self) -> Addr<M, P> {
        Addr {
            shared: self.shared.clone(),
            _p: PhantomData,
        }
    }

    /// The owning actor's id.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    fn pop(&mut self) -> Option<M> {
        let mut backoff = Backoff::new();
        loop {
            // SAFETY: the Mailbox is the single consumer (`&mut self`).
            match unsafe { self.shared.queue.pop() } {
                Pop::Data(m, node) => {
                    sched::node_free::<M, P>(node);
                    self.shared.life.count_taken();
                    return Some(m);
                }
                Pop::Empty => return None,
                // A sender swapped the tail but has not linked yet: it is
                // between two instructions, unless it was preempted there:
                // spin, then give the CPU away (a thread yield: the actor
                // must not park, no wake would come).
                Pop::Inconsistent => {
                    if backoff.snooze() {
                        P::yield_thread();
                    }
                }
            }
        }
    }

    /// The next message, if one is waiting.
    #[inline]
    pub fn try_recv(&mut self) -> Option<M> {
        if let Some(m) = self.save.pop_front() {
            return Some(m);
        }
        self.pop()
    }

    /// The next message, waiting for one if the mailbox is empty (an actor
    /// parks; a plain thread blocks on the platform's wait).
    pub fn recv(&mut self) -> M {
        // A safe point: an actor whose timeslice is spent yields here.
        sched::safe_point::<P>();
        loop {
            if let Some(m) = self.try_recv() {
                return m;
            }
            self.wait(None);
        }
    }

    /// The next message, waiting at most `timeout`; `None` if none came.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<M> {
        self.recv_deadline(sched::deadline_after::<P>(timeout))
    }

    /// The next message, waiting until `deadline_ns` on the platform's
    /// monotonic clock at most; `None` if none came by then. A message
    /// that arrives together with the deadline is returned, not lost: the
    /// timer and the sender race for the one registration, and the mailbox
    /// is checked once more after the wait is withdrawn.
    pub fn recv_deadline(&mut self, deadline_ns: u64) -> Option<M> {
        self.take_until(deadline_ns, Self::try_recv)
    }

    /// What `take` finds, waiting for arrivals until `deadline_ns`: the
    /// loop of every timed receive (plain and selective). At the deadline
    /// the registration is withdrawn and `take` looks once more, so a
    /// message that raced the timer is returned, not left behind.
    fn take_until(&mut self, deadline_ns: u64, mut take: impl FnMut(&mut Self) -> Option<M>) -> Option<M> {
        sched::safe_point::<P>();
        loop {
            if let Some(m) = take(self) {
                return Some(m);
            }
            if P::now_ns() >= deadline_ns || sched::unwinding::<P>() {
                self.withdraw();
                return take(self);
            }
            self.wait(Some(deadline_ns));
        }
    }

    /// Takes back a registration a timed-out wait left in place (a wake
    /// in flight for it is harmless: a later wait may return spuriously).
    fn withdraw(&mut self) {
        self.shared.withdraw();
    }

    /// Loom models only: makes the latest store to the state word a SeqCst
    /// one, as it always is in a running system (loom does not count an
    /// atomic's initial value as a SeqCst store, which breaks SeqCst-based
    /// Dekker reasoning in a model's first race).
    #[doc(hidden)]
    pub fn __warm_up(&self) {
        self.shared.state.store(IDLE, Ordering::SeqCst);
    }

    /// Parks the calling actor; with a deadline, a timer pokes the mailbox
    /// then (taking the registration as a sender would).
    fn park(&self, deadline: Option<u64>) {
        match deadline {
            None => sched::park::<P>(WAIT_MAILBOX),
            Some(d) => sched::park_until::<P>(
                WAIT_MAILBOX,
                d,
                PokeWith(self.shared.clone(), |s| s.wake_receiver()),
            ),
        }
    }

    /// The receiver's side of the protocol (module doc), waiting at most
    /// until `deadline` (platform ns) when one is given.
    #[cold]
    fn wait(&mut self, deadline: Option<u64>) {
        let s = &*self.shared;
        match s.state.load(Ordering::SeqCst) {
            IDLE => {}
            // Still registered (a stale wake resumed us): steps 3-4.
            WAITING => {
                // SAFETY: single consumer.
                if unsafe { s.queue.is_empty_sc() } {
                    self.park(deadline);
                } else {
                    // Withdraw; a failure means a wake is in flight (harmless).
                    s.withdraw();
                }
                return;
            }
            // A wake is in flight to us: let it land.
            WAKING => {
                if sched::current_actor::<P>().is_some() {
                    sched::park::<P>(WAIT_MAILBOX);
                } else {
                    P::yield_thread();
                }
                return;
            }
            _ => return, // CLOSED: only the receiver closes; not reachable
        }
        let w = Waiter::current::<P>();
        let thread = match &w {
            Waiter::Thread(t) => Some(t.clone()),
            Waiter::Actor(_) => None,
        };
        // R1. SAFETY: state is IDLE and only we move it out of IDLE, so no
        // sender owns `waiter`.
        s.waiter.with_mut(|p| unsafe { *p = Some(w) });
        crate::seam::failpoint::hit(crate::seam::failpoint::Site::MailboxWaitCas);
        // R2. SeqCst: the receiver's half of the Dekker pair.
        if s.state
            .compare_exchange(IDLE, WAITING, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            // SAFETY: the CAS failed, so no sender can own `waiter`.
            drop(s.waiter.with_mut(|p| unsafe { (*p).take() }));
            return;
        }
        // R3.
        // SAFETY: single consumer.
        if !unsafe { s.queue.is_empty_sc() } && s.withdraw() {
            return;
        }
        // R4 (also reached when the withdraw lost to a sender: its wake is
        // in flight, so the wait ends promptly).
        match thread {
            None => self.park(deadline),
            Some(t) => {
                // A thread leaves only once its registration is gone: woken
                // (the sender took it) or withdrawn.
                let w = Waiter::Thread(t);
                while !w.is_woken() {
                    // SAFETY: single consumer.
                    if !unsafe { s.queue.is_empty_sc() } && s.withdraw() {
                        return;
                    }
                    if deadline.is_some_and(|d| P::now_ns() >= d) {
                        // Timed out: withdraw, unless a sender took the
                        // registration (then its wake is imminent: wait
                        // for it, so none lands on a later wait).
                        if s.withdraw() {
                            return;
                        }
                        while !w.is_woken() {
                            w.wait::<P>(None);
                        }
                        return;
                    }
                    w.wait::<P>(deadline);
                }
            }
        }
    }
}

impl<M, P: Platform> Drop for Mailbox<M, P> {
    fn drop(&mut self) {
        // SeqCst: senders that load CLOSED after this fail; see `send`.
        self.shared.state.swap(CLOSED, Ordering::SeqCst);
        crate::seam::failpoint::hit(crate::seam::failpoint::Site::MailboxClose);
        // Drop what is queued now and recycle its nodes; a send racing the
        // close may still land, and is dropped with the shared half (the
        // queue's own Drop) when the last Addr goes.
        // SAFETY: the Mailbox is the single consumer.
        unsafe {
            self.shared.queue.drain(|m, node| {
                drop(m);
                sched::node_free::<M, P>(node);
            });
        }
    }
}

mod select;
#[cfg(test)]
mod tests;
