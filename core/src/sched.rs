//! The scheduler: the worker loop (generic over the run queue, so it is
//! monomorphised per variant) and the actor-side calls that switch back to
//! it (generic over the platform only).
//!
//! # One worker turn
//!
//! 1. Find an actor: the one handed over by the last turn (a work-first
//!    child, or an actor whose park was pre-empted by a wake), else the
//!    worker's own run-next slot, else the shared run queue, else another
//!    worker's run-next slot (a steal), else sleep ([`crate::idle`]).
//! 2. Store `RUNNING`, publish it as this worker's current actor, switch in.
//! 3. The actor runs until it switches back with a [`Request`].
//! 4. Back on the worker's stack, store the actor's sp and carry out the
//!    request (requeue, park, run a child first, or clean up an exit). Only
//!    now may another worker see the actor: its stack is no longer in use.
//!
//! # Work-first spawn
//!
//! `spawn` from an actor runs the child at once; the parent waits in the
//! run-next slot (displacing whatever was there to the queue), where an idle
//! worker may steal it. A spawn tree is thus walked depth-first and the
//! number of live stacks stays near depth × workers instead of growing with
//! the tree's width: skynet's million leaves never need a million stacks.
//!
//! # Thread-locals across migration
//!
//! An actor may resume on another worker. The worker context is found only
//! through [`Platform::current_worker`], an opaque call the optimiser cannot
//! hoist across a switch, and never cached in an actor's frame across one.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::mem;
use core::ptr::{self, NonNull};

use crate::actor::{
    Actor, Cancelled, Request, CANCEL_NONE, CANCEL_REQUESTED, CANCEL_UNWINDING, DONE, NOTIFIED, PARKED,
    RUNNABLE, RUNNING,
};
use crate::arch::Arch;
use crate::counters::Counters;
use crate::error::SpawnError;
use crate::idle::Idle;
use crate::join::{make_entry, JoinHandle};
use crate::mailbox::{self, Addr, Mailbox};
use crate::mpsc::Node;
use crate::platform::{Platform, RawStack};
use crate::queue::RunQueue;
use crate::slab::NodeCache;
use crate::slot::Slot;
use crate::stack::StackPool;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering, RawCell};

/// Ids a worker reserves at a time from the runtime's counter.
const ID_BLOCK: u64 = 1024;

/// The least number of spare stacks the shared pool keeps.
const SHARED_STACKS_MIN: usize = 4096;

/// Consecutive runs from the run-next slot before the worker serves the run
/// queue first: a ping-pong pair handing each other the slot would otherwise
/// starve everything queued (tokio settled on 3 for the same reason).
pub(crate) const RUN_NEXT_CAP: u32 = 3;

/// Spins a thief waits before taking another worker's run-next slot, so an
/// actor just woken by a running actor stays on its waker's worker (and
/// cache) when that worker is about to run it anyway (Go waits ~3 µs).
const STEAL_GRACE_SPINS: u32 = 2000;

/// Makes a runnable actor run: the type-erased face of a runtime, reached
/// from an actor's `rt` pointer by wakers that do not know the run-queue
/// type (a mailbox send, a channel, a join).
pub(crate) trait Schedule: Send + Sync {
    /// Schedules `a` (state `RUNNABLE`): into the caller's run-next slot when
    /// the caller is one of this runtime's workers (the wake-slot handoff),
    /// else onto the run queue, waking an idle worker if needed.
    fn schedule(&self, a: Arc<Actor>);
}

/// Schedules `a` on its own runtime.
pub(crate) fn schedule(a: Arc<Actor>) {
    let rt = a.rt;
    // SAFETY: an actor's runtime outlives it (see `Actor::rt`).
    unsafe { rt.as_ref().schedule(a) }
}

/// A message node for a `T`: from the calling worker's cache, or the global
/// allocator on a plain thread.
#[inline]
pub(crate) fn node_alloc<T, P: Platform>() -> NonNull<Node<T>> {
    let c = ctx::<P>();
    if c.is_null() {
        return Node::<T>::alloc_global();
    }
    // SAFETY: a non-null context is this thread's live worker context; no
    // other reference to its cache is live (we hold none across switches).
    unsafe { (*c).nodes.alloc(Node::<T>::layout()).cast() }
}

/// Returns a spent node to the calling worker's cache (or the global
/// allocator on a plain thread).
#[inline]
pub(crate) fn node_free<T, P: Platform>(node: NonNull<Node<T>>) {
    let c = ctx::<P>();
    // SAFETY: nodes come from `node_alloc` (some worker's cache or the
    // global allocator, interchangeable by `NodeCache`'s contract) and the
    // caller owns `node`; the context is as in `node_alloc`.
    unsafe {
        if c.is_null() {
            Node::<T>::free_global(node);
        } else {
            (*c).nodes.free(node.cast(), Node::<T>::layout());
        }
    }
}

/// The shared part of one worker.
#[repr(align(128))]
pub(crate) struct WorkerShared {
    /// The run-next slot: owner puts, idle workers may take.
    pub(crate) run_next: Slot<Actor>,
    pub(crate) counters: Counters,
}

/// Everything of a runtime that does not depend on the run-queue type.
pub(crate) struct RtCore<P: Platform> {
    pub(crate) idle: Idle<P, P::Lock>,
    pub(crate) workers: alloc::boxed::Box<[WorkerShared]>,
    /// Counters of plain OS threads (outside the workers).
    pub(crate) outside: Counters,
    pub(crate) pool: StackPool<P>,
    pub(crate) shutdown: AtomicBool,
    pub(crate) finished: AtomicBool,
    pub(crate) live: AtomicUsize,
    pub(crate) next_id: AtomicU64,
    /// This runtime as a [`Schedule`]: set once by the builder, before any
    /// actor or worker exists.
    pub(crate) sched: SchedSlot,
}

/// Where a runtime keeps its own type-erased [`Schedule`] pointer.
pub(crate) struct SchedSlot(pub(crate) RawCell<Option<NonNull<dyn Schedule>>>);

// SAFETY: written once by the builder before the runtime is shared (thread
// spawn orders it before every worker's reads), read-only afterwards; the
// pointee is `Send + Sync` (`Schedule`'s supertraits).
unsafe impl Send for SchedSlot {}
// SAFETY: as above.
unsafe impl Sync for SchedSlot {}

/// A whole runtime's shared state.
pub(crate) struct Shared<P: Platform, Q: RunQueue<P>> {
    pub(crate) core: RtCore<P>,
    pub(crate) queue: Q,
}

/// A worker thread's private context; [`Platform::current_worker`] points
/// at it while the worker runs. Only its worker thread (and the actor it is
/// running, on the same thread) touches it, always through the raw pointer
/// and never holding a reference across a switch.
pub(crate) struct WorkerCtx<P: Platform> {
    pub(crate) core: *const RtCore<P>,
    pub(crate) index: usize,
    pub(crate) current: *const Actor,
    pub(crate) stacks: Vec<RawStack>,
    pub(crate) nodes: NodeCache,
    /// Consecutive actors run from the run-next slot (see [`RUN_NEXT_CAP`]).
    streak: u32,
    id_next: u64,
    id_end: u64,
}

impl<P: Platform> RtCore<P> {
    pub(crate) fn new(workers: usize, stack_size: usize) -> Self {
        RtCore {
            idle: Idle::new(workers),
            workers: (0..workers)
                .map(|_| WorkerShared {
                    run_next: Slot::new(),
                    counters: Counters::default(),
                })
                .collect(),
            outside: Counters::default(),
            // Spare stacks kept mapped: enough for a few thousand short-lived
            // actors to come and go without mmap/munmap and first-touch page
            // faults (each was ~5-10 µs: msg_pairs at 1,024 pairs spawns 2,048
            // actors per run). Idle pooled stacks cost address space and the
            // pages they once touched (a few KiB each), not their full size.
            pool: StackPool::new(stack_size, SHARED_STACKS_MIN.max(256 * workers)),
            shutdown: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            live: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            sched: SchedSlot(RawCell::new(None)),
        }
    }

    /// A new actor with a stack, bootstrapped to start in [`actor_entry`].
    pub(crate) fn new_actor<F, T>(&self, id: u64, stack: RawStack, f: F) -> (Arc<Actor>, JoinHandle<T, P>)
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (entry, handle) = make_entry::<P, F, T>(id, f);
        let top = stack.top();
        // SAFETY: written once by the builder before the runtime is shared.
        let rt = unsafe { *self.sched.0.get() }.expect("runtime published before use");
        let actor = Arc::new(Actor::new(id, entry, stack, P::stack_free, rt));
        // SAFETY: `top` is the page-aligned end of a fresh mapping of at
        // least the runtime's minimum stack size; `actor_entry::<P>` takes
        // the actor pointer, which stays valid while the actor runs (its
        // worker holds an Arc).
        let sp =
            unsafe { <P::Arch as Arch>::init_stack(top, actor_entry::<P>, Arc::as_ptr(&actor) as *mut u8) };
        // SAFETY: the actor is not yet shared.
        actor.sp.with_mut(|p| unsafe { *p = sp });
        // Relaxed: a count; shutdown reads it after the workers' own edges.
        self.live.fetch_add(1, Ordering::Relaxed);
        (actor, handle)
    }
}

// ---------------------------------------------------------------------------
// Actor side
// ---------------------------------------------------------------------------

/// The worker context of the calling thread, if it is a worker.
#[inline(always)]
fn ctx<P: Platform>() -> *mut WorkerCtx<P> {
    P::current_worker().cast()
}

/// The actor running on the calling thread, if any.
#[inline]
pub(crate) fn current_actor<P: Platform>() -> Option<*const Actor> {
    let c = ctx::<P>();
    if c.is_null() {
        return None;
    }
    // SAFETY: a non-null current-worker pointer is a live WorkerCtx of this
    // thread (set by `run_worker`, cleared before it returns).
    let cur = unsafe { (*c).current };
    (!cur.is_null()).then_some(cur)
}

/// The id of the calling actor; `None` on a plain OS thread.
pub fn current_id<P: Platform>() -> Option<u64> {
    // SAFETY: `current_actor` returns a live actor (the running one).
    current_actor::<P>().map(|a| unsafe { (*a).id })
}

/// The index of the worker the caller runs on; `None` off the runtime.
pub fn current_worker<P: Platform>() -> Option<usize> {
    let c = ctx::<P>();
    // SAFETY: as in `current_actor`.
    (!c.is_null()).then(|| unsafe { (*c).index })
}

/// Hands `req` to the worker and switches to it; returns when resumed (on
/// whichever worker), unwinding if the runtime is shutting down.
///
/// # Safety
///
/// `me` is the calling (running) actor.
unsafe fn suspend<P: Platform>(me: *const Actor, req: Request) {
    // SAFETY: the running actor owns `request` and `sched_sp` (actor doc).
    unsafe {
        *(*me).request.get() = req;
        let back = <P::Arch as Arch>::switch(*(*me).sched_sp.get());
        // Resumed: `back` is the sp of the worker that resumed us.
        *(*me).sched_sp.get() = back;
        if *(*me).cancel.get() == CANCEL_REQUESTED {
            *(*me).cancel.get() = CANCEL_UNWINDING;
            P::resume_unwind(alloc::boxed::Box::new(Cancelled));
        }
    }
}

/// Parks the calling actor until a wake (see the state diagram in
/// [`crate::actor`]). Spurious returns are possible: callers re-check.
pub(crate) fn park<P: Platform>() {
    match current_actor::<P>() {
        // SAFETY: `a` is the running actor.
        Some(a) => unsafe { suspend::<P>(a, Request::Park) },
        None => P::yield_thread(),
    }
}

/// Lets other actors run: the caller goes to the back of the run queue.
/// On a plain OS thread, yields the thread.
pub fn yield_now<P: Platform>() {
    match current_actor::<P>() {
        // SAFETY: `a` is the running actor.
        Some(a) => unsafe {
            if *(*a).cancel.get() == CANCEL_UNWINDING {
                return;
            }
            suspend::<P>(a, Request::Yield)
        },
        None => P::yield_thread(),
    }
}

/// Spawns an actor from inside an actor: the child runs at once
/// (work-first), the caller continues when a worker picks it up again.
pub fn try_spawn<P, F, T>(f: F) -> Result<JoinHandle<T, P>, SpawnError>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_with_id::<P, F, T>(|_| f)
}

/// [`try_spawn`] with the body built from the child's id (so it can own
/// things that name the child, such as its mailbox).
pub(crate) fn spawn_with_id<P, F, T>(build: impl FnOnce(u64) -> F) -> Result<JoinHandle<T, P>, SpawnError>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let c = ctx::<P>();
    let Some(me) = current_actor::<P>() else {
        return Err(SpawnError::NoRuntime);
    };
    // SAFETY: `c` is this worker's live context; no reference to it is held
    // across the switch below (after it we may be on another worker).
    let (child, handle) = unsafe {
        let core = &*(*c).core;
        let stack = core.pool.get(&mut (*c).stacks)?;
        if (*c).id_next == (*c).id_end {
            // Relaxed: ids only need uniqueness.
            (*c).id_next = core.next_id.fetch_add(ID_BLOCK, Ordering::Relaxed);
            (*c).id_end = (*c).id_next + ID_BLOCK;
        }
        let id = (*c).id_next;
        (*c).id_next += 1;
        core.workers[(*c).index].counters.spawned(1);
        core.new_actor::<F, T>(id, stack, build(id))
    };
    // SAFETY: `me` is the running actor.
    unsafe { suspend::<P>(me, Request::Spawn(child)) };
    Ok(handle)
}

/// Spawns an actor with a mailbox from inside an actor (work-first, as
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
    let mut addr = None;
    let h = spawn_with_id::<P, _, T>(|id| mailbox::bind(id, f, &mut addr))?;
    Ok((addr.expect("the body builder ran"), h))
}

/// Entry of every actor's stack: runs its body, then exits to the worker.
unsafe extern "C" fn actor_entry<P: Platform>(from: *mut u8, arg: *mut u8) -> ! {
    let me = arg as *const Actor;
    // SAFETY: `arg` is the actor, kept alive by the worker running it; the
    // running actor owns `sched_sp` and `entry`.
    unsafe {
        *(*me).sched_sp.get() = from;
        let entry = (*(*me).entry.get()).take();
        let wake = match entry {
            Some(entry) => entry(&*me),
            None => None,
        };
        *(*me).request.get() = Request::Exit(wake);
        <P::Arch as Arch>::switch(*(*me).sched_sp.get());
    }
    P::abort("smarm: an exited actor was resumed")
}

// ---------------------------------------------------------------------------
// Worker side
// ---------------------------------------------------------------------------

impl<P: Platform, Q: RunQueue<P>> Schedule for Shared<P, Q> {
    fn schedule(&self, a: Arc<Actor>) {
        let c = ctx::<P>();
        // SAFETY: a non-null context is this thread's live worker context.
        if !c.is_null() && ptr::eq(unsafe { (*c).core }, &self.core) {
            // The wake-slot handoff: the woken actor runs next here.
            // SAFETY: as above.
            let w = &self.core.workers[unsafe { (*c).index }];
            self.put_run_next(w, a);
        } else {
            self.core.outside.shared_enqueued(1);
            self.queue.push(a);
            if self.core.idle.notify_one() {
                self.core.outside.shared_wakeups(1);
            }
        }
    }
}

impl<P: Platform, Q: RunQueue<P>> Shared<P, Q> {
    /// Queues a runnable actor and wakes a sleeping worker if needed.
    #[inline]
    pub(crate) fn push(&self, a: Arc<Actor>, counters: &Counters) {
        // Counted before the push: once pushed, another worker may pop and
        // finish the actor before we would count it, and a snapshot taken
        // after its join would see dequeued > enqueued.
        counters.enqueued(1);
        self.queue.push(a);
        if self.core.idle.notify_one() {
            counters.wakeups(1);
        }
    }

    /// Puts `a` in worker `w`'s run-next slot; a displaced actor is queued.
    #[inline]
    fn put_run_next(&self, w: &WorkerShared, a: Arc<Actor>) {
        let old = w.run_next.put(Arc::into_raw(a) as *mut Actor);
        if !old.is_null() {
            // SAFETY: the slot holds `Arc::into_raw` pointers; `put` handed
            // the displaced one to us.
            self.push(unsafe { Arc::from_raw(old) }, &w.counters);
        }
    }

    fn take_slot(slot: &Slot<Actor>) -> Option<Arc<Actor>> {
        let p = slot.take();
        // SAFETY: a non-null slot value is an `Arc::into_raw`, now ours.
        (!p.is_null()).then(|| unsafe { Arc::from_raw(p) })
    }

    /// Step 1 of a turn, short of sleeping.
    ///
    /// # Safety
    ///
    /// `ctx` is the calling worker's context.
    unsafe fn find_work(&self, ctx: *mut WorkerCtx<P>) -> Option<Arc<Actor>> {
        // SAFETY: `ctx` is ours (caller contract).
        let (index, streak) = unsafe { ((*ctx).index, &mut (*ctx).streak) };
        let me = &self.core.workers[index];
        if *streak < RUN_NEXT_CAP {
            if let Some(a) = Self::take_slot(&me.run_next) {
                *streak += 1;
                me.counters.run_next(1);
                return Some(a);
            }
        }
        *streak = 0;
        if let Some(a) = self.pop_queue(me) {
            return Some(a);
        }
        // The cap skipped the slot and the queue was empty: run the slot.
        if let Some(a) = Self::take_slot(&me.run_next) {
            me.counters.run_next(1);
            return Some(a);
        }
        // Last pass: another worker's run-next slot, after a grace period
        // in which its owner may take it itself.
        let n = self.core.workers.len();
        for k in 1..n {
            let victim = &self.core.workers[(index + k) % n];
            let seen = victim.run_next.peek();
            if seen.is_null() {
                continue;
            }
            for _ in 0..STEAL_GRACE_SPINS {
                <P::Arch as Arch>::spin_hint();
            }
            if victim.run_next.peek() != seen {
                continue;
            }
            if let Some(a) = Self::take_slot(&victim.run_next) {
                me.counters.steals(1);
                return Some(a);
            }
        }
        None
    }

    #[inline]
    fn pop_queue(&self, me: &WorkerShared) -> Option<Arc<Actor>> {
        if let Some(a) = self.queue.pop() {
            me.counters.dequeue_at(self.queue.len() as u64 + 1);
            // Chain wake: more work than this worker takes, and sleepers.
            if self.core.idle.sleepers() > 0 && !self.queue.is_empty() && self.core.idle.notify_one() {
                me.counters.wakeups(1);
            }
            return Some(a);
        }
        None
    }

    fn has_work(&self) -> bool {
        !self.queue.is_empty()
            // Relaxed: a probe; the idle protocol's fences order it.
            || self.core.workers.iter().any(|w| !w.run_next.peek().is_null())
            || self.core.finished.load(Ordering::Relaxed)
    }

    /// Nothing to run: sleep, or decide the worker is done. Returns `true`
    /// when the worker should exit.
    fn idle(&self, index: usize) -> bool {
        let core = &self.core;
        if core.finished.load(Ordering::SeqCst) {
            return true;
        }
        if core.shutdown.load(Ordering::SeqCst) {
            // Every worker idle with nothing queued: the remaining actors (if
            // any) are parked with nobody left to wake them.
            let others_idle = core.idle.sleepers() as usize + 1 >= core.workers.len();
            if core.live.load(Ordering::SeqCst) == 0 || others_idle {
                core.finished.store(true, Ordering::SeqCst);
                core.idle.notify_all();
                return true;
            }
        }
        if core.idle.sleep(index, || self.has_work(), None) {
            core.workers[index].counters.parks(1);
        }
        false
    }

    /// Steps 2–4: runs `a` until it switches back, then carries out its
    /// request. Returns an actor to run next without searching.
    ///
    /// # Safety
    ///
    /// `ctx` is the calling worker's context.
    unsafe fn run(&self, ctx: *mut WorkerCtx<P>, a: Arc<Actor>) -> Option<Arc<Actor>> {
        // SAFETY: (whole body) `ctx` is ours; we own `a` (we took it from a
        // queue/slot or were handed it), so its cells are ours until we
        // publish it again.
        unsafe {
            let index = (*ctx).index;
            let w = &self.core.workers[index];
            // Relaxed: we own the actor; wakers only CAS from PARKED/RUNNING
            // and their Release edge is the queue's or the state's.
            a.state.store(RUNNING, Ordering::Relaxed);
            // Relaxed: a hint. The flag is set once and never cleared; a
            // worker that reads it late resumes this actor once more
            // uncancelled and cancels it at a later resume (the exit
            // decision in `idle` reads the flag with SeqCst).
            if self.core.shutdown.load(Ordering::Relaxed) && *a.cancel.get() == CANCEL_NONE {
                *a.cancel.get() = CANCEL_REQUESTED;
            }
            (*ctx).current = Arc::as_ptr(&a);
            let back = <P::Arch as Arch>::switch(*a.sp.get());
            *a.sp.get() = back;
            (*ctx).current = ptr::null();
            w.counters.switches(1);
            match mem::replace(&mut *a.request.get(), Request::None) {
                Request::Yield => {
                    a.state.store(RUNNABLE, Ordering::Relaxed);
                    self.push(a, &w.counters);
                    None
                }
                Request::Park => {
                    // AcqRel: Release publishes the saved sp to the waker's
                    // Acquire load; Acquire sees a NOTIFIED waker's writes.
                    match a
                        .state
                        .compare_exchange(RUNNING, PARKED, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => None, // the waker's registration holds it now
                        Err(s) => {
                            debug_assert_eq!(s, NOTIFIED);
                            a.state.store(RUNNING, Ordering::Relaxed);
                            Some(a)
                        }
                    }
                }
                Request::Spawn(child) => {
                    self.put_run_next(w, a);
                    Some(child)
                }
                Request::Exit(wake) => {
                    // Release: a joiner never reads it; debugging aid only.
                    a.state.store(DONE, Ordering::Release);
                    if let Some(stack) = (*a.stack.get()).take() {
                        self.core.pool.put(&mut (*ctx).stacks, stack);
                    }
                    drop(a);
                    let left = self.core.live.fetch_sub(1, Ordering::SeqCst) - 1;
                    if left == 0 && self.core.shutdown.load(Ordering::SeqCst) {
                        self.core.idle.notify_all();
                    }
                    if let Some(j) = wake.and_then(Actor::wake) {
                        self.put_run_next(w, j);
                    }
                    None
                }
                Request::None => P::abort("smarm: an actor switched out without a request"),
            }
        }
    }
}

/// The body of worker thread `index`.
pub(crate) fn run_worker<P: Platform, Q: RunQueue<P>>(shared: &Shared<P, Q>, index: usize) {
    let mut ctx = WorkerCtx::<P> {
        core: &shared.core,
        index,
        current: ptr::null(),
        stacks: Vec::new(),
        nodes: NodeCache::new(),
        streak: 0,
        id_next: 0,
        id_end: 0,
    };
    let ctxp: *mut WorkerCtx<P> = &mut ctx;
    P::set_current_worker(ctxp.cast());
    let mut next: Option<Arc<Actor>> = None;
    loop {
        let a = match next.take() {
            Some(a) => a,
            // SAFETY: `ctxp` is this worker's context.
            None => match unsafe { shared.find_work(ctxp) } {
                Some(a) => a,
                None => {
                    if shared.idle(index) {
                        break;
                    }
                    continue;
                }
            },
        };
        // SAFETY: `ctxp` is this worker's context.
        next = unsafe { shared.run(ctxp, a) };
    }
    P::set_current_worker(ptr::null_mut());
    // SAFETY: the worker loop has ended; nothing else uses the context.
    let stacks = unsafe { &mut (*ctxp).stacks };
    shared.core.pool.free_local(stacks);
    // (The node cache frees its blocks when `ctx` drops.)
}
