//! Lent registrations: a receive that registers without a reference.
//!
//! A receive on a mailbox or channel registers the actor in the channel's
//! waiter slot. A counted registration holds a reference to the actor (one
//! `Arc` increment at the wait, the worker's decrement at the park: two
//! locked instructions a message, on lines the other side may hold). A
//! lent one holds none, which is sound because the channel itself holds a
//! reference to that actor (its *pin*, taken at the actor's first wait and
//! released with the channel): any waker reaches the registration through
//! the channel, so the actor's control block outlives every use of it, a
//! stale registration's included. The reference the park would have
//! dropped stays with the parked actor (`PARKED_LENT`), and the one
//! transition out of it (a CAS, so one winner) hands it on. A lent
//! registration's waker owns no reference, so it only takes
//! `PARKED_LENT`: it leaves a counted `PARKED` alone (a stale lent
//! registration of an actor now parked elsewhere; that wait has its own
//! registration). Only the pinned actor's receives are lent; another
//! actor receiving on the channel (a `Receiver` moved) registers counted.
//!
//! The pin keeps an ended actor's control block (not its stack, which
//! goes back at its exit) until its mailbox's last address is dropped.

use super::{Actor, ActorArc, Woken};
use crate::sync::AtomicU32;

/// The transition of a lent registration's waker (module doc): as
/// [`wake_word`](super::wake_word), but a counted `PARKED` is left as it
/// is (`Nothing`: this waker has no reference to schedule it with).
pub fn wake_word_lent(state: &AtomicU32) -> Woken {
    super::wake_from(state, false)
}

/// Wakes the actor of a lent registration (module doc), as
/// [`ActorArc::wake`] wakes a counted one: returns it if the caller must
/// schedule it, with the reference the parked actor kept.
///
/// # Safety
///
/// `a` is a lent registration's actor, taken out of its slot by the
/// caller, whose channel (holding the actor's pin) outlives this call.
pub(crate) unsafe fn wake_lent(a: *const Actor) -> Option<ActorArc> {
    // SAFETY: alive: the pin (contract).
    let r = unsafe { &*a };
    match wake_word_lent(&r.state) {
        // SAFETY: the reference the parked actor kept, ours by the CAS.
        Woken::ScheduleOwn => Some(unsafe { ActorArc::from_raw(a) }),
        Woken::Unpark => {
            // SAFETY: as in `ActorArc::wake`; the pin keeps the word alive.
            unsafe { r.rt.as_ref().unpark(&r.state) };
            None
        }
        Woken::Schedule | Woken::Nothing => None,
    }
}
