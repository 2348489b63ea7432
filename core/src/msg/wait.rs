//! Waiters: the one way a blocking call (a mailbox or channel receive, a
//! full bounded send) sleeps and is woken, for actors and OS threads alike.
//!
//! A [`Waiter`] is registered with the thing waited on *before* the waiter
//! re-checks its condition, and is taken out of the registration by exactly
//! one waker (a CAS on the registration's state), who calls
//! [`Waiter::wake`]. An actor waiter parks through the scheduler (the
//! `NOTIFIED` state absorbs a wake that lands before the park completes); a
//! thread waiter sleeps on its own futex word. Both may return spuriously:
//! callers loop and re-check.

use alloc::sync::Arc;

use crate::actor::ActorArc;
use crate::sched;
use crate::seam::platform::Platform;
use crate::sync::{AtomicU32, Ordering};

/// A plain OS thread's wake word: `0` while it waits, `1` once woken.
pub(crate) struct ThreadWaiter {
    word: AtomicU32,
    /// The platform's futex wake (so waking needs no platform parameter:
    /// a timer's poke is type-erased).
    wake: fn(&AtomicU32),
}

/// Whoever waits: an actor (parks) or an OS thread (futex-waits). A clone
/// is one more registration of the same waiter (a select registers with
/// several sources).
#[derive(Clone)]
pub(crate) enum Waiter {
    Actor(ActorArc),
    Thread(Arc<ThreadWaiter>),
}

impl Waiter {
    /// A waiter for the caller: the running actor, or this OS thread.
    pub(crate) fn current<P: Platform>() -> Waiter {
        match sched::current_actor::<P>() {
            // SAFETY: the running actor is alive (its worker holds an `ActorArc`);
            // we take one more reference for the registration.
            Some(a) => Waiter::Actor(unsafe { ActorArc::clone_from_ptr(a) }),
            None => Waiter::thread::<P>(),
        }
    }

    /// A waiter for the calling OS thread (not an actor).
    pub(crate) fn thread<P: Platform>() -> Waiter {
        Waiter::Thread(Arc::new(ThreadWaiter {
            word: AtomicU32::new(0),
            wake: P::wake_one,
        }))
    }

    /// Blocks the caller (which must be the waiter) until woken; may return
    /// spuriously. An actor that is being cancelled returns at once.
    pub(crate) fn wait<P: Platform>(&self, deadline_ns: Option<u64>) {
        match self {
            Waiter::Actor(_) => sched::park::<P>(crate::actor::WAIT_CHANNEL),
            Waiter::Thread(t) => {
                // Acquire: pairs with the Release store in `wake`.
                if t.word.load(Ordering::Acquire) == 0 {
                    P::wait(&t.word, 0, deadline_ns);
                }
            }
        }
    }

    /// Wakes the waiter (consumes the registration).
    pub(crate) fn wake(self) {
        match self {
            Waiter::Actor(a) => {
                if let Some(a) = a.wake() {
                    crate::actor::schedule(a);
                }
            }
            Waiter::Thread(t) => {
                // Release: publishes what the waker wrote before waking.
                t.word.store(1, Ordering::Release);
                (t.wake)(&t.word);
            }
        }
    }
}
