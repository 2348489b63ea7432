// The crate's README (its crates.io page) opens its docs.
#![doc = include_str!("../README.md")]
//!
//! # The API
//!
//! This crate re-exports the whole runtime API with the platform filled in
//! ([`Runtime`], [`spawn`], [`yield_now`], ...), the same names
//! `smarm-darwin` exports on macOS.
//!
//! # OS APIs and why
//!
//! - Wait/wake: `futex(FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG)` with an
//!   absolute `CLOCK_MONOTONIC` deadline (so a retry after EINTR keeps the
//!   original deadline) and `FUTEX_WAKE | FUTEX_PRIVATE_FLAG`. Private
//!   futexes skip the cross-process hash; the runtime never shares words
//!   across processes. Available since Linux 2.6.25.
//! - The raw lock: core's three-state futex lock (no pthread mutex, never
//!   recursive).
//! - Stacks, on Linux 6.13 and later: slots of a few large
//!   `mmap(PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE|MAP_STACK)`
//!   reservations per stack size, each slot's lowest page made a guard
//!   region with `madvise(MADV_GUARD_INSTALL)`, which faults like
//!   `PROT_NONE` without splitting the mapping (a million guarded stacks
//!   take a few dozen map entries); freed slots' pages are released with
//!   `MADV_DONTNEED` in batches (`slab.rs`). The kernel's support is probed
//!   at the first stack (the advice must succeed and the kernel must then
//!   refuse a `write(2)` from the page: emulators that acknowledge unknown
//!   advice fail that).
//! - Stacks otherwise (older kernels, emulators, `SMARM_STACK_GUARD=mapping`):
//!   one such mapping per stack, then `mprotect(PROT_NONE)` on its lowest
//!   page as the guard. Each guarded stack costs two entries of
//!   `vm.max_map_count` (65530 by default); an ENOMEM is reported as
//!   `StackError::OutOfMaps` with that advice. `MAP_GROWSDOWN` is rejected:
//!   the kernel's stack-guard gap logic makes it fragile and it buys
//!   nothing for fixed-size stacks. The mapping is shared with Darwin
//!   (`smarm_unix::stack`); the cap on mapped stacks
//!   (`StackError::MapReserve`) is this port's.
//! - Threads: `std::thread` (pthreads), with a small OS stack since actors
//!   run on their own stacks (`smarm_unix::thread`, shared with Darwin).
//! - Stack overflow: a SIGSEGV/SIGBUS handler on a per-worker alternate
//!   signal stack reports an actor that hits its guard page and aborts
//!   (`smarm_unix::fault`, shared with Darwin).
//! - IO readiness: one `epoll` instance per runtime (made at the first
//!   registration), every descriptor added once for `EPOLLIN | EPOLLOUT |
//!   EPOLLRDHUP` edge-triggered, an `eventfd` beside them as the kick that
//!   wakes a worker waiting in `epoll_wait` (`poll.rs`).
//! - Clock: `CLOCK_MONOTONIC` (the futex deadline's clock).
//! - The current-worker slot: a `thread_local!` `Cell` (smarm-unix's)
//!   behind this port's `#[inline(never)]` accessors, so LLVM cannot keep a
//!   thread-local's address in a register across a context switch
//!   (llvm#98479) when an actor migrates between workers.
//!
//! What this crate holds itself is what differs from Darwin: the futex,
//! the clock, the slab stacks, the cap on mapped stacks. Everything else
//! POSIX is `smarm-unix`'s.
#![cfg(target_os = "linux")]

/// The repository README's examples, run as this crate's doctests so the
/// README stays true. Only under `cfg(doctest)`: the file lies outside this
/// package (a published crate's build never reads it), and the crate's own
/// docs open with its own README.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct RepositoryReadme;

mod poll;
mod slab;

use core::ptr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use smarm_core::lock::{FutexLock, Mutex};
use smarm_core::{Futex, PanicPayload, Platform, RawStack, ThreadError};
pub use smarm_unix::stack::{StackGuard, STACK_GUARD_ENV};

cfg_if::cfg_if! {
    if #[cfg(target_arch = "x86_64")] {
        /// The ISA support this port uses.
        pub type HostArch = smarm_arch_x86_64::X86_64;
    } else if #[cfg(target_arch = "aarch64")] {
        /// The ISA support this port uses.
        pub type HostArch = smarm_arch_aarch64::Aarch64;
    } else {
        compile_error!("smarm-linux supports x86_64 and aarch64");
    }
}

/// The Linux platform (a zero-sized type; users never name it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Linux;

fn timespec_from_ns(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

// SAFETY: FUTEX_WAIT_BITSET checks `*word == expected` and sleeps atomically
// with respect to FUTEX_WAKE on the same address (the kernel's hash-bucket
// lock), and that lock orders the waker's prior stores before the waiter's
// return. Any thread may call these.
unsafe impl Futex for Linux {
    fn wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
        let ts = deadline_ns.map(timespec_from_ns);
        let ts_ptr = ts.as_ref().map_or(ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `word` is a valid, aligned u32 for the call's duration;
        // `ts_ptr` is null or points to a live timespec (absolute, on
        // CLOCK_MONOTONIC as FUTEX_WAIT_BITSET without CLOCK_REALTIME says).
        // Errors (EAGAIN: value changed, EINTR, ETIMEDOUT) all mean "return
        // and let the caller re-check", which the contract allows.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
                expected,
                ts_ptr,
                ptr::null::<u32>(),
                libc::FUTEX_BITSET_MATCH_ANY,
            );
        }
    }

    fn wake_one(word: &AtomicU32) {
        // SAFETY: FUTEX_WAKE only reads the address to find waiters.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            );
        }
    }

    fn wake_all(word: &AtomicU32) {
        // SAFETY: as in `wake_one`.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }
}

smarm_unix::current_worker_slot!();

// SAFETY: `current_worker` returns what this thread last stored (a plain
// thread-local) and is `#[inline(never)]`, so it is an opaque call at every
// use; every stack has a guard page below its usable range (a guard region
// in a slab, or PROT_NONE in a mapping of its own), is never handed out
// twice at once, and is freed by the path that made it (the mode is fixed
// for the process at the first stack); `catch_unwind` is std's; `now_ns`
// is CLOCK_MONOTONIC, the futex deadline's clock.
unsafe impl Platform for Linux {
    type Arch = HostArch;
    type Lock = FutexLock<Linux>;
    type Thread = std::thread::JoinHandle<()>;
    type Poller = poll::Epoll;

    const NAME: &'static str = "linux";

    fn yield_thread() {
        smarm_unix::yield_thread();
    }

    fn now_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
        smarm_unix::thread::spawn::<Linux>(name, f)
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

    fn stack_alloc(usable: usize) -> Result<RawStack, StackError> {
        match stacks() {
            Stacks::Slabs(slabs) => slabs.lock().alloc(usable),
            Stacks::Mappings => {
                let limit = stack_map_limit();
                // Relaxed: a count; a race lets at most one stack per racing
                // thread past the bound, well inside the reserve.
                let mapped = STACKS_MAPPED.fetch_add(1, Ordering::Relaxed);
                if mapped >= limit.stacks {
                    STACKS_MAPPED.fetch_sub(1, Ordering::Relaxed);
                    return Err(StackError::MapReserve {
                        stacks: mapped,
                        max_map_count: limit.max_map_count,
                    });
                }
                let r = smarm_unix::stack::alloc(usable);
                if r.is_err() {
                    STACKS_MAPPED.fetch_sub(1, Ordering::Relaxed);
                }
                r
            }
        }
    }

    unsafe fn stack_free(stack: RawStack) {
        match stacks() {
            // SAFETY: the caller passes a stack from `stack_alloc`, which
            // (the mode being fixed for the process) came from these slabs,
            // and nothing runs on it now.
            Stacks::Slabs(slabs) => unsafe { slabs.lock().free(stack) },
            Stacks::Mappings => {
                // SAFETY: as above, a stack made by `smarm_unix::stack::alloc`.
                unsafe { smarm_unix::stack::free(stack) };
                // Relaxed: a count (see `stack_alloc`).
                STACKS_MAPPED.fetch_sub(1, Ordering::Relaxed);
            }
        }
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

/// Where this process's actor stacks come from; chosen at the first stack.
enum Stacks {
    /// Slabs with guard regions (`slab`).
    Slabs(Mutex<FutexLock<Linux>, slab::Slabs<slab::Madvise>>),
    /// One mapping per stack with a `PROT_NONE` guard page
    /// (`smarm_unix::stack`), capped by [`stack_map_limit`].
    Mappings,
}

fn stacks() -> &'static Stacks {
    static STACKS: std::sync::OnceLock<Stacks> = std::sync::OnceLock::new();
    STACKS.get_or_init(|| {
        let forced = std::env::var_os(STACK_GUARD_ENV).is_some_and(|v| v == "mapping");
        if !forced && slab::guard_regions_work() {
            Stacks::Slabs(Mutex::new(slab::Slabs::new(
                slab::Madvise,
                smarm_unix::page_size(),
            )))
        } else {
            Stacks::Mappings
        }
    })
}

/// How this process guards its actor stacks (decided at the first stack
/// mapped, or by this call): [`StackGuard::Region`] on Linux 6.13 and later
/// (a million guarded stacks take a few dozen memory maps),
/// [`StackGuard::Mapping`] on older kernels, under emulators that ignore
/// `MADV_GUARD_INSTALL`, or when the environment variable
/// [`STACK_GUARD_ENV`] is `mapping` (then every stack takes two entries of
/// `vm.max_map_count`, and spawns past the limit fail with
/// `StackError::MapReserve`).
pub fn stack_guard() -> StackGuard {
    match stacks() {
        Stacks::Slabs(_) => StackGuard::Region,
        Stacks::Mappings => StackGuard::Mapping,
    }
}

/// Stacks this process has mapped now (`stack_alloc` minus `stack_free`),
/// in [`Stacks::Mappings`] mode.
static STACKS_MAPPED: AtomicUsize = AtomicUsize::new(0);

/// How many stacks may be mapped at once.
#[derive(Clone, Copy)]
struct MapLimit {
    stacks: usize,
    max_map_count: usize,
}

/// Read once from `/proc/sys/vm/max_map_count` (65530 if unreadable): every
/// guarded stack takes two map entries, and an eighth of the limit (at
/// least 1,024 entries) stays for the rest of the process (malloc's
/// arenas and large blocks, thread stacks, the loader, backtraces): at the
/// limit, `try_spawn` fails and everything else still works.
fn stack_map_limit() -> MapLimit {
    static LIMIT: std::sync::OnceLock<MapLimit> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let max_map_count = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(65530);
        let reserve = (max_map_count / 8).max(1024);
        MapLimit {
            stacks: max_map_count.saturating_sub(reserve) / 2,
            max_map_count,
        }
    })
}

smarm_core::port_api!(Linux);
smarm_unix::io_api!(crate::Linux);

#[cfg(test)]
mod tests {
    use smarm_core::lock::{FutexLock, Mutex};
    use smarm_core::overflow::{current_stack, overflow_at};

    use crate::{Linux, Runtime};

    #[test]
    fn failed_try_lock_leaves_the_holders_lock_held() {
        // Regression: `try_lock` once built its guard eagerly, and the
        // guard of a failed attempt unlocked the holder's lock on drop.
        let m: Mutex<FutexLock<Linux>, u32> = Mutex::new(0);
        let held = m.lock();
        assert!(m.try_lock().is_none());
        assert!(
            m.try_lock().is_none(),
            "a failed try_lock released the holder's lock"
        );
        drop(held);
        let mut g = m.try_lock().expect("free after the holder unlocked");
        *g += 1;
        drop(g);
        assert_eq!(*m.lock(), 1);
    }

    #[test]
    fn core_sees_the_running_actors_stack_and_guard() {
        assert_eq!(
            current_stack::<Linux>(),
            None,
            "a plain thread has no actor stack"
        );
        assert_eq!(overflow_at::<Linux>(0x1000), None);
        let rt = Runtime::builder()
            .workers(1)
            .stack_size(64 * 1024)
            .build()
            .unwrap();
        let (id, b, local, hits) = rt.block_on(|| {
            let local = 0u8;
            let b = current_stack::<Linux>().expect("an actor has a stack");
            let hits = [b.guard_start, b.low - 1, b.low, b.guard_start - 1].map(overflow_at::<Linux>);
            let local = core::hint::black_box(&local) as *const u8 as usize;
            (crate::current_id().unwrap(), b, local, hits)
        });
        // (Under ASan with detect_stack_use_after_return, an escaping local
        // lives on ASan's heap-allocated fake stack instead.)
        if !cfg!(smarm_asan) {
            assert!(
                b.low <= local && local < b.top,
                "a local lies in the bounds: {b:?} {local:#x}"
            );
        }
        assert_eq!(b.usable(), 64 * 1024);
        let first = hits[0].as_ref().expect("the guard's first byte is an overflow");
        assert_eq!(
            (first.actor, first.usable, first.guard.clone()),
            (id, 64 * 1024, b.guard())
        );
        assert_eq!(hits[1].as_ref().map(|o| o.addr), Some(b.low - 1));
        assert!(
            hits[2].is_none() && hits[3].is_none(),
            "outside the guard: {hits:?}"
        );
    }
}
