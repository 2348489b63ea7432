//! [`ActorBuilder`]: one spawn with options (a name, a stack size), like
//! `std::thread::Builder`. Its spawns onto a `Runtime` from any thread
//! (`spawn_on`, `spawn_actor_on`) are in the runtime's layer (`rt`).

use alloc::sync::Arc;
use core::marker::PhantomData;

use super::join::JoinHandle;
use super::Reserved;
use super::{spawn_actor_with, spawn_with, Origin};
use crate::msg::mailbox::{Addr, Mailbox};
use crate::seam::error::{SpawnError, MAX_STACK_SIZE, MIN_STACK_SIZE};
use crate::seam::platform::Platform;

/// Options for one spawn: a name and a stack size, then one of the
/// `spawn` methods (inside an actor: started as by the free `spawn`; from
/// any thread: [`spawn_on`](Self::spawn_on) a runtime).
///
/// A stack size other than the runtime's
/// ([`Builder::stack_size`](crate::Builder::stack_size), 128 KiB by default)
/// is mapped for that actor alone and unmapped when it exits (the runtime's
/// stack pool keeps only its own size), so a spawn with its own size costs
/// a mapping (on Linux with guard regions, a slot of a shared slab: no new
/// memory map). Small stacks suit dense workloads: what a parked actor
/// touches is measured in `docs/density.md`.
///
/// ```ignore
/// // With a port crate (`smarm_linux`, `smarm_darwin`) as `smarm`:
/// use smarm::{ActorBuilder, Runtime, SpawnError};
///
/// let rt = Runtime::new().unwrap();
/// let sum = rt.block_on(|| {
///     let h = ActorBuilder::new()
///         .name("small")
///         .stack_size(32 * 1024)
///         .spawn(|| (1..=10u32).sum::<u32>())
///         .unwrap();
///     h.join().unwrap()
/// });
/// assert_eq!(sum, 55);
/// // Out of bounds: an error, not a panic.
/// let err = ActorBuilder::new().stack_size(100).spawn_on(&rt, || ()).unwrap_err();
/// assert!(matches!(err, SpawnError::StackSize { requested: 100, .. }));
/// ```
pub struct ActorBuilder<P: Platform> {
    pub(crate) name: Option<Arc<str>>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) capacity: Option<usize>,
    _p: PhantomData<fn() -> P>,
}

impl<P: Platform> Default for ActorBuilder<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Platform> core::fmt::Debug for ActorBuilder<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ActorBuilder")
            .field("name", &self.name)
            .field("stack_size", &self.stack_size)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl<P: Platform> ActorBuilder<P> {
    /// No name, the runtime's stack size.
    pub fn new() -> Self {
        ActorBuilder {
            name: None,
            stack_size: None,
            capacity: None,
            _p: PhantomData,
        }
    }

    /// The actor's name (in join errors, `Down` notices, reports, dumps).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(Arc::from(name));
        self
    }

    /// Usable bytes of the actor's stack, rounded up to whole pages; from
    /// [`MIN_STACK_SIZE`] to [`MAX_STACK_SIZE`] (else the spawn returns
    /// [`SpawnError::StackSize`]). An overflow is reported, naming the
    /// actor, as for any stack.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// A bounded mailbox of `messages` slots for the actors that
    /// [`spawn_actor`](Self::spawn_actor) makes (unbounded by default): a
    /// send to a full mailbox waits (an actor parks, a thread blocks) until
    /// the actor takes a message; `Addr::try_send` and
    /// `Addr::send_timeout` do not wait, or wait at most so long. 0 is an
    /// error ([`SpawnError::MailboxCapacity`]).
    ///
    /// ```ignore
    /// let (addr, h) = ActorBuilder::new().capacity(64).spawn_actor(|mut mb: Mailbox<u64>| {
    ///     let mut n = 0;
    ///     while mb.recv().is_ok() {
    ///         n += 1;
    ///     }
    ///     n
    /// })?;
    /// assert_eq!(addr.capacity(), Some(64));
    /// ```
    pub fn capacity(mut self, messages: usize) -> Self {
        self.capacity = Some(messages);
        self
    }

    /// The mailbox capacity, checked (at least 1).
    pub(crate) fn checked_capacity(&self) -> Result<Option<usize>, SpawnError> {
        match self.capacity {
            Some(0) => Err(SpawnError::MailboxCapacity),
            c => Ok(c),
        }
    }

    /// The stack size, checked against the bounds.
    pub(crate) fn checked_stack(&self) -> Result<Option<usize>, SpawnError> {
        match self.stack_size {
            Some(b) if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&b) => Err(SpawnError::StackSize {
                requested: b,
                minimum: MIN_STACK_SIZE,
                maximum: MAX_STACK_SIZE,
            }),
            s => Ok(s),
        }
    }

    /// Spawns from inside an actor, started as by the free
    /// [`spawn`](crate::spawn::spawn): work-first, or help-first when the
    /// caller's worker has nothing else to run.
    /// [`SpawnError::NoRuntime`] on a plain thread (use
    /// [`spawn_on`](Self::spawn_on)).
    pub fn spawn<F, T>(self, f: F) -> Result<JoinHandle<T, P>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let stack = self.checked_stack()?;
        spawn_with::<P, F, T>(Origin::Here, self.name, stack, |_| f)
    }

    /// Reserves an actor (inside an actor, on its runtime): its address now,
    /// the actor itself when [`Reserved::spawn`] gives it a body, with this
    /// builder's name, stack size and mailbox capacity. From any thread:
    /// [`reserve_on`](Self::reserve_on). [`SpawnError::NoRuntime`] on a
    /// plain thread.
    #[allow(clippy::type_complexity)]
    pub fn reserve<M: Send + 'static>(self) -> Result<(Addr<M, P>, Reserved<M, P>), SpawnError> {
        let stack = self.checked_stack()?;
        let cap = self.checked_capacity()?;
        if crate::sched::current_actor::<P>().is_none() {
            return Err(SpawnError::NoRuntime);
        }
        let c = crate::sched::ctx::<P>();
        // SAFETY: a running actor's worker context is live (ours, this
        // thread's) and its `core` outlives the actors it runs; no other
        // reference to it is live here.
        Ok(unsafe { super::reserve::reserve_in(&*(*c).core, c, self.name, stack, cap) })
    }

    /// [`spawn`](Self::spawn) of an actor with a mailbox: `f` receives the
    /// mailbox; the caller gets its address and a join handle.
    #[allow(clippy::type_complexity)]
    pub fn spawn_actor<M, F, T>(self, f: F) -> Result<(Addr<M, P>, JoinHandle<T, P>), SpawnError>
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
        T: Send + 'static,
    {
        let stack = self.checked_stack()?;
        let cap = self.checked_capacity()?;
        spawn_actor_with::<P, M, F, T>(Origin::Here, self.name, stack, cap, f)
    }
}
