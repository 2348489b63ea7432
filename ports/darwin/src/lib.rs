// The crate's README (its crates.io page) opens its docs; on Apple targets
// only, where the crate has code: elsewhere its examples would run as
// doctests against an empty crate.
#![cfg_attr(target_vendor = "apple", doc = include_str!("../README.md"))]
//!
//! # The port
//!
//! Pick this crate on macOS; it fills in core's [`Platform`] with [`Darwin`]
//! and the ISA's [`Arch`](smarm_core::arch::Arch) (`smarm_arch_aarch64::Aarch64`
//! on Apple silicon, `smarm_arch_x86_64::X86_64` on Intel).
//!
//! # Which OS APIs, and why
//!
//! **Minimum macOS.** Everything used unconditionally exists from macOS
//! 10.12, below Rust's own minimums (10.12 for x86_64, 11.0 for aarch64).
//! The one newer API, `os_sync_wait_on_address` (14.4), is looked up at run
//! time.
//!
//! **Raw lock: `os_unfair_lock`** (10.12). One 32-bit word; the uncontended
//! path is a compare-and-swap in user space; a contended waiter parks in the
//! kernel, which knows the owner (its thread id is in the word) and lends
//! it the waiter's priority. [`DarwinLock`] spins briefly on the word before
//! it parks, for core's short sections. Rejected: a recursive
//! `pthread_mutex_t`, whose contended path on Darwin is the "firstfit" slow
//! path (every collision a kernel park and wake, an order of magnitude
//! longer than the section it guards: measured as the bottleneck of an
//! earlier C actor runtime); a plain `pthread_mutex_t`
//! (64 bytes, fair hand-off by default, so lock convoys); `OSSpinLock`
//! (deprecated: a spinning waiter of higher QoS starves a preempted owner).
//! An `os_unfair_lock` must be unlocked by the thread that locked it and
//! aborts the process on recursion: both are in core's contract already.
//!
//! **Wait/wake on a word: `os_sync_wait_on_address`, else `__ulock_*`.**
//! `os_sync_wait_on_address`, `os_sync_wait_on_address_with_timeout` and
//! `os_sync_wake_by_address_any`/`_all` are public from macOS 14.4. A binary
//! built for an older deployment target must not reference them directly
//! (it would not load on an older system, and the linker stubs carry no
//! availability to weak-link by), so they are looked up once with `dlsym`,
//! as std does. Without them the port falls back to `__ulock_wait` /
//! `__ulock_wake` (in libSystem since 10.12, private: declared here; std and
//! libc++'s `atomic::wait` use them). The public API is preferred where it
//! exists because `__ulock_wait` has a reported deadlock on macOS 14.6, and
//! because private calls may change. Rejected: a `pthread_cond_t` + mutex
//! per word (two objects, an extra lock round trip, not address-keyed);
//! `dispatch_semaphore` / `semaphore_wait` (counting, with no atomic
//! compare against the word, so a wake between check and sleep is lost).
//! `SMARM_DARWIN_FORCE_ULOCK=1` in the environment (read once) selects the
//! fallback on a new system, to test it.
//!
//! **Deadlines.** Core gives an absolute deadline on [`Darwin::now_ns`]'s
//! clock; the port passes the time remaining. `os_sync` takes it in
//! nanoseconds measured on `OS_CLOCK_MACH_ABSOLUTE_TIME`, the clock
//! `now_ns` reads. `__ulock_wait` takes whole microseconds in a `u32` with
//! 0 meaning "forever", so the remainder is rounded up (never to 0) and
//! clamped to `u32::MAX` µs (about 71 minutes); a wait that ends early is a
//! spurious return, which core's callers already loop on, like `EINTR`.
//!
//! **Clock: `mach_absolute_time`** scaled by `mach_timebase_info` (1/1 on
//! Intel, 125/3 on Apple silicon). It is monotonic and stops while the
//! machine sleeps, like `CLOCK_UPTIME_RAW`, and it is the clock the os_sync
//! timeout is measured on. Rejected: `clock_gettime(CLOCK_MONOTONIC)`, which
//! on Darwin counts sleep (a different clock from the waits').
//!
//! **Stacks: `mmap`** (private, anonymous, read-write) with the lowest page
//! `mprotect`ed `PROT_NONE` as the guard. Pages are 16 KiB on Apple silicon:
//! the size comes from `sysconf(_SC_PAGESIZE)`, never a constant. `ENOMEM`
//! becomes [`StackError::OutOfMaps`].
//! Darwin has no small per-process limit on map entries like Linux's
//! `vm.max_map_count`, so, unlike Linux, the port maps stacks until the
//! kernel refuses. The code is shared with Linux: `smarm_unix::stack`.
//!
//! **Threads: `std::thread::Builder`** (so std's thread-locals, names and
//! panic machinery work) with a small OS stack (only the scheduler loop runs
//! there; actors have their own stacks). Each worker raises its QoS class
//! with `pthread_set_qos_class_self_np(QOS_CLASS_USER_INITIATED, 0)`: a worker
//! runs work someone is waiting for, and under the default class the
//! scheduler may keep it on the efficiency cores of Apple silicon, where one
//! slow worker holding a wake-slot hand-off delays its peers.
//! `QOS_CLASS_USER_INTERACTIVE` is left to the application's main/UI thread.
//! The threads are smarm-unix's (`smarm_unix::thread`, shared with Linux);
//! the QoS call is this port's own.
//!
//! **Current worker: a `thread_local!` behind `#[inline(never)]` accessors.**
//! An actor may resume on another worker; LLVM may keep a thread-local's
//! address in a register across the context switch (llvm#98479), which
//! crashed a may-based server in release builds on macOS aarch64
//! (generator-rs#79). An opaque call re-reads it every time. The slot is
//! smarm-unix's; the `#[inline(never)]` boundary is this port's.
//!
//! **Stack overflow: `sigaltstack` + a SIGSEGV/SIGBUS handler** that
//! reports an actor hitting its guard page and aborts, and passes every
//! other fault to the handler that was there before (`smarm_unix::fault`,
//! shared with Linux; its module doc lists Darwin's differences).
//!
//! **IO readiness: `kqueue`.** One kqueue per runtime (made at the first
//! registration), every descriptor added once with `EVFILT_READ` and
//! `EVFILT_WRITE`, both `EV_CLEAR` (edge-triggered), in one `kevent` call (a
//! descriptor without write readiness keeps its read filter), and an
//! `EVFILT_USER` event triggered with `NOTE_TRIGGER` as the kick that wakes
//! a worker waiting in `kevent` (`poll.rs`). Rejected: `poll`/`select` (a
//! scan of every descriptor per wait, and a self-pipe as the kick);
//! `EV_RECEIPT` for per-change results (macOS 10.12 and 10.13 report a
//! refused change as a success).
//!
//! **Also:** `sched_yield`, `sysconf(_SC_NPROCESSORS_ONLN)` (through std's
//! `available_parallelism`),
//! `std::panic::catch_unwind`/`resume_unwind` at an actor's edge, and an
//! abort that prints its message first.
#![cfg(target_vendor = "apple")]
#![warn(missing_docs)]

mod clock;
mod lock;
mod poll;
mod qos;
mod wait;

use smarm_core::sync::AtomicU32;
use smarm_core::{Futex, PanicPayload, Platform, RawStack, ThreadError};

pub use lock::DarwinLock;
pub use smarm_unix::stack::{StackGuard, STACK_GUARD_ENV};

/// How this process guards its actor stacks: always
/// [`StackGuard::Mapping`] on Darwin (a mapping per stack with a
/// `PROT_NONE` guard page; XNU has no guard regions). The same function
/// exists on every port.
pub fn stack_guard() -> StackGuard {
    StackGuard::Mapping
}

cfg_if::cfg_if! {
    if #[cfg(target_arch = "aarch64")] {
        /// The ISA support this port uses (the same name as on every port).
        pub type HostArch = smarm_arch_aarch64::Aarch64;
    } else if #[cfg(target_arch = "x86_64")] {
        /// The ISA support this port uses (the same name as on every port).
        pub type HostArch = smarm_arch_x86_64::X86_64;
    } else {
        compile_error!("smarm-darwin supports aarch64 and x86_64 only");
    }
}

/// The Darwin (macOS) implementation of core's [`Platform`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Darwin;

impl Darwin {
    /// The wait/wake backend this process uses: `"os_sync_wait_on_address"`
    /// (macOS 14.4 and later) or `"__ulock_wait"` (the fallback), for
    /// reports and benches.
    pub fn wait_backend() -> &'static str {
        wait::backend()
    }
}

// SAFETY: `wait` compares and sleeps atomically in the kernel (os_sync /
// ulock compare-and-wait: the kernel re-reads the word under its wait-queue
// lock), so a wake cannot fall between check and sleep; that lock also
// orders a wake after the waker's earlier stores and the waiter's return
// before its later loads. Every method may be called from any thread.
unsafe impl Futex for Darwin {
    fn wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
        wait::wait(word, expected, deadline_ns);
    }

    fn wake_one(word: &AtomicU32) {
        wait::wake(word, false);
    }

    fn wake_all(word: &AtomicU32) {
        wait::wake(word, true);
    }
}

smarm_unix::current_worker_slot!();

// SAFETY: `current_worker` is an `#[inline(never)]` read of a thread-local
// set only by `set_current_worker` on the same thread; stacks are mapped
// page-aligned with a PROT_NONE guard page below at least `usable` bytes and
// unmapped whole; `catch_unwind` is std's; `now_ns` is mach_absolute_time in
// ns, the clock the waits' timeouts are measured on (see the crate doc).
unsafe impl Platform for Darwin {
    type Arch = HostArch;
    type Lock = DarwinLock;
    type Thread = std::thread::JoinHandle<()>;
    type Poller = poll::Kqueue;

    const NAME: &'static str = "darwin";

    fn yield_thread() {
        smarm_unix::yield_thread();
    }

    #[inline]
    fn now_ns() -> u64 {
        clock::now_ns()
    }

    fn cpu_count() -> usize {
        smarm_unix::thread::cpu_count()
    }

    fn page_size() -> usize {
        smarm_unix::page_size()
    }

    fn install_panic_hook(describe: smarm_core::DescribePanic) {
        smarm_unix::panic::install_panic_hook(describe);
    }

    fn spawn_thread(name: String, f: Box<dyn FnOnce() + Send>) -> Result<Self::Thread, ThreadError> {
        smarm_unix::thread::spawn::<Darwin>(name, move || {
            qos::set_worker_qos();
            f();
        })
    }

    fn join_thread(thread: Self::Thread) {
        smarm_unix::thread::join(thread);
    }

    #[inline(never)]
    fn current_worker() -> *mut () {
        current_worker_slot::get()
    }

    #[inline(never)]
    fn set_current_worker(worker: *mut ()) {
        current_worker_slot::set(worker);
    }

    fn stack_alloc(usable: usize) -> Result<RawStack, smarm_core::StackError> {
        smarm_unix::stack::alloc(usable)
    }

    unsafe fn stack_free(stack: RawStack) {
        // SAFETY: forwarded contract (the stack came from `stack_alloc` and
        // nothing runs on it).
        unsafe { smarm_unix::stack::free(stack) }
    }

    fn stack_touched(lo: usize, hi: usize) -> Option<usize> {
        smarm_unix::stackinfo::touched(lo, hi, Self::page_size())
    }

    fn catch_unwind(f: &mut dyn FnMut()) -> Result<(), PanicPayload> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
    }

    fn resume_unwind(payload: PanicPayload) -> ! {
        std::panic::resume_unwind(payload)
    }

    fn panicking() -> bool {
        std::thread::panicking()
    }

    fn abort(msg: &str) -> ! {
        smarm_unix::abort(msg)
    }
}

// The user API (`Runtime`, `Builder`, `spawn`, `yield_now`, ...), with
// `Darwin` filled in: the same invocation as every port, so the same names.
smarm_core::port_api!(Darwin);
smarm_unix::io_api!(crate::Darwin);

#[cfg(test)]
mod tests;
