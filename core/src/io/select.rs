//! A [`Select`] arm for readiness: [`Select::ready`].
//!
//! The arm speaks the readiness record's protocol (the scheduler's `io`
//! module) with the select's waiter: its poll asks whether an edge of its
//! directions came since the caller's ticket; its registration is the
//! record's check-and-join (under the record's lock: an edge after the
//! ticket either moved the tick before the check, and the arm is ready
//! now, or finds the entry and wakes the actor); its withdrawal takes the
//! entry out if no delivery took it (the select withdraws also when a
//! kill unwinds its park). Each entry is removed by exactly one
//! of the poller and the select, as for a plain wait, and a wake that
//! lands after the select withdrew is a spurious wake of a later park,
//! which every park tolerates. Readiness is never *taken*: an arm that
//! is not chosen leaves nothing to restore (the caller's next call finds
//! the data).

use alloc::boxed::Box;

use super::{Interest, Registration, Ticket, WaitError};
use crate::msg::select::{Arm, Select};
use crate::msg::wait::Waiter;
use crate::sched::io as sio;
use crate::seam::platform::Platform;

/// The readiness arm: a registration, the directions and ticket, and the
/// closure its outcome goes through.
struct ReadyArm<'a, P: Platform, F> {
    reg: &'a Registration<P>,
    interest: Interest,
    ticket: Ticket,
    /// The caller may wait on `reg` (an actor of its runtime): else the
    /// arm is ready at once with `WaitError::NotHere`.
    here: bool,
    /// The joined entry's id (the actor's address) while registered.
    joined: Option<usize>,
    f: Option<F>,
}

impl<P: Platform, F: FnOnce(Result<(), WaitError>) -> R, R> Arm<R> for ReadyArm<'_, P, F> {
    fn poll(&mut self) -> Option<R> {
        let out = if !self.here {
            Err(WaitError::NotHere)
        // SAFETY: the arm borrows the registration, which keeps the record
        // (and its driver) alive; so for every call below.
        } else if unsafe { sio::edge_since(self.reg.rec, self.interest.0, self.ticket.0) } {
            Ok(())
        } else {
            return None;
        };
        Some((self.f.take().expect("an arm completes once"))(out))
    }

    fn register(&mut self, w: &Waiter) -> bool {
        let Waiter::Actor(a) = w else {
            // No thread reaches here (`here` is false for one: its poll
            // completes the arm first); were one to, "ready" sends it
            // back to the poll.
            return false;
        };
        debug_assert!(self.joined.is_none());
        // SAFETY: as in `poll`; the select withdraws the entry (also when
        // its park unwinds) before the borrow ends.
        let joined = unsafe { sio::join_actor(self.reg.rec, a.clone(), self.interest.0, self.ticket.0) };
        if joined {
            self.joined = Some(crate::actor::ActorArc::as_ptr(a) as usize);
        }
        joined
    }

    fn withdraw(&mut self) {
        if let Some(id) = self.joined.take() {
            // SAFETY: as in `poll`.
            unsafe { sio::leave(self.reg.rec, id) };
        }
    }

    fn closed(&mut self) -> Option<R> {
        None
    }
}

impl<'a, R: 'a, P: Platform> Select<'a, R, P> {
    /// An arm that is ready once `reg`'s descriptor may be ready for
    /// `interest` after `ticket` (taken before the caller's non-blocking
    /// call that said `EAGAIN`: see [`Registration::ticket`]); its closure
    /// gets `Ok(())`, and the caller makes its call again. Readiness is
    /// not taken from the descriptor, so an arm not chosen leaves it as it
    /// was. As with [`Registration::wait`], a readiness may be spurious
    /// (the call says `EAGAIN` again: take a new ticket and select again).
    ///
    /// A caller that may not wait on `reg` (no actor of the runtime it is
    /// registered with: see [`Registration::can_wait`]) finds the arm ready
    /// at once with `Err(WaitError::NotHere)`. While runtime shutdown
    /// cancels the caller, a readiness arm is like a join arm: it does not
    /// end the select by itself.
    ///
    /// ```ignore
    /// // With a port crate (`smarm_linux`, `smarm_darwin`) as `smarm`, in
    /// // an actor that serves its mailbox and a socket:
    /// let reg = stream.registration()?;
    /// loop {
    ///     let ticket = reg.ticket();
    ///     match stream.try_io(|s| (&*s).read(&mut buf)) {
    ///         Ok(0) => break,
    ///         Ok(n) => handle(&buf[..n]),
    ///         Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
    ///         Err(e) => return Err(e),
    ///     }
    ///     let ev = smarm::Select::new()
    ///         .recv(&mut mb, Ev::Msg)
    ///         .ready(reg, Interest::READABLE, ticket, |_| Ev::Readable)
    ///         .wait();
    ///     // ...
    /// }
    /// ```
    pub fn ready(
        self,
        reg: &'a Registration<P>,
        interest: Interest,
        ticket: Ticket,
        f: impl FnOnce(Result<(), WaitError>) -> R + 'a,
    ) -> Self {
        self.arm(Box::new(ReadyArm {
            reg,
            interest,
            ticket,
            here: reg.can_wait(),
            joined: None,
            f: Some(f),
        }))
    }
}
