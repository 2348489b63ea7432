//! The oneshot channel: [`oneshot`], [`OneshotSender`], [`OneshotReceiver`].
//! One value, one sender, one receiver: a reply slot (the receiver waits
//! for it as an actor that parks or a thread that blocks).
//!
//! # The state word
//!
//! | value     | meaning                                                        |
//! |-----------|----------------------------------------------------------------|
//! | `EMPTY`   | nothing sent; the receiver is not waiting                      |
//! | `WAITING` | nothing sent; `waiter` holds the receiver's registration        |
//! | `SENT`    | `value` holds the value (final, but for the receiver's drop)   |
//! | `TX_GONE` | the sender was dropped without sending (final)                 |
//! | `RX_GONE` | the receiver was dropped (final, but for the sender's `SENT`)  |
//!
//! # Protocol (numbered as in the code)
//!
//! Sender, `send(v)`:
//! 1. `T1` writes `value` (the sender owns it until it publishes `SENT`);
//! 2. `T2` swaps in `SENT` (AcqRel). The old state says what to do: `EMPTY`,
//!    nothing; `WAITING`, take `waiter` and wake it; `RX_GONE`, take the
//!    value back and fail with it.
//!
//! Sender dropped unsent: swaps in `TX_GONE`; if it was `WAITING`, takes
//! `waiter` and wakes it.
//!
//! Receiver, `recv`:
//! 1. `V1` loads the state (Acquire): `SENT`, take the value; `TX_GONE`,
//!    fail; `WAITING`, it was a spurious wake: wait again;
//! 2. `V2` on `EMPTY`: writes `waiter`, CAS `EMPTY → WAITING` (AcqRel); if
//!    that fails (the sender finished meanwhile) take `waiter` back and go
//!    to `V1`;
//! 3. `V3` waits, then goes to `V1`.
//!
//! Receiver dropped: swaps in `RX_GONE`; `SENT`, drops the value; `WAITING`
//! (a `recv` that unwound while waiting), takes `waiter` back.
//!
//! Each cell has one owner at a time, handed over by the one state change
//! that reads the other side's: `value` passes to the receiver with `SENT`
//! (or back to the sender with `RX_GONE`), `waiter` passes to the sender
//! with `WAITING` and back when a CAS or swap out of `WAITING` is the
//! receiver's own. So the wake is delivered once, and no wake is lost: the
//! sender's swap and the receiver's CAS are read-modify-writes of one word.

use core::fmt;
use core::mem::ManuallyDrop;
use core::ptr;

use super::chan::cancelled;
use super::{RecvError, RecvTimeoutError, TryRecvError};
use crate::msg::wait::Waiter;
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::sched::WorkerBlocks;
use crate::seam::platform::Platform;
use crate::sync::block_arc::BlockArc;
use crate::sync::{AtomicU32, Ordering, UnsafeCell};
use core::time::Duration;

const EMPTY: u32 = 0;
const WAITING: u32 = 1;
const SENT: u32 = 2;
const TX_GONE: u32 = 3;
const RX_GONE: u32 = 4;

struct Inner<T> {
    state: AtomicU32,
    value: UnsafeCell<Option<T>>,
    waiter: UnsafeCell<Option<Waiter>>,
}

// SAFETY: `value` and `waiter` are each owned by one side at a time, handed
// over through the state word's Release/Acquire read-modify-writes (module
// doc); `value` moves between threads, so `T: Send`.
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: as above; `&Inner` gives no shared access to `T`.
unsafe impl<T: Send> Sync for Inner<T> {}

impl<T> Inner<T> {
    /// Takes `waiter` and wakes it.
    ///
    /// # Safety
    ///
    /// The caller's swap or CAS took the state out of `WAITING` (Acquire),
    /// so `waiter` is the caller's.
    unsafe fn wake_receiver(&self) {
        // SAFETY: forwarded contract.
        if let Some(w) = self.waiter.with_mut(|p| unsafe { (*p).take() }) {
            w.wake();
        }
    }

    /// A receive timer's poke: takes the registration if the receiver is
    /// still `WAITING` (the sender's swap and this CAS decide who owns it)
    /// and wakes it; the receiver then finds `EMPTY` and times out.
    fn poke(&self) {
        // AcqRel: Acquire sees the receiver's `waiter` write (before its
        // Release CAS into WAITING); Release orders our take before the
        // receiver's next registration (its Acquire CAS out of EMPTY).
        if self
            .state
            .compare_exchange(WAITING, EMPTY, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // SAFETY: our CAS took the state out of WAITING: `waiter` is
            // ours; the receiver writes it again only after this poke
            // returned (the timer's FIRED handshake).
            unsafe { self.wake_receiver() };
        }
    }

    /// Takes `value`.
    ///
    /// # Safety
    ///
    /// `SENT` was read with Acquire by the receiver (or `RX_GONE` by the
    /// sender's swap): `value` is the caller's.
    unsafe fn take_value(&self) -> Option<T> {
        // SAFETY: forwarded contract.
        self.value.with_mut(|p| unsafe { (*p).take() })
    }
}

/// The slot both halves share, from the calling worker's block cache (back
/// to the cache of the worker that drops it last; the global allocator on
/// a plain thread), as an unbounded channel's: a oneshot made per request
/// costs no `malloc` on a worker.
type InnerRef<T, P> = BlockArc<Inner<T>, WorkerBlocks<P>>;

/// The sending half of a oneshot channel: `send` consumes it.
pub struct OneshotSender<T, P: Platform> {
    inner: InnerRef<T, P>,
}

/// The receiving half of a oneshot channel.
pub struct OneshotReceiver<T, P: Platform> {
    inner: InnerRef<T, P>,
}

/// A new oneshot channel: one value from one sender to one receiver.
pub fn oneshot<T: Send, P: Platform>() -> (OneshotSender<T, P>, OneshotReceiver<T, P>) {
    let inner = BlockArc::new(|| Inner {
        state: AtomicU32::new(EMPTY),
        value: UnsafeCell::new(None),
        waiter: UnsafeCell::new(None),
    });
    (OneshotSender { inner: inner.clone() }, OneshotReceiver { inner })
}

impl<T, P: Platform> OneshotSender<T, P> {
    /// Sends `v`, waking the receiver if it waits; never waits. Fails,
    /// handing `v` back, when the receiver was dropped.
    pub fn send(self, v: T) -> Result<(), T> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the reference
        // is moved out exactly once (and the unsent-drop path does not run).
        let inner = unsafe { ptr::read(&this.inner) };
        // T1. SAFETY: the sender owns `value` until it publishes SENT.
        inner.value.with_mut(|p| unsafe { *p = Some(v) });
        // T2. AcqRel: Release publishes `value` to the receiver's Acquire
        // load of SENT; Acquire takes in the receiver's `waiter` write
        // (WAITING) or its drop (RX_GONE).
        match inner.state.swap(SENT, Ordering::AcqRel) {
            // SAFETY: our swap took the state out of WAITING.
            WAITING => unsafe { inner.wake_receiver() },
            RX_GONE => {
                // SAFETY: the receiver is gone and never reads `value` after
                // its RX_GONE swap (it saw EMPTY there); the value is ours.
                let v = unsafe { inner.take_value() };
                return v.map_or(Ok(()), Err);
            }
            // EMPTY (SENT and TX_GONE are written only by this handle).
            old => debug_assert_eq!(old, EMPTY),
        }
        Ok(())
    }

    /// Whether the receiver was dropped (a send would fail).
    pub fn is_closed(&self) -> bool {
        // Acquire: pairs with the receiver's AcqRel swap in its drop.
        self.inner.state.load(Ordering::Acquire) == RX_GONE
    }
}

impl<T, P: Platform> Drop for OneshotSender<T, P> {
    fn drop(&mut self) {
        // AcqRel: Release so a receiver reading TX_GONE sees the sender's
        // earlier writes; Acquire takes in the receiver's `waiter` write.
        if self.inner.state.swap(TX_GONE, Ordering::AcqRel) == WAITING {
            // SAFETY: our swap took the state out of WAITING.
            unsafe { self.inner.wake_receiver() };
        }
    }
}

impl<T, P: Platform> fmt::Debug for OneshotSender<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OneshotSender").finish_non_exhaustive()
    }
}

impl<T, P: Platform> OneshotReceiver<T, P> {
    /// Waits for the value (an actor parks; a plain thread blocks).
    /// `Err(RecvError)` if the sender was dropped without sending (or at
    /// once for an actor that runtime shutdown is cancelling).
    pub fn recv(mut self) -> Result<T, RecvError> {
        self.wait_value(None, |_| {}).map_err(|_| RecvError)
    }

    /// Waits at most `timeout` for the value: `Timeout` leaves the receiver
    /// usable (receive again later); `Disconnected` if the sender was
    /// dropped without sending.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<T, RecvTimeoutError>
    where
        T: Send + 'static,
    {
        self.recv_deadline_ns(sched::deadline_after::<P>(timeout))
    }

    /// [`recv_timeout`](Self::recv_timeout) with a deadline instead of a
    /// timeout.
    #[cfg(feature = "std")]
    pub fn recv_deadline(&mut self, deadline: std::time::Instant) -> Result<T, RecvTimeoutError>
    where
        T: Send + 'static,
    {
        self.recv_deadline_ns(sched::deadline_at::<P>(deadline))
    }

    /// [`recv_timeout`](Self::recv_timeout) with a deadline in ns on the
    /// platform's monotonic clock (for ports).
    #[doc(hidden)]
    pub fn recv_deadline_ns(&mut self, deadline_ns: u64) -> Result<T, RecvTimeoutError>
    where
        T: Send + 'static,
    {
        let inner = self.inner.clone();
        self.wait_value(Some(deadline_ns), move |d| {
            sched::park_until::<P>(
                crate::actor::WAIT_CHANNEL,
                d,
                PokeWith(inner.clone(), |i: &InnerRef<T, P>| i.poke()),
            )
        })
    }

    /// `V1`–`V3`, giving up at `deadline` if one is given (an actor waits
    /// then with `park_until`, which arms a timer poking [`Inner::poke`]).
    fn wait_value(&mut self, deadline: Option<u64>, park_until: impl Fn(u64)) -> Result<T, RecvTimeoutError> {
        let inner = &*self.inner;
        // The registered thread's wake word, if we registered as a thread.
        let mut thread = None;
        loop {
            // V1. Acquire: pairs with the sender's AcqRel swaps.
            match inner.state.load(Ordering::Acquire) {
                // SAFETY: SENT read with Acquire: `value` is ours.
                SENT => return unsafe { inner.take_value() }.ok_or(RecvTimeoutError::Disconnected),
                TX_GONE => return Err(RecvTimeoutError::Disconnected),
                WAITING => {
                    // Registered; a spurious wake, or the deadline. Before
                    // waiting again, a cancelled actor or a timed-out wait
                    // withdraws (CAS back to EMPTY: Acquire as in V1, in
                    // case the sender finished meanwhile).
                    let timed_out = deadline.is_some_and(|d| P::now_ns() >= d);
                    if cancelled::<P>() || timed_out {
                        if inner
                            .state
                            .compare_exchange(WAITING, EMPTY, Ordering::Acquire, Ordering::Relaxed)
                            .is_ok()
                        {
                            // SAFETY: our CAS took the state out of WAITING
                            // before the sender's swap: `waiter` is ours.
                            drop(inner.waiter.with_mut(|p| unsafe { (*p).take() }));
                            return Err(if timed_out {
                                RecvTimeoutError::Timeout
                            } else {
                                RecvTimeoutError::Disconnected
                            });
                        }
                        continue;
                    }
                }
                _ => {
                    // EMPTY: V2 (or the timer's poke took the registration).
                    if cancelled::<P>() {
                        return Err(RecvTimeoutError::Disconnected);
                    }
                    if deadline.is_some_and(|d| P::now_ns() >= d) {
                        return Err(RecvTimeoutError::Timeout);
                    }
                    let w = Waiter::current::<P>();
                    thread = match &w {
                        Waiter::Thread(t) => Some(t.clone()),
                        Waiter::Actor(_) => None,
                    };
                    // SAFETY: the state is not WAITING, so `waiter` is ours.
                    inner.waiter.with_mut(|p| unsafe { *p = Some(w) });
                    // AcqRel: Release publishes `waiter` to the sender's
                    // Acquire swap; Acquire (on failure too) as in V1.
                    if inner
                        .state
                        .compare_exchange(EMPTY, WAITING, Ordering::AcqRel, Ordering::Acquire)
                        .is_err()
                    {
                        // SAFETY: the CAS failed, so the sender never saw
                        // WAITING: `waiter` is still ours.
                        drop(inner.waiter.with_mut(|p| unsafe { (*p).take() }));
                        continue;
                    }
                }
            }
            // V3.
            match (&thread, deadline) {
                (Some(t), d) => Waiter::Thread(t.clone()).wait::<P>(d),
                (None, None) => sched::park::<P>(crate::actor::WAIT_CHANNEL),
                (None, Some(d)) => park_until(d),
            }
        }
    }

    /// A select's registration (`V2` without the wait): `false` if the
    /// value or the sender's drop is already here (nothing stays
    /// registered).
    pub(crate) fn register(&mut self, w: Waiter) -> bool {
        let inner = &*self.inner;
        // Acquire: as in V1.
        if inner.state.load(Ordering::Acquire) != EMPTY {
            return false;
        }
        // SAFETY: the state is EMPTY, so `waiter` is ours.
        inner.waiter.with_mut(|p| unsafe { *p = Some(w) });
        // AcqRel: as in V2.
        if inner
            .state
            .compare_exchange(EMPTY, WAITING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: the CAS failed, so the sender never saw WAITING.
            drop(inner.waiter.with_mut(|p| unsafe { (*p).take() }));
            return false;
        }
        true
    }

    /// Takes a select's registration back, unless the sender took it (then
    /// its wake comes, harmlessly).
    pub(crate) fn withdraw(&mut self) {
        let inner = &*self.inner;
        // Acquire: as in `wait_value`'s withdraw.
        if inner
            .state
            .compare_exchange(WAITING, EMPTY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: our CAS took the state out of WAITING before the
            // sender's swap: `waiter` is ours.
            drop(inner.waiter.with_mut(|p| unsafe { (*p).take() }));
        }
    }

    /// The value if it is here now: `Empty` if not yet sent, `Disconnected`
    /// if the sender was dropped unsent (or the value was already taken).
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        // Acquire: pairs with the sender's AcqRel swaps.
        match self.inner.state.load(Ordering::Acquire) {
            // SAFETY: SENT read with Acquire: `value` is ours.
            SENT => unsafe { self.inner.take_value() }.ok_or(TryRecvError::Disconnected),
            TX_GONE => Err(TryRecvError::Disconnected),
            _ => Err(TryRecvError::Empty),
        }
    }
}

impl<T, P: Platform> Drop for OneshotReceiver<T, P> {
    fn drop(&mut self) {
        let inner = &*self.inner;
        // AcqRel: Acquire takes in the sender's `value` (SENT); Release
        // orders our last reads of the cells before the sender's reclaim.
        match inner.state.swap(RX_GONE, Ordering::AcqRel) {
            // SAFETY: SENT read with Acquire: `value` is ours.
            SENT => drop(unsafe { inner.take_value() }),
            // SAFETY: our swap took the state out of WAITING (a `recv` that
            // unwound while waiting): `waiter` is ours again.
            WAITING => drop(inner.waiter.with_mut(|p| unsafe { (*p).take() })),
            _ => {}
        }
    }
}

impl<T, P: Platform> fmt::Debug for OneshotReceiver<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OneshotReceiver").finish_non_exhaustive()
    }
}
