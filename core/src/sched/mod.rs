//! The scheduler: the worker loop (generic over the run queue, so it is
//! monomorphised per variant) and the actor-side calls that switch back to
//! it (generic over the platform only).
//!
//! # One worker turn
//!
//! 1. Find an actor: the one handed over by the last turn (a work-first
//!    child, or an actor whose park was pre-empted by a wake), else the
//!    worker's own run-next slot, else the shared run queue (other
//!    workers' parts of it included), else sleep ([`crate::sched::idle`]).
//! 2. Store `RUNNING`, publish it as this worker's current actor, switch in.
//! 3. The actor runs until it switches back with a [`Request`].
//! 4. Back on the worker's stack, store the actor's sp and carry out the
//!    request (requeue, park, run a child first, or clean up an exit). Only
//!    now may another worker see the actor: its stack is no longer in use.
//!
//! A park or a yield usually skips 4 and the next 1–2: the actor switches
//! straight to whom step 1 would find, and that actor carries out the
//! request on its own stack ([`handoff()`]'s direct handoff), with the same
//! bookkeeping and the same rule (the request only once the stack is left).
//!
//! # Spawn: work-first under load, help-first when idle
//!
//! `spawn` from an actor, with other work waiting on its worker (the
//! run-next slot full, or actors queued on the worker's part of the run
//! queue), runs the child at once; the parent waits in the run-next slot
//! (displacing whatever was there to the queue, where idle workers take
//! it). A spawn tree is thus walked depth-first and the number of live
//! stacks stays near depth × workers instead of growing with the tree's
//! width: skynet's million leaves never need a million stacks. On a
//! worker with nothing else to run, the child takes the run-next slot and
//! the parent goes on, so a parent that spawns and ends leaves no stack
//! behind (a chain of 1,000 spawns otherwise holds 1,000 stacks); a
//! parent that joins the child next switches into it at the join
//! ([`start::run_joined_here`]). After [`start::WORK_FIRST_RUN`] work-first
//! spawns in a row with no spawner resumed, the next spawn queues its
//! child and goes on: a chain started on a busy worker would otherwise
//! hold all its spawners, each displaced from the slot to the queue by
//! the next. See [`start_here`].
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
//! Safe points (sends and receives once per budget of calls, which adapts
//! to how fast they come: [`SAFE_POINT_BUDGET_MAX`]; [`checkpoint`] every
//! call, spawn always) yield once the slice is spent. The slice thus
//! starts, and ends, up to one budget of safe points late: about a
//! [`CLOCK_READ_SHARE`]-th of a slice once the budget has adapted. An actor
//! whose slice is spent first moves the run-next slot's actor to the run
//! queue (it would inherit the spent slice), then yields
//! ([`timeslice::expire`]): one expiry per slice, and the queue gets its
//! turn even from a chain of wakes that never leaves the slot empty.
//! One exception: when the slot's actor is one the expiring actor woke in
//! its turn and nothing is queued on this worker, the two swap places
//! (`Request::YieldBehind`): the woken actor runs now with a fresh slice
//! and the yielder waits in the slot (see "A worker's run-next actor is
//! its own").
//!
//! # A worker's run-next actor is its own
//!
//! No other worker takes the actor in a worker's run-next slot: the
//! worker runs it as soon as its current actor switches out, by its
//! timeslice at the latest (or when it reaches a safe point after it; an
//! actor that never reaches one holds its slot's actor too, as it holds its
//! worker: the long-hold monitor reports both). What the slot displaces,
//! and what an expiry moves out of it, goes to the run queue, which idle
//! workers take from at once. The worker never sleeps with its slot full
//! (its idle check, `has_work`, reads its own slot), and only its serving
//! thread writes the slot, so every put and take is a plain load and store
//! (`lockfree::slot::Slot`).
//!
//! Why: a producer and the consumer it keeps waking (Savina's Counting)
//! ran 2.8x slower on two workers than on one. At the producer's expiry
//! both went to the queue and the idle worker took one; from then on every
//! message crossed cores, a node's cache line each way per message. With
//! the swap above the pair never reaches the queue, and with the slot its
//! own the idle worker cannot split it through the slot: it runs on one
//! worker as on a one-worker runtime (docs/benchmarks.md, "A producer and
//! its consumer stay on one worker"). Independent work still spreads: what
//! is queued is taken at once, which is how a second pair, or the siblings
//! a spawn tree displaces, reach the other workers. An earlier form let an
//! idle worker steal the slot of a worker that had stopped finding work;
//! the two swaps that made the slot safe for thieves were most of what a
//! second worker added to each hop of a token ring (docs/benchmarks.md,
//! "The run-next slot is its worker's own").
//!
//! # Blocking calls
//!
//! [`blocking()`] asks the worker (`Request::Block`) to hand its duty to a
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
//!    hands its duty to a spare thread, as for [`blocking()`], and resumes
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

mod blocking;
mod config;
pub(crate) use config::SchedConfig;
pub mod counters;
mod handoff;
pub mod idle;
pub mod io;
mod live;
pub mod local;
mod monitor;
mod nodes;
pub(crate) use nodes::{
    block_alloc, block_free, node_alloc, node_alloc_in, node_free, node_free_in, WorkerBlocks,
};
pub(crate) mod names;
pub mod overflow;
pub mod queue;
pub(crate) mod registry;
mod run;
mod serve;
mod shutdown;
mod sleep;
mod spin;
pub(crate) mod stack;
mod start;
mod switch;
pub mod timer;
mod timeslice;
mod worker;

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::mem;
use core::ptr::{self, NonNull};
use core::time::Duration;

pub use self::blocking::*;
pub(crate) use self::handoff::*;
pub use self::monitor::*;
pub use self::sleep::*;
pub(crate) use self::start::{run_joined_here, start_here};
pub use self::switch::*;
pub use self::timeslice::*;
pub(crate) use self::worker::*;

use crate::actor::life::Life;
use crate::actor::Entry;
use crate::actor::{
    schedule, Actor, Cancelled, Request, Schedule, CANCEL_NONE, CANCEL_REQUESTED, CANCEL_UNWINDING, DONE,
    RUNNABLE, RUNNING,
};
use crate::actor::{ActorArc, LifeRef};
use crate::lockfree::node_cache::NodeCache;
use crate::lockfree::node_depot::NodeDepot;
use crate::lockfree::slot::Slot;
use crate::lockfree::CachePadded;
use crate::sched::counters::Counters;
use crate::sched::idle::Idle;
use crate::sched::queue::RunQueue;
use crate::sched::stack::StackPool;
use crate::sched::timer::{Poke, PokeWith, TimerEntry, Timers};
use crate::seam::arch::Arch;
use crate::seam::error::SpawnError;
use crate::seam::lock::Mutex;
use crate::seam::platform::{Platform, RawStack};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, RawCell};

/// Ids a worker reserves at a time from the runtime's counter.
const ID_BLOCK: u64 = 1024;

/// The least number of spare stacks the shared pool keeps.
const SHARED_STACKS_MIN: usize = 4096;

/// The bytes of spare message nodes the node depot keeps per size class
/// (at least a magazine per worker): 64 magazines of 16-byte nodes, 2 of
/// 512-byte ones.
const DEPOT_CLASS_BYTES: usize = 1 << 20;

/// Consecutive runs from the run-next slot before the worker serves the run
/// queue first: a ping-pong pair handing each other the slot would otherwise
/// starve everything queued (tokio settled on 3 for the same reason).
pub(crate) const RUN_NEXT_CAP: u32 = 3;

/// The shared part of one worker.
#[repr(align(128))]
pub(crate) struct WorkerShared {
    /// The run-next slot: only the thread serving this worker puts and
    /// takes; others peek (see "A worker's run-next actor is its own").
    pub(crate) run_next: Slot<Actor>,
    /// This worker's index (its stripe of the run queue).
    pub(crate) index: usize,
    pub(crate) counters: Counters,
    /// The thread serving this worker (debug builds check each owner-only
    /// access against it: `serve`).
    pub(crate) server: serve::Server,
    /// Samples for dumps and the long-hold monitor, on their own cache line
    /// (written at every switch; idle checks peek at `run_next`).
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

/// A thread that lost its worker to a blocking call waits here to take
/// over another worker's duty later (or to exit at shutdown).
pub(crate) struct Spare {
    /// 0: waiting; `i + 1`: take over worker `i`; [`SPARE_EXIT`]: exit.
    word: AtomicU32,
}

const SPARE_EXIT: u32 = u32::MAX;

/// The most safe points (sends, receives) between two reads of the cycle
/// counter. The budget adapts between 1 and this (`timeslice::next_budget`):
/// it doubles while the safe points between two reads take under half of
/// [`CLOCK_READ_SHARE`] of a slice, and halves once they take more, so an
/// actor that does real work between messages is still preempted within
/// about that share of its slice, and a message storm reads the counter
/// once per 64 safe points. A read is 7.6 ns on the 2-core Intel Xeon VM
/// the benches ran on (11 ns on an AMD EPYC one); a fixed budget of 4 put
/// one on every second message (docs/benchmarks.md, "The safe points'
/// clock reads").
const SAFE_POINT_BUDGET_MAX: u32 = 64;

/// The budget a worker starts with (and the fixed one before it adapted).
const SAFE_POINT_BUDGET_START: u32 = 4;

/// The slice is divided by this for the time the budget aims to put
/// between two reads of the cycle counter (a sixteenth: 6 µs of the
/// default 100 µs slice).
const CLOCK_READ_SHARE: u32 = 16;

/// Times shutdown wakes the actors left parked before it abandons them.
const SHUTDOWN_SWEEPS: usize = 4;

/// Worker turns between two checks for due timers while there is work.
const TIMER_CHECK_TURNS: u32 = 16;

/// Everything of a runtime that does not depend on the run-queue type.
pub(crate) struct RtCore<P: Platform> {
    /// The idle list: its sleeper count is read at every push and written
    /// by workers going to sleep, so it has lines of its own.
    pub(crate) idle: CachePadded<Idle<P, P::Lock>>,
    /// Live actors for dumps: one shard per worker, the last for plain
    /// threads ([`crate::rt::dump`]), each under a lock whose unlock is a
    /// plain store (`sched::registry`).
    pub(crate) registry: alloc::boxed::Box<[crate::sched::registry::Shard<crate::seam::lock::PollLock<P>>]>,
    pub(crate) workers: alloc::boxed::Box<[WorkerShared]>,
    /// Counters of plain OS threads (outside the workers).
    pub(crate) outside: Counters,
    pub(crate) pool: StackPool<P>,
    /// Message nodes' full class lists, passed between the workers' caches.
    pub(crate) nodes: NodeDepot<P::Lock>,
    pub(crate) shutdown: AtomicBool,
    pub(crate) finished: AtomicBool,
    /// The live-actor count ([`RtCore::live`]) in shards: one per worker
    /// and one for plain threads, each on lines of its own, so that
    /// spawns and exits on different workers do not pass one line between
    /// their cores at every actor.
    pub(crate) live_shards: Box<[CachePadded<live::LiveShard>]>,
    pub(crate) next_id: AtomicU64,
    /// This runtime as a [`Schedule`]: set once by the builder, before any
    /// actor or worker exists.
    pub(crate) sched: SchedSlot,
    pub(crate) timers: Timers<P::Lock>,
    /// Timeslice length in cycles (0: no timeslices).
    pub(crate) slice_cycles: u64,
    /// Mailboxes count their sends, for dumps (`Builder::mailbox_depths`).
    pub(crate) mailbox_depths: bool,
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
    /// A worker is spinning for work before it sleeps (at most one at a
    /// time: `Shared::spin_for_work`). Written by every worker that goes
    /// idle, so alone on its lines (beside it were `shutdown`, read at
    /// every resume).
    pub(crate) spinning: CachePadded<crate::sync::AtomicBool>,
    /// The IO driver, made at the first registration.
    pub(crate) io: IoSlot<P>,
    /// Registered names (shared with the exit hooks that unbind them).
    pub(crate) names: Arc<crate::sched::names::Names<P::Lock>>,
}

/// Where a runtime keeps its IO driver: null until the first registration,
/// then an `Arc::into_raw` that the slot owns one count of.
pub(crate) struct IoSlot<P: Platform>(crate::sync::AtomicPtr<io::IoDriver<P>>);

impl<P: Platform> Drop for IoSlot<P> {
    fn drop(&mut self) {
        // Relaxed: the runtime's last owner drops it; nothing races.
        let p = self.0.load(Ordering::Relaxed);
        if !p.is_null() {
            // SAFETY: a non-null slot holds one `Arc::into_raw` count.
            drop(unsafe { Arc::from_raw(p) });
        }
    }
}

/// The idle protocol's kick for a worker waiting in the poller.
fn kick_driver<P: Platform>(arg: *const ()) {
    // SAFETY: `arg` is the runtime's `IoDriver<P>` (the polling worker
    // passes it to `sleep_polling`), alive while the runtime is.
    unsafe { (*arg.cast::<io::IoDriver<P>>()).kick() }
}

impl<P: Platform> RtCore<P> {
    /// The IO driver if one exists.
    #[inline]
    pub(crate) fn io(&self) -> Option<&io::IoDriver<P>> {
        // Acquire: pairs with the Release CAS in `io_driver`.
        let p = self.io.0.load(Ordering::Acquire);
        // SAFETY: once set, the slot keeps the driver alive as long as
        // the runtime.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The IO driver, made now if it does not exist yet.
    pub(crate) fn io_driver(&self) -> Result<Arc<io::IoDriver<P>>, crate::seam::poll::PollError> {
        // Acquire: pairs with the Release of the CAS below (a driver
        // another thread published is fully made).
        let mut p = self.io.0.load(Ordering::Acquire);
        if p.is_null() {
            let new = Arc::into_raw(Arc::new(io::IoDriver::<P>::new()?)).cast_mut();
            // AcqRel: Release publishes the driver; Acquire reads a
            // winner's.
            match self
                .io
                .0
                .compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => p = new,
                Err(winner) => {
                    // SAFETY: `new` was never published.
                    drop(unsafe { Arc::from_raw(new) });
                    p = winner;
                }
            }
        }
        // SAFETY: the slot holds a count; we take one more for the caller.
        unsafe {
            Arc::increment_strong_count(p);
            Ok(Arc::from_raw(p))
        }
    }
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
    /// `&core.workers[index]`, kept so the hot paths (a turn's
    /// bookkeeping, a direct handoff) skip the index and its bounds check.
    pub(crate) worker: *const WorkerShared,
    pub(crate) current: *const Actor,
    /// The worker's reference to the actor it is running (`ActorArc::into_raw`),
    /// while one runs: the actor it switched into, or the one a direct
    /// handoff passed the turn to since (`handoff`'s module doc).
    pub(crate) running: *const Actor,
    /// A direct handoff's switched-out actor (`ActorArc::into_raw`) whose
    /// request the actor switched to carries out, first thing.
    pub(crate) handed: *const Actor,
    /// This thread hosts a detached unwinding actor (`Request::Detach`):
    /// worker `index` is served by another thread now, so actor-side code
    /// must not touch its shared state (run-next slot, counters).
    pub(crate) detached: bool,
    pub(crate) stacks: Vec<RawStack>,
    pub(crate) nodes: NodeCache,
    /// Consecutive actors run from the run-next slot (see [`RUN_NEXT_CAP`]).
    streak: u32,
    /// The actor the running actor last woke into this worker's run-next
    /// slot in its turn (null: none; `enter` clears it). Compared, never
    /// dereferenced: a timeslice expiry's test that the slot's actor is
    /// its own partner (`timeslice::expire`).
    pub(crate) woke: *const Actor,
    /// Work-first spawns on this worker since a spawner last resumed here
    /// (see [`start::WORK_FIRST_RUN`]).
    pub(crate) work_first_run: u32,
    id_next: u64,
    id_end: u64,
    /// When the running actor's timeslice ends (cycles; `u64::MAX`: never,
    /// timeslices off; 0: a fresh slice not stamped yet).
    slice_end: u64,
    /// The slice length in cycles (the runtime's, copied here).
    slice_cycles: u64,
    /// Safe points left before the next cycle-counter read.
    budget: u32,
    /// The budget the countdown restarts from (adapted at each read).
    budget_len: u32,
    /// The cycle counter at the last budgeted read (0: none yet).
    last_read: u64,
    /// Turns left before the next timer check.
    timer_turns: u32,
    /// Timer checks left before the next non-blocking IO poll.
    io_checks: u32,
    /// Resumes so far (published for the long-hold monitor).
    resumes: u64,
}

/// The worker context of the calling thread, if it is a worker.
#[inline(always)]
pub(crate) fn ctx<P: Platform>() -> *mut WorkerCtx<P> {
    P::current_worker().cast()
}

/// The actor running on the calling thread, if any.
#[inline]
pub(crate) fn current_actor<P: Platform>() -> Option<*const Actor> {
    current_with_ctx::<P>().map(|(_, a)| a)
}

/// [`current_actor`] with its worker context (one lookup for both).
#[inline]
pub(crate) fn current_with_ctx<P: Platform>() -> Option<(*mut WorkerCtx<P>, *const Actor)> {
    let c = ctx::<P>();
    if c.is_null() {
        return None;
    }
    // SAFETY: a non-null current-worker pointer is a live WorkerCtx of this
    // thread (set by `run_worker`, cleared before it returns).
    let cur = unsafe { (*c).current };
    (!cur.is_null()).then_some((c, cur))
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

/// The calling actor (`None` on a plain thread), and whether its wait must
/// give up at once ([`unwinding`]), both from `c` (a receive's wait).
///
/// # Safety
///
/// `c` is what `ctx::<P>()` returned on this thread, with no switch since.
pub(crate) unsafe fn current_for_wait_in<P: Platform>(c: *mut WorkerCtx<P>) -> (Option<*const Actor>, bool) {
    if c.is_null() {
        return (None, false);
    }
    // SAFETY: as in `unwinding`.
    unsafe {
        let a = (*c).current;
        if a.is_null() {
            return (None, false);
        }
        // Relaxed: as in `unwinding`.
        let give_up = (*(*c).core).shutdown.load(Ordering::Relaxed)
            && (*(*a).cancel.get() == CANCEL_UNWINDING || P::panicking());
        (Some(a), give_up)
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

/// The panic hook's description of the panicking thread (the
/// [`DescribePanic`](crate::seam::platform::DescribePanic) core hands every
/// port): `smarm: actor 7 "name" panicked:` inside an actor, nothing on a
/// plain thread.
pub(crate) fn describe_panic<P: Platform>(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
    let Some(id) = current_id::<P>() else {
        return Ok(());
    };
    match current_name::<P>() {
        Some(n) => write!(out, "smarm: actor {id} {:?} panicked:", &*n),
        None => write!(out, "smarm: actor {id} panicked:"),
    }
}

/// The index of the worker the caller runs on; `None` off the runtime
/// (and for an actor detached while it unwinds).
pub fn current_worker<P: Platform>() -> Option<usize> {
    let c = ctx::<P>();
    // SAFETY: as in `current_actor`.
    (!c.is_null() && unsafe { !(*c).detached }).then(|| unsafe { (*c).index })
}
