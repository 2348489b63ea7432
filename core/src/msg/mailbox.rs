//! Actor mailboxes: an actor's receiving end ([`Mailbox`]) and the
//! addresses that send to it ([`Addr`]), on the same MPSC machinery as the
//! channels (`channel::chan`: a lock-free queue, a one-pointer receiver
//! registration, the sender count, the receiver's park protocol), so a send
//! is one `swap`, one store and one load when the receiver is busy, and
//! wakes the receiver exactly once when it waits.
//!
//! # Lifecycle
//!
//! | event | effect |
//! |---|---|
//! | `spawn_actor` / `ActorBuilder::reserve` | a mailbox and its first `Addr` (the sender count is 1) |
//! | `Addr::clone`, `Mailbox::addr`, a weak address upgraded | one more sender (from 0: the mailbox reconnects) |
//! | the last `Addr` dropped | the sender count is 0: once the queue is drained, receives say *closed* (`RecvError`, `Disconnected`) instead of waiting |
//! | the `Mailbox` dropped (its actor exits) | sends fail, handing the message back; queued messages are dropped; blocked senders fail |
//!
//! Weak addresses (an exit trap's) do not count as senders: an actor that
//! traps exits into its own mailbox still sees it close when every `Addr`
//! is gone. A registered name holds a real `Addr`
//! (`supervise::names`): a registered actor's mailbox stays open until
//! the name is unregistered or the actor ends.
//!
//! # Protocol
//!
//! The receiver park protocol, the sender count and the close are
//! `channel::chan`'s (numbered `R1`–`R3`, `S1`–`S3`, `D1`–`D2` there); a
//! bounded mailbox adds `channel::bound`'s slot accounting and wait list
//! (`B1`–`B4`, `F1`–`F2`), exactly as a bounded channel. What is the
//! mailbox's own:
//!
//! - **The save queue.** [`Mailbox::recv_matching`] takes the first message
//!   matching a predicate and keeps the others, in arrival order, in a
//!   private queue (as Erlang's receive does); every receive reads it
//!   first. A message moved there has left the MPSC queue, so in a bounded
//!   mailbox it no longer holds a slot.
//! - **Notices never wait.** The runtime's own messages into a mailbox (a
//!   monitor's or a trap's `Down`, sent from the ending actor's exit path)
//!   take a slot of a bounded mailbox even when it is full
//!   (`Bound::force_reserve`): an exit never blocks on a slow watcher.
//! - **The owner's identity.** Each mailbox belongs to one actor's `Life`
//!   (its id, name, exit hooks), so an `Addr` can give an `ActorRef`.
//!
//! # Allocation
//!
//! The shared half is a block from the spawning worker's cache
//! (`sync::block_arc`: an `Arc`'s two counts), which the last reference
//! gives back to its own worker's cache with the queue's last nodes, so
//! a spawn with a mailbox allocates nothing once warm. Message nodes come
//! from the current worker's node cache and go back to the receiving
//! worker's, so steady-state messaging on one worker allocates nothing; across workers the caches' levels drift and a dry
//! one allocates now and then (docs/reliability.md, "Allocation").
//! Senders on plain OS threads use the global allocator.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use core::fmt;

use crate::actor::life::ActorRef;
use crate::actor::LifeRef;

use crate::actor::WAIT_MAILBOX;
use crate::msg::channel::bound::{Bound, Sent};
use crate::msg::channel::chan::{CachedChan, Chan, Popped};
use crate::msg::channel::{RecvError, RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::sched::WorkerBlocks;
use crate::seam::platform::Platform;
use crate::sync::block_arc::{BlockArc, BlockWeak};
use core::time::Duration;

pub use crate::seam::error::SendError;

/// The shared half of a mailbox (owned jointly by the receiver and every
/// [`Addr`]; weak addresses point at it without counting as senders).
pub(crate) struct Shared<M, P: Platform> {
    /// Its nodes go back to the dropping worker's cache: a spawn with a
    /// mailbox and its end take and give back the same nodes.
    chan: CachedChan<M, P>,
    /// A bounded mailbox's slots and blocked senders (boxed: an unbounded
    /// mailbox pays one word for it).
    bound: Option<Box<Bound<P>>>,
    id: u64,
    /// The owning actor's id, name, exit hooks.
    life: LifeRef,
}

/// [`Shared`]'s layout with the platform left out (the box's pointee and
/// the `CachedChan`'s platform marker do not change its size; a test
/// checks the two sizes agree), for `dump::runtime_bytes_per_actor`,
/// which has no platform parameter.
#[allow(dead_code)]
pub(crate) struct SharedLayout {
    chan: Chan<()>,
    bound: Option<Box<u8>>,
    id: u64,
    life: LifeRef,
}

/// An actor's mailbox: the receiving end, owned by the actor.
///
/// Receives say *closed* ([`RecvError`], [`TryRecvError::Disconnected`],
/// [`RecvTimeoutError::Disconnected`]) once the mailbox is empty and no
/// [`Addr`] is left, so a serving loop ends by itself:
///
/// ```ignore
/// // With a port crate (`smarm_linux`, `smarm_darwin`) as `smarm`:
/// let (addr, h) = smarm::spawn_actor(|mut mb: smarm::Mailbox<u64>| {
///     let mut sum = 0;
///     while let Ok(n) = mb.recv() {
///         sum += n;
///     }
///     sum // every address was dropped and the mailbox drained
/// });
/// for n in 1..=3 {
///     addr.send(n).unwrap();
/// }
/// drop(addr);
/// assert_eq!(h.join().unwrap(), 6);
/// ```
///
/// Dropping it (normally: the actor's exit) closes it for senders: later
/// sends fail with the message returned; messages still queued are
/// dropped.
pub struct Mailbox<M, P: Platform> {
    shared: SharedRef<M, P>,
    save: VecDeque<M>,
    /// The shared half's fixed facts each receive reads ([`RxFlags`]).
    flags: RxFlags,
}

/// A mailbox's facts that every receive reads, fixed when it is made and
/// kept in the receiving [`Mailbox`]: in the shared half they sit on the
/// line of the queue's tail, which every send swaps (a miss per message
/// for a receiver on another core than its senders; docs/benchmarks.md,
/// "A receive reads nothing the senders write").
#[derive(Clone, Copy)]
struct RxFlags {
    /// Receives are counted for dumps (`Chan::counted`).
    counted: bool,
    /// The mailbox has a bound, whose slot each receive frees.
    bounded: bool,
}

/// The address of an actor's mailbox: clone it, send it anywhere, send to
/// it from actors and plain threads alike. The mailbox closes for its
/// receiver (once drained) when the last address is dropped.
pub struct Addr<M, P: Platform> {
    shared: SharedRef<M, P>,
}

/// A counted reference to a mailbox's shared half: a block from the
/// calling worker's cache (`sync::block_arc`), not the global allocator.
type SharedRef<M, P> = BlockArc<Shared<M, P>, WorkerBlocks<P>>;

impl<M, P: Platform> Clone for Addr<M, P> {
    fn clone(&self) -> Self {
        self.shared.chan.add_sender();
        Addr {
            shared: self.shared.clone(),
        }
    }
}

impl<M, P: Platform> Drop for Addr<M, P> {
    fn drop(&mut self) {
        self.shared.chan.drop_sender();
    }
}

impl<M, P: Platform> fmt::Debug for Addr<M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Addr").field("actor", &self.shared.id).finish()
    }
}

impl<M, P: Platform> fmt::Debug for Mailbox<M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mailbox")
            .field("actor", &self.shared.id)
            .field("saved", &self.save.len())
            .finish_non_exhaustive()
    }
}

/// A mailbox not bound to any actor (id 0), for models and tests that drive
/// the protocol from plain threads.
#[doc(hidden)]
#[cfg(any(test, feature = "internals", smarm_loom))]
pub fn detached<M: Send, P: Platform>() -> (Mailbox<M, P>, Addr<M, P>) {
    pair::<M, P>(crate::actor::life::Life::detached(0, true), None)
}

/// [`detached`] with room for `cap` messages.
#[doc(hidden)]
#[cfg(any(test, feature = "internals", smarm_loom))]
pub fn detached_bounded<M: Send, P: Platform>(cap: usize) -> (Mailbox<M, P>, Addr<M, P>) {
    pair::<M, P>(crate::actor::life::Life::detached(0, true), Some(cap))
}

/// The body of an actor with a mailbox: makes the mailbox of the actor
/// whose `Life` is `life` (bounded to `cap` messages if given), leaves its
/// first address in `addr`, and returns the body that hands the mailbox to
/// `f`. Shared by every `spawn_actor`.
pub(crate) fn bind<M, P, F, T>(
    life: &LifeRef,
    cap: Option<usize>,
    f: F,
    addr: &mut Option<Addr<M, P>>,
) -> impl FnOnce() -> T + Send + 'static
where
    M: Send + 'static,
    P: Platform,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    let (mb, a) = owned::<M, P>(life, cap);
    *addr = Some(a);
    move || f(mb)
}

/// A new mailbox for the actor whose `Life` is `life`, registered with it
/// (its depth shows in dumps; an overflow recovery closes it).
pub(crate) fn owned<M: Send + 'static, P: Platform>(
    life: &LifeRef,
    cap: Option<usize>,
) -> (Mailbox<M, P>, Addr<M, P>) {
    let (shared, weak) = BlockArc::new_with_weak(|| Shared::new(life.clone(), cap));
    // SAFETY: the `Life` is not shared yet beyond its actor's spawn (or
    // its reservation), whose other handles nobody holds yet.
    unsafe { *life.mailbox.get() = Some(dead::erase(weak)) };
    halves(shared)
}

/// A new mailbox and its first address, for the actor of `life`.
#[cfg(any(test, feature = "internals", smarm_loom))]
fn pair<M: Send, P: Platform>(life: LifeRef, cap: Option<usize>) -> (Mailbox<M, P>, Addr<M, P>) {
    halves(BlockArc::new(|| Shared::new(life, cap)))
}

/// The receiving end and the first address of a new shared half.
fn halves<M, P: Platform>(shared: SharedRef<M, P>) -> (Mailbox<M, P>, Addr<M, P>) {
    (
        Mailbox {
            flags: RxFlags {
                counted: shared.chan.counted(),
                bounded: shared.bound.is_some(),
            },
            shared: shared.clone(),
            save: VecDeque::new(),
        },
        Addr { shared },
    )
}

/// An address that does not keep the mailbox open (an exit trap's: see
/// `life::trap_exits_into`): not a sender until upgraded.
pub(crate) struct WeakAddr<M, P: Platform> {
    shared: BlockWeak<Shared<M, P>, WorkerBlocks<P>>,
}

impl<M, P: Platform> WeakAddr<M, P> {
    /// The address, if the mailbox's shared half is still alive (a
    /// mailbox every `Addr` had left reconnects).
    pub(crate) fn upgrade(&self) -> Option<Addr<M, P>> {
        self.shared.upgrade().map(|shared| {
            shared.chan.add_sender();
            Addr { shared }
        })
    }
}

impl<M, P: Platform> Addr<M, P> {
    /// The receiving actor's `Life` (its id, exit hooks).
    pub(crate) fn life(&self) -> &LifeRef {
        &self.shared.life
    }

    /// A weak copy of this address.
    pub(crate) fn downgrade(&self) -> WeakAddr<M, P> {
        WeakAddr {
            shared: BlockArc::downgrade(&self.shared),
        }
    }

    /// The receiving actor's id.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// A reference to the receiving actor (to kill, monitor or link to it).
    pub fn actor_ref(&self) -> ActorRef<P> {
        ActorRef::new(&self.shared.life)
    }

    /// Whether the mailbox was dropped (its actor exited): sends fail.
    pub fn is_closed(&self) -> bool {
        self.shared.chan.rx_gone()
    }

    /// The mailbox's capacity; `None` if it is unbounded.
    pub fn capacity(&self) -> Option<usize> {
        self.shared.bound.as_ref().map(|b| b.cap())
    }
}

impl<M: Send + 'static, P: Platform> Addr<M, P> {
    /// Models and tests only: what a receive timer does when it fires
    /// (takes a waiting receiver's registration, as a sender would, and
    /// wakes it).
    #[doc(hidden)]
    pub fn __poke(&self) {
        self.shared.chan.wake_receiver();
    }

    /// Sends `msg`. Fails, returning the message, when the actor has
    /// exited. An unbounded mailbox never makes the sender wait; a bounded
    /// one that is full does (an actor parks, a thread blocks) until the
    /// receiver takes a message. A receiver that was waiting is woken and,
    /// when the sender is an actor, runs next on the sender's worker (its
    /// run-next slot).
    #[inline]
    pub fn send(&self, msg: M) -> Result<(), SendError<M>> {
        let s = &*self.shared;
        // S1 (and whether to count, from the same load).
        let Some(counted) = s.chan.open() else {
            return Err(SendError(msg));
        };
        if s.bound.is_some() {
            return match self.send_bounded(msg, None) {
                Sent::Ok => Ok(()),
                Sent::Closed(m) | Sent::TimedOut(m) => Err(SendError(m)),
            };
        }
        if counted {
            s.life.count_sent();
        }
        // S2–S3 (and a safe point: an actor whose timeslice is spent
        // yields there).
        s.chan.push::<P>(msg);
        Ok(())
    }

    /// Sends `msg` if that needs no waiting: [`TrySendError::Full`] when a
    /// bounded mailbox has no free slot, [`TrySendError::Disconnected`]
    /// when the actor has exited; the message is handed back either way.
    pub fn try_send(&self, msg: M) -> Result<(), TrySendError<M>> {
        let s = &*self.shared;
        let Some(counted) = s.chan.open() else {
            return Err(TrySendError::Disconnected(msg));
        };
        if let Some(b) = &s.bound {
            if !b.try_reserve() {
                return Err(TrySendError::Full(msg));
            }
        }
        if counted {
            s.life.count_sent();
        }
        s.chan.push::<P>(msg);
        Ok(())
    }

    /// Sends `msg`, waiting at most `timeout` for a free slot of a bounded
    /// mailbox ([`SendTimeoutError::Timeout`] then; an unbounded mailbox
    /// never waits); [`SendTimeoutError::Disconnected`] when the actor has
    /// exited. The message is handed back either way.
    pub fn send_timeout(&self, msg: M, timeout: Duration) -> Result<(), SendTimeoutError<M>> {
        if self.shared.bound.is_none() {
            return self.send(msg).map_err(SendTimeoutError::from);
        }
        if self.shared.chan.rx_gone() {
            return Err(SendTimeoutError::Disconnected(msg));
        }
        match self.send_bounded(msg, Some(sched::deadline_after::<P>(timeout))) {
            Sent::Ok => Ok(()),
            Sent::Closed(m) => Err(SendTimeoutError::Disconnected(m)),
            Sent::TimedOut(m) => Err(SendTimeoutError::Timeout(m)),
        }
    }

    /// A bounded mailbox's send (`B1`–`B4`), waiting until `deadline` at
    /// most.
    #[cold]
    fn send_bounded(&self, msg: M, deadline: Option<u64>) -> Sent<M> {
        let s = &self.shared;
        let b = s.bound.as_ref().expect("a bounded mailbox");
        let r = b.send(&s.chan, msg, WAIT_MAILBOX_SEND, deadline, |ticket| {
            PokeWith((s.clone(), ticket), |(s, t): &(SharedRef<M, P>, u64)| {
                if let Some(b) = &s.bound {
                    b.wake_ticket(*t)
                }
            })
        });
        if matches!(r, Sent::Ok) && s.chan.counted() {
            s.life.count_sent();
        }
        r
    }

    /// The runtime's own notice (a `Down` from an exit hook): never waits,
    /// even on a full bounded mailbox (module doc, "Notices never wait").
    pub(crate) fn send_notice(&self, msg: M) -> Result<(), SendError<M>> {
        let s = &*self.shared;
        let Some(counted) = s.chan.open() else {
            return Err(SendError(msg));
        };
        if let Some(b) = &s.bound {
            b.force_reserve();
        }
        if counted {
            s.life.count_sent();
        }
        s.chan.push::<P>(msg);
        Ok(())
    }
}

/// A bounded send parks as a channel send does (dumps show it so).
const WAIT_MAILBOX_SEND: u8 = crate::actor::WAIT_CHANNEL;

impl<M: Send, P: Platform> Shared<M, P> {
    /// A connected, empty shared half for the actor of `life`, bounded to
    /// `cap` messages if given.
    fn new(life: LifeRef, cap: Option<usize>) -> Self {
        Shared {
            // Sends are counted only where the runtime asked for depths.
            chan: CachedChan::new(Chan::with_counted::<P>(life.has_mailbox())),
            bound: cap.map(|c| Box::new(Bound::new(c))),
            id: life.id,
            life,
        }
    }

    /// Closes the mailbox (later sends fail) and drops what is queued.
    ///
    /// # Safety
    ///
    /// The owning `Mailbox` will never run again (its frame was
    /// abandoned): the caller becomes the queue's single consumer.
    unsafe fn close_dead(&self) {
        // SAFETY: the contract makes us the single consumer; nodes go to the
        // global allocator (interchangeable with any worker's cache).
        unsafe { self.chan.close_rx_global() };
        if let Some(b) = &self.bound {
            b.close();
        }
    }
}

impl<M, P: Platform> Shared<M, P> {
    /// The oldest message of the MPSC queue, its slot freed; `f` is the
    /// receiving `Mailbox`'s copy of this mailbox's flags.
    ///
    /// # Safety
    ///
    /// Receiver only (the queue's single consumer).
    #[inline]
    unsafe fn pop(&self, f: RxFlags) -> Result<M, TryRecvError> {
        // SAFETY: forwarded contract.
        unsafe { self.pop_in_place(f) }.map(Popped::take)
    }

    /// [`pop`](Self::pop) with the message left in its node
    /// (`Chan::pop_in_place`) until the caller takes it, before its next
    /// pop.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    #[inline]
    unsafe fn pop_in_place(&self, f: RxFlags) -> Result<Popped<M, P>, TryRecvError> {
        // SAFETY: forwarded contract.
        let m = unsafe { self.chan.try_recv_in_place::<P>() }?;
        if f.counted {
            self.life.count_taken();
        }
        if f.bounded {
            if let Some(b) = &self.bound {
                b.release_slot();
            }
        }
        Ok(m)
    }
}

impl<M: Send + 'static, P: Platform> Mailbox<M, P> {
    /// A new address of this mailbox (a mailbox every `Addr` had left
    /// reconnects).
    pub fn addr(&self) -> Addr<M, P> {
        self.shared.chan.add_sender();
        Addr {
            shared: self.shared.clone(),
        }
    }

    /// The owning actor's id.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The MPSC core (for select's registrations).
    pub(crate) fn chan(&self) -> &Chan<M> {
        &self.shared.chan
    }

    /// The mailbox's capacity; `None` if it is unbounded.
    pub fn capacity(&self) -> Option<usize> {
        self.shared.bound.as_ref().map(|b| b.cap())
    }

    /// The next message, if one is waiting: `Empty` if not (addresses
    /// remain), `Disconnected` if none will come (no `Addr` is left).
    #[inline]
    pub fn try_recv(&mut self) -> Result<M, TryRecvError> {
        if let Some(m) = self.save.pop_front() {
            return Ok(m);
        }
        // SAFETY: `&mut self`: the single consumer.
        unsafe { self.shared.pop(self.flags) }
    }

    /// The next message, waiting for one if the mailbox is empty (an actor
    /// parks; a plain thread blocks). `Err(RecvError)` once the mailbox is
    /// empty and no `Addr` is left (nothing can come), or at once for an
    /// actor that runtime shutdown is cancelling, which must not park.
    pub fn recv(&mut self) -> Result<M, RecvError> {
        // A safe point: an actor whose timeslice is spent yields here. The
        // current-worker slot as it is after it, for the node free.
        let c = sched::safe_point_here::<P>();
        // Saved messages first. Only this receiver's selective receives
        // (`&mut self`) fill the save queue, so one look before the wait
        // loop is enough.
        if let Some(m) = self.save.pop_front() {
            return Ok(m);
        }
        let (shared, flags) = (&self.shared, self.flags);
        // SAFETY: `&mut self`: the single consumer.
        let take = |_: &Chan<M>| unsafe { shared.pop_in_place(flags) };
        // SAFETY: as above; `c` read after the safe point; the message is
        // taken at once (no pop in between), with the slot read after the
        // last switch.
        unsafe { shared.chan.recv_loop::<P, _>(WAIT_MAILBOX, c, take) }.map(|(m, c)| unsafe { m.take_in(c) })
    }

    /// The next message, waiting at most `timeout`: `Timeout` if none
    /// came, `Disconnected` if none will come. A message that arrives
    /// together with the deadline is returned, not lost: the timer and the
    /// sender race for the one registration, and the mailbox is checked
    /// once more after the wait is withdrawn.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<M, RecvTimeoutError> {
        self.recv_deadline_ns(sched::deadline_after::<P>(timeout))
    }

    /// [`recv_timeout`](Self::recv_timeout) with a deadline instead of a
    /// timeout.
    #[cfg(feature = "std")]
    pub fn recv_deadline(&mut self, deadline: std::time::Instant) -> Result<M, RecvTimeoutError> {
        self.recv_deadline_ns(sched::deadline_at::<P>(deadline))
    }

    /// [`recv_timeout`](Self::recv_timeout) with a deadline in ns on the
    /// platform's monotonic clock (for ports).
    #[doc(hidden)]
    pub fn recv_deadline_ns(&mut self, deadline_ns: u64) -> Result<M, RecvTimeoutError> {
        let Mailbox { shared, save, flags } = self;
        let take = |_: &Chan<M>| match save.pop_front() {
            Some(m) => Ok(m),
            // SAFETY: `&mut self`: the single consumer.
            None => unsafe { shared.pop(*flags) },
        };
        let poke = || PokeWith(shared.clone(), |s: &SharedRef<M, P>| s.chan.wake_receiver());
        // SAFETY: as above.
        unsafe {
            shared
                .chan
                .recv_deadline_with::<P, _>(WAIT_MAILBOX, deadline_ns, poke, take)
        }
    }
}

impl<M, P: Platform> Drop for Mailbox<M, P> {
    fn drop(&mut self) {
        let s = &*self.shared;
        // Later sends fail; what is queued now is dropped, its nodes
        // recycled; a send racing the close may still land, and is dropped
        // with the shared half (the queue's own Drop) when the last handle
        // goes.
        // SAFETY: the Mailbox is the single consumer; this is its drop.
        unsafe { s.chan.close_rx::<P>() };
        if let Some(b) = &s.bound {
            b.close();
        }
    }
}

mod dead;
mod select;
#[cfg(test)]
mod tests;
