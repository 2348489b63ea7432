//! Join handles: where an actor's result (or its panic) waits for whoever
//! joins it — another actor (which parks) or a plain OS thread (which
//! blocks on the platform's futex).
//!
//! The slot's state word is a one-shot handshake:
//!
//! | value         | meaning                                         |
//! |---------------|-------------------------------------------------|
//! | `EMPTY`       | no result, nobody waiting                       |
//! | `WAIT_REG`    | no result; `waiter` holds a registration: a parked-or-parking actor, or a select's waiter (an actor or a thread) |
//! | `WAIT_THREAD` | no result; an OS thread sleeps on this word     |
//! | `DONE`        | `result` is written                             |
//!
//! 1. The joiner, finding no result, writes `waiter` (registrations) and
//!    CASes `EMPTY → WAIT_*` (Release). If the CAS finds `DONE`, it takes
//!    the result.
//! 2. The finishing actor writes `result` and swaps in `DONE` (AcqRel). The
//!    old value says whom to wake: the `waiter`, or futex sleepers.
//!
//! Each side publishes before it reads the other's: no wake is lost.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::actor::exit::{ExitReason, JoinError};
use crate::actor::life::{ActorRef, Life};
use crate::actor::WAIT_JOIN;
use crate::actor::{AbortJoin, Actor, CANCEL_UNWINDING};
use crate::msg::wait::Waiter;
use crate::sched::timer::PokeWith;
use crate::seam::platform::Platform;
use crate::sync::{AtomicU32, Ordering, UnsafeCell};
use core::time::Duration;

const EMPTY: u32 = 0;
const WAIT_REG: u32 = 1;
const WAIT_THREAD: u32 = 2;
const DONE: u32 = 3;

/// Where one actor's outcome waits for its joiner.
pub(crate) struct JoinSlot<T> {
    state: AtomicU32,
    waiter: UnsafeCell<Option<Waiter>>,
    result: UnsafeCell<Option<Result<T, JoinError>>>,
}

// SAFETY: `waiter` and `result` are handed from one side to the other
// through the state word's Release/Acquire handshake (module doc); each is
// written by one side and read by the other only after the handoff.
unsafe impl<T: Send> Send for JoinSlot<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for JoinSlot<T> {}

impl<T> JoinSlot<T> {
    pub(crate) fn new() -> Self {
        JoinSlot {
            state: AtomicU32::new(EMPTY),
            waiter: UnsafeCell::new(None),
            result: UnsafeCell::new(None),
        }
    }

    /// Step 2: stores the outcome; returns a parked actor joiner to wake (a
    /// thread is woken here).
    pub(crate) fn complete<F: crate::seam::platform::Futex>(
        &self,
        r: Result<T, JoinError>,
    ) -> Option<Arc<Actor>> {
        // SAFETY: only the finishing side writes `result`, once, before DONE.
        self.result.with_mut(|p| unsafe { *p = Some(r) });
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
    fn poke(self: &Arc<Self>) {
        // AcqRel: Acquire sees the joiner's `waiter` write (before its
        // Release CAS into WAIT_REG); one of this CAS and `complete`'s
        // swap takes the registration.
        if self
            .state
            .compare_exchange(WAIT_REG, EMPTY, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // SAFETY: our CAS took the registration; the joiner writes
            // `waiter` again only once this poke has returned.
            if let Some(w) = self.waiter.with_mut(|p| unsafe { (*p).take() }) {
                w.wake();
            }
        }
    }

    /// Registers `w` (step 1): `false` if the result is already in.
    ///
    /// # Safety
    ///
    /// The caller is the handle's only user and nothing is registered.
    unsafe fn register(&self, w: Waiter) -> bool {
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
    fn withdraw(&self) -> bool {
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

    fn is_done(&self) -> bool {
        // Acquire: pairs with the AcqRel swap in `complete`.
        self.state.load(Ordering::Acquire) == DONE
    }

    fn take(&self, id: u64, name: &Option<Arc<str>>) -> Result<T, JoinError> {
        debug_assert!(self.is_done());
        // SAFETY: DONE was observed with Acquire, so `result` is written and
        // the finishing side is done with it; the handle is the only taker.
        self.result
            .with_mut(|p| unsafe { (*p).take() })
            .unwrap_or_else(|| Err(JoinError::cancelled(id, name)))
    }
}

/// Completes a slot with `Cancelled` if the actor's body never ran to the
/// end (it was dropped unrun at shutdown), so no joiner waits forever.
pub(crate) struct Completer<T, P: Platform> {
    pub(crate) slot: Option<Arc<JoinSlot<T>>>,
    pub(crate) id: u64,
    pub(crate) name: Option<Arc<str>>,
    pub(crate) _p: PhantomData<fn() -> P>,
}

impl<T, P: Platform> Completer<T, P> {
    pub(crate) fn complete(mut self, r: Result<T, JoinError>) -> Option<Arc<Actor>> {
        let slot = self.slot.take()?;
        slot.complete::<P>(r)
    }
}

impl<T, P: Platform> Drop for Completer<T, P> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            // Nobody can schedule an actor joiner from here (we are being
            // torn down, possibly outside any worker): dropping its Arc is
            // all we can do; a thread joiner is woken by `complete`.
            drop(slot.complete::<P>(Err(JoinError::cancelled(self.id, &self.name))));
        }
    }
}

impl<T, P: Platform> AbortJoin for Completer<T, P> {
    fn abort(&mut self, e: JoinError) -> Option<Arc<Actor>> {
        self.slot.take().and_then(|s| s.complete::<P>(Err(e)))
    }
}

/// An owned permission to wait for an actor's result.
///
/// Dropping it detaches the actor (it keeps running; its result is dropped).
pub struct JoinHandle<T, P: Platform> {
    pub(crate) slot: Arc<JoinSlot<T>>,
    pub(crate) id: u64,
    pub(crate) life: Arc<Life>,
    pub(crate) _p: PhantomData<fn() -> P>,
}

impl<T, P: Platform> fmt::Debug for JoinHandle<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.id).finish()
    }
}

impl<T, P: Platform> JoinHandle<T, P> {
    /// The actor's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The actor's name, if it was spawned with one.
    pub fn name(&self) -> Option<&str> {
        self.life.name.as_deref()
    }

    /// A reference to the actor (to kill, monitor or link to it).
    pub fn actor_ref(&self) -> ActorRef<P> {
        ActorRef::new(&self.life)
    }

    /// Whether the actor has finished (its result is ready).
    pub fn is_finished(&self) -> bool {
        self.slot.is_done()
    }

    /// Waits for the actor and returns its value, or why there is none.
    ///
    /// From an actor, the caller parks (its worker runs others meanwhile);
    /// from a plain OS thread, the thread blocks on the platform's wait.
    pub fn join(self) -> Result<T, JoinError>
    where
        T: Send + 'static,
    {
        if self.slot.is_done() {
            return self.slot.take(self.id, &self.life.name);
        }
        match crate::sched::current_actor::<P>() {
            Some(me) => {
                // SAFETY: `current_actor` returned the actor running on this
                // worker, which is us; it stays alive while we run.
                let r = unsafe { self.join_as_actor(me, None) };
                r.unwrap_or(Err(JoinError::cancelled(self.id, &self.life.name)))
            }
            // Without a deadline the wait only ends with a result.
            None => self
                .join_as_thread(None)
                .unwrap_or(Err(JoinError::cancelled(self.id, &self.life.name))),
        }
    }

    /// Like [`join`](Self::join), giving up at `deadline`: `Err(self)`
    /// hands the handle back (join again later, or drop it to detach). An
    /// actor parks with a timer; a plain thread blocks with a deadline.
    #[cfg(feature = "std")]
    pub fn join_deadline(self, deadline: std::time::Instant) -> Result<Result<T, JoinError>, Self>
    where
        T: Send + 'static,
    {
        self.join_deadline_ns(crate::sched::deadline_at::<P>(deadline))
    }

    /// [`join_deadline`](Self::join_deadline) with a deadline in ns on the
    /// platform's monotonic clock (for ports).
    #[doc(hidden)]
    pub fn join_deadline_ns(self, deadline_ns: u64) -> Result<Result<T, JoinError>, Self>
    where
        T: Send + 'static,
    {
        if self.slot.is_done() {
            return Ok(self.slot.take(self.id, &self.life.name));
        }
        let r = match crate::sched::current_actor::<P>() {
            // SAFETY: as in `join`.
            Some(me) => unsafe { self.join_as_actor(me, Some(deadline_ns)) }.ok_or(()),
            None => self.join_as_thread(Some(deadline_ns)),
        };
        r.map_err(|()| self)
    }

    /// Like [`join`](Self::join), giving up after `timeout` (see `join_deadline`).
    pub fn join_timeout(self, timeout: Duration) -> Result<Result<T, JoinError>, Self>
    where
        T: Send + 'static,
    {
        self.join_deadline_ns(crate::sched::deadline_after::<P>(timeout))
    }

    /// Registers `me` as the waiter: `false` if the result is already in.
    fn register(&self, me: *const Actor) -> bool {
        // SAFETY: `me` is the running actor; clone its Arc for the waiter
        // registration (the slot then co-owns it until it wakes us).
        let me_arc = unsafe {
            Arc::increment_strong_count(me);
            Arc::from_raw(me)
        };
        // SAFETY: we are the only joiner (the handle is consumed by `join`)
        // and the slot is EMPTY: nothing is registered.
        unsafe { self.slot.register(Waiter::Actor(me_arc)) }
    }

    /// The actor's wait, until `deadline` if given (`None`: timed out, the
    /// registration withdrawn).
    ///
    /// # Safety
    ///
    /// `me` is the actor running on the calling worker.
    unsafe fn join_as_actor(&self, me: *const Actor, deadline: Option<u64>) -> Option<Result<T, JoinError>>
    where
        T: Send + 'static,
    {
        loop {
            // Acquire: pairs with `complete`'s swap and the poke's CAS.
            match self.slot.state.load(Ordering::Acquire) {
                DONE => return Some(self.slot.take(self.id, &self.life.name)),
                // Not registered (first pass, or a timer's poke took it).
                EMPTY if !self.register(me) => return Some(self.slot.take(self.id, &self.life.name)),
                _ => {}
            }
            // Unwinding at shutdown: give up (the joined actor may never end).
            if crate::sched::unwinding::<P>() {
                return Some(Err(JoinError::cancelled(self.id, &self.life.name)));
            }
            match deadline {
                None => crate::sched::park::<P>(WAIT_JOIN),
                Some(d) if P::now_ns() >= d => {
                    // Withdraw; a failure means DONE (take it) or EMPTY
                    // (the timer's poke took the registration).
                    self.slot.withdraw();
                    return self
                        .slot
                        .is_done()
                        .then(|| self.slot.take(self.id, &self.life.name));
                }
                Some(d) => {
                    crate::sched::park_until::<P>(WAIT_JOIN, d, PokeWith(self.slot.clone(), JoinSlot::poke))
                }
            }
        }
    }

    /// Waits for the actor by blocking the calling OS thread on the slot's
    /// word until the result is in, whoever calls (an actor too: it does
    /// not park): no deadline, and no giving up at shutdown, unlike
    /// [`join`](Self::join) from an unwinding actor. `Runtime::block_on`'s
    /// wait, which must not end before the actor is done with what its
    /// closure borrowed.
    pub(crate) fn join_blocking(self) -> Result<T, JoinError> {
        loop {
            if let Ok(r) = self.join_as_thread(None) {
                return r;
            }
        }
    }

    fn join_as_thread(&self, deadline_ns: Option<u64>) -> Result<Result<T, JoinError>, ()> {
        // Release/Acquire: as in `join_as_actor`; a failure means DONE.
        let _ = self
            .slot
            .state
            .compare_exchange(EMPTY, WAIT_THREAD, Ordering::AcqRel, Ordering::Acquire);
        loop {
            if self.slot.is_done() {
                return Ok(self.slot.take(self.id, &self.life.name));
            }
            if let Some(d) = deadline_ns {
                if P::now_ns() >= d {
                    return Err(());
                }
            }
            P::wait(&self.slot.state, WAIT_THREAD, deadline_ns);
        }
    }
}

/// Builds the entry of an actor running `f`, and its join handle.
pub(crate) fn make_entry<P, F, T>(id: u64, life: Arc<Life>, f: F) -> (crate::actor::Entry, JoinHandle<T, P>)
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let slot = Arc::new(JoinSlot::new());
    let completer = Completer::<T, P> {
        slot: Some(slot.clone()),
        id,
        name: life.name.clone(),
        _p: PhantomData,
    };
    let handle = JoinHandle {
        slot,
        id,
        life,
        _p: PhantomData,
    };
    let entry: crate::actor::Entry = Box::new(move |actor: &Actor| {
        // SAFETY: `cancel` is owned by the running actor (us).
        if actor.cancel.with(|c| unsafe { *c }) != crate::actor::CANCEL_NONE
            // Relaxed: a kill before the first resume (its wake's CAS, or
            // the queue we were taken from, ordered it).
            || actor.life.killed.load(Ordering::Relaxed)
        {
            let name = &actor.life.name;
            let e = if actor.life.killed.load(Ordering::Relaxed) {
                JoinError::Killed {
                    id,
                    name: name.clone(),
                }
            } else {
                JoinError::cancelled(id, name)
            };
            // Ending: no resume point raises again (`CANCEL_UNWINDING`).
            // SAFETY: `cancel` is owned by the running actor (us).
            actor.cancel.with_mut(|c| unsafe { *c = CANCEL_UNWINDING });
            // The body (and a mailbox it owns) goes first: once a monitor
            // or joiner hears of the end, sends to the actor fail.
            drop(f);
            actor.life.end(e.reason());
            return completer.complete(Err(e));
        }
        // Reachable from an overflow recovery (`fault::overflow_exit`),
        // which abandons this frame without unwinding: its memory stays.
        let mut completer = completer;
        let abort: *mut (dyn AbortJoin + 'static) = &mut completer;
        // SAFETY: the running actor owns `abort_join`; the pointer is
        // cleared below before `completer` moves.
        unsafe { *actor.abort_join.get() = NonNull::new(abort) };
        let mut f = Some(f);
        let mut out = None;
        let r = P::catch_unwind(&mut || {
            if let Some(f) = f.take() {
                out = Some(f());
            }
        });
        // SAFETY: as above.
        unsafe { *actor.abort_join.get() = None };
        // The body is over: the actor is ending, and its exit path (actor
        // locals, exit hooks, which may reach safe points) runs to the end:
        // no resume point raises a kill or cancellation from here on.
        // SAFETY: `cancel` and `detached` are owned by the running actor.
        unsafe {
            *actor.cancel.get() = CANCEL_UNWINDING;
            if *actor.detached.get() {
                // The unwind was caught on the thread it started on: back
                // to the scheduler (sched's "Unwinding", step 5).
                crate::sched::rejoin::<P>(actor);
            }
        }
        let r = match (r, out) {
            (Ok(()), Some(v)) => Ok(v),
            (Ok(()), None) => Err(JoinError::cancelled(id, &actor.life.name)),
            (Err(payload), _) => Err(JoinError::from_payload(id, &actor.life.name, payload)),
        };
        // Actor-local values go on the actor's own stack, then monitors and
        // links: once a joiner has the result, every `Down` notice is out.
        // SAFETY: we are the running actor.
        unsafe { crate::sched::local::drop_all(actor) };
        actor
            .life
            .end(r.as_ref().map_or_else(JoinError::reason, |_| ExitReason::Normal));
        completer.complete(r)
    });
    (entry, handle)
}

/// A select's join arm: ready once the actor has finished (then
/// `JoinHandle::join` returns at once).
struct JoinArm<'a, T, P: Platform, F> {
    h: &'a mut JoinHandle<T, P>,
    f: Option<F>,
}

impl<T, P: Platform, F: FnOnce() -> R, R> crate::msg::select::Arm<R> for JoinArm<'_, T, P, F> {
    fn poll(&mut self) -> Option<R> {
        self.h
            .slot
            .is_done()
            .then(|| (self.f.take().expect("an arm completes once"))())
    }

    fn register(&mut self, w: &Waiter) -> bool {
        // SAFETY: the select holds the only (`&mut`) borrow of the handle
        // and withdraws before it returns: nothing else is registered.
        unsafe { self.h.slot.register(w.clone()) }
    }

    fn withdraw(&mut self) {
        self.h.slot.withdraw();
    }

    fn closed(&mut self) -> Option<R> {
        None
    }
}

impl<'a, R: 'a, P: Platform> crate::msg::select::Select<'a, R, P> {
    /// An arm that is ready once `h`'s actor has finished (its result is
    /// in: `h.join()` then returns at once, whatever the result).
    pub fn join<T: 'a>(self, h: &'a mut JoinHandle<T, P>, f: impl FnOnce() -> R + 'a) -> Self {
        self.arm(alloc::boxed::Box::new(JoinArm { h, f: Some(f) }))
    }
}
