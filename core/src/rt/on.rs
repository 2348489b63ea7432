//! What a runtime offers plain threads beyond `Runtime`'s own methods:
//! registered names, and the spawns of [`ActorBuilder`](crate::ActorBuilder)
//! and [`Reserved`](crate::Reserved) onto a runtime from any thread (here,
//! in the runtime's layer, since they name the runtime).

use alloc::sync::Arc;
use alloc::vec::Vec;

use super::runtime::Runtime;
use crate::msg::mailbox::{Addr, Mailbox};
use crate::sched::queue::RunQueue;
use crate::seam::error::SpawnError;
use crate::seam::platform::Platform;
use crate::spawn::join::JoinHandle;
use crate::spawn::Origin;

/// Registered names, from any thread ([`crate::names`]: Erlang's `register`).
impl<P: Platform, Q: RunQueue<P>> Runtime<P, Q> {
    /// Binds `name` to `addr`'s actor until it exits or is unregistered
    /// (as the free `register`, from any thread).
    pub fn register<M: Send + 'static>(
        &self,
        name: &str,
        addr: &Addr<M, P>,
    ) -> Result<(), crate::RegisterError> {
        crate::supervise::names::register_in(&self.shared.core.names, name, addr)
    }

    /// The address registered as `name`, if a live actor holds it with
    /// message type `M`.
    pub fn whereis<M: Send + 'static>(&self, name: &str) -> Option<Addr<M, P>> {
        crate::supervise::names::whereis_in(&self.shared.core.names, name)
    }

    /// Unbinds `name`; whether a live actor held it.
    pub fn unregister(&self, name: &str) -> bool {
        self.shared.core.names.remove(name)
    }

    /// Every registered name, sorted.
    pub fn registered(&self) -> Vec<Arc<str>> {
        self.shared.core.names.names()
    }
}

/// [`Reserved`](crate::spawn::Reserved)'s spawn from any thread (here, in
/// the runtime's layer, since it names the runtime).
impl<M: Send + 'static, P: Platform> crate::spawn::Reserved<M, P> {
    /// Spawns the reserved actor on `rt` from any thread (queued, as
    /// [`Runtime::try_spawn`]); [`SpawnError::ForeignRuntime`] if it was
    /// reserved on another runtime.
    pub fn spawn_on<Q, F, T>(self, rt: &Runtime<P, Q>, f: F) -> Result<JoinHandle<T, P>, SpawnError>
    where
        Q: RunQueue<P>,
        F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
        T: Send + 'static,
    {
        let push = |a| rt.shared.push_outside(a);
        self.spawn_from(Origin::Outside(&rt.shared.core, &push), f)
    }
}

/// [`ActorBuilder`](crate::ActorBuilder)'s spawns from any thread (here, in
/// the runtime's layer, since they name the runtime).
impl<P: Platform> crate::spawn::ActorBuilder<P> {
    /// Spawns on `rt` from any thread (queued, as
    /// [`Runtime::try_spawn`]).
    pub fn spawn_on<Q, F, T>(self, rt: &Runtime<P, Q>, f: F) -> Result<JoinHandle<T, P>, SpawnError>
    where
        Q: RunQueue<P>,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let stack = self.checked_stack()?;
        rt.spawn_with_id(self.name, stack, |_| f)
    }

    /// [`reserve`](Self::reserve) from any thread, on `rt`.
    #[allow(clippy::type_complexity)]
    pub fn reserve_on<Q, M>(
        self,
        rt: &Runtime<P, Q>,
    ) -> Result<(Addr<M, P>, crate::spawn::Reserved<M, P>), SpawnError>
    where
        Q: RunQueue<P>,
        M: Send + 'static,
    {
        let stack = self.checked_stack()?;
        let cap = self.checked_capacity()?;
        // SAFETY: a null worker context: the shared id counter.
        Ok(
            unsafe {
                crate::spawn::reserve_in(&rt.shared.core, core::ptr::null_mut(), self.name, stack, cap)
            },
        )
    }

    /// [`spawn_on`](Self::spawn_on) of an actor with a mailbox.
    #[allow(clippy::type_complexity)]
    pub fn spawn_actor_on<Q, M, F, T>(
        self,
        rt: &Runtime<P, Q>,
        f: F,
    ) -> Result<(Addr<M, P>, JoinHandle<T, P>), SpawnError>
    where
        Q: RunQueue<P>,
        M: Send + 'static,
        F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
        T: Send + 'static,
    {
        let stack = self.checked_stack()?;
        let cap = self.checked_capacity()?;
        rt.spawn_actor_inner(self.name, stack, cap, f)
    }
}
