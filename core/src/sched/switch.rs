//! Switching an actor out and back in: suspend, the resume point that raises
//! a kill or a cancellation, deferred kills, detaching while unwinding, park
//! and yield (the module doc's "Unwinding").

#[allow(unused_imports)]
use super::*;

/// Hands `req` to the worker and switches to it; returns when resumed (on
/// whichever worker). No resume point: callers run [`resume_point`].
///
/// # Safety
///
/// `me` is the calling (running) actor, not unwinding; `c` is what
/// `ctx::<P>()` returned on this thread, with no switch since.
pub(crate) unsafe fn switch_out<P: Platform>(c: *mut WorkerCtx<P>, me: *const Actor, req: Request) {
    // SAFETY: the running actor owns `request` and `sched_sp` (actor doc).
    unsafe {
        crate::sched::local::check_switch(me);
        let may_hand = matches!(
            req,
            Request::Yield | Request::YieldBehind | Request::Park | Request::ParkLent | Request::Spawn(_)
        );
        *(*me).request.get() = req;
        if may_hand {
            // Straight to the actor the worker would run next, if it may be.
            if let Some(back) = handoff::<P>(c, me) {
                after_resume::<P>(me, back);
                return;
            }
        }
        let to = *(*me).sched_sp.get();
        crate::actor::sanitizer::actor_to_worker(&*me, false);
        let back = <P::Arch as Arch>::switch(to);
        // Resumed: `back` is the sp of the worker that resumed us, or of
        // an actor that handed over to us.
        after_resume::<P>(me, back);
    }
}

/// A resume point: unwinds the actor if the runtime is cancelling it or it
/// was killed, unless it is already unwinding or ending (module doc,
/// "Unwinding": an actor unwinds once).
///
/// # Safety
///
/// `me` is the calling (running) actor.
#[inline(always)]
pub(crate) unsafe fn resume_point<P: Platform>(me: *const Actor) {
    // SAFETY: the running actor owns `cancel`.
    unsafe {
        let c = *(*me).cancel.get();
        if c == CANCEL_REQUESTED {
            raise::<P>(me, alloc::boxed::Box::new(Cancelled));
        }
        // Relaxed: pairs with the kill's Release store; a parked actor's
        // kill is ordered by its wake (the state CAS), a running one's is
        // seen at this or a later resume.
        if c == CANCEL_NONE && (*me).killed.load(Ordering::Relaxed) {
            raise::<P>(me, alloc::boxed::Box::new(crate::actor::exit::Killed));
        }
    }
}

/// Starts the actor's cancellation or kill unwind, unless it is unwinding
/// already (then the kill is absorbed: raising inside a destructor would
/// abort the process).
///
/// # Safety
///
/// `me` is the calling (running) actor.
#[cold]
pub(crate) unsafe fn raise<P: Platform>(me: *const Actor, payload: crate::seam::platform::PanicPayload) {
    // SAFETY: the running actor owns `deferred`.
    if P::panicking() || unsafe { *(*me).deferred.get() } != 0 {
        return;
    }
    if !P::PANIC_UNWINDS {
        // `Builder::allow_panic_abort`: the unwind would abort silently.
        let what = if payload.is::<Cancelled>() {
            "cancelled by the runtime's shutdown"
        } else {
            "killed"
        };
        // SAFETY: `me` is the running actor.
        let id = unsafe { (*me).id };
        P::abort(&alloc::format!(
            "smarm: actor {id} was {what}, which unwinds it, but this binary is built with \
             panic = \"abort\" (Builder::allow_panic_abort): aborting"
        ));
    }
    // SAFETY: the running actor owns `cancel`.
    unsafe { *(*me).cancel.get() = CANCEL_UNWINDING };
    P::resume_unwind(payload)
}

/// Runs `f` with the calling actor's kills and cancellation deferred: its
/// resume points inside `f` do not unwind, and a kill that arrived meanwhile
/// unwinds it at its first resume point after `f` (a supervisor starting a
/// child must get the child's reference, or nobody could stop the child).
/// Off actors, just runs `f`.
pub(crate) fn defer_kills<P: Platform, R>(f: impl FnOnce() -> R) -> R {
    struct Undefer(*const Actor);
    impl Drop for Undefer {
        fn drop(&mut self) {
            // SAFETY: the actor that deferred is the one running this drop
            // (`f` returned or unwound on it): it owns `deferred` and
            // `cancel`.
            unsafe {
                let a = &*self.0;
                *a.deferred.get() -= 1;
                // A kill (or cancellation) skipped inside may have had its
                // wake consumed by a switch there: leave one for the next
                // park (`RUNNING → NOTIFIED`), so it returns at once and its
                // resume point unwinds, instead of parking for good.
                // Relaxed: as the kill flag's read in `resume_point`.
                if *a.deferred.get() == 0
                    && (*a.cancel.get() == CANCEL_REQUESTED
                        || (*a.cancel.get() == CANCEL_NONE && a.killed.load(Ordering::Relaxed)))
                {
                    let _ = crate::actor::wake_word(&a.state);
                }
            }
        }
    }
    let Some(me) = current_actor::<P>() else {
        return f();
    };
    // SAFETY: the running actor owns `deferred`.
    unsafe { *(*me).deferred.get() += 1 };
    let _undefer = Undefer(me);
    f()
}

/// Hands `req` to the worker, switches to it and, once resumed, runs the
/// resume point; while the actor unwinds, does what the module doc's
/// "Unwinding" says instead of switching.
///
/// # Safety
///
/// `me` is the calling (running) actor; `c` is what `ctx::<P>()` returned
/// on this thread, with no switch since.
#[inline]
pub(crate) unsafe fn suspend<P: Platform>(c: *mut WorkerCtx<P>, me: *const Actor, req: Request) {
    // SAFETY: contract.
    unsafe {
        if suspend_no_resume_point::<P>(c, me, req) {
            resume_point::<P>(me);
        }
    }
}

/// [`suspend`] without its resume point (spawn: the caller must get the
/// child's handle first). Returns whether the actor switched out (a resume
/// point is due), `false` while it unwinds.
///
/// # Safety
///
/// `me` is the calling (running) actor; `c` is what `ctx::<P>()` returned
/// on this thread, with no switch since.
#[inline(always)]
pub(crate) unsafe fn suspend_no_resume_point<P: Platform>(
    mut c: *mut WorkerCtx<P>,
    me: *const Actor,
    req: Request,
) -> bool {
    // SAFETY: contract.
    unsafe {
        if P::panicking() {
            suspend_unwinding::<P>(me, req);
            return false;
        }
        if *(*me).detached.get() {
            // The unwind was caught inside the actor (its own
            // `catch_unwind`): back to the scheduler first.
            rejoin::<P>(me);
            if matches!(
                req,
                Request::Park | Request::ParkLent | Request::Yield | Request::YieldBehind
            ) {
                // The rejoin queued us (a yield); a park re-checks.
                return true;
            }
            // The rejoin switched: we may be on another worker now.
            c = ctx::<P>();
        }
        switch_out::<P>(c, me, req);
        true
    }
}

/// `suspend` while the actor unwinds: steps 1-4 of the module doc's
/// "Unwinding".
///
/// # Safety
///
/// `me` is the calling (running) actor, unwinding.
#[cold]
pub(crate) unsafe fn suspend_unwinding<P: Platform>(me: *const Actor, req: Request) {
    // SAFETY: contract.
    unsafe {
        match req {
            Request::Yield | Request::YieldBehind => {}
            Request::Spawn(child) => schedule(child),
            Request::Park | Request::ParkLent => {
                detach::<P>(me);
                park_in_place::<P>(me);
            }
            _ => P::abort("smarm: an unwinding actor asked its worker for a switch it cannot make"),
        }
    }
}

/// Detaches the unwinding actor from the scheduler (step 3 of "Unwinding"),
/// if it is not already.
///
/// # Safety
///
/// `me` is the calling (running) actor, unwinding.
pub(crate) unsafe fn detach<P: Platform>(me: *const Actor) {
    // SAFETY: the running actor owns `detached`; the switch returns on
    // this same thread (the worker side resumes us in place).
    unsafe {
        if !*(*me).detached.get() {
            switch_out::<P>(ctx::<P>(), me, Request::Detach);
            *(*me).detached.get() = true;
        }
    }
}

/// Back to the scheduler after an unwind detached the actor (step 5 of
/// "Unwinding"): this thread queues it and leaves worker duty; returns on
/// whichever worker resumes it.
///
/// # Safety
///
/// `me` is the calling (running) actor, detached, no longer unwinding.
pub(crate) unsafe fn rejoin<P: Platform>(me: *const Actor) {
    // SAFETY: contract; the running actor owns `detached`.
    unsafe {
        *(*me).detached.get() = false;
        switch_out::<P>(ctx::<P>(), me, Request::Rejoin);
    }
}

/// Step 4 of "Unwinding": waits on this thread until a wake (see
/// [`crate::actor`], step 7). May return spuriously; callers re-check.
///
/// # Safety
///
/// `me` is the calling (running) actor.
pub(crate) unsafe fn park_in_place<P: Platform>(me: *const Actor) {
    // SAFETY: the running actor is alive while it runs.
    if !crate::actor::hold_wait::<P>(unsafe { &(*me).state }) {
        P::abort("smarm: an actor waiting in place was not running");
    }
}

/// Parks the calling actor until a wake (see the state diagram in
/// [`crate::actor`]); `what` it waits on shows in dumps. Spurious returns
/// are possible: callers re-check.
pub(crate) fn park<P: Platform>(what: u8) {
    match current_with_ctx::<P>() {
        // SAFETY: `a` is the running actor; `c` read just now.
        Some((c, a)) => unsafe { park_actor::<P>(c, a, what) },
        None => P::yield_thread(),
    }
}

/// [`park`] for a caller that has its actor and its worker context at
/// hand (no second read of the current-worker slot).
///
/// # Safety
///
/// `a` is the calling (running) actor; `c` is what `ctx::<P>()` returned
/// on this thread, with no switch since.
#[inline]
pub(crate) unsafe fn park_actor<P: Platform>(c: *mut WorkerCtx<P>, a: *const Actor, what: u8) {
    crate::actor::waiting_on(a, what);
    // SAFETY: contract.
    unsafe { suspend::<P>(c, a, Request::Park) }
}

/// [`park_actor`] for a wait whose registration is lent
/// (`crate::actor::lent`): the worker keeps its reference in the parked
/// actor (`PARKED_LENT`).
///
/// # Safety
///
/// As for [`park_actor`]; the caller's registration is a lent one of `a`.
#[inline]
pub(crate) unsafe fn park_actor_lent<P: Platform>(c: *mut WorkerCtx<P>, a: *const Actor, what: u8) {
    crate::actor::waiting_on(a, what);
    // SAFETY: contract.
    unsafe { suspend::<P>(c, a, Request::ParkLent) }
}

/// Lets other actors run: the caller goes to the back of the run queue.
/// On a plain OS thread, yields the thread.
pub fn yield_now<P: Platform>() {
    match current_with_ctx::<P>() {
        // SAFETY: `a` is the running actor; `c` read just now.
        Some((c, a)) => unsafe { suspend::<P>(c, a, Request::Yield) },
        None => P::yield_thread(),
    }
}
