//! The Platform seam: what core needs from an operating system.
//!
//! One implementation per OS lives in a port crate (`smarm-linux`,
//! `smarm-darwin`). A port gives primitives only; the algorithms built on them
//! (the futex lock, the idle protocol, the stack pool, the scheduler) are
//! written once, here in core.

use alloc::boxed::Box;
use alloc::string::String;
use core::any::Any;
use core::fmt;

use crate::seam::arch::Arch;
use crate::sync::AtomicU32;

/// Wait/wake on a 32-bit word: the one blocking primitive core builds on.
///
/// # Safety
///
/// An implementation guarantees:
/// - [`wait`](Futex::wait) returns only after the word was observed != `expected`,
///   or a wake was delivered for the word, or the deadline passed, or
///   spuriously (callers re-check); it never sleeps when the word already
///   differs from `expected` at the moment the OS checks it (the check and the
///   sleep are atomic with respect to [`wake_one`](Futex::wake_one) /
///   [`wake_all`](Futex::wake_all));
/// - a wake happens-after the waker's prior stores (wake = Release, the
///   return of wait = Acquire, as the kernel's futex hash lock provides);
/// - any thread (a worker, a plain OS thread) may call any method.
pub unsafe trait Futex: 'static {
    /// Blocks while `*word == expected`, until woken or until the monotonic
    /// clock ([`Platform::now_ns`]) reaches `deadline_ns` (`None`: no
    /// deadline). EINTR and spurious returns are allowed; callers loop.
    fn wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>);

    /// Wakes at most one thread waiting on `word`.
    fn wake_one(word: &AtomicU32);

    /// Wakes every thread waiting on `word`.
    fn wake_all(word: &AtomicU32);
}

/// A raw lock for short critical sections. Never recursive: re-locking from
/// the owner deadlocks (or aborts), it does not count.
///
/// # Safety
///
/// `lock`/`try_lock` (when it returns `true`) give mutual exclusion with
/// Acquire semantics; `unlock` has Release semantics and synchronises with
/// the next successful acquire.
pub unsafe trait RawLock: Send + Sync + 'static {
    /// A new, unlocked lock.
    fn new() -> Self;
    /// Acquires the lock, waiting as needed (briefly spinning, then sleeping).
    fn lock(&self);
    /// Acquires the lock if it is free.
    fn try_lock(&self) -> bool;
    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// The caller holds the lock (acquired by this thread's `lock`/`try_lock`).
    unsafe fn unlock(&self);
}

/// A stack mapped for an actor: `[base, base + guard)` is inaccessible (the
/// guard page that turns an overflow into a fault), `[base + guard, top)` is
/// usable, growing down from `top`.
#[derive(Debug)]
pub struct RawStack {
    /// Lowest address of the mapping (the start of the guard).
    pub base: *mut u8,
    /// Total length of the mapping in bytes (guard included).
    pub len: usize,
    /// Bytes of guard at `base`.
    pub guard: usize,
}

// SAFETY: a RawStack is an owned mapping; it is plain data that can be moved
// to and freed from any thread.
unsafe impl Send for RawStack {}

impl RawStack {
    /// One past the highest usable byte (16-byte aligned: mappings are
    /// page-aligned and `len` is a page multiple).
    pub fn top(&self) -> *mut u8 {
        self.base.wrapping_add(self.len)
    }

    /// Usable bytes (the mapping less its guard).
    pub fn usable(&self) -> usize {
        self.len - self.guard
    }

    /// The usable range `[lo, hi)` as addresses (above the guard page).
    pub fn usable_range(&self) -> (usize, usize) {
        let lo = self.base as usize + self.guard;
        (lo, self.base as usize + self.len)
    }
}

/// Why a stack could not be mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StackError {
    /// The OS refused the mapping for lack of memory or of map entries. On
    /// Linux every guarded stack costs two entries of `vm.max_map_count`
    /// (65530 by default, about 32,000 stacks); raise it with
    /// `sysctl vm.max_map_count=N` or keep fewer actors alive at once.
    OutOfMaps {
        /// The OS error code (ENOMEM).
        errno: i32,
    },
    /// Refused before the OS would run out: the runtime's stacks already
    /// use the share of the process's memory maps a port allows them
    /// (Linux: all of `vm.max_map_count` but a reserve of an eighth, at
    /// least 1,024 entries, kept for malloc, threads and the loader, so the
    /// rest of the process still works when actors are this many). Raise
    /// `vm.max_map_count` or keep fewer actors alive at once.
    MapReserve {
        /// Stacks mapped when the spawn was refused.
        stacks: usize,
        /// The process's map limit (`vm.max_map_count`).
        max_map_count: usize,
    },
    /// Any other OS error.
    Os {
        /// The OS error code.
        errno: i32,
    },
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StackError::OutOfMaps { errno } => write!(
                f,
                "out of memory or address-space maps mapping an actor stack (errno {errno}); \
                 each guarded stack takes two map entries: raise vm.max_map_count \
                 (sysctl) or keep fewer actors alive at once"
            ),
            StackError::MapReserve {
                stacks,
                max_map_count,
            } => write!(
                f,
                "{stacks} actor stacks are mapped, the most that leaves the rest of the process \
                 its reserve of vm.max_map_count ({max_map_count}; each guarded stack takes two \
                 entries): raise vm.max_map_count (sysctl) or keep fewer actors alive at once"
            ),
            StackError::Os { errno } => write!(f, "mapping an actor stack failed (errno {errno})"),
        }
    }
}

impl core::error::Error for StackError {}

/// Why a worker thread could not be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadError {
    /// What the OS said.
    pub message: String,
}

impl fmt::Display for ThreadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "starting a worker thread failed: {}", self.message)
    }
}

impl core::error::Error for ThreadError {}

/// A panic payload caught at an actor's edge.
pub type PanicPayload = Box<dyn Any + Send + 'static>;

/// An operating system, as core sees it.
///
/// # Safety
///
/// An implementation guarantees, besides [`Futex`]'s contract:
/// - [`current_worker`](Platform::current_worker) returns exactly the value
///   the calling OS thread last passed to
///   [`set_current_worker`](Platform::set_current_worker) (null if none), and
///   is an opaque call the optimiser cannot hoist or cache across a context
///   switch (an actor may resume on another thread: `#[inline(never)]` over a
///   thread-local);
/// - [`stack_alloc`](Platform::stack_alloc) returns a mapping of at least the
///   requested usable size, page-aligned, with an inaccessible guard of at
///   least one page below it, readable and writable above it, and
///   [`stack_free`](Platform::stack_free) unmaps exactly that;
/// - [`catch_unwind`](Platform::catch_unwind) stops any unwind started inside
///   `f` and returns its payload;
/// - [`now_ns`](Platform::now_ns) is monotonic and shares its epoch with the
///   deadlines given to [`Futex::wait`].
pub unsafe trait Platform: Futex + Sized + Send + Sync + 'static {
    /// The ISA's context switch and cycle counter.
    type Arch: Arch;
    /// The raw lock for short sections.
    type Lock: RawLock;
    /// A handle to a started OS thread.
    type Thread: Send;
    /// The IO readiness poller ([`NoPoller`](crate::seam::poll::NoPoller)
    /// where the platform has none).
    type Poller: crate::seam::poll::Poller;

    /// The port's name, for reports ("linux", "darwin").
    const NAME: &'static str;

    /// Gives the CPU to another OS thread (`sched_yield`).
    fn yield_thread();
    /// Nanoseconds on a monotonic clock.
    fn now_ns() -> u64;
    /// Online CPUs (at least 1).
    fn cpu_count() -> usize;
    /// The page size in bytes.
    fn page_size() -> usize;

    /// Starts an OS thread named `name` running `f`.
    fn spawn_thread(name: String, f: Box<dyn FnOnce() + Send>) -> Result<Self::Thread, ThreadError>;
    /// Waits for a thread started by [`Platform::spawn_thread`] to finish.
    fn join_thread(thread: Self::Thread);

    /// This OS thread's current-worker slot.
    fn current_worker() -> *mut ();
    /// Sets this OS thread's current-worker slot.
    fn set_current_worker(worker: *mut ());

    /// Maps a stack with at least `usable` bytes above a guard page.
    fn stack_alloc(usable: usize) -> Result<RawStack, StackError>;
    /// Unmaps a stack.
    ///
    /// # Safety
    ///
    /// `stack` came from [`Platform::stack_alloc`] and no context runs on it.
    unsafe fn stack_free(stack: RawStack);

    /// How many bytes of the usable stack `[lo, hi)` have ever been touched
    /// (resident pages from the top down: a high-water mark at page
    /// granularity), if the OS can tell. Read-only and safe on any live
    /// mapping; the default says nothing.
    fn stack_touched(lo: usize, hi: usize) -> Option<usize> {
        let _ = (lo, hi);
        None
    }

    /// Deterministic testing: `true` only in a port whose
    /// [`pick`](Platform::pick) and [`turn_point`](Platform::turn_point)
    /// carry a seeded schedule (`smarm-sim`). Real ports keep the default
    /// `false`, and core's calls to both compile away.
    const SEEDED_SCHEDULE: bool = false;

    /// Deterministic testing: which of `n` (>= 1) runnable actors a worker
    /// runs next, as an index into its run queue's FIFO order. Called by
    /// core only when [`SEEDED_SCHEDULE`](Platform::SEEDED_SCHEDULE) is set.
    /// Core rotates the queue by the index (a pop and a push per skipped
    /// actor), so a port keeps its picks near the head.
    fn pick(n: usize) -> usize {
        let _ = n;
        0
    }

    /// Deterministic testing: called by a worker at the start of every
    /// turn (between actors, holding no lock, no half-done operation), a
    /// point where a seeded port may run another of its threads first.
    /// Called by core only when
    /// [`SEEDED_SCHEDULE`](Platform::SEEDED_SCHEDULE) is set.
    fn turn_point() {}

    /// Whether a panic unwinds (`panic = "unwind"`, the default) rather
    /// than aborts the process. Kills and shutdown's cancellations are
    /// unwinds, so a runtime refuses to build without them
    /// ([`BuildError::PanicAbort`](crate::BuildError::PanicAbort)) unless
    /// told otherwise. The default is the strategy this crate (core) was
    /// compiled with, which under cargo is the whole build's (the
    /// profile's `panic` reaches every crate; an aborting crate cannot be
    /// linked into an unwinding binary). A port built some other way may
    /// say its own.
    const PANIC_UNWINDS: bool = cfg!(panic = "unwind");

    /// Runs `f`, stopping any panic that unwinds out of it.
    fn catch_unwind(f: &mut dyn FnMut()) -> Result<(), PanicPayload>;
    /// Starts unwinding with `payload` without calling the panic hook.
    fn resume_unwind(payload: PanicPayload) -> !;
    /// Whether the calling OS thread is unwinding (std's
    /// `thread::panicking()`, which counts panics per OS thread: core never
    /// switches an actor off its thread while this is true).
    fn panicking() -> bool;
    /// Prints `msg` to the error stream and aborts the process.
    fn abort(msg: &str) -> !;

    /// Wraps the process's panic hook, once per process: the new hook
    /// first prints what `describe` writes about the panicking thread (core
    /// passes a function naming the running actor, `smarm: actor 7 "name"
    /// panicked:`, and writing nothing off actors), then runs the hook it
    /// replaced. Core calls this at every runtime build, before any worker
    /// starts; calls after the first must do nothing. A port without panic
    /// hooks (no std) does nothing.
    fn install_panic_hook(describe: DescribePanic);
}

/// What [`Platform::install_panic_hook`]'s hook calls to describe the
/// panicking thread: writes a line (without its newline) or nothing.
pub type DescribePanic = fn(&mut dyn fmt::Write) -> fmt::Result;
