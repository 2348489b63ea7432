//! Direct handoff: an actor that parks switches straight to the actor its
//! worker would run next (the run-next slot's, or else the run queue's
//! oldest), stack to stack, instead of through the worker's stack and loop.
//! The worker's bookkeeping around a turn ([`RtCore::enter`],
//! [`RtCore::leave`]) runs on the actors' stacks, and the park's state
//! change ([`park_switched`]) on the stack of the actor switched to, once
//! the parking actor's stack is no longer in use — exactly as the worker
//! would do it after switching back.
//!
//! # Why
//!
//! A message round trip between two actors on one worker was four
//! switches (A → worker → B → worker → A) and two passes of the worker
//! loop; with the handoff it is two switches (A → B → A). The ping-pong
//! shape — wake the receiver into the run-next slot, then park on one's
//! own receive — is the common one (request/reply, actor pairs, rings).
//! When the slot is empty (an actor woke several, so all but the last wait
//! in the queue: a broker's replies, a fan-out), the park hands over to the
//! queue's oldest the same way.
//!
//! A yield hands over too: the loop would queue the yielder and run its
//! run-next actor, or else the run queue's oldest, so the yielder switches
//! straight to that actor, which queues the yielder once its stack is
//! left. With many actors yielding in turn each yield is one switch.
//!
//! A work-first spawn (and a join of a child waiting in the slot, which
//! starts it as that spawn would have) hands over too: the loop would put
//! the spawner in its run-next slot and start the child, so the spawner
//! switches straight into the child's entry, which puts the spawner in the
//! slot. Any fresh actor (a spawn's child, or one popped from the queue)
//! completes the handoff first thing in its entry ([`after_start`]).
//!
//! # Protocol (A parks, yields or spawns, B runs next; numbered as in the code)
//!
//! On A's stack, in [`switch_out`] for `Request::Park` (or `Yield`,
//! `YieldBehind`, `Spawn`):
//! 1. `H1` check the handoff may happen: A runs on a worker (not detached),
//!    the loop's periodic duties are not due ([`TIMER_CHECK_TURNS`]: timers,
//!    the IO poll, the seeded schedule's turn), the run-next streak cap
//!    allows another (timeslices off);
//! 2. `H2` a spawn: B is the child, taken out of the request (which becomes
//!    `Request::Spawned`), in A's slice, the streak untouched (the loop's
//!    `Next::Run`). Else take B from the slot (only this thread takes from
//!    it); with the slot empty, pop B from the run queue instead, as the
//!    loop would ([`Schedule::pop_queued`], counted as the loop's pop), and
//!    B gets a fresh timeslice as a popped actor does (with timeslices on);
//! 3. `H3` the turn's bookkeeping: [`RtCore::leave`] for A (samples,
//!    counters), [`RtCore::enter`] for B (`RUNNING`, cancellation at
//!    shutdown, the inherited slice, samples, `current`); the worker's
//!    reference moves from A to B (`running`), A's goes to `handed`; B's
//!    scheduler sp becomes A's (both return to this worker's stack); B is
//!    marked `handed`;
//! 4. `H4` switch from A to B.
//!
//! On B's stack, first thing after the switch returns ([`after_resume`];
//! a fresh B: [`after_start`], first thing in its entry):
//! 5. `H5` B sees `handed`: the sp the switch returned is A's (not the
//!    worker's): store it in A, then carry out A's park ([`park_switched`]:
//!    `RUNNING → PARKED`, or, if a wake came meanwhile (`NOTIFIED`), A is
//!    runnable at once and goes to the now-empty run-next slot). A yield:
//!    `RUNNABLE`, and A goes to the back of the run queue
//!    ([`Schedule::requeue`]; the queue's push is the Release edge to the
//!    worker that pops A and resumes it at the sp just stored). A spawner
//!    (`Spawned`): A goes to the run-next slot, still `RUNNING` as the loop
//!    leaves it, displacing to the queue an actor it woke there
//!    ([`Schedule::put_run_next_here`]).
//!
//! The invariants the worker loop keeps hold: A's state changes only after
//! its stack is left (5 runs on B's), so no other worker can resume an
//! actor whose stack is in use; one CAS moves A out of `RUNNING`, so a wake
//! is neither lost (`NOTIFIED` is caught) nor doubled; B is owned by this
//! thread from its take (2) until it switches out. Wakes from other
//! threads never fill this worker's slot (they queue), so the slot is
//! empty when 5 needs it. The worker's own frame stays suspended in its
//! resume of A; whichever actor switches back to it last hands back the
//! `running` reference.

#[allow(unused_imports)]
use super::*;

/// Parks an actor that switched out, taking the caller's reference `a`:
/// `RUNNING → PARKED` drops it (the waker's registration holds one from
/// here), `RUNNING → PARKED_LENT` (`lent`: a lent registration) leaves it
/// with the parked actor for the waker to take (`crate::actor::lent`).
/// Gives `a` back if a wake came first (`NOTIFIED`: it
/// must run again). Called after its stack was left (by its worker, or by
/// the actor a direct handoff switched to).
pub(crate) fn park_switched(a: ActorArc, lent: bool) -> Option<ActorArc> {
    crate::seam::failpoint::hit(crate::seam::failpoint::Site::BeforeParkCas);
    if !crate::actor::park_word(&a.state, lent) {
        return Some(a);
    }
    crate::seam::failpoint::hit(crate::seam::failpoint::Site::AfterParkCas);
    if lent {
        // The parked actor's own reference now: its waker's CAS hands it
        // on. `a` may already run elsewhere; nothing here touches it.
        mem::forget(a);
    }
    None
}

impl<P: Platform> RtCore<P> {
    /// Step 2 of a turn (and `H3` for the actor handed to): `a` becomes the
    /// worker's current actor. `inherit`: it keeps the current timeslice.
    ///
    /// # Safety
    ///
    /// `ctx` is the calling thread's worker context of this runtime; the
    /// caller owns `a`.
    #[inline(always)]
    pub(crate) unsafe fn enter(&self, ctx: *mut WorkerCtx<P>, a: &Actor, inherit: bool) {
        // SAFETY: contract.
        unsafe {
            // Relaxed: we own the actor; wakers only CAS from PARKED/RUNNING
            // and their Release edge is the queue's or the state's.
            a.state.store(RUNNING, Ordering::Relaxed);
            // Relaxed: a hint. The flag is set once and never cleared; a
            // worker that reads it late resumes this actor once more
            // uncancelled and cancels it at a later resume (the exit
            // decision in `idle` reads the flag with SeqCst).
            if self.shutdown.load(Ordering::Relaxed) && *a.cancel.get() == CANCEL_NONE {
                *a.cancel.get() = CANCEL_REQUESTED;
            }
            if !inherit && self.slice_cycles != 0 {
                // A fresh slice, stamped by the first safe point (module doc).
                (*ctx).slice_end = 0;
            }
            let w = &*(*ctx).worker;
            // Relaxed: samples for dumps and the monitor, which tolerate
            // staleness.
            w.samples.running.store(a.id, Ordering::Relaxed);
            if self.hold_ns != 0 {
                (*ctx).resumes += 1;
                // Relaxed: as above.
                w.samples.resumes.store((*ctx).resumes, Ordering::Relaxed);
            }
            (*ctx).current = a;
            (*ctx).woke = ptr::null();
        }
    }

    /// Step 4's bookkeeping (and `H3` for the actor handing over): `a`
    /// switched out of this worker.
    ///
    /// # Safety
    ///
    /// As [`enter`](Self::enter).
    #[inline(always)]
    pub(crate) unsafe fn leave(&self, ctx: *mut WorkerCtx<P>, a: &Actor) {
        // SAFETY: contract.
        unsafe {
            (*ctx).current = ptr::null();
            let w = &*(*ctx).worker;
            if self.hold_ns != 0 {
                self.end_hold(w, (*ctx).index, a.id, (*ctx).resumes);
            } else {
                // Relaxed: as in `enter`.
                w.samples.running.store(0, Ordering::Relaxed);
            }
            w.counters.switches(1);
        }
    }
}

/// Switches from the worker's stack into its `running` actor and returns
/// when an actor switches back to the worker (after direct handoffs, maybe
/// another: `running` then names it), its sp saved.
///
/// # Safety
///
/// `ctx` is the calling thread's worker context; `running` and `current`
/// are the actor the caller owns and is about to run.
#[inline(always)]
pub(crate) unsafe fn resume_running<P: Platform>(ctx: *mut WorkerCtx<P>) {
    // SAFETY: contract: we own the actor's `sp` until we publish it again;
    // the actor that switches back owns none of its cells any more.
    unsafe {
        let a = &*(*ctx).running;
        let to = *a.sp.get();
        let san = crate::actor::sanitizer::worker_to_actor(a);
        // The running actor's span is current on this thread exactly while
        // it runs here (crate::seam::trace, "The actor span").
        a.span.enter();
        let back = <P::Arch as Arch>::switch(to);
        let x = &*(*ctx).running;
        x.span.exit();
        crate::actor::sanitizer::worker_resumed(san);
        *x.sp.get() = back;
    }
}

/// `H1`–`H4` for the running actor `me`, which is about to switch out to
/// park, to yield or to spawn: switches straight to the actor its worker
/// would run next (a spawn's child), if a handoff may happen. `Some(back)`:
/// it did, and `me` has since been resumed (by its worker or by another
/// handoff), `back` being what its switch returned; `None`: no handoff,
/// switch out as usual.
///
/// # Safety
///
/// `me` is the calling (running) actor, not unwinding, with
/// `Request::Park` (or `Yield`, `YieldBehind`, `Spawn`) stored; it must
/// pass `back` to [`after_resume`]. `c` is what `ctx::<P>()` returned on
/// this thread, with no switch since.
#[inline]
pub(crate) unsafe fn handoff<P: Platform>(c: *mut WorkerCtx<P>, me: *const Actor) -> Option<*mut u8> {
    // SAFETY: a non-null context is this thread's live worker context,
    // running `me` (its `running` and `current`); see the module doc for
    // each step.
    unsafe {
        // H1.
        if c.is_null() || (*c).detached || (*c).timer_turns <= 1 {
            return None;
        }
        let capped = (*c).slice_cycles == 0 && (*c).streak >= RUN_NEXT_CAP;
        if P::SEEDED_SCHEDULE {
            // The deterministic port: a scheduling point, and the seeded
            // policy decides whether this turn is a handoff.
            P::turn_point();
            if P::pick(2) == 0 {
                return None;
            }
        }
        let w = &*(*c).worker;
        serve::check::<P>(w, "run-next slot");
        // H2: whom the worker loop would run next: a spawn's child (as
        // `run` runs it, in the spawner's slice, the streak untouched), or
        // what [`Shared::find_work`] would find.
        let spawn = (*(*me).request.get()).take_spawn();
        let spawned = spawn.is_some();
        let (b, inherit) = if let Some(child) = spawn {
            (ActorArc::into_raw(child).cast_mut(), true)
        } else if !w.run_next.peek().is_null() {
            if capped {
                // The loop serves the queue first now; one that found the
                // queue empty would run the slot's actor without the
                // slice: rare, left to the loop.
                return None;
            }
            // The slot's actor, as peeked (only this thread takes from the
            // slot; were it gone, the loop would find what there is).
            let b = w.run_next.take();
            if b.is_null() {
                return None;
            }
            (b, true)
        } else {
            // The queue's oldest, as the loop takes it.
            match (*me).rt.as_ref().pop_queued((*c).index) {
                Some(b) => (ActorArc::into_raw(b).cast_mut(), false),
                None => return None,
            }
        };
        // H3. The loop's own counts for the turn (the queue's pop counted
        // itself). A fresh B starts in its entry, which completes the
        // handoff first thing ([`after_start`]).
        (*c).timer_turns -= 1;
        w.counters.direct_switches(1);
        if spawned {
            // `run`'s `Next::Run`: no pick, no streak.
        } else if inherit {
            (*c).streak += 1;
            w.counters.run_next(1);
        } else {
            (*c).streak = 0;
        }
        let core = &*(*c).core;
        core.leave(c, &*me);
        core.enter(c, &*b, inherit);
        (*c).handed = mem::replace(&mut (*c).running, b);
        *(*b).sched_sp.get() = *(*me).sched_sp.get();
        *(*b).handed.get() = true;
        (*me).span.exit();
        (*b).span.enter();
        crate::actor::sanitizer::actor_to_actor(&*me, &*b);
        // H4.
        Some(<P::Arch as Arch>::switch(*(*b).sp.get()))
    }
}

/// First thing in a resumed actor (`me`) after its switch returned `back`:
/// `back` is its worker's sp, or, after a direct handoff (`handed`), the
/// sp of the actor that handed over, whose request is carried out here
/// (`H5`).
///
/// # Safety
///
/// `me` is the calling (running) actor, just resumed.
#[inline(always)]
pub(crate) unsafe fn after_resume<P: Platform>(me: *const Actor, back: *mut u8) {
    // SAFETY: the running actor owns `handed` and `sched_sp`.
    unsafe {
        crate::actor::sanitizer::actor_resumed(&*me);
        // The rest is a fresh actor's start: `back` is the sp of its worker
        // or of the actor that handed over.
        after_start::<P>(me, back);
    }
}

/// First thing in a fresh actor's entry (`me`), its first switch having
/// returned `from` (and, after the resume's sanitizer hook, the rest of
/// [`after_resume`]; a fresh actor's hook is the entry's
/// [`actor_started`](crate::actor::sanitizer::actor_started)): `from` is
/// its worker's sp, or, when a direct handoff switched to it (a spawn's
/// child, the queue's oldest, any resumed actor), the sp of the actor that
/// handed over (`H5`).
///
/// # Safety
///
/// `me` is the calling (running) actor, just started.
#[inline(always)]
pub(crate) unsafe fn after_start<P: Platform>(me: *const Actor, from: *mut u8) {
    // SAFETY: the running actor owns `handed` and `sched_sp`.
    unsafe {
        if !*(*me).handed.get() {
            *(*me).sched_sp.get() = from;
            return;
        }
        *(*me).handed.get() = false;
        complete_handoff::<P>(me, from);
    }
}

/// `H5`. Inlined, not cold: in a ping-pong every resume but the first
/// comes through here.
///
/// # Safety
///
/// As [`after_resume`], `me` resumed by a direct handoff whose actor's sp
/// is `back`.
#[inline]
unsafe fn complete_handoff<P: Platform>(me: *const Actor, back: *mut u8) {
    let c = ctx::<P>();
    // SAFETY: a handoff happens only on a worker, and the actor switched
    // to resumes on the same thread: `c` is that worker's live context,
    // whose `handed` holds the actor that switched to us, now owned here.
    unsafe {
        let a = ActorArc::from_raw(mem::replace(&mut (*c).handed, ptr::null()));
        serve::check::<P>(&*(*c).worker, "run-next slot");
        crate::actor::sanitizer::handed_over(&a, &*me);
        *a.sp.get() = back;
        match mem::replace(&mut *a.request.get(), Request::None) {
            r @ (Request::Park | Request::ParkLent) => {
                if let Some(a) = park_switched(a, matches!(r, Request::ParkLent)) {
                    // Woken before its park: runnable at once, next here
                    // (the slot is empty: only this thread fills it, and
                    // H2 emptied it; were it not, its actor would go to
                    // the queue, nothing lost).
                    a.state.store(RUNNABLE, Ordering::Relaxed);
                    let rt = a.rt;
                    rt.as_ref().put_run_next_here(a, (*c).index);
                }
            }
            Request::Yield => {
                // To the back of the queue, as the loop queues a yield.
                // Relaxed: as the loop's store; the queue's push is the
                // Release edge to whoever pops it.
                a.state.store(RUNNABLE, Ordering::Relaxed);
                let rt = a.rt;
                rt.as_ref().requeue(a, (*c).index);
            }
            Request::YieldBehind => {
                // Into the slot H2 emptied (this handoff went to its
                // actor), as the loop's `run` puts it.
                a.state.store(RUNNABLE, Ordering::Relaxed);
                let rt = a.rt;
                rt.as_ref().put_run_next_here(a, (*c).index);
            }
            Request::Spawned => {
                // Into the slot, as the loop's `run` puts a spawner (an
                // actor it woke there is displaced to the queue).
                let rt = a.rt;
                rt.as_ref().put_run_next_here(a, (*c).index);
            }
            _ => P::abort("smarm: a direct handoff with a request other than a park, a yield or a spawn"),
        }
    }
}
