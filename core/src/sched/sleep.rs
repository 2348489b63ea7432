//! Sleeping and timed parks: arming a timer for the running actor,
//! `park_until`, `sleep` and `sleep_until` (the module doc's "Timers").

#[allow(unused_imports)]
use super::*;

/// An armed timer that is cancelled when dropped (also when the waiter
/// unwinds), so a poke never outlives the wait it belongs to.
pub(crate) struct Armed<P: Platform> {
    entry: Arc<TimerEntry>,
    _p: core::marker::PhantomData<fn() -> P>,
}

impl<P: Platform> Armed<P> {
    /// Whether the timer fired.
    pub(crate) fn has_fired(&self) -> bool {
        self.entry.has_fired()
    }
}

impl<P: Platform> Drop for Armed<P> {
    fn drop(&mut self) {
        if self.entry.cancel::<P>() {
            let c = ctx::<P>();
            if !c.is_null() {
                // SAFETY: a non-null context is this thread's live worker
                // context; the runtime it points at outlives its actors.
                unsafe { (*(*c).core).timers.cancelled_one() };
            }
        }
    }
}

/// Arms a timer on the caller's runtime that pokes `target` at
/// `deadline` (ns, platform clock). `None` off the runtime's workers.
pub(crate) fn arm<P: Platform>(deadline: u64, target: impl Poke + 'static) -> Option<Armed<P>> {
    let c = ctx::<P>();
    if c.is_null() {
        return None;
    }
    let entry = timer::entry(target);
    // SAFETY: a non-null context is this thread's live worker context.
    let core = unsafe { &*(*c).core };
    if let Some(i) = core.timers.arm(deadline, &entry) {
        core.idle.notify_worker(i);
    }
    Some(Armed {
        entry,
        _p: core::marker::PhantomData,
    })
}

/// Parks the calling actor until a wake, or until `deadline`, when the
/// timer pokes `target` (which takes the caller's registration in the wait
/// object, exactly as a sender would: see [`crate::sched::timer`]). May return
/// spuriously; callers re-check. On a plain thread: yields.
pub(crate) fn park_until<P: Platform>(what: u8, deadline: u64, target: impl Poke + 'static) {
    let Some(armed) = arm::<P>(deadline, target) else {
        return P::yield_thread();
    };
    park::<P>(what);
    drop(armed);
}

/// Sleeps until `deadline`: an actor parks (its worker runs others; a
/// timer wakes it), a plain thread blocks. A deadline already past
/// returns at once.
#[cfg(feature = "std")]
pub fn sleep_until<P: Platform>(deadline: std::time::Instant) {
    sleep_until_ns::<P>(crate::sched::deadline_at::<P>(deadline))
}

/// [`sleep_until`] with a deadline in ns on the platform's clock (for
/// ports; `no_std` users have [`sleep`]).
#[doc(hidden)]
pub fn sleep_until_ns<P: Platform>(deadline: u64) {
    let Some(me) = current_actor::<P>() else {
        let word = AtomicU32::new(0);
        while P::now_ns() < deadline {
            P::wait(&word, 0, Some(deadline));
        }
        return;
    };
    loop {
        if unwinding::<P>() || P::now_ns() >= deadline {
            return;
        }
        // SAFETY: `me` is the running actor, alive while it runs; the entry
        // takes one more reference for the timer's wake.
        let me_arc = unsafe { ActorArc::clone_from_ptr(me) };
        // The entry is the sleep's only registration: the timer wakes us.
        let poke = PokeWith(me_arc, |a: &ActorArc| {
            if let Some(a) = a.clone().wake() {
                schedule(a);
            }
        });
        let Some(armed) = arm::<P>(deadline, poke) else {
            return;
        };
        while !armed.has_fired() {
            park::<P>(crate::actor::WAIT_TIMER);
        }
        // Returns once the poke has returned (the Drop waits for FIRED).
        drop(armed);
        if P::now_ns() >= deadline {
            return;
        }
        // Fired before its deadline: only a shutdown does that (`idle`
        // fires every timer so that sleepers resume and are cancelled).
        // If it fired before we parked, no resume point ran: a yield's
        // does (the resume saw the shutdown and cancels us); were the
        // shutdown not seen yet, we sleep on.
        yield_now::<P>();
    }
}

/// Sleeps for `d`: an actor parks (its worker runs others; a timer wakes
/// it), a plain thread blocks.
pub fn sleep<P: Platform>(d: Duration) {
    sleep_until_ns::<P>(deadline_after::<P>(d))
}
