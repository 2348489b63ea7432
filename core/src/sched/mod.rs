//! The scheduler: the worker loop (generic over the run queue, so it is
//! monomorphised per variant) and the actor-side calls that switch back to
//! it (generic over the platform only).
//!
//! # One worker turn
//!
//! 1. Find an actor: the one handed over by the last turn (a work-first
//!    child, or an actor whose park was pre-empted by a wake), else the
//!    worker's own run-next slot, else the shared run queue, else another
//!    worker's run-next slot (a steal), else sleep ([`crate::sched::idle`]).
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
//! # Timers
//!
//! A worker checks for due timers every [`TIMER_CHECK_TURNS`] turns (one
//! relaxed load when none is armed) and before it sleeps; one idle worker
//! claims the timers and sleeps until the earliest deadline, and arming an
//! earlier one wakes it (see [`crate::sched::timer`]). What a timer wakes lands in
//! the firing worker's run-next slot.
//!
//! # Timeslices
//!
//! Each resume of an actor taken from the run queue (or stolen) starts a
//! fresh slice; an actor handed over by the last turn, or woken into this
//! worker's run-next slot by the running actor, inherits the current one.
//! The slice's start is stamped lazily, by the first safe point that reads
//! the arch cycle counter (a plain read) after the resume: stamping at
//! every resume cost 1.37x on the yield round trip in `preempt_cost`
//! (68.4 vs 50.0 ns here: a counter read is ~20 ns in this VM), and an
//! actor that switches out before any safe point needs no slice at all.
//! Safe points (sends and receives every [`SAFE_POINT_BUDGET`] calls,
//! [`checkpoint`] every call, spawn always) yield once the slice is spent.
//! The slice thus starts up to one budget of safe points late.
//!
//! # Blocking calls
//!
//! [`blocking`] asks the worker (`Request::Block`) to hand its duty to a
//! spare thread, which runs [`run_worker`] for the same index with a fresh
//! context, and resumes the actor on this thread with no current worker.
//! When `f` returns, the actor switches back (`Request::Rejoin`): this
//! thread queues it, leaves worker duty and waits as a spare.
//!
//! # Unwinding: no switch while `panicking()`
//!
//! std counts panics per OS thread (`thread::panicking()` reads that
//! count) and uncounts one where the unwind is caught. An actor that
//! switched out while unwinding would leave its thread's count raised for
//! every actor run there meanwhile (their `std::sync::Mutex` guards would
//! poison on drop), and one caught on another worker would uncount it
//! there. So, while [`Platform::panicking`] is true (a panic, or a kill or
//! cancellation raised at a resume point, is unwinding), an actor never
//! switches:
//!
//! 1. a yield (and a spent timeslice) does nothing;
//! 2. a spawn queues the child instead of running it first;
//! 3. the first wait *detaches* the actor (`Request::Detach`): its worker
//!    hands its duty to a spare thread, as for [`blocking`], and resumes
//!    the actor on this same thread, whose worker context stays current
//!    but is marked detached (the actor keeps its id, actor-locals and
//!    spawn; its wakes and spawns go to the run queue);
//! 4. a detached actor's waits (and every wait while unwinding) happen in
//!    place: it stores `HELD` in its state word and sleeps on it; a wake
//!    stores `RUNNING` and wakes the word (see [`crate::actor`], step 7);
//!    `blocking(f)` runs `f` in place;
//! 5. once the unwind is caught (at the entry, or by the actor's own
//!    `catch_unwind`), the actor rejoins (`Request::Rejoin`): this thread
//!    queues it and leaves worker duty, and it resumes on any worker.
//!
//! Resume points never start an unwind inside one (a kill that arrives
//! while an actor unwinds, or after its body returned, is absorbed: the
//! actor unwinds once, and its exit path runs to the end). Waits while
//! unwinding wait for as long as the runtime runs; once it is shutting
//! down they give up at once where the call can say so ([`unwinding`]).
//!
//! # Thread-locals across migration
//!
//! An actor may resume on another worker. The worker context is found only
//! through [`Platform::current_worker`], an opaque call the optimiser cannot
//! hoist across a switch, and never cached in an actor's frame across one.

//!
//! Layer 4, the scheduler: the worker loop (here) and what it drives: run
//! queues, idle sleep, timers, timeslices, the stack pool, counters, the
//! overflow handler's core side, actor-locals. Imports only the layers
//! below; the layers above reach the running actor through `current_*`.

pub mod counters;
pub mod idle;
pub mod local;
pub mod overflow;
pub mod queue;
pub(crate) mod stack;
pub mod timer;

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::mem;
use core::ptr::{self, NonNull};
use core::time::Duration;

use crate::actor::life::Life;
use crate::actor::{
    Actor, Cancelled, Request, CANCEL_NONE, CANCEL_REQUESTED, CANCEL_UNWINDING, DONE, NOTIFIED, PARKED,
    RUNNABLE, RUNNING,
};
use crate::lockfree::mpsc::Node;
use crate::lockfree::node_cache::NodeCache;
use crate::lockfree::slot::Slot;
use crate::msg::mailbox::{self, Addr, Mailbox};
use crate::sched::counters::Counters;
use crate::sched::idle::Idle;
use crate::sched::queue::RunQueue;
use crate::sched::stack::StackPool;
use crate::sched::timer::{Poke, PokeWith, TimerEntry, Timers};
use crate::seam::arch::Arch;
use crate::seam::error::SpawnError;
use crate::seam::platform::{Platform, RawStack};
use crate::spawn::join::{make_entry, JoinHandle};
use crate::sync::lock::Mutex;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, RawCell};

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
    /// Wakes the OS thread of an actor waiting in place on `word` (its
    /// state word; step 7 of [`crate::actor`]).
    fn unpark(&self, word: &AtomicU32);
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
    /// Samples for dumps and the long-hold monitor, on their own cache line
    /// (written at every switch; thieves peek at `run_next`).
    pub(crate) samples: Samples,
}

/// What a worker publishes about the actor it runs.
#[repr(align(128))]
pub(crate) struct Samples {
    /// The id of the actor this worker is running (0: none) ...
    pub(crate) running: AtomicU64,
    /// ... how many actors it has resumed (with the monitor on) ...
    pub(crate) resumes: AtomicU64,
    /// ... and, once the monitor has reported the current hold, when it saw
    /// the hold begin (ns; 0: not reported), for the worker's final report.
    pub(crate) hold_since: AtomicU64,
    /// The resume count of the hold the monitor reported.
    pub(crate) hold_seq: AtomicU64,
}

/// What [`Runtime`](crate::Runtime)'s long-hold hook receives: an actor held
/// its worker without reaching a safe point for longer than the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongHold {
    /// The actor's id.
    pub actor: u64,
    /// The worker it holds.
    pub worker: usize,
    /// How long it has held it (a lower bound while `finished` is false:
    /// the monitor samples every quarter of the bound).
    pub held: Duration,
    /// `false`: reported by the monitor while the actor still runs; `true`:
    /// reported by the worker when the actor finally switched out.
    pub finished: bool,
}

/// The long-hold hook.
pub type LongHoldHook = Arc<dyn Fn(&LongHold) + Send + Sync>;

/// A thread that lost its worker to a blocking call waits here to take
/// over another worker's duty later (or to exit at shutdown).
pub(crate) struct Spare {
    /// 0: waiting; `i + 1`: take over worker `i`; [`SPARE_EXIT`]: exit.
    word: AtomicU32,
}

const SPARE_EXIT: u32 = u32::MAX;

/// Safe points (sends, receives) between two reads of the cycle counter.
const SAFE_POINT_BUDGET: u32 = 4;

/// Times shutdown wakes the actors left parked before it abandons them.
const SHUTDOWN_SWEEPS: usize = 4;

/// Worker turns between two checks for due timers while there is work.
const TIMER_CHECK_TURNS: u32 = 16;

/// Everything of a runtime that does not depend on the run-queue type.
pub(crate) struct RtCore<P: Platform> {
    pub(crate) idle: Idle<P, P::Lock>,
    /// Live actors for dumps: one shard per worker, the last for plain
    /// threads ([`crate::rt::dump`]).
    pub(crate) registry: alloc::boxed::Box<[crate::rt::dump::Shard<P::Lock>]>,
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
    pub(crate) timers: Timers<P::Lock>,
    /// Timeslice length in cycles (0: no timeslices).
    pub(crate) slice_cycles: u64,
    /// Actors inside a blocking call or detached while unwinding (off any
    /// worker); shutdown waits for them to come back.
    pub(crate) blocked: AtomicUsize,
    /// Of those, the ones detached while unwinding (they may wait on
    /// parked actors: shutdown sweeps those while these wait).
    pub(crate) unwinders: AtomicUsize,
    /// Threads waiting to take over a worker (see [`Spare`]).
    pub(crate) spares: Mutex<P::Lock, Vec<Arc<Spare>>>,
    /// Threads started for blocking-call handoffs (joined at shutdown).
    pub(crate) extra_threads: Mutex<P::Lock, Vec<P::Thread>>,
    /// The long-hold bound in ns (0: no monitor) and its hook.
    pub(crate) hold_ns: u64,
    pub(crate) hold_hook: Option<LongHoldHook>,
    /// The monitor thread's wake word: set to 1 at shutdown.
    pub(crate) monitor_word: AtomicU32,
    /// Shutdown sweeps of parked actors so far.
    pub(crate) sweeps: AtomicUsize,
}

/// Runtime settings the scheduler needs (from the builder).
pub(crate) struct SchedConfig {
    pub(crate) workers: usize,
    pub(crate) stack_size: usize,
    pub(crate) timeslice: Option<Duration>,
    pub(crate) hold: Option<(Duration, Option<LongHoldHook>)>,
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
    /// This thread hosts a detached unwinding actor (`Request::Detach`):
    /// worker `index` is served by another thread now, so actor-side code
    /// must not touch its shared state (run-next slot, counters).
    pub(crate) detached: bool,
    pub(crate) stacks: Vec<RawStack>,
    pub(crate) nodes: NodeCache,
    /// Consecutive actors run from the run-next slot (see [`RUN_NEXT_CAP`]).
    streak: u32,
    id_next: u64,
    id_end: u64,
    /// When the running actor's timeslice ends (cycles; `u64::MAX`: never,
    /// timeslices off; 0: a fresh slice not stamped yet).
    slice_end: u64,
    /// The slice length in cycles (the runtime's, copied here).
    slice_cycles: u64,
    /// Safe points left before the next cycle-counter read.
    budget: u32,
    /// Turns left before the next timer check.
    timer_turns: u32,
    /// Resumes so far (published for the long-hold monitor).
    resumes: u64,
}

impl<P: Platform> RtCore<P> {
    pub(crate) fn new(cfg: SchedConfig) -> Self {
        let SchedConfig {
            workers,
            stack_size,
            timeslice,
            hold,
        } = cfg;
        let slice_cycles = timeslice.map_or(0, |d| duration_to_cycles::<P>(d).max(1));
        let (hold_ns, hold_hook) = match hold {
            Some((d, hook)) => ((d.as_nanos().min(u64::MAX as u128) as u64).max(1), hook),
            None => (0, None),
        };
        RtCore {
            timers: Timers::new(),
            slice_cycles,
            blocked: AtomicUsize::new(0),
            unwinders: AtomicUsize::new(0),
            spares: Mutex::new(Vec::new()),
            extra_threads: Mutex::new(Vec::new()),
            hold_ns,
            hold_hook,
            monitor_word: AtomicU32::new(0),
            sweeps: AtomicUsize::new(0),
            registry: (0..=workers).map(|_| crate::rt::dump::Shard::new()).collect(),
            idle: Idle::new(workers),
            workers: (0..workers)
                .map(|_| WorkerShared {
                    run_next: Slot::new(),
                    counters: Counters::default(),
                    samples: Samples {
                        running: AtomicU64::new(0),
                        resumes: AtomicU64::new(0),
                        hold_since: AtomicU64::new(0),
                        hold_seq: AtomicU64::new(0),
                    },
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
    pub(crate) fn new_actor<F, T>(
        &self,
        id: u64,
        life: Arc<Life>,
        stack: RawStack,
        f: F,
    ) -> (Arc<Actor>, JoinHandle<T, P>)
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (entry, handle) = make_entry::<P, F, T>(id, life.clone(), f);
        let top = stack.top();
        crate::actor::sanitizer::fresh_stack(stack.usable_range());
        // SAFETY: written once by the builder before the runtime is shared.
        let rt = unsafe { *self.sched.0.get() }.expect("runtime published before use");
        let actor = Arc::new(Actor::new(id, entry, stack, P::stack_free, rt, life.clone()));
        // SAFETY: the `Life` is not shared yet beyond the mailbox made for
        // this actor, whose handles nobody else holds yet.
        unsafe { *life.actor.get() = Arc::downgrade(&actor) };
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

/// Cycles per second of the arch counter: the arch's figure, or measured
/// once (about 1 ms) against the platform clock.
pub(crate) fn cycles_per_second<P: Platform>() -> u64 {
    if let Some(hz) = <P::Arch as Arch>::cycles_per_second() {
        return hz;
    }
    // One figure per process (the counter is per machine); `core`'s atomic,
    // not loom's: a cache, not part of any protocol.
    static MEASURED: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
    // Relaxed: a cached value; racing measurers store near-equal figures.
    let hz = MEASURED.load(core::sync::atomic::Ordering::Relaxed);
    if hz != 0 {
        return hz;
    }
    let t0 = P::now_ns();
    let c0 = <P::Arch as Arch>::cycles();
    let mut t1 = t0;
    while t1.saturating_sub(t0) < 1_000_000 {
        <P::Arch as Arch>::spin_hint();
        t1 = P::now_ns();
    }
    let c1 = <P::Arch as Arch>::cycles();
    let hz = ((c1.wrapping_sub(c0) as u128 * 1_000_000_000) / (t1 - t0).max(1) as u128) as u64;
    let hz = hz.max(1);
    MEASURED.store(hz, core::sync::atomic::Ordering::Relaxed);
    hz
}

/// `d` in cycles of the arch counter.
pub(crate) fn duration_to_cycles<P: Platform>(d: Duration) -> u64 {
    let hz = cycles_per_second::<P>() as u128;
    (d.as_nanos() * hz / 1_000_000_000).min(u64::MAX as u128 / 2) as u64
}

/// The deadline `d` from now on the platform clock (saturating).
pub fn deadline_after<P: Platform>(d: Duration) -> u64 {
    P::now_ns().saturating_add(d.as_nanos().min(u64::MAX as u128) as u64)
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

/// Whether a wait of the caller must give up at once: the caller is an
/// actor that unwinds (or runs its exit path) while its runtime shuts
/// down, when whoever would answer may be going away too. Waits that can
/// say so fail (a disconnect, a timeout, `Cancelled`); the others wait.
pub(crate) fn unwinding<P: Platform>() -> bool {
    let c = ctx::<P>();
    if c.is_null() {
        return false;
    }
    // SAFETY: a non-null context is this thread's live worker context; a
    // non-null `current` is the running actor (us), which owns `cancel`.
    unsafe {
        let a = (*c).current;
        // Relaxed: the flag is set once; a late read waits once more and
        // is woken by shutdown's sweep.
        !a.is_null()
            && (*(*c).core).shutdown.load(Ordering::Relaxed)
            && (*(*a).cancel.get() == CANCEL_UNWINDING || P::panicking())
    }
}

/// The id of the calling actor; `None` on a plain OS thread.
pub fn current_id<P: Platform>() -> Option<u64> {
    // SAFETY: `current_actor` returns a live actor (the running one).
    current_actor::<P>().map(|a| unsafe { (*a).id })
}

/// The calling actor's name, if it was spawned with one.
pub fn current_name<P: Platform>() -> Option<Arc<str>> {
    // SAFETY: `current_actor` returns a live actor (the running one).
    current_actor::<P>().and_then(|a| unsafe { (&*a).life.name.clone() })
}

/// The index of the worker the caller runs on; `None` off the runtime
/// (and for an actor detached while it unwinds).
pub fn current_worker<P: Platform>() -> Option<usize> {
    let c = ctx::<P>();
    // SAFETY: as in `current_actor`.
    (!c.is_null() && unsafe { !(*c).detached }).then(|| unsafe { (*c).index })
}

/// Hands `req` to the worker and switches to it; returns when resumed (on
/// whichever worker). No resume point: callers run [`resume_point`].
///
/// # Safety
///
/// `me` is the calling (running) actor, not unwinding.
unsafe fn switch_out<P: Platform>(me: *const Actor, req: Request) {
    // SAFETY: the running actor owns `request` and `sched_sp` (actor doc).
    unsafe {
        crate::sched::local::check_switch(me);
        *(*me).request.get() = req;
        let to = *(*me).sched_sp.get();
        crate::actor::sanitizer::actor_to_worker(&*me, false);
        let back = <P::Arch as Arch>::switch(to);
        crate::actor::sanitizer::actor_resumed(&*me);
        // Resumed: `back` is the sp of the worker that resumed us.
        *(*me).sched_sp.get() = back;
    }
}

/// A resume point: unwinds the actor if the runtime is cancelling it or it
/// was killed, unless it is already unwinding or ending (module doc,
/// "Unwinding": an actor unwinds once).
///
/// # Safety
///
/// `me` is the calling (running) actor.
#[inline(always)]
unsafe fn resume_point<P: Platform>(me: *const Actor) {
    // SAFETY: the running actor owns `cancel`.
    unsafe {
        let c = *(*me).cancel.get();
        if c == CANCEL_REQUESTED {
            raise::<P>(me, alloc::boxed::Box::new(Cancelled));
        }
        // Relaxed: pairs with the kill's Release store; a parked actor's
        // kill is ordered by its wake (the state CAS), a running one's is
        // seen at this or a later resume.
        if c == CANCEL_NONE && (*me).killed.load(Ordering::Relaxed) {
            raise::<P>(me, alloc::boxed::Box::new(crate::actor::life::Killed));
        }
    }
}

/// Starts the actor's cancellation or kill unwind, unless it is unwinding
/// already (then the kill is absorbed: raising inside a destructor would
/// abort the process).
///
/// # Safety
///
/// `me` is the calling (running) actor.
#[cold]
unsafe fn raise<P: Platform>(me: *const Actor, payload: crate::seam::platform::PanicPayload) {
    // SAFETY: the running actor owns `deferred`.
    if P::panicking() || unsafe { *(*me).deferred.get() } != 0 {
        return;
    }
    // SAFETY: the running actor owns `cancel`.
    unsafe { *(*me).cancel.get() = CANCEL_UNWINDING };
    P::resume_unwind(payload)
}

/// Runs `f` with the calling actor's kills and cancellation deferred: its
/// resume points inside `f` do not unwind, and a kill that arrived meanwhile
/// unwinds it at its first resume point after `f` (a supervisor starting a
/// child must get the child's reference, or nobody could stop the child).
/// Off actors, just runs `f`.
pub(crate) fn defer_kills<P: Platform, R>(f: impl FnOnce() -> R) -> R {
    struct Undefer(*const Actor);
    impl Drop for Undefer {
        fn drop(&mut self) {
            // SAFETY: the actor that deferred is the one running this drop
            // (`f` returned or unwound on it): it owns `deferred` and
            // `cancel`.
            unsafe {
                let a = &*self.0;
                *a.deferred.get() -= 1;
                // A kill (or cancellation) skipped inside may have had its
                // wake consumed by a switch there: leave one for the next
                // park (`RUNNING → NOTIFIED`), so it returns at once and its
                // resume point unwinds, instead of parking for good.
                // Relaxed: as the kill flag's read in `resume_point`.
                if *a.deferred.get() == 0
                    && (*a.cancel.get() == CANCEL_REQUESTED
                        || (*a.cancel.get() == CANCEL_NONE && a.killed.load(Ordering::Relaxed)))
                {
                    let _ = crate::actor::wake_word(&a.state);
                }
            }
        }
    }
    let Some(me) = current_actor::<P>() else {
        return f();
    };
    // SAFETY: the running actor owns `deferred`.
    unsafe { *(*me).deferred.get() += 1 };
    let _undefer = Undefer(me);
    f()
}

/// Hands `req` to the worker, switches to it and, once resumed, runs the
/// resume point; while the actor unwinds, does what the module doc's
/// "Unwinding" says instead of switching.
///
/// # Safety
///
/// `me` is the calling (running) actor.
#[inline]
unsafe fn suspend<P: Platform>(me: *const Actor, req: Request) {
    // SAFETY: contract.
    unsafe {
        if suspend_no_resume_point::<P>(me, req) {
            resume_point::<P>(me);
        }
    }
}

/// [`suspend`] without its resume point (spawn: the caller must get the
/// child's handle first). Returns whether the actor switched out (a resume
/// point is due), `false` while it unwinds.
///
/// # Safety
///
/// `me` is the calling (running) actor.
#[inline(always)]
unsafe fn suspend_no_resume_point<P: Platform>(me: *const Actor, req: Request) -> bool {
    // SAFETY: contract.
    unsafe {
        if P::panicking() {
            suspend_unwinding::<P>(me, req);
            return false;
        }
        if *(*me).detached.get() {
            // The unwind was caught inside the actor (its own
            // `catch_unwind`): back to the scheduler first.
            rejoin::<P>(me);
            if matches!(req, Request::Park | Request::Yield) {
                // The rejoin queued us (a yield); a park re-checks.
                return true;
            }
        }
        switch_out::<P>(me, req);
        true
    }
}

/// `suspend` while the actor unwinds: steps 1-4 of the module doc's
/// "Unwinding".
///
/// # Safety
///
/// `me` is the calling (running) actor, unwinding.
#[cold]
unsafe fn suspend_unwinding<P: Platform>(me: *const Actor, req: Request) {
    // SAFETY: contract.
    unsafe {
        match req {
            Request::Yield => {}
            Request::Spawn(child) => schedule(child),
            Request::Park => {
                detach::<P>(me);
                park_in_place::<P>(me);
            }
            _ => P::abort("smarm: an unwinding actor asked its worker for a switch it cannot make"),
        }
    }
}

/// Detaches the unwinding actor from the scheduler (step 3 of "Unwinding"),
/// if it is not already.
///
/// # Safety
///
/// `me` is the calling (running) actor, unwinding.
unsafe fn detach<P: Platform>(me: *const Actor) {
    // SAFETY: the running actor owns `detached`; the switch returns on
    // this same thread (the worker side resumes us in place).
    unsafe {
        if !*(*me).detached.get() {
            switch_out::<P>(me, Request::Detach);
            *(*me).detached.get() = true;
        }
    }
}

/// Back to the scheduler after an unwind detached the actor (step 5 of
/// "Unwinding"): this thread queues it and leaves worker duty; returns on
/// whichever worker resumes it.
///
/// # Safety
///
/// `me` is the calling (running) actor, detached, no longer unwinding.
pub(crate) unsafe fn rejoin<P: Platform>(me: *const Actor) {
    // SAFETY: contract; the running actor owns `detached`.
    unsafe {
        *(*me).detached.get() = false;
        switch_out::<P>(me, Request::Rejoin);
    }
}

/// Step 4 of "Unwinding": waits on this thread until a wake (see
/// [`crate::actor`], step 7). May return spuriously; callers re-check.
///
/// # Safety
///
/// `me` is the calling (running) actor.
unsafe fn park_in_place<P: Platform>(me: *const Actor) {
    // SAFETY: the running actor is alive while it runs.
    if !crate::actor::hold_wait::<P>(unsafe { &(*me).state }) {
        P::abort("smarm: an actor waiting in place was not running");
    }
}

/// Parks the calling actor until a wake (see the state diagram in
/// [`crate::actor`]); `what` it waits on shows in dumps. Spurious returns
/// are possible: callers re-check.
pub(crate) fn park<P: Platform>(what: u8) {
    match current_actor::<P>() {
        // SAFETY: `a` is the running actor.
        Some(a) => unsafe {
            crate::rt::dump::waiting_on(a, what);
            suspend::<P>(a, Request::Park)
        },
        None => P::yield_thread(),
    }
}

/// Lets other actors run: the caller goes to the back of the run queue.
/// On a plain OS thread, yields the thread.
pub fn yield_now<P: Platform>() {
    match current_actor::<P>() {
        // SAFETY: `a` is the running actor.
        Some(a) => unsafe { suspend::<P>(a, Request::Yield) },
        None => P::yield_thread(),
    }
}

/// An armed timer that is cancelled when dropped (also when the waiter
/// unwinds), so a poke never outlives the wait it belongs to.
pub(crate) struct Armed<P: Platform> {
    entry: Arc<TimerEntry>,
    _p: core::marker::PhantomData<fn() -> P>,
}

impl<P: Platform> Armed<P> {
    /// Whether the timer fired.
    pub(crate) fn has_fired(&self) -> bool {
        self.entry.has_fired()
    }
}

impl<P: Platform> Drop for Armed<P> {
    fn drop(&mut self) {
        if self.entry.cancel::<P>() {
            let c = ctx::<P>();
            if !c.is_null() {
                // SAFETY: a non-null context is this thread's live worker
                // context; the runtime it points at outlives its actors.
                unsafe { (*(*c).core).timers.cancelled_one() };
            }
        }
    }
}

/// Arms a timer on the caller's runtime that pokes `target` at
/// `deadline` (ns, platform clock). `None` off the runtime's workers.
pub(crate) fn arm<P: Platform>(deadline: u64, target: impl Poke + 'static) -> Option<Armed<P>> {
    let c = ctx::<P>();
    if c.is_null() {
        return None;
    }
    let entry = timer::entry(target);
    // SAFETY: a non-null context is this thread's live worker context.
    let core = unsafe { &*(*c).core };
    if let Some(i) = core.timers.arm(deadline, &entry) {
        core.idle.notify_worker(i);
    }
    Some(Armed {
        entry,
        _p: core::marker::PhantomData,
    })
}

/// Parks the calling actor until a wake, or until `deadline`, when the
/// timer pokes `target` (which takes the caller's registration in the wait
/// object, exactly as a sender would: see [`crate::sched::timer`]). May return
/// spuriously; callers re-check. On a plain thread: yields.
pub(crate) fn park_until<P: Platform>(what: u8, deadline: u64, target: impl Poke + 'static) {
    let Some(armed) = arm::<P>(deadline, target) else {
        return P::yield_thread();
    };
    park::<P>(what);
    drop(armed);
}

/// Sleeps until `deadline` (ns on the platform clock): an actor parks (its
/// worker runs others; a timer wakes it), a plain thread blocks.
pub fn sleep_until<P: Platform>(deadline: u64) {
    let Some(me) = current_actor::<P>() else {
        let word = AtomicU32::new(0);
        while P::now_ns() < deadline {
            P::wait(&word, 0, Some(deadline));
        }
        return;
    };
    if unwinding::<P>() || P::now_ns() >= deadline {
        return;
    }
    // SAFETY: `me` is the running actor, alive while it runs; the entry
    // takes one more reference for the timer's wake.
    let me_arc = unsafe {
        Arc::increment_strong_count(me);
        Arc::from_raw(me)
    };
    // The entry is the sleep's only registration: the timer wakes us.
    let poke = PokeWith(me_arc, |a: &Arc<Actor>| {
        if let Some(a) = a.clone().wake() {
            schedule(a);
        }
    });
    let Some(armed) = arm::<P>(deadline, poke) else {
        return;
    };
    while !armed.has_fired() {
        park::<P>(crate::rt::dump::WAIT_TIMER);
    }
    // Returns once the poke has returned (the Drop waits for FIRED).
    drop(armed);
}

/// Sleeps for `d` (see [`sleep_until`]).
pub fn sleep<P: Platform>(d: Duration) {
    sleep_until::<P>(deadline_after::<P>(d))
}

/// A safe point for long-running code: yields if the calling actor's
/// timeslice is spent (one read of the cycle counter). Off actors, or with
/// timeslices off, it does nothing.
#[inline]
pub fn checkpoint<P: Platform>() {
    let c = ctx::<P>();
    if c.is_null() {
        return;
    }
    // SAFETY: a non-null context is this thread's live worker context.
    unsafe {
        if !(*c).current.is_null() && slice_spent(c) {
            expire::<P>(c);
        }
    }
}

/// Whether the running actor's slice is spent (stamping its start if this
/// is the first check since the resume).
///
/// # Safety
///
/// `c` is this thread's live worker context.
#[inline(always)]
unsafe fn slice_spent<P: Platform>(c: *mut WorkerCtx<P>) -> bool {
    // SAFETY: contract.
    unsafe {
        let end = (*c).slice_end;
        if end == u64::MAX {
            return false; // timeslices off
        }
        let now = <P::Arch as Arch>::cycles();
        if end == 0 {
            (*c).slice_end = now.saturating_add((*c).slice_cycles);
            return false;
        }
        now >= end
    }
}

/// The safe point inside sends and receives: counts down a budget and
/// reads the cycle counter only when it runs out.
#[inline]
pub(crate) fn safe_point<P: Platform>() {
    let c = ctx::<P>();
    if c.is_null() {
        return;
    }
    // SAFETY: a non-null context is this thread's live worker context.
    unsafe {
        (*c).budget -= 1;
        if (*c).budget != 0 {
            return;
        }
        (*c).budget = SAFE_POINT_BUDGET;
        if !(*c).current.is_null() && slice_spent(c) {
            expire::<P>(c);
        }
    }
}

/// The running actor's timeslice is spent: count it and yield.
///
/// # Safety
///
/// `c` is this thread's live worker context, running an actor.
#[cold]
unsafe fn expire<P: Platform>(c: *mut WorkerCtx<P>) {
    // SAFETY: contract; no reference is held across the yield.
    unsafe {
        let me = (*c).current;
        if !(*c).detached {
            (*(*c).core).workers[(*c).index].counters.timeslice_expiries(1);
        }
        suspend::<P>(me, Request::Yield);
    }
}

/// Runs `f`, which may block its OS thread (file I/O, a C call, a lock),
/// without stalling other actors: the worker hands its duty to another
/// thread (a spare one, or a new one) and `f` runs on this thread, on the
/// actor's own stack; the actor then rejoins the run queue. Inside `f` the
/// caller is a plain thread as far as the runtime is concerned: receives
/// block the thread, `spawn` needs a `Runtime` handle. Off actors, `f` just
/// runs. A panic in `f` propagates after the actor has rejoined.
pub fn blocking<P: Platform, R>(f: impl FnOnce() -> R) -> R {
    let Some(me) = current_actor::<P>() else {
        return f();
    };
    // SAFETY: `me` is the running actor, which owns `detached`.
    unsafe {
        if P::panicking() {
            // Unwinding: no switch (module doc): `f` runs in place, after
            // the worker's duty has moved to another thread.
            detach::<P>(me);
            return f();
        }
        if *(*me).detached.get() {
            rejoin::<P>(me);
        }
        // A resume point: a pending kill unwinds here, before the handoff.
        resume_point::<P>(me);
    }
    crate::rt::dump::waiting_on(me, crate::rt::dump::WAIT_BLOCKING);
    // SAFETY: `me` is the running actor; the worker hands its duty away and
    // resumes us on this thread, detached (no current worker). No resume
    // point here: an unwind must not start off the runtime (it would reach
    // the entry without rejoining); a kill shows after the rejoin.
    unsafe { switch_out::<P>(me, Request::Block) };
    let mut f = Some(f);
    let mut out = None;
    let r = P::catch_unwind(&mut || {
        if let Some(f) = f.take() {
            out = Some(f());
        }
    });
    crate::rt::dump::waiting_on(me, crate::rt::dump::WAIT_NONE);
    // SAFETY: as above; the thread's old worker frame requeues us and
    // retires (the actor resumes on whichever worker takes it).
    unsafe { switch_out::<P>(me, Request::Rejoin) };
    match (r, out) {
        (Ok(()), Some(v)) => {
            // SAFETY: `me` is the running actor (on a worker again).
            unsafe { resume_point::<P>(me) };
            v
        }
        (Err(payload), _) => P::resume_unwind(payload),
        (Ok(()), None) => P::abort("smarm: a blocking call returned without a value"),
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
    spawn_with_id::<P, F, T>(None, |_| f)
}

/// [`try_spawn`] with a name (in join errors, `Down` notices and reports).
pub fn try_spawn_named<P, F, T>(name: &str, f: F) -> Result<JoinHandle<T, P>, SpawnError>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_with_id::<P, F, T>(Some(Arc::from(name)), |_| f)
}

/// [`try_spawn`] with the body built from the child's id (so it can own
/// things that name the child, such as its mailbox).
/// `build` makes the body from the child's [`Life`] (its id and name).
pub(crate) fn spawn_with_id<P, F, T>(
    name: Option<Arc<str>>,
    build: impl FnOnce(&Arc<Life>) -> F,
) -> Result<JoinHandle<T, P>, SpawnError>
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
        if !(*c).detached {
            core.workers[(*c).index].counters.spawned(1);
        }
        let life = Life::new(id, name, stack.usable_range());
        let body = build(&life);
        let (child, handle) = core.new_actor::<F, T>(id, life, stack, body);
        core.registry[(*c).index].add((*c).index as u32, &child);
        (child, handle)
    };
    // SAFETY: `me` is the running actor. No resume point after the switch:
    // the caller gets the child's handle even if it was killed meanwhile
    // (the kill unwinds it at its next resume point).
    unsafe { suspend_no_resume_point::<P>(me, Request::Spawn(child)) };
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
    try_spawn_actor_inner::<P, M, F, T>(None, f)
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
    try_spawn_actor_inner::<P, M, F, T>(Some(Arc::from(name)), f)
}

#[allow(clippy::type_complexity)]
fn try_spawn_actor_inner<P, M, F, T>(
    name: Option<Arc<str>>,
    f: F,
) -> Result<(Addr<M, P>, JoinHandle<T, P>), SpawnError>
where
    P: Platform,
    M: Send + 'static,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    let mut addr = None;
    let h = spawn_with_id::<P, _, T>(name, |life| mailbox::bind(life, f, &mut addr))?;
    Ok((addr.expect("the body builder ran"), h))
}

/// Entry of every actor's stack: runs its body, then exits to the worker.
unsafe extern "C" fn actor_entry<P: Platform>(from: *mut u8, arg: *mut u8) -> ! {
    let me = arg as *const Actor;
    // SAFETY: `arg` is the actor, kept alive by the worker running it; the
    // running actor owns `sched_sp` and `entry`.
    unsafe {
        crate::actor::sanitizer::actor_started(&*me);
        *(*me).sched_sp.get() = from;
        let entry = (*(*me).entry.get()).take();
        let wake = match entry {
            Some(entry) => entry(&*me),
            None => None,
        };
        *(*me).request.get() = Request::Exit(wake);
        let to = *(*me).sched_sp.get();
        crate::actor::sanitizer::actor_to_worker(&*me, true);
        <P::Arch as Arch>::switch(to);
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
        // A detached one's worker is served by another thread (its slot is
        // not ours to fill): queue instead.
        if !c.is_null() && ptr::eq(unsafe { (*c).core }, &self.core) && unsafe { !(*c).detached } {
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

    fn unpark(&self, word: &AtomicU32) {
        P::wake_all(word);
    }
}

/// Switches from the worker's stack into actor `a` and returns when it
/// switches back, its sp saved (the sanitizers told of both switches).
///
/// # Safety
///
/// The caller owns `a` (it took it from a queue or slot, or was handed it)
/// and is the worker (or detached host) that runs it on this thread.
#[inline(always)]
unsafe fn resume_actor<P: Platform>(a: &Actor) {
    // SAFETY: contract: we own `a`'s `sp` cell until we publish it again.
    unsafe {
        let to = *a.sp.get();
        let san = crate::actor::sanitizer::worker_to_actor(a);
        let back = <P::Arch as Arch>::switch(to);
        crate::actor::sanitizer::worker_resumed(san);
        *a.sp.get() = back;
    }
}

/// What a worker does after running an actor.
enum Next {
    /// Search for work.
    Find,
    /// Run this actor at once (it inherits the timeslice).
    Run(Arc<Actor>),
    /// Leave worker duty: another thread serves this worker now.
    Retire,
}

/// Why [`run_worker`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkerExit {
    /// The runtime finished.
    Finished,
    /// A blocking call handed this worker to another thread.
    Retired,
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

    /// [`push`](Self::push) from a thread that is not (or no longer) a
    /// worker: counted in the outside block.
    fn push_outside(&self, a: Arc<Actor>) {
        self.core.outside.shared_enqueued(1);
        self.queue.push(a);
        if self.core.idle.notify_one() {
            self.core.outside.shared_wakeups(1);
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

    /// Consecutive run-next runs before the queue is served first. With
    /// timeslices on, an actor woken into the slot inherits its waker's
    /// slice, so a ping-pong pair yields when their shared slice is spent
    /// and needs no cap (the cap would hand the queue a full slice for
    /// every three of the pair's turns).
    #[inline]
    fn run_next_cap(&self) -> u32 {
        if self.core.slice_cycles != 0 {
            u32::MAX
        } else {
            RUN_NEXT_CAP
        }
    }

    /// Step 1 of a turn, short of sleeping. The flag says whether the actor
    /// came from this worker's own run-next slot (it inherits the slice).
    ///
    /// # Safety
    ///
    /// `ctx` is the calling worker's context.
    unsafe fn find_work(&self, ctx: *mut WorkerCtx<P>) -> Option<(Arc<Actor>, bool)> {
        // SAFETY: `ctx` is ours (caller contract).
        let (index, streak) = unsafe { ((*ctx).index, &mut (*ctx).streak) };
        let me = &self.core.workers[index];
        if P::SEEDED_SCHEDULE {
            self.seeded_pick(me);
        }
        if *streak < self.run_next_cap() {
            if let Some(a) = Self::take_slot(&me.run_next) {
                *streak += 1;
                me.counters.run_next(1);
                return Some((a, true));
            }
        }
        *streak = 0;
        if let Some(a) = self.pop_queue(me) {
            return Some((a, false));
        }
        // The cap skipped the slot and the queue was empty: run the slot.
        if let Some(a) = Self::take_slot(&me.run_next) {
            me.counters.run_next(1);
            return Some((a, false));
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
                return Some((a, false));
            }
        }
        None
    }

    /// Deterministic testing: lets the platform's seeded policy choose the
    /// next actor. The worker's run-next actor joins the queue's tail, then
    /// the queue rotates by `P::pick(len)` (the skipped actors re-queue in
    /// order), so the usual pop below takes the chosen one. O(queue) per
    /// turn; only a seeded port (one worker thread running at a time, so
    /// the rotation is not raced) compiles it in.
    #[cold]
    fn seeded_pick(&self, me: &WorkerShared) {
        if let Some(a) = Self::take_slot(&me.run_next) {
            me.counters.enqueued(1);
            self.queue.push(a);
        }
        let n = self.queue.len();
        if n < 2 {
            return;
        }
        for _ in 0..P::pick(n) % n {
            match self.queue.pop() {
                Some(a) => self.queue.push(a),
                None => break,
            }
        }
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

    /// Fires the timers due now, if any may be (a Relaxed hint first).
    #[inline]
    fn fire_timers(&self, w: &WorkerShared) {
        let t = &self.core.timers;
        let mut now = 0;
        if t.maybe_due(|| {
            now = P::now_ns();
            now
        }) {
            let n = t.fire(now);
            w.counters.timer_fires(n);
        }
    }

    /// Nothing to run: sleep (until the earliest timer, for the one worker
    /// that claims them), or decide the worker is done. Returns `true` when
    /// the worker should exit.
    fn idle(&self, index: usize) -> bool {
        let core = &self.core;
        if core.finished.load(Ordering::SeqCst) {
            return true;
        }
        if core.shutdown.load(Ordering::SeqCst) && core.timers.next() != timer::NEVER {
            // Shutdown does not wait for timers: fire them all now, so
            // sleepers and timed waits resume and are cancelled (their
            // joiners see `Cancelled`) instead of being abandoned.
            let n = core.timers.fire(u64::MAX);
            core.workers[index].counters.timer_fires(n);
            return false;
        }
        if core.shutdown.load(Ordering::SeqCst) {
            // Every worker idle with nothing queued and nobody inside a
            // blocking call: the remaining actors (if any) are parked with
            // nobody left to wake them. Wake them (from the registry) so
            // they resume, are cancelled and unwind; an actor that swallows
            // the cancellation and parks again is left after a few sweeps.
            let others_idle = core.idle.sleepers() as usize + 1 >= core.workers.len();
            let blocked = core.blocked.load(Ordering::SeqCst);
            // Read after `blocked` (both SeqCst): an unwinder leaving
            // decrements this first, so a stale pair errs towards "a
            // blocking call is in flight" (no sweep yet).
            let unwinders = core.unwinders.load(Ordering::SeqCst);
            if core.live.load(Ordering::SeqCst) == 0 {
                self.finish();
                return true;
            }
            // Detached unwinders may wait on parked actors: sweep those
            // while they wait, but finish only once they are back.
            if others_idle && blocked == unwinders {
                // Relaxed: a bound on retries, not a protocol.
                if core.sweeps.fetch_add(1, Ordering::Relaxed) < SHUTDOWN_SWEEPS && self.wake_parked() > 0 {
                    return false;
                }
                // A plain thread's wake (a send from outside) may have
                // queued an actor since `find_work` looked: run it rather
                // than abandon it (loom: `loom_shutdown.rs`,
                // `outside_wake_races_the_sweep`). A push after this look
                // is left over, as `Runtime::stop` documents.
                if self.has_work() {
                    return false;
                }
                if blocked == 0 {
                    self.finish();
                    return true;
                }
            }
        }
        let w = &core.workers[index];
        // Due timers first: what they wake lands in our run-next slot, and
        // the sleep below re-checks it.
        self.fire_timers(w);
        let t = &core.timers;
        let claimed = t.claim(index);
        let deadline = if claimed { t.next() } else { timer::NEVER };
        let slept = core.idle.sleep(
            index,
            || {
                self.has_work()
                    || (claimed && t.changed(deadline))
                    // At shutdown, the last worker to go idle must not
                    // sleep: it decides that the runtime is finished (two
                    // workers checking `others_idle` at once both see the
                    // other awake; once on the list, the later sees both).
                    || (core.shutdown.load(Ordering::SeqCst)
                        && core.idle.sleepers() as usize >= core.workers.len())
            },
            (deadline != timer::NEVER).then_some(deadline),
        );
        if claimed {
            t.release(index);
            // Timers remain and other workers sleep without a deadline:
            // hand the role to one of them (we may be about to run a long
            // actor).
            if t.next() != timer::NEVER && core.idle.sleepers() > 0 {
                core.idle.notify_one();
            }
        }
        if slept {
            w.counters.parks(1);
        }
        // Whatever woke us, timers may be due.
        self.fire_timers(w);
        false
    }

    /// An actor ended (its stack already dealt with): marks it done, drops
    /// the worker's reference, and wakes its joiner into the run-next slot.
    fn retire(&self, w: &WorkerShared, a: Arc<Actor>, wake: Option<Arc<Actor>>) -> Next {
        if let Some(j) = self.end_actor(a, wake) {
            self.put_run_next(w, j);
        }
        Next::Find
    }

    /// The bookkeeping of an actor's end, wherever it ended: marks it done,
    /// drops the caller's reference and counts it gone; returns its joiner
    /// if that must now be scheduled.
    fn end_actor(&self, a: Arc<Actor>, wake: Option<Arc<Actor>>) -> Option<Arc<Actor>> {
        // Release: a joiner never reads it; debugging aid only.
        a.state.store(DONE, Ordering::Release);
        self.unregister(&a);
        drop(a);
        let left = self.core.live.fetch_sub(1, Ordering::SeqCst) - 1;
        if left == 0 && self.core.shutdown.load(Ordering::SeqCst) {
            self.core.idle.notify_all();
        }
        wake.and_then(Actor::wake)
    }

    /// Takes an ended actor out of the registry (dumps).
    fn unregister(&self, a: &Actor) {
        // Relaxed: the shard bits never change after registration, which
        // happened before the actor first ran; `remove` re-reads under the
        // shard's lock.
        let reg = a.reg.load(Ordering::Relaxed);
        if reg != crate::rt::dump::UNREGISTERED {
            self.core.registry[(reg >> 32) as usize].remove(a);
        }
    }

    /// Shutdown: makes every parked actor runnable (it is then cancelled
    /// at its resume point). Returns how many were woken.
    fn wake_parked(&self) -> usize {
        let mut parked = Vec::new();
        for s in self.core.registry.iter() {
            s.parked(&mut parked);
        }
        let mut woken = 0;
        for a in parked {
            if let Some(a) = a.wake() {
                woken += 1;
                schedule(a);
            }
        }
        woken
    }

    /// Marks the runtime finished and releases every waiting thread.
    fn finish(&self) {
        let core = &self.core;
        core.finished.store(true, Ordering::SeqCst);
        core.idle.notify_all();
        let spares = core::mem::take(&mut *core.spares.lock());
        for s in spares {
            // Release: pairs with the spare's Acquire load.
            s.word.store(SPARE_EXIT, Ordering::Release);
            P::wake_one(&s.word);
        }
    }

    /// Hands worker `index` to a spare thread, or to a new one. Returns
    /// `false` if no thread could be started (the caller keeps the duty).
    fn hand_off(&self, index: usize) -> bool {
        let spare = self.core.spares.lock().pop();
        if let Some(s) = spare {
            // Release: pairs with the spare's Acquire load; everything this
            // worker did is visible to its successor.
            s.word.store(index as u32 + 1, Ordering::Release);
            P::wake_one(&s.word);
            return true;
        }
        // SAFETY: `self` lives in the `Arc` the builder made (every
        // `Shared` does) and is alive (we run on one of its workers): take
        // one more reference for the new thread.
        let me = unsafe {
            Arc::increment_strong_count(self as *const Self);
            Arc::from_raw(self as *const Self)
        };
        let name = alloc::format!("smarm-worker-{index}+");
        match P::spawn_thread(name, Box::new(move || worker_thread(&me, index, true))) {
            Ok(t) => {
                self.core.extra_threads.lock().push(t);
                true
            }
            // (The closure, and its reference, were dropped.)
            Err(_) => false,
        }
    }

    /// Steps 2–4: runs `a` until it switches back, then carries out its
    /// request. `inherit`: keep the current timeslice (the actor was handed
    /// over by the last turn or woken into our run-next slot).
    ///
    /// # Safety
    ///
    /// `ctx` is the calling worker's context.
    unsafe fn run(&self, ctx: *mut WorkerCtx<P>, a: Arc<Actor>, inherit: bool) -> Next {
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
            if !inherit && self.core.slice_cycles != 0 {
                // A fresh slice, stamped by the first safe point (module doc).
                (*ctx).slice_end = 0;
            }
            let monitored = self.core.hold_ns != 0;
            // Relaxed: samples for dumps and the monitor, which tolerate
            // staleness.
            w.samples.running.store(a.id, Ordering::Relaxed);
            if monitored {
                (*ctx).resumes += 1;
                // Relaxed: as above.
                w.samples.resumes.store((*ctx).resumes, Ordering::Relaxed);
            }
            (*ctx).current = Arc::as_ptr(&a);
            resume_actor::<P>(&a);
            (*ctx).current = ptr::null();
            if monitored {
                self.end_hold(w, index, a.id, (*ctx).resumes);
            } else {
                // Relaxed: as above.
                w.samples.running.store(0, Ordering::Relaxed);
            }
            w.counters.switches(1);
            match mem::replace(&mut *a.request.get(), Request::None) {
                Request::Yield => {
                    a.state.store(RUNNABLE, Ordering::Relaxed);
                    self.push(a, &w.counters);
                    Next::Find
                }
                Request::Park => {
                    crate::seam::failpoint::hit(crate::seam::failpoint::Site::BeforeParkCas);
                    // AcqRel: Release publishes the saved sp to the waker's
                    // Acquire load; Acquire sees a NOTIFIED waker's writes.
                    match a
                        .state
                        .compare_exchange(RUNNING, PARKED, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => {
                            // The waker's registration holds it now.
                            crate::seam::failpoint::hit(crate::seam::failpoint::Site::AfterParkCas);
                            Next::Find
                        }
                        Err(s) => {
                            debug_assert_eq!(s, NOTIFIED);
                            a.state.store(RUNNING, Ordering::Relaxed);
                            Next::Run(a)
                        }
                    }
                }
                Request::Spawn(child) => {
                    self.put_run_next(w, a);
                    Next::Run(child)
                }
                Request::Exit(wake) => {
                    crate::actor::sanitizer::retired(&a);
                    if let Some(stack) = (*a.stack.get()).take() {
                        self.core.pool.put(&mut (*ctx).stacks, stack);
                    }
                    self.retire(w, a, wake)
                }
                Request::Block => {
                    self.core.blocked.fetch_add(1, Ordering::SeqCst);
                    if !self.hand_off(index) {
                        // No thread to take over (the OS refused one): the
                        // call runs here and blocks this worker, as it
                        // would without `blocking`; nothing is lost.
                        self.core.blocked.fetch_sub(1, Ordering::SeqCst);
                        return Next::Run(a);
                    }
                    // From here on this thread is no longer worker `index`:
                    // it touches none of the worker's shared state again.
                    P::set_current_worker(ptr::null_mut());
                    resume_actor::<P>(&a);
                    match mem::replace(&mut *a.request.get(), Request::None) {
                        Request::Rejoin => {}
                        _ => P::abort("smarm: an actor left a blocking call without rejoining"),
                    }
                    a.state.store(RUNNABLE, Ordering::Relaxed);
                    self.push_outside(a);
                    self.core.blocked.fetch_sub(1, Ordering::SeqCst);
                    Next::Retire
                }
                Request::Detach => self.detached(ctx, index, a),
                Request::Overflowed(wake) => {
                    // The frames on the stack were abandoned without
                    // unwinding and may have lent its memory out (scoped
                    // threads, pinned wait nodes): never reuse or unmap it.
                    // (Taking the descriptor out is the leak: `RawStack` has
                    // no destructor, and the actor's drop no longer sees it.)
                    let _leaked: Option<RawStack> = (*a.stack.get()).take();
                    crate::actor::sanitizer::retired(&a);
                    self.retire(w, a, wake)
                }
                // Back from a blocking call that ran on the worker (no
                // thread could take over): a yield.
                Request::Rejoin => {
                    a.state.store(RUNNABLE, Ordering::Relaxed);
                    self.push(a, &w.counters);
                    Next::Find
                }
                Request::None => P::abort("smarm: an actor switched out without a request"),
            }
        }
    }

    /// `Request::Detach` (module doc, "Unwinding", step 3): hands worker
    /// `index` to another thread and resumes the unwinding actor here,
    /// with this context marked detached, until it sends `Rejoin`. If no
    /// thread can take over (the OS refused one), this thread keeps the
    /// duty and serves it again once the actor rejoins (meanwhile the
    /// worker waits with the actor, as `blocking` without a thread does).
    ///
    /// # Safety
    ///
    /// As [`run`](Self::run); `a` has just switched out with `Detach`.
    #[cold]
    unsafe fn detached(&self, ctx: *mut WorkerCtx<P>, index: usize, a: Arc<Actor>) -> Next {
        let core = &self.core;
        core.blocked.fetch_add(1, Ordering::SeqCst);
        core.unwinders.fetch_add(1, Ordering::SeqCst);
        let handed = self.hand_off(index);
        // SAFETY: (whole body) `ctx` is ours; we own `a` until it is queued.
        unsafe {
            // From here on, if `handed`, this thread is no longer worker
            // `index`: neither it nor the actor touches that worker's
            // shared state (the context's own caches stay ours).
            (*ctx).detached = true;
            (*ctx).current = Arc::as_ptr(&a);
            resume_actor::<P>(&a);
            (*ctx).current = ptr::null();
            (*ctx).detached = false;
            let req = mem::replace(&mut *a.request.get(), Request::None);
            core.unwinders.fetch_sub(1, Ordering::SeqCst);
            match req {
                Request::Rejoin => {}
                Request::Overflowed(wake) => {
                    // Overflow recovery while detached: as in `run`, the
                    // stack is abandoned; the joiner is woken through the
                    // queue (this thread may own no worker).
                    let _leaked: Option<RawStack> = (*a.stack.get()).take();
                    crate::actor::sanitizer::retired(&a);
                    if let Some(j) = self.end_actor(a, wake) {
                        self.push_outside(j);
                    }
                    core.blocked.fetch_sub(1, Ordering::SeqCst);
                    return if handed { Next::Retire } else { Next::Find };
                }
                _ => P::abort("smarm: a detached actor switched out without rejoining"),
            }
            if !handed {
                core.blocked.fetch_sub(1, Ordering::SeqCst);
                return Next::Run(a);
            }
            a.state.store(RUNNABLE, Ordering::Relaxed);
            self.push_outside(a);
            core.blocked.fetch_sub(1, Ordering::SeqCst);
            Next::Retire
        }
    }

    /// After an actor switched out of worker `index` (long-hold monitor
    /// on): clears the running id and, if the monitor reported this hold,
    /// reports its full length.
    #[inline]
    fn end_hold(&self, w: &WorkerShared, index: usize, id: u64, resumes: u64) {
        // Relaxed: samples for the monitor.
        w.samples.running.store(0, Ordering::Relaxed);
        if w.samples.hold_since.load(Ordering::Relaxed) != 0 {
            self.report_end_hold(w, index, id, resumes);
        }
    }

    #[cold]
    fn report_end_hold(&self, w: &WorkerShared, index: usize, id: u64, resumes: u64) {
        // Acquire: pairs with the monitor's Release store of `hold_since`,
        // after its store of `hold_seq`.
        let since = w.samples.hold_since.swap(0, Ordering::Acquire);
        // A report about an earlier hold that ended while the monitor was
        // reporting it (Relaxed: ordered by the swap above).
        if since == 0 || w.samples.hold_seq.load(Ordering::Relaxed) != resumes {
            return;
        }
        if let Some(hook) = &self.core.hold_hook {
            hook(&LongHold {
                actor: id,
                worker: index,
                held: Duration::from_nanos(P::now_ns().saturating_sub(since)),
                finished: true,
            });
        }
    }
}

/// The body of a worker thread: serves worker `index` (taking it over from
/// a thread inside a blocking call if `took_over`), then, if a blocking
/// call took it off duty, waits as a spare to take over another worker.
pub(crate) fn worker_thread<P: Platform, Q: RunQueue<P>>(
    shared: &Shared<P, Q>,
    index: usize,
    took_over: bool,
) {
    let mut index = index;
    let mut took_over = took_over;
    while run_worker(shared, index, took_over) == WorkerExit::Retired {
        if P::panicking() {
            // An unwind on this thread never ended (an actor overflowed its
            // stack while detached and unwinding): its panic count stays
            // raised, so it must not run actors again.
            return;
        }
        took_over = true;
        let spare = Arc::new(Spare {
            word: AtomicU32::new(0),
        });
        {
            let mut list = shared.core.spares.lock();
            // Under the lock: `finish` sets `finished` before draining the
            // list under it, so either it drains us or we see the flag.
            if shared.core.finished.load(Ordering::SeqCst) {
                return;
            }
            list.push(spare.clone());
        }
        loop {
            // Acquire: pairs with the Release store in `hand_off`/`finish`.
            match spare.word.load(Ordering::Acquire) {
                0 => P::wait(&spare.word, 0, None),
                SPARE_EXIT => return,
                i => {
                    index = i as usize - 1;
                    break;
                }
            }
        }
    }
}

/// Serves worker `index` until the runtime finishes or a blocking call
/// retires this thread from it. `took_over`: the worker's previous thread
/// handed it over for a blocking call (counted here, by the worker's new
/// single writer of its counters).
pub(crate) fn run_worker<P: Platform, Q: RunQueue<P>>(
    shared: &Shared<P, Q>,
    index: usize,
    took_over: bool,
) -> WorkerExit {
    let mut ctx = WorkerCtx::<P> {
        core: &shared.core,
        index,
        current: ptr::null(),
        detached: false,
        stacks: Vec::new(),
        nodes: NodeCache::new(),
        streak: 0,
        id_next: 0,
        id_end: 0,
        slice_end: if shared.core.slice_cycles != 0 {
            0
        } else {
            u64::MAX
        },
        slice_cycles: shared.core.slice_cycles,
        budget: SAFE_POINT_BUDGET,
        timer_turns: TIMER_CHECK_TURNS,
        resumes: 0,
    };
    let ctxp: *mut WorkerCtx<P> = &mut ctx;
    P::set_current_worker(ctxp.cast());
    let w = &shared.core.workers[index];
    if took_over {
        w.counters.blocking_handoffs(1);
    }
    let mut next = Next::Find;
    let exit = loop {
        // SAFETY: `ctxp` is this worker's context; no reference to it is
        // held across a switch.
        unsafe {
            (*ctxp).timer_turns -= 1;
            if (*ctxp).timer_turns == 0 {
                (*ctxp).timer_turns = TIMER_CHECK_TURNS;
                shared.fire_timers(w);
            }
        }
        if P::SEEDED_SCHEDULE {
            P::turn_point();
        }
        let (a, inherit) = match mem::replace(&mut next, Next::Find) {
            Next::Run(a) => (a, true),
            Next::Retire => break WorkerExit::Retired,
            // SAFETY: `ctxp` is this worker's context.
            Next::Find => match unsafe { shared.find_work(ctxp) } {
                Some(found) => found,
                None => {
                    if shared.idle(index) {
                        break WorkerExit::Finished;
                    }
                    continue;
                }
            },
        };
        // SAFETY: `ctxp` is this worker's context.
        next = unsafe { shared.run(ctxp, a, inherit) };
    };
    P::set_current_worker(ptr::null_mut());
    // SAFETY: the worker loop has ended; nothing else uses the context.
    let stacks = unsafe { &mut (*ctxp).stacks };
    shared.core.pool.free_local(stacks);
    // (The node cache frees its blocks when `ctx` drops.)
    exit
}

/// The long-hold monitor: samples every worker every quarter of the bound
/// and reports an actor that has held one past the bound without reaching
/// a safe point (once per hold; the worker reports the hold's full length
/// when it ends).
pub(crate) fn run_monitor<P: Platform, Q: RunQueue<P>>(shared: &Shared<P, Q>) {
    let core = &shared.core;
    let n = core.workers.len();
    let period = (core.hold_ns / 4).max(100_000);
    // Per worker: the resume count last seen, and when it was first seen.
    let mut seen: Vec<(u64, u64)> = (0..n).map(|_| (u64::MAX, 0)).collect();
    let mut reported: Vec<bool> = (0..n).map(|_| false).collect();
    loop {
        let now = P::now_ns();
        // SeqCst: pairs with the store in `Runtime::stop`.
        if core.monitor_word.load(Ordering::SeqCst) != 0 {
            return;
        }
        for (i, w) in core.workers.iter().enumerate() {
            // Relaxed: samples (see `WorkerShared`).
            let resumes = w.samples.resumes.load(Ordering::Relaxed);
            let id = w.samples.running.load(Ordering::Relaxed);
            if id == 0 || resumes != seen[i].0 {
                seen[i] = (resumes, now);
                reported[i] = false;
                continue;
            }
            let held = now - seen[i].1;
            if held >= core.hold_ns && !reported[i] {
                reported[i] = true;
                // The monitor is this counter's only writer.
                w.counters.long_holds(1);
                if let Some(hook) = &core.hold_hook {
                    hook(&LongHold {
                        actor: id,
                        worker: i,
                        held: Duration::from_nanos(held),
                        finished: false,
                    });
                }
                // Relaxed, then Release: pairs with the worker's Acquire
                // swap of `hold_since`, which it reads `hold_seq` after.
                w.samples.hold_seq.store(resumes, Ordering::Relaxed);
                w.samples.hold_since.store(seen[i].1.max(1), Ordering::Release);
            }
        }
        P::wait(&core.monitor_word, 0, Some(now + period));
    }
}
