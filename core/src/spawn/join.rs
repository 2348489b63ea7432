//! Join handles: where an actor's result (or its panic) waits for whoever
//! joins it — another actor (which parks) or a plain OS thread (which
//! blocks on the platform's futex) — and the harness that runs an actor's
//! body and completes its slot. The slot and the body share one allocation
//! (`slot`'s module doc has the cell and the slot's handshake).

use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::actor::exit::{ExitReason, JoinError};
use crate::actor::life::ActorRef;
use crate::actor::WAIT_JOIN;
use crate::actor::{AbortJoin, Actor, ActorArc, LifeRef, CANCEL_UNWINDING};
use crate::msg::wait::Waiter;
use crate::sched::timer::PokeWith;
use crate::seam::platform::Platform;
use crate::sync::Ordering;

use super::slot::{self, BodyCell, JoinSlot, SlotRef, DONE, EMPTY, WAIT_THREAD};
use crate::actor::{Entry, EntryVt};
use core::time::Duration;

/// Completes a slot with no result (the joiner reports `Cancelled`) if the
/// actor's body never ran to the end (it was dropped unrun at shutdown, or
/// its harness unwound), so no joiner waits forever.
pub(crate) struct Completer<T, P: Platform> {
    pub(crate) slot: Option<SlotRef<T>>,
    pub(crate) _p: PhantomData<fn() -> P>,
}

impl<T, P: Platform> Completer<T, P> {
    /// An entry dropped unrun: drops the body in place, then completes the
    /// slot with no result (the completer holds the entry's reference
    /// across the body's drop and completes when dropped: after the body,
    /// also when the body's destructor unwinds).
    ///
    /// # Safety
    ///
    /// `c` came from [`cell`](super::slot::cell); the caller is its entry,
    /// which has neither run nor dropped the body and has not given up its
    /// reference.
    pub(crate) unsafe fn drop_unrun<F>(c: NonNull<BodyCell<T, F>>) {
        let completer = Completer::<T, P> {
            // SAFETY: contract.
            slot: Some(unsafe { BodyCell::entry_ref(c) }),
            _p: PhantomData,
        };
        // SAFETY: contract: the body is still there; the reference is held.
        unsafe { BodyCell::drop_body(c) };
        drop(completer);
    }

    pub(crate) fn complete(mut self, r: Result<T, JoinError>) -> Option<ActorArc> {
        let slot = self.slot.take()?;
        slot.complete::<P>(Some(r))
    }
}

impl<T, P: Platform> Drop for Completer<T, P> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            // Nobody can schedule an actor joiner from here (we are being
            // torn down, possibly outside any worker): dropping its reference is
            // all we can do; a thread joiner is woken by `complete`.
            drop(slot.complete::<P>(None));
        }
    }
}

impl<T, P: Platform> AbortJoin for Completer<T, P> {
    fn abort(&mut self, e: JoinError) -> Option<ActorArc> {
        self.slot.take().and_then(|s| s.complete::<P>(Some(Err(e))))
    }
}

/// An owned permission to wait for an actor's result.
///
/// Dropping it detaches the actor (it keeps running; its result is dropped).
pub struct JoinHandle<T, P: Platform> {
    pub(crate) slot: SlotRef<T>,
    pub(crate) id: u64,
    pub(crate) life: LifeRef,
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
        match crate::sched::current_with_ctx::<P>() {
            Some((c, me)) => {
                // SAFETY: `me` is the actor running on this worker, which is
                // us (alive while we run), and `c` its context.
                unsafe { crate::sched::run_joined_here::<P>(c, me, self.life.actor_ptr()) };
                // SAFETY: as above.
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
        // SAFETY: `me` is the running actor; take a reference for the waiter
        // registration (the slot then co-owns it until it wakes us).
        let me_arc = unsafe { ActorArc::clone_from_ptr(me) };
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

/// Builds the entry of an actor running `f`, and its join handle: one
/// allocation for both (`slot::cell`).
pub(crate) fn make_entry<P, F, T>(id: u64, life: LifeRef, f: F) -> (Entry, JoinHandle<T, P>)
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (slot, cell) = slot::cell::<P, T, F>(f);
    let handle = JoinHandle {
        slot,
        id,
        life,
        _p: PhantomData,
    };
    // SAFETY: a fresh cell, whose body and entry reference stay until the
    // harness's run or drop (each takes both, for its `T` and `F`) is
    // called once with it; the cell is `Send` (`F: Send`, `T: Send`).
    let entry = unsafe { Entry::new(cell.cast(), Harness::<P, F, T>::VT) };
    (entry, handle)
}

/// The entry functions of a body `F` returning `T` on platform `P`.
struct Harness<P, F, T>(PhantomData<Types<P, F, T>>);

/// The types a [`Harness`] is for.
type Types<P, F, T> = (fn() -> P, F, T);

impl<P, F, T> Harness<P, F, T>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    const VT: &'static EntryVt = &EntryVt {
        run: Self::run,
        drop: Self::drop_unrun,
    };

    /// # Safety
    ///
    /// `c` is the entry's cell, a `BodyCell<T, F>`, as `BodyCell::take`
    /// requires.
    unsafe fn run(c: NonNull<u8>, actor: &Actor) -> Option<ActorArc> {
        // SAFETY: contract.
        let (f, slot) = unsafe { BodyCell::<T, F>::take(c.cast()) };
        run_body::<P, F, T>(
            actor,
            f,
            Completer {
                slot: Some(slot),
                _p: PhantomData,
            },
        )
    }

    /// # Safety
    ///
    /// As [`run`](Self::run).
    unsafe fn drop_unrun(c: NonNull<u8>) {
        // SAFETY: contract.
        unsafe { Completer::<T, P>::drop_unrun::<F>(c.cast()) }
    }
}

/// The harness around an actor's body: starts it unless a kill or
/// cancellation came first, catches its panic, runs its exit path, and
/// completes its slot; returns the joiner to wake.
fn run_body<P, F, T>(actor: &Actor, f: F, completer: Completer<T, P>) -> Option<ActorArc>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let id = actor.id;
    {
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
    }
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
