//! Actor-local storage, and the thread-local hazard.
//!
//! An actor may resume on another worker (another OS thread) after any
//! safe point: a send, a receive, a spawn, a yield, a join, a sleep,
//! `checkpoint()`. A `thread_local!` value therefore changes under it:
//! state kept there is another thread's after a migration, and a
//! `RefCell` borrow held across a safe point lets the next actor on the
//! same thread find it borrowed. [`ActorLocal`] is the replacement: one
//! value per actor, created on first use, dropped when the actor ends.
//!
//! ```ignore
//! static HITS: ActorLocal<Cell<u32>> = ActorLocal::new(|| Cell::new(0));
//! HITS.with(|h| h.set(h.get() + 1));
//! ```
//!
//! # Catching the misuse (debug builds)
//!
//! [`no_switch`] marks a section that must not reach a safe point (for
//! example while a `thread_local!` borrow is held); in debug builds, a
//! switch inside it panics with the actor's id, naming the hazard. An
//! [`ActorLocal::with`] closure is such a section too.

use alloc::boxed::Box;
use core::marker::PhantomData;

use crate::actor::Actor;
use crate::sched;
use crate::seam::platform::Platform;

/// A value per actor, created by `init` on first use in each actor and
/// dropped when that actor ends. Declare it as a `static`.
pub struct ActorLocal<T: Send + 'static, P: Platform> {
    init: fn() -> T,
    _p: PhantomData<fn() -> P>,
}

impl<T: Send + 'static, P: Platform> ActorLocal<T, P> {
    /// A key whose value starts as `init()` in each actor.
    pub const fn new(init: fn() -> T) -> Self {
        ActorLocal {
            init,
            _p: PhantomData,
        }
    }

    /// Runs `f` with the calling actor's value. The closure must not reach
    /// a safe point (debug builds check). Panics outside an actor.
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let a = sched::current_actor::<P>().expect("ActorLocal::with outside an actor");
        let key = self as *const Self as usize;
        // SAFETY: `a` is the running actor; its locals are touched only by
        // itself (on whichever thread it runs), never across a switch: the
        // reference below lives inside `f`, which must not switch (checked
        // in debug builds by `no_switch`).
        let locals = unsafe { &mut *(*a).locals.get() };
        let i = match locals.values.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                locals.values.push((key, Box::new((self.init)())));
                locals.values.len() - 1
            }
        };
        let v: *const T = locals.values[i]
            .1
            .downcast_ref::<T>()
            .expect("one type per ActorLocal key");
        locals.no_switch += 1;
        let _g = Leave(a);
        // SAFETY: the value lives in the actor's locals until the actor
        // ends; nothing else removes it, and `f` cannot switch (so cannot
        // end the actor) while it holds the reference.
        f(unsafe { &*v })
    }
}

/// Drops the actor's local values (at its end, on its own stack).
///
/// # Safety
///
/// `a` is the running actor.
pub(crate) unsafe fn drop_all(a: &Actor) {
    // SAFETY: contract: the running actor owns its locals.
    let values = core::mem::take(unsafe { &mut (*a.locals.get()).values });
    drop(values);
}

/// Leaves a `no_switch` section (also on unwind).
struct Leave(*const Actor);

impl Drop for Leave {
    fn drop(&mut self) {
        // SAFETY: the actor that entered the section is still running it.
        unsafe { (*(*self.0).locals.get()).no_switch -= 1 };
    }
}

/// Runs `f` as a section that must not reach a safe point: in debug
/// builds, a switch inside it (a send, receive, yield, join, sleep, spawn,
/// expired `checkpoint`) panics naming the hazard. Wrap code that holds a
/// `thread_local!` borrow in it. Off actors it just runs `f`.
pub fn no_switch<P: Platform, R>(f: impl FnOnce() -> R) -> R {
    let Some(a) = sched::current_actor::<P>() else {
        return f();
    };
    // SAFETY: the running actor owns its locals.
    unsafe { (*(*a).locals.get()).no_switch += 1 };
    let _g = Leave(a);
    f()
}

/// Debug builds: the switch check (called by the scheduler before every
/// switch away from an actor).
///
/// # Safety
///
/// `a` is the running actor.
#[inline(always)]
pub(crate) unsafe fn check_switch(a: *const Actor) {
    #[cfg(debug_assertions)]
    {
        // SAFETY: contract.
        if unsafe { (*(*a).locals.get()).no_switch } != 0 {
            // SAFETY: as above.
            let id = unsafe { (*a).id };
            panic!(
                "actor {id} reached a safe point (it may resume on another thread) inside \
                 no_switch or ActorLocal::with: a thread_local! or actor-local borrow would \
                 be held across a migration"
            );
        }
    }
    let _ = a;
}
