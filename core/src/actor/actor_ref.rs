//! [`ActorRef`]: a reference to an actor that does not keep it alive,
//! built on its [`Life`](crate::actor::life::Life).

use core::fmt;
use core::marker::PhantomData;

use crate::actor::cell::LifeRef;
use crate::actor::life::Hook;
use crate::seam::platform::Platform;

/// A reference to an actor that does not keep it alive (its stack goes
/// when it ends, and its control block too, or, once it has waited on its
/// mailbox, when the last address of that goes; the reference keeps only
/// its id, name and exit reason): kill it, monitor it, link to it. Get
/// one from a `JoinHandle`, an `Addr` or [`current`](crate::current).
pub struct ActorRef<P: Platform> {
    pub(crate) life: LifeRef,
    pub(crate) _p: PhantomData<fn() -> P>,
}

impl<P: Platform> Clone for ActorRef<P> {
    fn clone(&self) -> Self {
        ActorRef {
            life: self.life.clone(),
            _p: PhantomData,
        }
    }
}

impl<P: Platform> fmt::Debug for ActorRef<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActorRef").field("id", &self.life.id).finish()
    }
}

impl<P: Platform> ActorRef<P> {
    pub(crate) fn new(life: &LifeRef) -> Self {
        ActorRef {
            life: life.clone(),
            _p: PhantomData,
        }
    }

    /// The actor's id.
    pub fn id(&self) -> u64 {
        self.life.id
    }

    /// The actor's name, if it was spawned with one.
    pub fn name(&self) -> Option<&str> {
        self.life.name.as_deref()
    }

    /// Whether the actor has ended.
    pub fn has_exited(&self) -> bool {
        self.life.hooks.is_closed()
    }

    /// Kills the actor: it unwinds at its next resume point and ends with
    /// [`ExitReason::Killed`](crate::ExitReason::Killed) (its joiner sees `JoinError::Killed`). Killing
    /// an actor that has ended does nothing.
    pub fn kill(&self) {
        if !self.has_exited() {
            self.life.kill();
        }
    }

    /// Runs `hook` once when the actor ends (at once if it has ended). On an
    /// actor dropped without ending (abandoned at shutdown) it never runs.
    pub(crate) fn on_exit(&self, hook: Hook) {
        self.life.hooks.add(hook);
    }
}
