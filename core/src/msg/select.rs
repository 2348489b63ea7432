//! Select: wait on several sources at once — a mailbox, channel receivers
//! of every kind, join handles, descriptor readiness, a timeout — and take
//! exactly one.
//!
//! The semantics and fairness users see are on [`Select`].
//!
//! # Protocol
//!
//! One round: poll every arm (from the rotating start) and return the
//! first value; else register the caller's waiter with every source in
//! turn, each registration re-checking its source (the source's own Dekker
//! pair: `chan`'s `R1`–`R2`, the oneshot's `V2`, the join slot's step 1);
//! if one finds its source ready, the ones made so far are withdrawn and
//! the round starts over; else wait (with a timeout, an actor arms a timer
//! that wakes it directly), then withdraw every registration and start
//! over. A waker takes the one registration it finds (the source's own
//! exactly-once rule) and wakes the caller; a second source's wake that
//! lands after the caller withdrew is a spurious wake of a later wait,
//! which every wait in the runtime tolerates. So no wake is lost (each
//! source's protocol) and none is taken twice; and a value is taken only
//! by the poll of the arm that returns.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;

use crate::actor::{ActorArc, WAIT_CHANNEL};
use crate::msg::channel::{BoundedReceiver, OneshotReceiver, Receiver, RecvError, TryRecvError};
use crate::msg::mailbox::Mailbox;
use crate::msg::wait::Waiter;
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::seam::arch::Arch;
use crate::seam::platform::Platform;

/// One arm of a select (crate-internal; the sources implement
/// [`Selectable`]).
pub(crate) trait Arm<R> {
    /// Takes the source's value (or its end) if it has one now, mapped by
    /// the arm's closure (which then is spent).
    fn poll(&mut self) -> Option<R>;
    /// Registers `w` with the source; `false` if the source is ready now
    /// (nothing stays registered).
    fn register(&mut self, w: &Waiter) -> bool;
    /// Takes the registration back.
    fn withdraw(&mut self);
    /// A cancelled actor's way out: a receive arm's closure told its
    /// source is closed; `None` for arms that cannot say so (joins).
    fn closed(&mut self) -> Option<R>;
}

/// The caller's waiter, as the sources' registrations hold it (opaque).
#[doc(hidden)]
pub struct WaitToken(pub(crate) Waiter);

mod sealed {
    pub trait Sealed {}
}

/// A receiving end a [`Select`] can wait on: [`Mailbox`], [`Receiver`],
/// [`BoundedReceiver`], [`OneshotReceiver`].
pub trait Selectable: sealed::Sealed {
    /// What a receive gives.
    type Item;
    #[doc(hidden)]
    fn __poll(&mut self) -> Option<Result<Self::Item, RecvError>>;
    #[doc(hidden)]
    fn __register(&mut self, w: &WaitToken) -> bool;
    #[doc(hidden)]
    fn __withdraw(&mut self);
}

/// A receive arm: a source and the closure its outcome goes through.
struct RecvArm<'a, S: Selectable, F> {
    src: &'a mut S,
    f: Option<F>,
}

impl<S: Selectable, F: FnOnce(Result<S::Item, RecvError>) -> R, R> Arm<R> for RecvArm<'_, S, F> {
    fn poll(&mut self) -> Option<R> {
        let v = self.src.__poll()?;
        Some((self.f.take().expect("an arm completes once"))(v))
    }

    fn register(&mut self, w: &Waiter) -> bool {
        self.src.__register(&WaitToken(w.clone()))
    }

    fn withdraw(&mut self) {
        self.src.__withdraw();
    }

    fn closed(&mut self) -> Option<R> {
        Some((self.f.take().expect("an arm completes once"))(Err(RecvError)))
    }
}

/// A selective-receive arm of a mailbox.
struct MatchArm<'a, M, P: Platform, Q, F> {
    mb: &'a mut Mailbox<M, P>,
    pred: Q,
    f: Option<F>,
}

/// A `try_recv`'s outcome as an arm's poll: a value, the end, or nothing
/// yet.
fn polled<T>(r: Result<T, TryRecvError>) -> Option<Result<T, RecvError>> {
    match r {
        Ok(v) => Some(Ok(v)),
        Err(TryRecvError::Disconnected) => Some(Err(RecvError)),
        Err(TryRecvError::Empty) => None,
    }
}

impl<M, P, Q, F, R> Arm<R> for MatchArm<'_, M, P, Q, F>
where
    M: Send + 'static,
    P: Platform,
    Q: FnMut(&M) -> bool,
    F: FnOnce(Result<M, RecvError>) -> R,
{
    fn poll(&mut self) -> Option<R> {
        let v = match self.mb.try_recv_matching(&mut self.pred) {
            Ok(m) => Ok(m),
            Err(crate::msg::channel::TryRecvError::Disconnected) => Err(RecvError),
            Err(crate::msg::channel::TryRecvError::Empty) => return None,
        };
        Some((self.f.take().expect("an arm completes once"))(v))
    }

    fn register(&mut self, w: &Waiter) -> bool {
        self.mb.__register(&WaitToken(w.clone()))
    }

    fn withdraw(&mut self) {
        self.mb.__withdraw();
    }

    fn closed(&mut self) -> Option<R> {
        Some((self.f.take().expect("an arm completes once"))(Err(RecvError)))
    }
}

/// Waits on several sources at once and takes exactly one. Build it with
/// one call per arm, each with the closure that turns that arm's outcome
/// into the select's result, then [`wait`](Self::wait).
///
/// ```ignore
/// // With a port crate (`smarm_linux`, `smarm_darwin`) as `smarm`:
/// enum Event { Msg(u32), Reply(String), Closed, Done, Idle }
/// let ev = smarm::Select::new()
///     .recv(&mut mb, |r| r.map_or(Event::Closed, Event::Msg))
///     .recv(&mut replies, |r| r.map_or(Event::Closed, Event::Reply))
///     .join(&worker, || Event::Done)
///     .timeout(Duration::from_millis(50), || Event::Idle)
///     .wait();
/// ```
///
/// # Semantics
///
/// - An arm is *ready* when its source has something to give now: a
///   message (or the oneshot's value), or its end (a mailbox or channel
///   closed and drained, a oneshot's sender dropped: the arm's closure gets
///   `Err(RecvError)`), or, for a join arm, the actor has finished (then
///   `JoinHandle::join` returns at once), or, for a readiness arm
///   (`Select::ready`, in the `io` layer), the descriptor had an edge
///   since the caller's ticket (readiness is not taken: the caller's next
///   call reads the data).
/// - `wait` completes exactly one ready arm: it takes that arm's value and
///   returns its closure's result. Every other source is left as it was:
///   its messages stay queued, in order.
/// - **Fairness.** Each round looks at the arms from a pseudo-random start
///   (the cycle counter, hashed), so when several are ready each is taken
///   about equally often over many selects; no arm starves another. The
///   timeout arm fires only when no other arm is ready at the deadline.
/// - An actor parks while it waits (its worker runs others); a plain
///   thread blocks. A select with no arm and no timeout waits until the
///   actor is killed (as a receive on a mailbox that keeps its own
///   address).
/// - An actor that runtime shutdown is cancelling while it unwinds does
///   not wait: the timeout arm fires, if there is one, else the first
///   receive arm gets `Err(RecvError)` (as a receive would); a select
///   with only join and readiness arms waits.
///
pub struct Select<'a, R, P: Platform> {
    arms: Vec<Box<dyn Arm<R> + 'a>>,
    /// The timeout arm: its deadline (platform ns) and closure.
    timeout: Option<(u64, Box<dyn FnOnce() -> R + 'a>)>,
    _p: PhantomData<fn() -> P>,
}

impl<R, P: Platform> fmt::Debug for Select<'_, R, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Select")
            .field("arms", &self.arms.len())
            .field("timeout", &self.timeout.is_some())
            .finish()
    }
}

impl<R, P: Platform> Default for Select<'_, R, P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a, R, P: Platform> Select<'a, R, P> {
    /// A select with no arms yet.
    pub fn new() -> Self {
        Select {
            arms: Vec::new(),
            timeout: None,
            _p: PhantomData,
        }
    }

    /// An arm receiving from `src` (a mailbox or any channel receiver):
    /// ready when a message is there (`Ok`) or none can come any more
    /// (`Err(RecvError)`: closed and drained).
    pub fn recv<S: Selectable>(
        mut self,
        src: &'a mut S,
        f: impl FnOnce(Result<S::Item, RecvError>) -> R + 'a,
    ) -> Self
    where
        R: 'a,
    {
        self.arms.push(Box::new(RecvArm { src, f: Some(f) }));
        self
    }

    /// An arm of selective receive on `mb`: ready when a message matching
    /// `pred` is there (the others stay in the mailbox in order, as
    /// `Mailbox::recv_matching` leaves them), or none can come any more.
    pub fn recv_matching<M: Send + 'static>(
        mut self,
        mb: &'a mut Mailbox<M, P>,
        pred: impl FnMut(&M) -> bool + 'a,
        f: impl FnOnce(Result<M, RecvError>) -> R + 'a,
    ) -> Self
    where
        R: 'a,
    {
        self.arms.push(Box::new(MatchArm { mb, pred, f: Some(f) }));
        self
    }

    /// Adds an arm from another layer (join handles, readiness).
    pub(crate) fn arm(mut self, a: Box<dyn Arm<R> + 'a>) -> Self {
        self.arms.push(a);
        self
    }

    /// The timeout arm: fires when no other arm became ready within
    /// `timeout`. A second timeout arm replaces the first.
    pub fn timeout(self, timeout: Duration, f: impl FnOnce() -> R + 'a) -> Self {
        self.deadline_ns(sched::deadline_after::<P>(timeout), f)
    }

    /// [`timeout`](Self::timeout) at a deadline.
    #[cfg(feature = "std")]
    pub fn deadline(self, deadline: std::time::Instant, f: impl FnOnce() -> R + 'a) -> Self {
        self.deadline_ns(sched::deadline_at::<P>(deadline), f)
    }

    fn deadline_ns(mut self, deadline: u64, f: impl FnOnce() -> R + 'a) -> Self {
        self.timeout = Some((deadline, Box::new(f)));
        self
    }

    /// Waits until one arm is ready and returns its closure's result.
    pub fn wait(mut self) -> R {
        sched::safe_point::<P>();
        let n = self.arms.len();
        loop {
            // Poll, from a rotating start.
            let start = if n > 1 {
                // The counter's bits mixed (Fibonacci hashing), so a clock
                // that ticks in even steps still spreads the start.
                let h = <P::Arch as Arch>::cycles().wrapping_mul(0x9E37_79B9_7F4A_7C15);
                ((h >> 32) as usize) % n
            } else {
                0
            };
            for k in 0..n {
                if let Some(r) = self.arms[(start + k) % n].poll() {
                    return r;
                }
            }
            let deadline = self.timeout.as_ref().map(|t| t.0);
            if deadline.is_some_and(|d| P::now_ns() >= d) {
                return self.fire_timeout();
            }
            if sched::unwinding::<P>() {
                if let Some(r) = self.give_up() {
                    return r;
                }
            }
            self.wait_once(deadline);
        }
    }

    /// Registers with every arm, waits, withdraws (one round's wait). The
    /// withdrawal is a guard's drop, so a kill or a cancellation that
    /// unwinds the park takes every registration back too (none is left
    /// in a source the actor no longer waits on).
    fn wait_once(&mut self, deadline: Option<u64>) {
        /// Withdraws the registered arms when dropped.
        struct Registered<'s, 'a, R>(&'s mut [Box<dyn Arm<R> + 'a>]);
        impl<R> Drop for Registered<'_, '_, R> {
            fn drop(&mut self) {
                for a in self.0.iter_mut() {
                    a.withdraw();
                }
            }
        }
        let w = Waiter::current::<P>();
        let mut registered = 0;
        let mut ready = false;
        for a in self.arms.iter_mut() {
            if !a.register(&w) {
                ready = true;
                break;
            }
            registered += 1;
        }
        let _registered = Registered(&mut self.arms[..registered]);
        if !ready {
            match (&w, deadline) {
                (Waiter::Thread(_), d) => w.wait::<P>(d),
                (Waiter::Actor(_), None) => sched::park::<P>(WAIT_CHANNEL),
                (Waiter::Actor(a), Some(d)) => {
                    let poke = PokeWith(a.clone(), |a: &ActorArc| {
                        if let Some(a) = a.clone().wake() {
                            crate::actor::schedule(a);
                        }
                    });
                    sched::park_until::<P>(WAIT_CHANNEL, d, poke);
                }
            }
        }
    }

    fn fire_timeout(&mut self) -> R {
        let (_, f) = self.timeout.take().expect("the timeout arm");
        f()
    }

    /// A cancelled actor's way out (module doc): the timeout arm, else the
    /// first receive arm told it is closed.
    fn give_up(&mut self) -> Option<R> {
        if self.timeout.is_some() {
            return Some(self.fire_timeout());
        }
        self.arms.iter_mut().find_map(|a| a.closed())
    }
}

// ---------------------------------------------------------------------------
// The sources
// ---------------------------------------------------------------------------

impl<M, P: Platform> sealed::Sealed for Mailbox<M, P> {}

impl<M: Send + 'static, P: Platform> Selectable for Mailbox<M, P> {
    type Item = M;

    fn __poll(&mut self) -> Option<Result<M, RecvError>> {
        polled(self.try_recv())
    }

    fn __register(&mut self, w: &WaitToken) -> bool {
        // SAFETY: `&mut self`: the queue's single consumer.
        unsafe { self.chan().register(w.0.clone()) }
    }

    fn __withdraw(&mut self) {
        self.chan().withdraw();
    }
}

/// `Selectable` for a channel receiver whose queue is a `Chan`.
macro_rules! chan_selectable {
    ($ty:ident) => {
        impl<T, P: Platform> sealed::Sealed for $ty<T, P> {}

        impl<T: Send + 'static, P: Platform> Selectable for $ty<T, P> {
            type Item = T;

            fn __poll(&mut self) -> Option<Result<T, RecvError>> {
                polled(self.try_recv())
            }

            fn __register(&mut self, w: &WaitToken) -> bool {
                // SAFETY: `&mut self`: the queue's single consumer.
                unsafe { self.chan().register(w.0.clone()) }
            }

            fn __withdraw(&mut self) {
                self.chan().withdraw();
            }
        }
    };
}

chan_selectable!(Receiver);

impl<T, P: Platform> sealed::Sealed for BoundedReceiver<T, P> {}

/// Either kind of bounded receiver: the queue's registration is `chan`'s
/// (as above); a rendezvous receiver is ready when a sender waits (the
/// poll takes its value, completing that send) or every sender is gone.
impl<T: Send + 'static, P: Platform> Selectable for BoundedReceiver<T, P> {
    type Item = T;

    fn __poll(&mut self) -> Option<Result<T, RecvError>> {
        polled(self.try_recv())
    }

    fn __register(&mut self, w: &WaitToken) -> bool {
        self.register(w.0.clone())
    }

    fn __withdraw(&mut self) {
        self.withdraw();
    }
}

impl<T, P: Platform> sealed::Sealed for OneshotReceiver<T, P> {}

impl<T: Send + 'static, P: Platform> Selectable for OneshotReceiver<T, P> {
    type Item = T;

    fn __poll(&mut self) -> Option<Result<T, RecvError>> {
        polled(self.try_recv())
    }

    fn __register(&mut self, w: &WaitToken) -> bool {
        self.register(w.0.clone())
    }

    fn __withdraw(&mut self) {
        self.withdraw();
    }
}

#[cfg(test)]
mod tests;
