//! A std-backed, asm-free [`Platform`] for core's unit tests, so Miri can
//! run the mailbox, the channels, the timers and the stack pool from plain
//! OS threads (nothing here context-switches: no actor ever runs).
//!
//! - Futex: one process-wide std `Mutex` over a table of sleepers keyed by
//!   their word's address, each with its own `Condvar`: a wait checks its
//!   word and lists itself under the mutex, then sleeps until a wake of its
//!   own word takes it off the table (or its deadline passes); a wake takes
//!   the mutex, unlists the word's sleepers (`wake_one`: the oldest one) and
//!   notifies each one's condvar. A wake cannot slip between check and
//!   sleep, and a wake of one word never ends a wait on another (no
//!   spurious returns, so a missing wake is a timeout; tests below).
//! - Clock: `Instant` since a process-wide epoch (Miri emulates it).
//! - Stacks: the global allocator (page-aligned, a "guard" that is not
//!   protected), counted per thread so pool tests can check the bookkeeping;
//!   Miri's leak check catches a stack never freed.
//! - The current-worker slot is always null: core takes its thread paths.

use std::boxed::Box;
use std::cell::Cell;
use std::string::String;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use std::vec::Vec;

use crate::seam::arch::{Arch, EntryFn};
use crate::seam::lock::FutexLock;
use crate::seam::platform::{Futex, PanicPayload, Platform, RawStack, StackError, ThreadError};
use crate::sync::{AtomicU32, Ordering};

/// One thread asleep in the test futex.
struct Sleeper {
    /// The address of the word it waits on (its key).
    addr: usize,
    /// This waiter's own condvar, one per wait call, so also its identity
    /// (the waiter looks for it to learn whether a wake has taken it off
    /// the table). A wake notifies only the waiters it takes off the table.
    cv: Arc<Condvar>,
}

/// The futex "kernel": every sleeper, oldest first.
static KERNEL: Mutex<Vec<Sleeper>> = Mutex::new(Vec::new());

/// The kernel's lock. A poisoned lock is taken anyway: the table is never
/// left half-updated (nothing panics while it is held), and one failing
/// test must not fail every other test's futex.
fn kernel() -> MutexGuard<'static, Vec<Sleeper>> {
    KERNEL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A futex word's key: its address (a sleeper's word outlives its listing,
/// the wait call borrowing it, so two listed sleepers with one address wait
/// on one word).
fn key(word: &AtomicU32) -> usize {
    word as *const AtomicU32 as usize
}

/// Threads asleep in [`StdPlatform`]'s futex wait on `word` (for the tests of
/// the futex itself, which a loom build leaves out).
#[cfg(not(smarm_loom))]
pub(crate) fn sleepers_on(word: &AtomicU32) -> usize {
    let k = key(word);
    kernel().iter().filter(|s| s.addr == k).count()
}

const PAGE: usize = 4096;

std::thread_local! {
    /// Stacks this thread mapped and has not freed.
    static STACKS_LIVE: Cell<isize> = const { Cell::new(0) };
    /// Stacks this thread mapped in all.
    static STACKS_MAPPED: Cell<usize> = const { Cell::new(0) };
}

/// Stacks this thread has mapped and not freed (`stack_alloc` less `stack_free`).
pub(crate) fn stacks_live() -> isize {
    STACKS_LIVE.with(Cell::get)
}

/// Stacks this thread has mapped in all.
pub(crate) fn stacks_mapped() -> usize {
    STACKS_MAPPED.with(Cell::get)
}

/// No context switch: no actor ever runs on the test platform.
pub(crate) struct NoArch;

// SAFETY: `switch` and `init_stack` are never called: the current-worker
// slot is always null, so no actor is ever started or resumed.
unsafe impl Arch for NoArch {
    const NAME: &'static str = "none";
    const INIT_STACK_BYTES: usize = 0;
    unsafe fn switch(_to: *mut u8) -> *mut u8 {
        unreachable!("no actors on the test platform")
    }
    unsafe fn init_stack(_top: *mut u8, _entry: EntryFn, _arg: *mut u8) -> *mut u8 {
        unreachable!("no actors on the test platform")
    }
    fn cycles() -> u64 {
        0
    }
    fn cycles_serialising() -> u64 {
        0
    }
    fn cycles_per_second() -> Option<u64> {
        None
    }
    fn spin_hint() {
        core::hint::spin_loop();
    }
}

/// The std test platform (see the module docs).
pub(crate) struct StdPlatform;

// SAFETY: a wait checks its word and lists itself while holding KERNEL's
// lock, and a wake unlists and notifies while holding it, so no wake falls
// between check and sleep; the std mutex gives the Release (wake) / Acquire
// (return of wait) edges. A wait returns only if its word differed at
// entry, a wake of its own word unlisted it, or its deadline (on the clock
// of `now_ns`) passed: never spuriously.
unsafe impl Futex for StdPlatform {
    fn wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
        let mut k = kernel();
        if word.load(Ordering::SeqCst) != expected {
            return;
        }
        let cv = Arc::new(Condvar::new());
        k.push(Sleeper {
            addr: key(word),
            cv: cv.clone(),
        });
        // Looped: std's condvar may return spuriously, and a timeout may
        // come early by our clock.
        while k.iter().any(|s| Arc::ptr_eq(&s.cv, &cv)) {
            k = match deadline_ns {
                None => cv.wait(k).unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let now = Self::now_ns();
                    if now >= d {
                        // The deadline: unlist ourselves (still listed, so
                        // no wake was spent on us).
                        k.retain(|s| !Arc::ptr_eq(&s.cv, &cv));
                        return;
                    }
                    cv.wait_timeout(k, Duration::from_nanos(d - now))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }
    fn wake_one(word: &AtomicU32) {
        let key = key(word);
        let mut k = kernel();
        // The oldest sleeper on this word; none: the wake is a no-op.
        if let Some(pos) = k.iter().position(|s| s.addr == key) {
            k.remove(pos).cv.notify_one();
        }
    }
    fn wake_all(word: &AtomicU32) {
        let key = key(word);
        let mut k = kernel();
        k.retain(|s| {
            if s.addr == key {
                s.cv.notify_one();
            }
            s.addr != key
        });
    }
}

// SAFETY: `current_worker` is always null (core takes its thread paths and
// never switches); stacks are page-aligned global-allocator blocks of the
// requested usable size plus one page, freed with the same layout;
// `catch_unwind` is std's; `now_ns` is `Instant`, the clock the futex's
// deadlines are measured on.
unsafe impl Platform for StdPlatform {
    type Arch = NoArch;
    type Lock = FutexLock<StdPlatform>;
    type Thread = std::thread::JoinHandle<()>;
    type Poller = crate::seam::poll::NoPoller;
    const NAME: &'static str = "std-test";

    fn yield_thread() {
        std::thread::yield_now();
    }
    fn now_ns() -> u64 {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        let e = *EPOCH.get_or_init(Instant::now);
        u64::try_from(e.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
    fn cpu_count() -> usize {
        2
    }
    fn page_size() -> usize {
        PAGE
    }
    fn spawn_thread(name: String, f: Box<dyn FnOnce() + Send>) -> Result<Self::Thread, ThreadError> {
        std::thread::Builder::new()
            .name(name)
            .spawn(f)
            .map_err(|e| ThreadError {
                message: std::format!("{e}"),
            })
    }
    fn join_thread(thread: Self::Thread) {
        thread.join().unwrap();
    }
    fn current_worker() -> *mut () {
        core::ptr::null_mut()
    }
    fn set_current_worker(_worker: *mut ()) {
        unreachable!("no workers on the test platform")
    }
    fn stack_alloc(usable: usize) -> Result<RawStack, StackError> {
        let len = usable.next_multiple_of(PAGE) + PAGE;
        let layout =
            std::alloc::Layout::from_size_align(len, PAGE).map_err(|_| StackError::Os { errno: 22 })?;
        // SAFETY: `layout` has a non-zero size (at least one page).
        let base = unsafe { std::alloc::alloc(layout) };
        if base.is_null() {
            return Err(StackError::OutOfMaps { errno: 12 });
        }
        STACKS_LIVE.with(|c| c.set(c.get() + 1));
        STACKS_MAPPED.with(|c| c.set(c.get() + 1));
        Ok(RawStack {
            base,
            len,
            guard: PAGE,
        })
    }
    unsafe fn stack_free(stack: RawStack) {
        STACKS_LIVE.with(|c| c.set(c.get() - 1));
        let layout = std::alloc::Layout::from_size_align(stack.len, PAGE).unwrap();
        // SAFETY: the caller's contract: `stack` came from `stack_alloc`,
        // which allocated exactly this layout at `base`.
        unsafe { std::alloc::dealloc(stack.base, layout) };
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
        panic!("{msg}")
    }

    fn install_panic_hook(_describe: crate::seam::platform::DescribePanic) {
        // Unit tests run no actors: std's own hook is enough.
    }
}

/// Runs `f` on its own thread and panics if it has not finished within
/// `secs` seconds (a lost wake-up becomes a loud failure, not a hang; under
/// Miri, whose clock jumps ahead when every thread is blocked, too). A panic
/// inside `f` is re-raised here.
pub(crate) fn with_timeout<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let v = f();
        let _ = tx.send(());
        v
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("test timed out after {secs} s (a lost wake-up?)")
        }
    }
}

/// A value that counts its drops into a shared counter (exactly-once checks).
#[derive(Debug)]
pub(crate) struct Counted(pub u64, pub std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(all(test, not(smarm_loom)))]
mod tests;
