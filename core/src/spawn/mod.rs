//! Layer 6, spawning: the one path every spawn takes, the entry harness
//! and join handles ([`join`]), the join slot and body in one allocation
//! ([`slot`]).
//!
//! Every spawn entry point (the free `spawn` family inside an actor, the
//! [`Runtime`](crate::Runtime) methods from any thread, each port's
//! `port_api!` exports) ends in [`spawn_with`]: reserve a stack and an id,
//! build the body (a mailbox is bound to the child's `Life` here), wrap it
//! in the entry harness, make the control block, then start it on the
//! caller's worker ([`Origin::Here`]: work-first, or help-first when that
//! worker has nothing else to run; `sched::start_here`) or through the
//! runtime's run queue ([`Origin::Outside`]).

mod builder;
pub(crate) mod join;
mod reserve;
pub(crate) mod slot;
pub(crate) use reserve::reserve_in;

pub use builder::ActorBuilder;
pub use reserve::Reserved;

use alloc::sync::Arc;

use crate::actor::{ActorArc, LifeRef};
use crate::msg::mailbox::{self, Addr, Mailbox};
use crate::sched::{self, RtCore};
use crate::seam::error::SpawnError;
use crate::seam::platform::Platform;
use join::{make_entry, JoinHandle};

/// Where a new actor starts.
pub(crate) enum Origin<'a, P: Platform> {
    /// Inside an actor: on the caller's worker, work-first (the caller
    /// waits in the run-next slot) or, with nothing else to run there,
    /// help-first (the child waits in the slot).
    Here,
    /// From any thread: queued on `core`'s runtime by `push` (which counts
    /// and wakes a worker).
    Outside(&'a RtCore<P>, &'a dyn Fn(ActorArc)),
}

/// Who a new actor is.
pub(crate) enum Identity {
    /// A new id, with this name.
    New(Option<Arc<str>>),
    /// A reserved actor's `Life` (already shared through its addresses),
    /// reserved on the runtime whose core is at this address.
    Reserved(LifeRef, usize),
}

/// The one spawn path: a child named `name` whose body `build` makes from
/// the child's [`Life`](crate::actor::life::Life) (its id and name, for a mailbox bound to it).
pub(crate) fn spawn_with<P, F, T>(
    origin: Origin<'_, P>,
    name: Option<Arc<str>>,
    stack: Option<usize>,
    build: impl FnOnce(&LifeRef) -> F,
) -> Result<JoinHandle<T, P>, SpawnError>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_as(origin, Identity::New(name), stack, build)
}

/// [`spawn_with`] for any [`Identity`].
pub(crate) fn spawn_as<P, F, T>(
    origin: Origin<'_, P>,
    who: Identity,
    stack: Option<usize>,
    build: impl FnOnce(&LifeRef) -> F,
) -> Result<JoinHandle<T, P>, SpawnError>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (core, c, me) = match origin {
        Origin::Here => {
            let Some((c, me)) = sched::current_with_ctx::<P>() else {
                return Err(SpawnError::NoRuntime);
            };
            // SAFETY: a running actor's worker context is live; its `core`
            // outlives the actors it runs.
            (unsafe { &*(*c).core }, c, me)
        }
        Origin::Outside(core, _) => (core, core::ptr::null_mut(), core::ptr::null()),
    };
    // `c` is null or this thread's live worker context of `core`'s runtime;
    // no reference to it is held across the switch below (after it we may
    // be on another worker).
    let (life, stack, shared) = match who {
        Identity::New(name) => {
            // SAFETY: `c` as above.
            let (life, stack) = unsafe { core.reserve(c, name, stack)? };
            (life, stack, false)
        }
        Identity::Reserved(life, rt) => {
            if rt != core::ptr::from_ref(core).addr() {
                return Err(SpawnError::ForeignRuntime);
            }
            // SAFETY: `c` as above.
            let stack = unsafe { core.take_stack(c, stack)? };
            // SAFETY: the actor is not made yet: nobody reads its stack.
            unsafe { life.set_stack(stack.usable_range()) };
            (life, stack, true)
        }
    };
    let body = build(&life);
    let (entry, handle) = make_entry::<P, F, T>(life.id, life.clone(), body);
    // SAFETY: as above, with the stack taken for `c`.
    let child = unsafe { core.new_actor(c, life, stack, entry, shared) };
    match origin {
        // SAFETY: with `Here`, `me` is the running actor (found above).
        Origin::Here => unsafe { sched::start_here::<P>(c, me, child) },
        Origin::Outside(_, push) => push(child),
    }
    Ok(handle)
}

/// [`spawn_with`] for an actor with a mailbox: `f` receives the mailbox;
/// the caller gets its address and a join handle. The mailbox closes when
/// `f` drops it (at the latest when the actor exits).
#[allow(clippy::type_complexity)]
pub(crate) fn spawn_actor_with<P, M, F, T>(
    origin: Origin<'_, P>,
    name: Option<Arc<str>>,
    stack: Option<usize>,
    cap: Option<usize>,
    f: F,
) -> Result<(Addr<M, P>, JoinHandle<T, P>), SpawnError>
where
    P: Platform,
    M: Send + 'static,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    let mut addr = None;
    let h = spawn_with::<P, _, T>(origin, name, stack, |life| mailbox::bind(life, cap, f, &mut addr))?;
    Ok((addr.expect("the body builder ran"), h))
}

/// Spawns an actor from inside an actor, on the caller's worker. With
/// other work waiting there the child runs at once (work-first) and the
/// caller continues when a worker picks it up again; with nothing else to
/// run the child waits in the worker's run-next slot and the caller goes
/// on (help-first: it runs when the caller switches out, and a join of it
/// switches into it). [`SpawnError::NoRuntime`] on a plain thread (use
/// `Runtime::spawn`).
pub fn try_spawn<P, F, T>(f: F) -> Result<JoinHandle<T, P>, SpawnError>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_with::<P, F, T>(Origin::Here, None, None, |_| f)
}

/// [`try_spawn`] with a name (in join errors, `Down` notices and reports).
pub fn try_spawn_named<P, F, T>(name: &str, f: F) -> Result<JoinHandle<T, P>, SpawnError>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_with::<P, F, T>(Origin::Here, Some(Arc::from(name)), None, |_| f)
}

/// Spawns an actor with a mailbox from inside an actor (started as by
/// [`try_spawn`]): `f` receives the mailbox; the caller gets its address
/// and a join handle. The mailbox closes when `f` drops it (at the latest
/// when the actor exits).
#[allow(clippy::type_complexity)]
pub fn try_spawn_actor<P, M, F, T>(f: F) -> Result<(Addr<M, P>, JoinHandle<T, P>), SpawnError>
where
    P: Platform,
    M: Send + 'static,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_actor_with::<P, M, F, T>(Origin::Here, None, None, None, f)
}

/// [`try_spawn_actor`] with a name.
#[allow(clippy::type_complexity)]
pub fn try_spawn_actor_named<P, M, F, T>(
    name: &str,
    f: F,
) -> Result<(Addr<M, P>, JoinHandle<T, P>), SpawnError>
where
    P: Platform,
    M: Send + 'static,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_actor_with::<P, M, F, T>(Origin::Here, Some(Arc::from(name)), None, None, f)
}

/// Spawns an actor from inside an actor, started as by [`try_spawn`]:
/// work-first (the child runs at once), or help-first when the caller's
/// worker has nothing else to run (the child runs when the caller switches
/// out; joining it switches into it).
///
/// # Panics
///
/// Outside an actor (use `Runtime::spawn` there), or when no stack can be
/// mapped ([`try_spawn`] returns these as errors instead).
pub fn spawn<P, F, T>(f: F) -> JoinHandle<T, P>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match try_spawn::<P, F, T>(f) {
        Ok(h) => h,
        Err(e) => panic!("{e}"),
    }
}

/// Spawns an actor with a mailbox from inside an actor (started as by
/// [`spawn`]): `f` receives the mailbox; the caller gets its address and a
/// join handle.
///
/// # Panics
///
/// As [`spawn`]; [`try_spawn_actor`] returns the errors instead.
#[allow(clippy::type_complexity)]
pub fn spawn_actor<P, M, F, T>(f: F) -> (Addr<M, P>, JoinHandle<T, P>)
where
    P: Platform,
    M: Send + 'static,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    match try_spawn_actor::<P, M, F, T>(f) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

/// [`spawn`] with a name (shown in join errors, `Down` notices, reports).
pub fn spawn_named<P, F, T>(name: &str, f: F) -> JoinHandle<T, P>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match try_spawn_named::<P, F, T>(name, f) {
        Ok(h) => h,
        Err(e) => panic!("{e}"),
    }
}

/// [`spawn_actor`] with a name.
#[allow(clippy::type_complexity)]
pub fn spawn_actor_named<P, M, F, T>(name: &str, f: F) -> (Addr<M, P>, JoinHandle<T, P>)
where
    P: Platform,
    M: Send + 'static,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    match try_spawn_actor_named::<P, M, F, T>(name, f) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}
