//! [`Reserved`]: an actor's address before the actor exists. Two actors
//! that need each other's `Addr` reserve one, hand its address to the
//! other, then spawn it; no `Hello(Addr)` handshake.
//!
//! What a reservation holds and how it ends: [`Reserved`].

use alloc::sync::Arc;
use core::fmt;

use super::join::JoinHandle;
use super::{spawn_as, Identity, Origin};
use crate::actor::exit::ExitReason;
use crate::actor::life::{ActorRef, Life};
use crate::actor::LifeRef;
use crate::msg::mailbox::{self, Addr, Mailbox};
use crate::sched::RtCore;
use crate::seam::error::SpawnError;
use crate::seam::platform::Platform;

/// An actor reserved but not yet spawned: its identity and mailbox, so that
/// two actors that need each other's `Addr` reserve one, hand its address
/// to the other, then spawn it (no `Hello(Addr)` handshake).
///
/// A reservation is an actor's identity (its id, name, exit hooks: an
/// `ActorRef` can monitor or link it already) and its mailbox (sends
/// queue), without a stack or a body. [`Reserved::spawn`] gives it both;
/// a reservation dropped unspawned ends its identity with
/// [`ExitReason::Cancelled`] and closes its mailbox (sends fail, queued
/// messages are dropped), as if the actor had been cancelled before it
/// ran. A kill that reaches a reserved actor before it is spawned takes
/// effect when it starts: it ends `Killed` without running its body.
///
/// Made by
/// [`ActorBuilder::reserve`](crate::ActorBuilder::reserve) (inside an
/// actor) or [`ActorBuilder::reserve_on`](crate::ActorBuilder::reserve_on)
/// (any thread), with the builder's name, stack size and mailbox capacity.
///
/// ```ignore
/// // With a port crate (`smarm_linux`, `smarm_darwin`) as `smarm`.
/// // Ping and pong each need the other's address from the start:
/// let (pong_addr, pong) = ActorBuilder::new().name("pong").reserve::<u32>()?;
/// let (ping_addr, ping) = smarm::spawn_actor(move |mut mb: Mailbox<u32>| {
///     pong_addr.send(3).unwrap();
///     mb.recv().unwrap() // pong's answer
/// });
/// let pong = pong.spawn(move |mut mb: Mailbox<u32>| {
///     let n = mb.recv().unwrap();
///     ping_addr.send(n + 1).unwrap();
/// })?;
/// assert_eq!(ping.join().unwrap(), 4);
/// ```
pub struct Reserved<M, P: Platform> {
    life: LifeRef,
    /// `None` once spawned.
    mb: Option<Mailbox<M, P>>,
    stack: Option<usize>,
    /// The runtime it belongs to (its core's address).
    rt: usize,
}

impl<M, P: Platform> fmt::Debug for Reserved<M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reserved")
            .field("id", &self.life.id)
            .field("name", &self.life.name)
            .finish_non_exhaustive()
    }
}

/// Reserves an actor on `core`'s runtime from worker context `c` (null:
/// any other thread).
///
/// # Safety
///
/// `c` is null or the calling thread's live worker context of `core`'s
/// runtime, with no other reference to it live.
#[allow(clippy::type_complexity)]
pub(crate) unsafe fn reserve_in<M: Send + 'static, P: Platform>(
    core: &RtCore<P>,
    c: *mut crate::sched::WorkerCtx<P>,
    name: Option<Arc<str>>,
    stack: Option<usize>,
    cap: Option<usize>,
) -> (Addr<M, P>, Reserved<M, P>) {
    // SAFETY: forwarded contract.
    let id = unsafe { core.new_id(c) };
    let life = Life::new_block(
        id,
        name,
        (0, 0),
        core.mailbox_depths,
        crate::sched::block_alloc::<P>,
        crate::sched::block_free::<P>,
    );
    let (mb, addr) = mailbox::owned::<M, P>(&life, cap);
    let r = Reserved {
        life,
        mb: Some(mb),
        stack,
        rt: core::ptr::from_ref(core).addr(),
    };
    (addr, r)
}

impl<M: Send + 'static, P: Platform> Reserved<M, P> {
    /// The reserved actor's id (its `JoinHandle`'s once spawned).
    pub fn id(&self) -> u64 {
        self.life.id
    }

    /// Another address of its mailbox.
    pub fn addr(&self) -> Addr<M, P> {
        self.mb.as_ref().expect("not spawned yet").addr()
    }

    /// A reference to the actor (monitor, link or kill it, before or after
    /// it is spawned).
    pub fn actor_ref(&self) -> ActorRef<P> {
        ActorRef::new(&self.life)
    }

    /// Spawns the reserved actor from inside an actor of the same runtime
    /// (started as by the free `spawn_actor`): `f` gets its mailbox, with
    /// whatever was sent to it meanwhile. [`SpawnError::NoRuntime`] on a
    /// plain thread (use [`spawn_on`](Self::spawn_on)),
    /// [`SpawnError::ForeignRuntime`] inside another runtime's actor. If
    /// the spawn fails, the reservation ends (see the module docs).
    pub fn spawn<F, T>(self, f: F) -> Result<JoinHandle<T, P>, SpawnError>
    where
        F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_from(Origin::Here, f)
    }

    /// The spawn every origin takes.
    pub(crate) fn spawn_from<F, T>(
        mut self,
        origin: Origin<'_, P>,
        f: F,
    ) -> Result<JoinHandle<T, P>, SpawnError>
    where
        F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
        T: Send + 'static,
    {
        let mb = self.mb.take().expect("spawned once");
        let who = Identity::Reserved(self.life.clone(), self.rt);
        let r = spawn_as::<P, _, T>(origin, who, self.stack, |_| move || f(mb));
        if r.is_ok() {
            // Spawned: the actor's exit ends the identity, not our drop.
            self.rt = 0;
        }
        r
    }
}

impl<M, P: Platform> Drop for Reserved<M, P> {
    fn drop(&mut self) {
        if self.rt == 0 {
            return; // spawned
        }
        // Never spawned (or the spawn failed): the mailbox closes first,
        // so a monitor that hears of the end finds sends failing, as for
        // any actor.
        drop(self.mb.take());
        self.life.end(ExitReason::Cancelled);
    }
}
