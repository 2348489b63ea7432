//! The actor control block and its state word.
//!
//! # The state word
//!
//! | value | name       | meaning                                                  |
//! |-------|------------|----------------------------------------------------------|
//! | 0     | `RUNNABLE` | in a run queue or run-next slot, or about to be put there |
//! | 1     | `RUNNING`  | a worker is running it (or has just switched off it)      |
//! | 2     | `PARKED`   | suspended, waiting for a wake; its registration is the only reference that can make it runnable |
//! | 3     | `NOTIFIED` | `RUNNING`, and a wake arrived before its park completed   |
//! | 4     | `DONE`     | exited; never runs again                                  |
//! | 5     | `HELD`     | unwinding, waiting in place on its own OS thread (no switch while unwinding); a wake stores `RUNNING` and wakes that thread |
//! | 6     | `PARKED_LENT` | `PARKED` in a receive whose registration is lent (holds no reference; [`lent`]): the actor keeps its worker's reference, which the waker that moves it out takes |
//!
//! # Lifecycle
//!
//! ```text
//!            (1) spawn                 (2) pick
//!   new ────────────────▶ RUNNABLE ─────────────▶ RUNNING ──(6) exit──▶ DONE
//!                            ▲  ▲                  │  │  ▲
//!                 (3) yield  │  └──(5a) wake───┐   │  │  │ (4b) park fails:
//!                            └─────────────────┼───┘  │  │      resume at once
//!                                              │  (4a)│  │
//!                                            PARKED ◀─┘  NOTIFIED ◀─(5b) wake while running
//! ```
//!
//! 1. `spawn` (`Runtime::spawn`, `spawn`): a new actor starts `RUNNABLE`
//!    (work-first spawns skip straight to (2)).
//! 2. the worker that takes it from a queue or slot stores `RUNNING`.
//! 3. `yield_now` → after switching off the actor, the worker stores
//!    `RUNNABLE` and queues it.
//! 4. `park` → after switching off the actor, the worker CASes
//!    `RUNNING → PARKED` (4a) and drops its reference (the registration
//!    holds one). If the CAS finds `NOTIFIED` (4b), a wake came in between:
//!    the worker stores `RUNNING` and resumes the actor at once. A *lent*
//!    park (a receive whose registration holds no reference: [`lent`])
//!    CASes `RUNNING → PARKED_LENT` instead and keeps the worker's
//!    reference in the parked actor.
//! 5. `wake` (any thread): CAS `PARKED → RUNNABLE` and schedule it (5a), or
//!    CAS `RUNNING → NOTIFIED` (5b); from any other state a wake does nothing
//!    (it will run anyway, or never again). `PARKED_LENT → RUNNABLE` is 5a
//!    too, but what the waker schedules is the reference the parked actor
//!    kept (a waker holding a reference of its own drops that one).
//! 6. the actor's closure returns (or unwinds): the worker stores `DONE`.
//! 7. an actor that waits while it unwinds (a destructor during a panic,
//!    a kill or a cancellation) never switches (see `sched`'s "Unwinding"):
//!    it CASes `RUNNING → HELD` itself and sleeps on the state word; a
//!    wake CASes `HELD → RUNNING` and wakes the word (through the
//!    runtime's [`Schedule::unpark`]), or absorbs as (5b) when it lands
//!    before the CAS.
//!
//! # The park invariant
//!
//! A pending park is observed in exactly one place: the waker's registration
//! (a join slot, later a mailbox) holds the only handle that moves the actor
//! out of `PARKED`, and every transition out of `PARKED` is a CAS, so a wake
//! is delivered once. The condition a parker waits for is always re-checked
//! after the registration is published (the registration is a CAS that fails
//! if the condition already holds), and the `NOTIFIED` state carries a wake
//! that lands between registration and the park's CAS, so no wake is lost.
//! State changes the actor makes happen after it has been switched off
//! (steps 3, 4, 6 run on the worker's own stack), so no other worker can
//! resume an actor whose stack is still in use.
//!
//! Layer 3, the actor: its control block and state word (here), its exit
//! data ([`life`]) and its sanitizer hooks ([`sanitizer`]). Imports only
//! the layers below (the scheduler is reached through [`Schedule`]).

pub mod actor_ref;
pub mod cell;
pub mod exit;
pub mod lent;
pub mod life;
pub(crate) mod sanitizer;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::any::Any;
use core::mem::ManuallyDrop;
use core::ptr::{self, NonNull};

pub use crate::actor::cell::ActorArc;
pub(crate) use crate::actor::cell::LifeRef;
use crate::actor::exit::JoinError;
pub(crate) use crate::actor::lent::wake_lent;
use crate::seam::platform::RawStack;
use crate::sync::{AtomicU32, AtomicU8, Ordering, RawCell};

/// In a run queue or slot (the bit table above).
pub const RUNNABLE: u32 = 0;
/// Running (or just switched off).
pub const RUNNING: u32 = 1;
/// Suspended until a wake.
pub const PARKED: u32 = 2;
/// Running, with a wake for its coming park.
pub const NOTIFIED: u32 = 3;
/// Exited.
pub const DONE: u32 = 4;
/// Unwinding, waiting in place on its own thread.
pub const HELD: u32 = 5;
/// Parked with a lent registration: the actor holds its own reference
/// ([`lent`]).
pub const PARKED_LENT: u32 = 6;

/// What a wake did to a state word (the lifecycle's steps 5 and 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// `PARKED → RUNNABLE`: the waker must schedule the actor.
    Schedule,
    /// `PARKED_LENT → RUNNABLE`: the waker must schedule the actor with the
    /// reference the parked actor kept.
    ScheduleOwn,
    /// `HELD → RUNNING`: the waker must wake the word (the actor sleeps on
    /// it in [`hold_wait`]).
    Unpark,
    /// `RUNNING → NOTIFIED` (absorbed by the coming park), or a state in
    /// which a wake is moot.
    Nothing,
}

/// The wake's transition on `state` (steps 5a, 5b and 7).
pub fn wake_word(state: &AtomicU32) -> Woken {
    wake_from(state, true)
}

/// The transitions of [`wake_word`] and, with `counted` false (a waker
/// holding no reference of its own), of [`lent::wake_word_lent`], which
/// leaves a counted `PARKED` alone.
#[inline(always)]
fn wake_from(state: &AtomicU32, counted: bool) -> Woken {
    // Acquire: pairs with the worker's AcqRel CAS into PARKED (step 4a), so
    // the actor's saved sp is visible before we schedule it, and with the
    // actor's AcqRel CAS into HELD.
    let mut s = state.load(Ordering::Acquire);
    loop {
        let (to, woken) = match s {
            PARKED if counted => (RUNNABLE, Woken::Schedule),
            PARKED_LENT => (RUNNABLE, Woken::ScheduleOwn),
            RUNNING => (NOTIFIED, Woken::Nothing),
            HELD => (RUNNING, Woken::Unpark),
            _ => return Woken::Nothing,
        };
        // AcqRel: Release publishes what the waker wrote before waking (the
        // condition the parker re-checks); Acquire as above.
        match state.compare_exchange(s, to, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return woken,
            Err(now) => s = now,
        }
    }
}

/// Step 4a, the parker's transition, run once the actor's stack is left
/// (by its worker, or by the actor a direct handoff switched to):
/// `RUNNING → PARKED` (`true`: the waker's registration holds it now), or
/// `false` if a wake came first (`NOTIFIED`: it must run again; the word
/// is left `NOTIFIED` for the caller to overwrite).
/// `lent`: the registration is lent, and the parked state `PARKED_LENT`
/// (the caller then keeps its reference in the parked actor).
pub fn park_word(state: &AtomicU32, lent: bool) -> bool {
    let to = if lent { PARKED_LENT } else { PARKED };
    // AcqRel: Release publishes the saved sp (written before this) to the
    // waker's Acquire in `wake_word`; Acquire sees a NOTIFIED waker's
    // writes (the condition the actor re-checks when it runs again).
    match state.compare_exchange(RUNNING, to, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => true,
        Err(s) => {
            debug_assert_eq!(s, NOTIFIED);
            false
        }
    }
}

/// Step 7, the actor's side: waits on `state` (its own, `RUNNING` or
/// `NOTIFIED`) on the calling OS thread until a wake. A wake that landed
/// before (`NOTIFIED`) is consumed at once. Returns `false` if the actor
/// was in neither state (a caller's bug). May return spuriously only as
/// a park does: after a wake meant for an earlier registration.
pub fn hold_wait<F: crate::seam::platform::Futex>(state: &AtomicU32) -> bool {
    // AcqRel: Release publishes our registration's writes to a waker that
    // sees HELD; Acquire sees a NOTIFIED waker's writes.
    match state.compare_exchange(RUNNING, HELD, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => loop {
            F::wait(state, HELD, None);
            // Acquire: pairs with the waker's AcqRel CAS out of HELD.
            if state.load(Ordering::Acquire) != HELD {
                return true;
            }
        },
        Err(NOTIFIED) => {
            // Relaxed: we own the actor's state while it runs; the CAS
            // above was the Acquire.
            state.store(RUNNING, Ordering::Relaxed);
            true
        }
        Err(_) => false,
    }
}

/// Makes a runnable actor run: the type-erased face of a runtime, reached
/// from an actor's `rt` pointer by wakers that do not know the run-queue
/// type (a mailbox send, a channel, a join).
pub(crate) trait Schedule: Send + Sync {
    /// Schedules `a` (state `RUNNABLE`): into the caller's run-next slot when
    /// the caller is one of this runtime's workers (the wake-slot handoff),
    /// else onto the run queue, waking an idle worker if needed.
    fn schedule(&self, a: ActorArc);
    /// Wakes the OS thread of an actor waiting in place on `word` (its
    /// state word; step 7 of [`crate::actor`]).
    fn unpark(&self, word: &AtomicU32);
    /// A direct yield handoff's pick (`crate::sched::handoff`, `H2`): the
    /// run queue's oldest actor, taken for worker `index` of this runtime
    /// as its loop would take it (counted, chain wake included).
    fn pop_queued(&self, index: usize) -> Option<ActorArc>;
    /// A direct yield handoff's completion (`H5`): the yielding actor `a`
    /// (`RUNNABLE`, its stack left) goes to the back of the run queue, as
    /// worker `index`'s loop queues a yield (`push_yield`: no fenced
    /// notify; worker `index`, the caller, takes it in turn).
    fn requeue(&self, a: ActorArc, index: usize);
    /// Whether the part of the run queue that worker `index` (the caller)
    /// serves first is empty (a timeslice expiry's test before it lets the
    /// yielder wait in the run-next slot: nobody queued there is overtaken).
    fn nothing_queued_here(&self, index: usize) -> bool;
    /// A direct handoff's completion (`H5`) for an actor that runs next on
    /// worker `index` (its stack left): a spawner (still `RUNNING`, as the
    /// loop's `run` leaves it for `Spawn`), a `YieldBehind` yielder, or a
    /// parker a wake reached first. `a` goes to the run-next slot; an
    /// actor it displaces goes to the queue.
    fn put_run_next_here(&self, a: ActorArc, index: usize);
    /// A spawn's child `a` (fresh) goes to the back of worker `index`'s
    /// part of the run queue, an idle worker notified (`Shared::push`):
    /// the help-first spawn that ends a run of work-first ones
    /// ([`crate::sched::start_here`]).
    fn queue_here(&self, a: ActorArc, index: usize);
}

/// Schedules `a` on its own runtime.
pub(crate) fn schedule(a: ActorArc) {
    let rt = a.rt;
    // SAFETY: an actor's runtime outlives it (see `Actor::rt`).
    unsafe { rt.as_ref().schedule(a) }
}

/// Completes an actor's join slot from outside its entry frame (an
/// overflow recovery, which never returns to that frame).
pub(crate) trait AbortJoin {
    /// Completes the slot with `e` (if not done); returns a joiner to wake.
    fn abort(&mut self, e: JoinError) -> Option<ActorArc>;
}

/// What a parked actor waits on (set just before it parks).
pub(crate) const WAIT_NONE: u8 = 0;
/// A mailbox receive.
pub(crate) const WAIT_MAILBOX: u8 = 1;
/// A channel receive or a bounded send.
pub(crate) const WAIT_CHANNEL: u8 = 2;
/// A join.
pub(crate) const WAIT_JOIN: u8 = 3;
/// A sleep.
pub(crate) const WAIT_TIMER: u8 = 4;
/// Inside `blocking` (off the workers).
pub(crate) const WAIT_BLOCKING: u8 = 5;
/// A descriptor to become readable (`Life::wait_fd` says which).
pub(crate) const WAIT_IO_READ: u8 = 6;
/// A descriptor to become writable.
pub(crate) const WAIT_IO_WRITE: u8 = 7;
/// A lock, condition variable, semaphore or barrier (`crate::locks`).
pub(crate) const WAIT_LOCK: u8 = 8;

/// Records what the calling actor is about to wait on (a Relaxed store:
/// a hint for dumps only).
pub(crate) fn waiting_on(a: *const Actor, what: u8) {
    // SAFETY: callers pass the running actor, alive while it runs.
    let a: &Actor = unsafe { &*a };
    let w: &AtomicU8 = &a.life.wait;
    // Relaxed: read only by dumps, which tolerate staleness.
    w.store(what, Ordering::Relaxed);
}

/// An actor's place in the registry: `shard << 32 | index`, or
/// [`UNREGISTERED`]. Written only under the shard's lock.
pub(crate) const UNREGISTERED: u64 = u64::MAX;

/// One actor's local values, keyed by the address of their
/// `ActorLocal` static (`crate::sched::local`).
#[derive(Default)]
pub(crate) struct Locals {
    pub(crate) values: Vec<(usize, Box<dyn Any + Send>)>,
    /// Depth of `no_switch` sections (checked at every switch in debug
    /// builds).
    pub(crate) no_switch: u32,
}

/// The `cancel` cell: nothing pending.
pub(crate) const CANCEL_NONE: u8 = 0;
/// Set by a worker during shutdown before it resumes an actor: the next
/// resume point unwinds the actor with [`Cancelled`].
pub(crate) const CANCEL_REQUESTED: u8 = 1;
/// The actor is ending: a resume point raised its kill or cancellation, or
/// its body has returned (or unwound) to the entry. Resume points never
/// raise again, so an actor unwinds at most once and its exit path (actor
/// locals, exit hooks) runs to the end.
pub(crate) const CANCEL_UNWINDING: u8 = 2;

/// The payload of the unwind that cancels an actor at shutdown.
#[derive(Debug)]
pub struct Cancelled;

/// What a running actor asks its worker to do once switched off it.
pub(crate) enum Request {
    /// Nothing pending (the actor is running).
    None,
    /// Requeue at the back of the run queue.
    Yield,
    /// A timeslice expiry's yield behind the run-next slot's actor, one
    /// this actor woke in its turn, with nothing queued on the worker: that
    /// actor runs now with a fresh slice, and this one waits in the slot
    /// and runs when it switches out (`crate::sched::timeslice::expire`).
    YieldBehind,
    /// Park (see the state diagram, step 4).
    Park,
    /// Park with a lent registration (`PARKED_LENT`: the worker keeps its
    /// reference in the parked actor; [`lent`]).
    ParkLent,
    /// Run `child` at once; the parent waits in the run-next slot.
    Spawn(ActorArc),
    /// A `Spawn` that a direct handoff carried out (it switched straight to
    /// the child): the child's `H5` puts the parent in the run-next slot,
    /// as the loop does for `Spawn` (`crate::sched::handoff`).
    Spawned,
    /// The actor finished; wake this actor (a joiner) if any.
    Exit(Option<ActorArc>),
    /// The actor is about to block its thread: hand the worker's duty to
    /// another thread, then resume the actor here, off the runtime.
    Block,
    /// Back from a blocking call (sent from the detached thread): queue the
    /// actor, and retire this thread from worker duty.
    Rejoin,
    /// The actor unwinds and must wait (see `sched`'s "Unwinding"): hand
    /// the worker's duty to another thread, then resume the actor here,
    /// still this worker's context but marked detached; it waits in place
    /// and sends `Rejoin` once its unwind has been caught.
    Detach,
    /// The actor overflowed its stack and was ended by recovery
    /// ([`crate::sched::overflow::overflow_exit`]): its stack is abandoned (never
    /// reused); wake this joiner, if any.
    Overflowed(Option<ActorArc>),
}

impl Request {
    /// The child of a `Spawn`, leaving `Spawned` in its place (a direct
    /// handoff carries the spawn out); `None`, and the request unchanged,
    /// for any other.
    pub(crate) fn take_spawn(&mut self) -> Option<ActorArc> {
        // Looked at first: every park and yield that hands over asks, and
        // theirs is left as it is, unwritten.
        if !matches!(self, Request::Spawn(_)) {
            return None;
        }
        match core::mem::replace(self, Request::Spawned) {
            Request::Spawn(child) => Some(child),
            _ => None,
        }
    }
}

/// What an actor runs: the spawn layer's body, seen without its types (a
/// pointer and its functions; the spawn layer keeps the body and the join
/// slot in one allocation). Consumed by [`run`](Self::run), which runs the
/// user's closure, stores its result and returns the joiner to wake;
/// dropped unrun (an actor never started, dropped at shutdown), it drops
/// the body and completes the join with no result.
pub(crate) struct Entry {
    body: NonNull<u8>,
    vt: &'static EntryVt,
}

/// An entry's functions, for one body type.
pub(crate) struct EntryVt {
    /// Runs the body as the given actor; returns the joiner to wake.
    pub(crate) run: unsafe fn(NonNull<u8>, &Actor) -> Option<ActorArc>,
    /// Drops the body unrun.
    pub(crate) drop: unsafe fn(NonNull<u8>),
}

// SAFETY: what `body` points to is `Send` (`new`'s contract) and the entry
// is its only user until it runs or drops it.
unsafe impl Send for Entry {}

impl Entry {
    /// An entry for `body`, run or dropped by `vt`'s functions.
    ///
    /// # Safety
    ///
    /// `body` stays valid until one of `vt`'s functions is called with it,
    /// which each may be with it once (either one, once), on any thread;
    /// what it points to is `Send`.
    pub(crate) unsafe fn new(body: NonNull<u8>, vt: &'static EntryVt) -> Self {
        Entry { body, vt }
    }

    /// Runs the body as `actor`; returns the joiner to wake.
    pub(crate) fn run(self, actor: &Actor) -> Option<ActorArc> {
        let e = core::mem::ManuallyDrop::new(self);
        // SAFETY: `new`'s contract: the entry is consumed here, so `run` is
        // called once and `drop` never after.
        unsafe { (e.vt.run)(e.body, actor) }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // SAFETY: `new`'s contract: never run (`run` consumes the entry),
        // dropped once.
        unsafe { (self.vt.drop)(self.body) }
    }
}

/// An actor's control block. Shared as `ActorArc` between the queues,
/// the worker running it and wakers' registrations.
///
/// Field ownership: `sp`, `request`, `cancel` and `entry` belong to whoever
/// owns the actor per the state word (the worker running or switching it, or
/// the actor itself while it runs); ownership passes through the state
/// word's and the run queue's Release/Acquire edges. `sched_sp` is written by
/// the actor right after each resume and read by it before each suspend.
///
/// Layout: `repr(C)`, the fields every switch reads or writes first (`sp`
/// to `handed`: 64 bytes, so one or two cache lines wherever the block
/// falls), the rest after. The default layout spread them over three to
/// four lines of the 192 bytes; among 1,024 yielding actors, each one's
/// lines are cold when its turn comes (docs/benchmarks.md, "The control
/// block's first line").
#[repr(C)]
pub struct Actor {
    pub(crate) sp: RawCell<*mut u8>,
    pub(crate) sched_sp: RawCell<*mut u8>,
    pub(crate) request: RawCell<Request>,
    /// The runtime that schedules this actor when a wake makes it runnable.
    /// Valid for the actor's whole life: a runtime outlives its actors (one
    /// that shuts down with actors left keeps its shared state alive).
    pub(crate) rt: NonNull<dyn Schedule>,
    pub(crate) id: u64,
    pub(crate) state: AtomicU32,
    pub(crate) cancel: RawCell<u8>,
    /// Set by a kill (a copy of `life.killed` on this cache line, read at
    /// every resume).
    pub(crate) killed: crate::sync::AtomicBool,
    /// Detached from the scheduler while unwinding (`Request::Detach`),
    /// until it rejoins; owned by the running actor.
    pub(crate) detached: RawCell<bool>,
    /// Set by a direct handoff that switches to this actor: its resume
    /// carries out the previous actor's request (`sched::handoff`). Owned
    /// like `sp`.
    pub(crate) handed: RawCell<bool>,
    /// Sections in which resume points do not raise a kill or a
    /// cancellation (`sched::defer_kills`); owned by the running actor.
    pub(crate) deferred: RawCell<u32>,
    /// Frees `stack` if the actor is dropped without exiting (shutdown).
    pub(crate) stack_free: unsafe fn(RawStack),
    /// Id, name, kill flag, exit hooks: what outlives the control block,
    /// in the same block (`crate::actor::cell`). The one `Life` reference
    /// all `ActorArc`s hold together, dropped after the control block (by
    /// the cell; hence `ManuallyDrop`). For a reference of one's own, clone
    /// the `LifeRef` inside (`(*a.life).clone()`), never the wrapper (its
    /// clone would never be dropped).
    pub(crate) life: ManuallyDrop<LifeRef>,
    pub(crate) entry: RawCell<Option<Entry>>,
    pub(crate) stack: RawCell<Option<RawStack>>,
    /// Actor-local values; owned by the running actor.
    pub(crate) locals: RawCell<Locals>,
    /// Its place in the runtime's registry (`crate::rt::dump`).
    pub(crate) reg: crate::sync::AtomicU64,
    /// The join completer in the running entry frame (for an overflow
    /// recovery); owned by the running actor.
    pub(crate) abort_join: RawCell<Option<NonNull<dyn AbortJoin>>>,
    /// Sanitizer fiber state (zero-sized without the sanitizer cfgs);
    /// owned like `sp`.
    #[cfg_attr(not(any(smarm_tsan, smarm_asan)), allow(dead_code))]
    pub(crate) san: crate::actor::sanitizer::ActorSan,
    /// Its `tracing` span (zero-sized without the feature), entered by the
    /// worker around each resume (`crate::seam::trace`).
    pub(crate) span: crate::seam::trace::ActorSpan,
}

// The switch's fields in the first 64 bytes (the type's doc); loom's
// atomics and cells are larger, so only the real build is held to it.
#[cfg(not(smarm_loom))]
const _: () = assert!(core::mem::offset_of!(Actor, handed) < 64);

// SAFETY: every `UnsafeCell` field is accessed only by the actor's current
// owner (see the struct doc), and ownership moves between threads through
// Release/Acquire edges (the state word, the run queue, the run-next slot).
unsafe impl Send for Actor {}
// SAFETY: as above; the only fields touched concurrently are atomics.
unsafe impl Sync for Actor {}

impl Actor {
    pub(crate) fn new(
        id: u64,
        entry: Entry,
        stack: RawStack,
        stack_free: unsafe fn(RawStack),
        rt: NonNull<dyn Schedule>,
        life: ManuallyDrop<LifeRef>,
    ) -> Self {
        Actor {
            id,
            state: AtomicU32::new(RUNNABLE),
            sp: RawCell::new(ptr::null_mut()),
            sched_sp: RawCell::new(ptr::null_mut()),
            request: RawCell::new(Request::None),
            cancel: RawCell::new(CANCEL_NONE),
            entry: RawCell::new(Some(entry)),
            stack: RawCell::new(Some(stack)),
            stack_free,
            rt,
            locals: RawCell::new(Locals::default()),
            abort_join: RawCell::new(None),
            detached: RawCell::new(false),
            deferred: RawCell::new(0),
            handed: RawCell::new(false),
            reg: crate::sync::AtomicU64::new(UNREGISTERED),
            killed: crate::sync::AtomicBool::new(false),
            san: crate::actor::sanitizer::ActorSan::new(),
            span: crate::seam::trace::ActorSpan::new(id, life.name.as_deref()),
            life,
        }
    }

    /// The name given at spawn, if any.
    pub fn name(&self) -> Option<&str> {
        self.life.name.as_deref()
    }
}

impl ActorArc {
    /// Wakes a parked actor: returns it if the caller must schedule it
    /// (it was `PARKED`, now `RUNNABLE`); otherwise the wake was absorbed
    /// (`RUNNING → NOTIFIED`) or is moot.
    pub(crate) fn wake(self) -> Option<ActorArc> {
        match wake_word(&self.state) {
            Woken::Schedule => Some(self),
            Woken::ScheduleOwn => {
                // SAFETY: the parked actor's own reference (its worker's,
                // kept at a lent park), which the winning CAS gave us; ours
                // is one more, so the drop below frees nothing.
                let own = unsafe { ActorArc::from_raw(ActorArc::as_ptr(&self)) };
                drop(self);
                Some(own)
            }
            Woken::Unpark => {
                // Step 7: the actor sleeps on its state word on its own
                // thread. Our reference keeps the word alive for the wake.
                // SAFETY: an actor's runtime outlives it (`rt`'s doc).
                unsafe { self.rt.as_ref().unpark(&self.state) };
                None
            }
            Woken::Nothing => None,
        }
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        // One dropped unretired (shutdown) may still own a TSan fiber.
        crate::actor::sanitizer::retired(self);
        // An actor dropped with its stack still attached never exited (it
        // was left in a queue or parked at shutdown): its frames are
        // abandoned without unwinding, but the stack itself is unmapped.
        if let Some(stack) = self.stack.with_mut(|s| {
            // SAFETY: `&mut self`: no other reference exists.
            unsafe { (*s).take() }
        }) {
            // SAFETY: no context runs on the stack of an actor being dropped
            // (a running actor's Arc is held by its worker).
            unsafe { (self.stack_free)(stack) };
        }
    }
}
