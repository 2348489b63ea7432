//! smarm-sim: a deterministic port of smarm for tests.
//!
//! The same runtime (core is unchanged but for two hooks), on a simulated
//! machine:
//!
//! - **One thread runs at a time.** Workers, blocking-call spares and the
//!   monitor are real OS threads, but they pass a baton: a thread runs only
//!   while it holds it, and gives it up only at the port's scheduling points
//!   (futex waits and wakes, `yield_thread`, every scheduler turn, a
//!   thread's start and end, and, with the `failpoints` feature, core's
//!   failpoints: between a ring slot's claim and publish, around the park
//!   CAS, in a receive between registering and re-checking, inside a
//!   mailbox's or channel's close, between exit hooks).
//! - **A seeded policy decides.** At every point it picks the next thread
//!   among the runnable ones, and at every scheduler turn it picks which of
//!   the queued actors runs next (`Platform::pick`; the run-next slot is
//!   folded into the queue first). One splitmix64 stream per run, seeded.
//! - **The clock is virtual**: it moves a little per decision, and jumps to
//!   the next deadline when every thread waits, so timers, `sleep`s and
//!   receive timeouts cost no real time and fire in a replayable order.
//! - **A lost wake-up is caught**: every thread blocked with no deadline is
//!   reported (every thread's state, the seed) and aborts the process.
//!
//! The same seed replays the same interleaving: a failing seed reproduces.
//!
//! [`net`] is a simulated network with the real ports' socket names (TCP
//! and UDP in memory, on the virtual clock; the seed picks latency,
//! partial reads and writes, reordering, loss, resets and partitions).
//!
//! ```
//! use smarm_sim::{run, spawn, Runtime};
//!
//! let (sum, report) = run(7, || {
//!     let rt = Runtime::builder().workers(2).build().unwrap();
//!     rt.block_on(|| {
//!         let hs: Vec<_> = (0..4u64).map(|i| spawn(move || i * 10)).collect();
//!         hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
//!     })
//! });
//! assert_eq!(sum, 60);
//! assert_eq!(report.seed, 7);
//! // The same seed, the same schedule.
//! let again = run(7, || {
//!     let rt = Runtime::builder().workers(2).build().unwrap();
//!     rt.block_on(|| {
//!         let hs: Vec<_> = (0..4u64).map(|i| spawn(move || i * 10)).collect();
//!         hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
//!     })
//! });
//! assert_eq!(report.trace, again.1.trace);
//! ```
//!
//! # What is deterministic
//!
//! Everything a program does through the runtime, from inside [`run`]: the
//! order actors run in, on which worker, when timers fire, what a receive
//! with a timeout sees. Not covered: threads the program starts itself
//! (they work, as outside threads, but their timing is the OS's), real time
//! read around the runtime (`std::time::Instant`), and the addresses of
//! allocations. `Platform::cpu_count` is fixed at [`CPUS`] so a default
//! runtime has the same shape on every machine.
//!
//! Outside [`run`] the port behaves as the host's (real threads, real
//! clock), so its `Runtime` can also be used as an ordinary one.
#![cfg(any(target_os = "linux", target_vendor = "apple"))]

/// The crate's README (its crates.io page), whose example runs as a
/// doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;

use std::sync::atomic::AtomicU32;

use smarm_core::lock::FutexLock;
use smarm_core::{Arch, EntryFn, Futex, PanicPayload, Platform, RawStack, ThreadError};

pub mod net;
mod world;

pub use world::{Report, SimThread, ABANDON_AFTER, DEADLOCK_GRACE, EPOCH, QUANTUM};

cfg_if::cfg_if! {
    if #[cfg(target_os = "linux")] {
        /// The host port the simulation runs on (stacks, unwinding, the
        /// outside threads' futex).
        pub type Host = smarm_linux::Linux;
        type HostArch = smarm_linux::HostArch;
        /// The host's stacks, so the host's guards (`stack_guard()`).
        pub use smarm_linux::{stack_guard, StackGuard, STACK_GUARD_ENV};
    } else {
        /// The host port the simulation runs on (stacks, unwinding, the
        /// outside threads' futex).
        pub type Host = smarm_darwin::Darwin;
        type HostArch = smarm_darwin::HostArch;
        /// The host's stacks, so the host's guards (`stack_guard()`).
        pub use smarm_darwin::{stack_guard, StackGuard, STACK_GUARD_ENV};
    }
}

/// What `Platform::cpu_count` says in the simulation.
pub const CPUS: usize = 2;

/// OS stack for the simulation's threads (they run the scheduler loop).
const THREAD_STACK: usize = 256 * 1024;

/// The simulated platform (a zero-sized type; users never name it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sim;

/// The host's context switch with the simulation's clock: the cycle
/// counter is the virtual clock in nanoseconds, so timeslices expire at
/// replayable points.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimArch;

// SAFETY: `switch`, `init_stack` and `INIT_STACK_BYTES` are the host arch's,
// which upholds the trait's contract; the cycle reads are the virtual clock,
// side-effect free as far as the caller can tell (they advance simulated
// time, which no register or memory of the caller's holds).
unsafe impl Arch for SimArch {
    const NAME: &'static str = <HostArch as Arch>::NAME;
    const INIT_STACK_BYTES: usize = <HostArch as Arch>::INIT_STACK_BYTES;

    #[inline(always)]
    unsafe fn switch(to: *mut u8) -> *mut u8 {
        // SAFETY: the caller upholds `Arch::switch`'s contract, which is the
        // host arch's.
        unsafe { <HostArch as Arch>::switch(to) }
    }

    unsafe fn init_stack(top: *mut u8, entry: EntryFn, arg: *mut u8) -> *mut u8 {
        // SAFETY: as above, `init_stack`'s contract is passed through.
        unsafe { <HostArch as Arch>::init_stack(top, entry, arg) }
    }

    fn cycles() -> u64 {
        world::now_ns()
    }

    fn cycles_serialising() -> u64 {
        world::now_ns()
    }

    fn cycles_per_second() -> Option<u64> {
        Some(1_000_000_000)
    }

    fn spin_hint() {
        <HostArch as Arch>::spin_hint()
    }
}

// SAFETY: inside a world, a participant's `wait` checks the word under the
// world's mutex, which every `wake` also takes after the waker's stores, so
// the check-and-block is atomic with respect to wakes and a wake orders the
// waker's prior stores before the waiter's return; outside threads use the
// host's futex, and every wake also wakes them through it.
unsafe impl Futex for Sim {
    fn wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
        world::wait(word, expected, deadline_ns)
    }

    fn wake_one(word: &AtomicU32) {
        world::wake(word, false)
    }

    fn wake_all(word: &AtomicU32) {
        world::wake(word, true)
    }
}

std::thread_local! {
    static CURRENT_WORKER: std::cell::Cell<*mut ()> = const { std::cell::Cell::new(core::ptr::null_mut()) };
}

// SAFETY: `current_worker` is this port's own thread-local behind
// `#[inline(never)]` (opaque at every use, as the contract requires); stacks,
// unwinding and abort are the host port's, which meets their contracts;
// `now_ns` is the virtual clock, monotonic, and the clock `wait` deadlines
// are read against.
unsafe impl Platform for Sim {
    type Arch = SimArch;
    type Lock = FutexLock<Sim>;
    type Thread = SimThread;
    type Poller = smarm_core::poll::NoPoller;

    const NAME: &'static str = "sim";
    const SEEDED_SCHEDULE: bool = true;

    fn yield_thread() {
        world::switch_point(true)
    }

    fn now_ns() -> u64 {
        world::now_ns()
    }

    fn cpu_count() -> usize {
        CPUS
    }

    fn page_size() -> usize {
        <Host as Platform>::page_size()
    }

    fn install_panic_hook(describe: smarm_core::DescribePanic) {
        // The host port's hook (it keeps every describer installed).
        <crate::Host as Platform>::install_panic_hook(describe);
    }

    fn spawn_thread(name: String, f: Box<dyn FnOnce() + Send>) -> Result<Self::Thread, ThreadError> {
        install_failpoint_hook();
        world::spawn(name, THREAD_STACK, f).map_err(|e| ThreadError {
            message: e.to_string(),
        })
    }

    fn join_thread(thread: Self::Thread) {
        world::join(thread)
    }

    #[inline(never)]
    fn current_worker() -> *mut () {
        CURRENT_WORKER.with(|c| c.get())
    }

    #[inline(never)]
    fn set_current_worker(worker: *mut ()) {
        CURRENT_WORKER.with(|c| c.set(worker));
    }

    fn stack_alloc(usable: usize) -> Result<RawStack, StackError> {
        <Host as Platform>::stack_alloc(usable)
    }

    unsafe fn stack_free(stack: RawStack) {
        // SAFETY: the caller's contract is the host's (the stack came from
        // the host's `stack_alloc` above).
        unsafe { <Host as Platform>::stack_free(stack) }
    }

    fn stack_touched(lo: usize, hi: usize) -> Option<usize> {
        <Host as Platform>::stack_touched(lo, hi)
    }

    fn pick(n: usize) -> usize {
        world::pick(n)
    }

    fn turn_point() {
        world::switch_point(false)
    }

    fn catch_unwind(f: &mut dyn FnMut()) -> Result<(), PanicPayload> {
        <Host as Platform>::catch_unwind(f)
    }

    fn resume_unwind(payload: PanicPayload) -> ! {
        <Host as Platform>::resume_unwind(payload)
    }

    fn panicking() -> bool {
        <Host as Platform>::panicking()
    }

    fn abort(msg: &str) -> ! {
        <Host as Platform>::abort(msg)
    }
}

smarm_core::port_api!(Sim);

/// Runs `f` on the calling thread as the root of a simulated machine seeded
/// with `seed`: every runtime `f` builds runs its threads one at a time in
/// the seeded order, on the virtual clock. Returns `f`'s value and what the
/// world did ([`Report`]; equal seeds give equal `trace`s).
///
/// Worlds in one process run one after another (a second `run` on another
/// thread waits). A panic in `f` propagates after the world is left.
pub fn run<R>(seed: u64, f: impl FnOnce() -> R) -> (R, Report) {
    /// Leaves the world if `f` unwinds.
    struct Leave(Option<u64>);
    impl Drop for Leave {
        fn drop(&mut self) {
            if let Some(gen) = self.0 {
                world::leave(gen);
            }
        }
    }
    install_failpoint_hook();
    let gen = world::enter(seed, true);
    let mut guard = Leave(Some(gen));
    let r = f();
    guard.0 = None;
    (r, world::leave(gen))
}

/// Installs the failpoint hook once per process: it acts only on the
/// threads of a world (a no-op elsewhere), so it can stay.
fn install_failpoint_hook() {
    #[cfg(feature = "failpoints")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            smarm_core::failpoint::set_hook(Some(failpoint_hook));
        });
    }
}

/// Core's failpoints are scheduling points of the simulation.
#[cfg(feature = "failpoints")]
fn failpoint_hook(_site: smarm_core::failpoint::Site) {
    world::failpoint()
}

/// A scheduling point: inside a simulated machine the policy may run
/// another of its threads first; elsewhere the OS thread yields. For code
/// that waits on the runtime by spinning (a test's `eventually` loop).
pub fn yield_thread() {
    <Sim as Platform>::yield_thread()
}

/// Whether the calling thread runs inside a simulated machine.
pub fn in_sim() -> bool {
    world::in_world()
}

/// The seeds [`check`] runs: `SMARM_SIM_SEED=S` (one seed, to replay a
/// failure) or `SMARM_SIM_SEEDS=N` (seeds `0..N`) from the environment,
/// else `0..default`.
pub fn seeds(default: u64) -> std::ops::Range<u64> {
    let var = |k: &str| std::env::var(k).ok().and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(s) = var("SMARM_SIM_SEED") {
        return s..s + 1;
    }
    0..var("SMARM_SIM_SEEDS").unwrap_or(default)
}

/// Runs `f` in a fresh world for every seed of [`seeds(default)`](seeds),
/// stopping at the first panic with a message naming the seed to replay.
/// Returns the reports, in seed order.
pub fn check(default: u64, f: impl Fn(u64)) -> Vec<Report> {
    let mut out = Vec::new();
    for seed in seeds(default) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed, || f(seed)).1));
        match r {
            Ok(rep) => out.push(rep),
            Err(p) => {
                eprintln!("smarm-sim: failed at seed {seed}; replay it alone with SMARM_SIM_SEED={seed}");
                std::panic::resume_unwind(p)
            }
        }
    }
    out
}
