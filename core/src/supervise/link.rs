//! Exit reasons, kill, monitors and links: how one actor learns of another's
//! end, and how fates are tied (Erlang's model, typed).
//!
//! - Every actor ends with an [`ExitReason`]: `Normal` (its closure
//!   returned), `Panicked` (with the message), `Killed` ([`ActorRef::kill`],
//!   or a linked actor's abnormal exit) or `Cancelled` (runtime shutdown).
//! - [`ActorRef::monitor`] gives a [`Monitor`]: one [`Down`] notice with the
//!   reason (at once if the actor already ended);
//!   [`ActorRef::monitor_into`] delivers it as a message of the watcher's
//!   own mailbox type instead.
//! - [`link`] ties the caller and another actor: when either ends
//!   abnormally (`Panicked` or `Killed`), the other is killed — unless it
//!   called [`trap_exits_into`], in which case it receives a [`Down`]
//!   message in its mailbox and carries on. A normal exit breaks the link
//!   quietly.
//!
//!
//! The data behind them (exit hooks, kill flag, link sets) is
//! `crate::actor::life`'s; this layer adds what needs messages (a monitor is
//! a oneshot, a trap or `monitor_into` sends to a mailbox) and the running
//! actor.

use alloc::boxed::Box;
use core::fmt;

use crate::actor::exit::Down;
use crate::actor::life::{ActorRef, Life};
use crate::msg::channel::{oneshot, OneshotReceiver};
use crate::msg::mailbox::Addr;
use crate::seam::platform::Platform;

impl<P: Platform> ActorRef<P> {
    /// A monitor: one [`Down`] notice when the actor ends.
    pub fn monitor(&self) -> Monitor<P> {
        let (tx, rx) = oneshot::<Down, P>();
        self.on_exit(Box::new(move |d: &Down| {
            // The monitor may have been dropped: nobody to tell.
            let _ = tx.send(d.clone());
        }));
        Monitor { rx }
    }

    /// Delivers the [`Down`] notice, mapped by `f`, to the mailbox `to` (an
    /// actor watching several others waits on its one mailbox). A mailbox
    /// closed by then drops it. `f` may carry context (a closure); it runs
    /// once, on the ending actor's exit path.
    pub fn monitor_into<M: Send + 'static>(
        &self,
        to: &Addr<M, P>,
        f: impl FnOnce(Down) -> M + Send + 'static,
    ) {
        let to = to.clone();
        self.on_exit(Box::new(move |d: &Down| {
            let _ = to.send_notice(f(d.clone()));
        }));
    }
}

/// Waits for one actor's [`Down`] notice.
pub struct Monitor<P: Platform> {
    rx: OneshotReceiver<Down, P>,
}

impl<P: Platform> fmt::Debug for Monitor<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor").finish_non_exhaustive()
    }
}

impl<P: Platform> Monitor<P> {
    /// Waits for the notice (an actor parks, a thread blocks). `None` if it
    /// can never come (the actor was abandoned at shutdown).
    pub fn recv(self) -> Option<Down> {
        self.rx.recv().ok()
    }

    /// Waits at most `timeout`; `None` if the actor has not ended by then.
    pub fn recv_timeout(&mut self, timeout: core::time::Duration) -> Option<Down> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// The notice, if the actor has ended.
    pub fn try_recv(&mut self) -> Option<Down> {
        self.rx.try_recv().ok()
    }
}

/// A reference to the calling actor; `None` on a plain thread.
pub fn current<P: Platform>() -> Option<ActorRef<P>> {
    let a = crate::sched::current_actor::<P>()?;
    // SAFETY: the running actor is alive while it runs.
    Some(ActorRef::new(unsafe { &(*a).life }))
}

/// Links the calling actor with `other`: when either ends abnormally
/// (`Panicked` or `Killed`) the other is killed, unless it traps exits
/// ([`trap_exits_into`]). Returns `false` on a plain thread (nothing to
/// link). Linking to an actor that already ended abnormally kills the
/// caller at its next resume point, as in Erlang. Idempotent, as Erlang's:
/// linking again to the same partner (from either side) adds nothing, and
/// one exit delivers one notice; linking to itself does nothing.
pub fn link<P: Platform>(other: &ActorRef<P>) -> bool {
    let Some(me) = current::<P>() else {
        return false;
    };
    if me.life.id == other.life.id || !me.life.add_link::<P>(&other.life) {
        return true;
    }
    let (to_other, to_me) = (other.life.clone(), me.life.clone());
    me.on_exit(Box::new(move |d: &Down| propagate(&to_other, d)));
    other.on_exit(Box::new(move |d: &Down| propagate(&to_me, d)));
    true
}

/// A linked actor ended with `d`: kill `peer` or tell it (if it traps).
fn propagate(peer: &Life, d: &Down) {
    if !d.reason.is_abnormal() || peer.hooks.is_closed() {
        return;
    }
    if !peer.trap_exit(d) {
        peer.kill();
    }
}

/// Makes the calling actor trap exits: a linked actor's abnormal exit is
/// delivered to `to` (normally the caller's own mailbox), mapped by `f`,
/// instead of killing the caller. Returns `false` on a plain thread; the
/// first call wins.
///
/// The trap holds `to` weakly: it keeps no mailbox (and so no actor)
/// alive, and a notice for a mailbox that is gone or closed is not
/// delivered, so the link kills the caller instead (it has ended anyway,
/// or it is ending). Context `f` captures lives until the caller's last
/// handle is dropped.
pub fn trap_exits_into<P: Platform, M: Send + 'static>(
    to: &Addr<M, P>,
    f: impl Fn(Down) -> M + Send + Sync + 'static,
) -> bool {
    let Some(a) = crate::sched::current_actor::<P>() else {
        return false;
    };
    let to = to.downgrade();
    // SAFETY: the running actor is alive while it runs.
    unsafe {
        (*a).life.set_trap(Box::new(move |d: &Down| {
            to.upgrade()
                .is_some_and(|to| to.send_notice(f(d.clone())).is_ok())
        }))
    };
    true
}
