//! The runtime handle and its builder.
//!
//! # Shutdown
//!
//! Dropping a [`Runtime`] (or calling [`Runtime::shutdown`]):
//! 1. sets the shutdown flag and wakes every worker;
//! 2. workers keep running: each actor they resume from now on is cancelled
//!    at its resume point — it unwinds (destructors run) with a `Cancelled`
//!    payload that its joiner sees as [`JoinError::Cancelled`](crate::JoinError::Cancelled); waits made
//!    while it unwinds (in destructors) give up at once where the call can
//!    report it (a disconnect, a timeout, `Cancelled`), and run off the
//!    scheduler where it cannot (see `sched`'s "Unwinding": shutdown then
//!    waits for them as for blocking calls);
//! 3. pending timers fire at once (sleepers resume and are cancelled); when
//!    every worker is idle with nothing runnable, the actors left parked
//!    (on a mailbox, a channel, a join) are woken from the registry and
//!    cancelled the same way; a worker exits when no actor is left (or
//!    after a few such sweeps, when an actor keeps swallowing its
//!    cancellation and parking again);
//! 4. the dropping thread joins the workers and drops whatever is left; a
//!    leftover actor's stack is unmapped without unwinding its frames (what
//!    they own leaks; the stack does not).
//!
//! An actor that never reaches a resume point (a loop without `yield_now`)
//! holds its worker and so delays shutdown until it does. Dropping the
//! runtime from one of its own actors does not wait for the workers.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crate::actor::Schedule;
use crate::msg::mailbox::{Addr, Mailbox};
use crate::sched::counters::CounterSnapshot;
use crate::sched::queue::{AutoQueue, RunQueue};
use crate::sched::{
    run_monitor, take_slot, worker_thread, LongHoldHook, RtCore, SchedConfig, Shared, WorkerCtx,
};
use crate::seam::error::{
    BuildError, SpawnError, MAX_QUEUE_CAPACITY, MAX_STACK_SIZE, MAX_WORKERS, MIN_STACK_SIZE,
};
use crate::seam::platform::Platform;
use crate::spawn::join::JoinHandle;
use crate::spawn::{spawn_actor_with, spawn_with, Origin};
use crate::sync::Ordering;
use core::time::Duration;

/// Default usable stack per actor (untouched pages cost no memory).
pub const DEFAULT_STACK_SIZE: usize = 128 * 1024;

/// Default run-queue capacity before the ring spills to its overflow.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;

/// Default timeslice: how long an actor runs before its next safe point
/// yields to others.
pub const DEFAULT_TIMESLICE: Duration = Duration::from_micros(100);

/// Configures and starts a [`Runtime`].
pub struct Builder<P: Platform, Q: RunQueue<P> = AutoQueue<P>> {
    workers: Option<usize>,
    stack_size: usize,
    queue_capacity: usize,
    thread_name: String,
    timeslice: Option<Duration>,
    long_hold: Option<(Duration, Option<crate::sched::LongHoldHook>)>,
    allow_panic_abort: bool,
    mailbox_depths: bool,
    _p: PhantomData<fn() -> (P, Q)>,
}

impl<P: Platform, Q: RunQueue<P>> Default for Builder<P, Q> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Platform, Q: RunQueue<P>> Builder<P, Q> {
    /// Defaults: one worker per CPU, [`DEFAULT_STACK_SIZE`], threads named
    /// `smarm-worker-N`.
    pub fn new() -> Self {
        Builder {
            workers: None,
            stack_size: DEFAULT_STACK_SIZE,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            thread_name: String::from("smarm-worker"),
            timeslice: Some(DEFAULT_TIMESLICE),
            long_hold: None,
            allow_panic_abort: false,
            mailbox_depths: false,
            _p: PhantomData,
        }
    }

    /// Number of worker threads (1 to [`MAX_WORKERS`];
    /// default: the CPU count, capped there).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// Usable bytes of each actor's stack, rounded up to whole pages
    /// (between [`MIN_STACK_SIZE`] and [`MAX_STACK_SIZE`]). Each stack also
    /// has a guard page that turns an overflow into a fault.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Ring slots of the run queue before it spills (2 to
    /// [`MAX_QUEUE_CAPACITY`]; rounded up to a
    /// power of two).
    pub fn queue_capacity(mut self, n: usize) -> Self {
        self.queue_capacity = n;
        self
    }

    /// Prefix of the worker threads' names (`PREFIX-0`, `PREFIX-1`, ...;
    /// no NUL bytes).
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = prefix.into();
        self
    }

    /// How long an actor runs before a safe point (a send, a receive, a
    /// spawn, [`checkpoint`](crate::checkpoint)) makes it yield; `None`
    /// turns timeslices off (an actor then yields only when it waits or
    /// calls `yield_now`). Default [`DEFAULT_TIMESLICE`]. An actor woken by
    /// the running one inherits the rest of its slice, so a ping-pong pair
    /// shares one slice with everyone else's.
    pub fn timeslice(mut self, slice: Option<Duration>) -> Self {
        self.timeslice = slice;
        self
    }

    /// Starts a monitor thread that reports any actor holding its worker
    /// for longer than `bound` without reaching a safe point (a loop with
    /// no send, receive or [`checkpoint`](crate::checkpoint), or a blocking
    /// syscall outside [`blocking`](crate::blocking)): it counts each in
    /// the `long_holds` counter and calls `hook` (if any) with the actor
    /// and how long so far, then once more from the worker when the hold
    /// ends. The hook runs on the monitor or worker thread: keep it short.
    pub fn long_hold(mut self, bound: Duration, hook: Option<LongHoldHook>) -> Self {
        self.long_hold = Some((bound, hook));
        self
    }

    /// Builds even if the binary aborts on panic (`panic = "abort"`),
    /// where `build` fails with [`BuildError::PanicAbort`]: then a panic in
    /// an actor, a kill (links, supervisors) and the cancellation of an
    /// actor still alive at shutdown each end the process (saying so).
    pub fn allow_panic_abort(mut self, allow: bool) -> Self {
        self.allow_panic_abort = allow;
        self
    }

    /// Counts every mailbox's messages so that [`Runtime::dump`] shows
    /// each actor's mailbox depth ([`ActorInfo::mailbox_depth`]; with the
    /// `counters` feature, which is on by default). Off by default: the
    /// count is an atomic add per send on a word all of a mailbox's
    /// senders share (exact whatever their number), which made msg_pairs
    /// on one worker 1.06-1.10x slower. Without it `mailbox_depth` is
    /// `None`.
    ///
    /// [`ActorInfo::mailbox_depth`]: crate::rt::dump::ActorInfo::mailbox_depth
    pub fn mailbox_depths(mut self, on: bool) -> Self {
        self.mailbox_depths = on;
        self
    }

    /// Checks the configuration and starts the workers.
    pub fn build(self) -> Result<Runtime<P, Q>, BuildError> {
        crate::seam::error::check_panic_strategy(P::PANIC_UNWINDS, self.allow_panic_abort)?;
        let workers = self.workers.unwrap_or_else(|| P::cpu_count().min(MAX_WORKERS));
        if workers == 0 {
            return Err(BuildError::ZeroWorkers);
        }
        if workers > MAX_WORKERS {
            return Err(BuildError::TooManyWorkers {
                requested: workers,
                maximum: MAX_WORKERS,
            });
        }
        if self.thread_name.contains('\0') {
            return Err(BuildError::ThreadName);
        }
        if self.stack_size < MIN_STACK_SIZE {
            return Err(BuildError::StackTooSmall {
                requested: self.stack_size,
                minimum: MIN_STACK_SIZE,
            });
        }
        if self.stack_size > MAX_STACK_SIZE {
            return Err(BuildError::StackTooLarge {
                requested: self.stack_size,
                maximum: MAX_STACK_SIZE,
            });
        }
        // Before any worker runs an actor: a panic in one names it.
        P::install_panic_hook(crate::sched::describe_panic::<P>);
        if self.queue_capacity < 2 {
            return Err(BuildError::QueueTooSmall {
                requested: self.queue_capacity,
            });
        }
        if self.queue_capacity > MAX_QUEUE_CAPACITY {
            return Err(BuildError::QueueTooLarge {
                requested: self.queue_capacity,
                maximum: MAX_QUEUE_CAPACITY,
            });
        }
        if self.timeslice == Some(Duration::ZERO) {
            return Err(BuildError::ZeroTimeslice);
        }
        if matches!(self.long_hold, Some((d, _)) if d.is_zero()) {
            return Err(BuildError::ZeroLongHold);
        }
        let page = P::page_size().max(16);
        let stack_size = self.stack_size.div_ceil(page) * page;
        let shared = Arc::new(Shared::<P, Q> {
            core: RtCore::new(SchedConfig {
                workers,
                stack_size,
                timeslice: self.timeslice,
                hold: self.long_hold,
                mailbox_depths: self.mailbox_depths,
            }),
            queue: Q::with_capacity(self.queue_capacity, workers),
        });
        let sched: NonNull<dyn Schedule> = NonNull::from(&*shared as &dyn Schedule);
        // SAFETY: nothing else sees `shared` yet (no worker, no actor).
        unsafe { *shared.core.sched.0.get() = Some(sched) };
        let mut rt = Runtime {
            shared,
            threads: Vec::with_capacity(workers),
            monitor: None,
            stack_size,
        };
        for i in 0..workers {
            let s = rt.shared.clone();
            let name = format!("{}-{}", self.thread_name, i);
            match P::spawn_thread(name, alloc::boxed::Box::new(move || worker_thread(&s, i, false))) {
                Ok(t) => rt.threads.push(t),
                // `rt` drops here: the started workers are shut down.
                Err(e) => return Err(BuildError::Thread(e)),
            }
        }
        if rt.shared.core.hold_ns != 0 {
            let s = rt.shared.clone();
            let name = format!("{}-monitor", self.thread_name);
            match P::spawn_thread(name, alloc::boxed::Box::new(move || run_monitor(&s))) {
                Ok(t) => rt.monitor = Some(t),
                Err(e) => return Err(BuildError::Thread(e)),
            }
        }
        Ok(rt)
    }
}

/// Per-worker counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountersReport {
    /// One entry per worker, by index.
    pub workers: Vec<CounterSnapshot>,
    /// What plain OS threads (outside the workers) counted.
    pub outside: CounterSnapshot,
}

impl CountersReport {
    /// The sum over workers and outside threads.
    pub fn total(&self) -> CounterSnapshot {
        let mut t = self.outside;
        for w in &self.workers {
            t += *w;
        }
        t
    }
}

/// What [`Runtime::shutdown`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Actors still alive when the workers stopped (parked with nobody to
    /// wake them); their stacks were unmapped without unwinding.
    pub abandoned: usize,
}

/// A running set of worker threads and the actors on them.
///
/// Generic over the platform `P` (ports alias it so users never write it)
/// and the run-queue variant `Q`.
pub struct Runtime<P: Platform, Q: RunQueue<P> = AutoQueue<P>> {
    pub(super) shared: Arc<Shared<P, Q>>,
    threads: Vec<P::Thread>,
    monitor: Option<P::Thread>,
    stack_size: usize,
}

impl<P: Platform, Q: RunQueue<P>> Runtime<P, Q> {
    /// A builder with the defaults.
    pub fn builder() -> Builder<P, Q> {
        Builder::new()
    }

    /// A runtime with the defaults (one worker per CPU).
    pub fn new() -> Result<Self, BuildError> {
        Builder::new().build()
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.shared.core.workers.len()
    }

    /// Usable bytes per actor stack (after rounding to pages).
    pub fn stack_size(&self) -> usize {
        self.stack_size
    }

    /// The run-queue variant's name.
    pub fn queue_name(&self) -> &'static str {
        Q::NAME
    }

    /// Spawns an actor from any thread. Inside an actor, the free
    /// `spawn` starts the child on the caller's worker (work-first, or
    /// help-first when that worker has nothing else to run); this one
    /// queues it.
    pub fn try_spawn<F, T>(&self, f: F) -> Result<JoinHandle<T, P>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_with_id(None, None, |_| f)
    }

    /// [`spawn`](Self::spawn) with a name (shown in join errors, `Down`
    /// notices and reports).
    pub fn spawn_named<F, T>(&self, name: &str, f: F) -> JoinHandle<T, P>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        match self.spawn_with_id(Some(Arc::from(name)), None, |_| f) {
            Ok(h) => h,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`spawn_actor`](Self::spawn_actor) with a name.
    pub fn spawn_actor_named<M, F, T>(&self, name: &str, f: F) -> (Addr<M, P>, JoinHandle<T, P>)
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
        T: Send + 'static,
    {
        match self.spawn_actor_inner(Some(Arc::from(name)), None, None, f) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Spawns an actor with a mailbox from any thread: `f` receives the
    /// mailbox; the caller gets its address and a join handle.
    #[allow(clippy::type_complexity)]
    pub fn try_spawn_actor<M, F, T>(&self, f: F) -> Result<(Addr<M, P>, JoinHandle<T, P>), SpawnError>
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_actor_inner(None, None, None, f)
    }

    /// Spawns an actor with a mailbox on this runtime, named, with a stack
    /// size and a bounded mailbox if given (every `spawn_actor*` method, and
    /// [`ActorBuilder::spawn_actor_on`](crate::ActorBuilder::spawn_actor_on)).
    #[allow(clippy::type_complexity)]
    pub(crate) fn spawn_actor_inner<M, F, T>(
        &self,
        name: Option<Arc<str>>,
        stack: Option<usize>,
        cap: Option<usize>,
        f: F,
    ) -> Result<(Addr<M, P>, JoinHandle<T, P>), SpawnError>
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
        T: Send + 'static,
    {
        let push = |a| self.shared.push_outside(a);
        spawn_actor_with(Origin::Outside(&self.shared.core, &push), name, stack, cap, f)
    }

    /// [`try_spawn_actor`](Self::try_spawn_actor), panicking with the
    /// error's message if no stack can be mapped.
    pub fn spawn_actor<M, F, T>(&self, f: F) -> (Addr<M, P>, JoinHandle<T, P>)
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
        T: Send + 'static,
    {
        match self.try_spawn_actor(f) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Spawns on this runtime, named and with a stack size if given (every
    /// `spawn*` method, and
    /// [`ActorBuilder::spawn_on`](crate::ActorBuilder::spawn_on)).
    pub(crate) fn spawn_with_id<F, T>(
        &self,
        name: Option<Arc<str>>,
        stack: Option<usize>,
        build: impl FnOnce(&crate::actor::LifeRef) -> F,
    ) -> Result<JoinHandle<T, P>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let push = |a| self.shared.push_outside(a);
        spawn_with(Origin::Outside(&self.shared.core, &push), name, stack, build)
    }

    /// [`try_spawn`](Self::try_spawn), panicking with the error's message
    /// if no stack can be mapped.
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T, P>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        match self.try_spawn(f) {
            Ok(h) => h,
            Err(e) => panic!("{e}"),
        }
    }

    /// Per-worker counters now.
    pub fn counters(&self) -> CountersReport {
        CountersReport {
            workers: self
                .shared
                .core
                .workers
                .iter()
                .map(|w| w.counters.snapshot())
                .collect(),
            outside: self.shared.core.outside.snapshot(),
        }
    }

    /// A dump of every live actor (id, name, state, what it waits on,
    /// mailbox depth, worker) and the per-worker counters; print it with
    /// `{}`. Safe to call at any time from any thread (it locks each
    /// registry shard briefly; the actors keep running).
    pub fn dump(&self) -> crate::rt::dump::Dump {
        let core = &self.shared.core;
        // Relaxed: a snapshot for humans.
        let running: Vec<u64> = core
            .workers
            .iter()
            .map(|w| w.samples.running.load(Ordering::Relaxed))
            .collect();
        crate::rt::dump::Dump::collect(
            P::NAME,
            &core.registry,
            self.counters().workers,
            &running,
            P::stack_touched,
        )
    }

    /// Actors spawned and not yet exited.
    pub fn live_actors(&self) -> usize {
        self.shared.core.live()
    }

    /// Stops the runtime (see the module doc) and reports what was left.
    pub fn shutdown(mut self) -> ShutdownReport {
        self.stop()
    }

    fn stop(&mut self) -> ShutdownReport {
        let core = &self.shared.core;
        core.shutdown.store(true, Ordering::SeqCst);
        core.idle.notify_all();
        let c = P::current_worker().cast::<WorkerCtx<P>>();
        // SAFETY: a non-null current-worker pointer is this thread's live
        // worker context.
        let on_own_worker = !c.is_null() && unsafe { ptr::eq((*c).core, core) };
        if on_own_worker {
            // Joining would wait for ourselves: the workers finish on their
            // own and keep `shared` alive through their Arcs.
            self.threads.clear();
            core.monitor_word.store(1, Ordering::SeqCst);
            P::wake_all(&core.monitor_word);
            self.monitor = None;
            return ShutdownReport { abandoned: 0 };
        }
        // The monitor first (it samples; it does not keep anything alive).
        // SeqCst: pairs with the monitor's load.
        core.monitor_word.store(1, Ordering::SeqCst);
        P::wake_all(&core.monitor_word);
        if let Some(t) = self.monitor.take() {
            P::join_thread(t);
        }
        for t in self.threads.drain(..) {
            P::join_thread(t);
        }
        // Threads started by blocking-call handoffs; a thread joined here
        // may have started more before it stopped: repeat until none.
        loop {
            let extra = core::mem::take(&mut *core.extra_threads.lock());
            if extra.is_empty() {
                break;
            }
            for t in extra {
                P::join_thread(t);
            }
        }
        let abandoned = core.live();
        if abandoned > 0 {
            // Actors left parked still point at this runtime (a late wake
            // schedules through it): keep its shared state alive for good.
            core::mem::forget(self.shared.clone());
        }
        // Forget the registry's entries before any leftover is dropped, and
        // the registered names (each holds an address; an abandoned actor's
        // would keep its mailbox, and through it the table, alive).
        for s in core.registry.iter() {
            s.clear();
        }
        core.names.clear();
        // Leftovers (pushed by outside threads after the workers stopped):
        // dropping them unmaps their stacks.
        // SAFETY: every worker thread has been joined above, so no thread
        // serves a worker now, and their last queue calls happen-before this.
        while unsafe { self.shared.queue.pop_worker(0) }.is_some() {}
        for w in core.workers.iter() {
            drop(take_slot(&w.run_next));
        }
        ShutdownReport { abandoned }
    }
}

impl<P: Platform, Q: RunQueue<P>> Drop for Runtime<P, Q> {
    fn drop(&mut self) {
        if !self.threads.is_empty() || !self.shared.core.shutdown.load(Ordering::SeqCst) {
            self.stop();
        }
    }
}
