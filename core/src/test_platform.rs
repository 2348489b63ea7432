//! A std-backed, asm-free [`Platform`] for core's unit tests, so Miri can
//! run the mailbox, the channels, the timers and the stack pool from plain
//! OS threads (nothing here context-switches: no actor ever runs).
//!
//! - Futex: one process-wide std `Mutex` + `Condvar` "kernel": a wait checks
//!   its word under the mutex and sleeps on the condvar (with a timeout for
//!   a deadline); a wake takes the mutex and notifies every sleeper, who
//!   re-check their own words. A wake cannot slip between check and sleep.
//! - Clock: `Instant` since a process-wide epoch (Miri emulates it).
//! - Stacks: the global allocator (page-aligned, a "guard" that is not
//!   protected), counted per thread so pool tests can check the bookkeeping;
//!   Miri's leak check catches a stack never freed.
//! - The current-worker slot is always null: core takes its thread paths.

use std::boxed::Box;
use std::cell::Cell;
use std::string::String;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::arch::{Arch, EntryFn};
use crate::lock::FutexLock;
use crate::platform::{Futex, PanicPayload, Platform, RawStack, StackError, ThreadError};
use crate::sync::{AtomicU32, Ordering};

static KERNEL_LOCK: Mutex<()> = Mutex::new(());
static KERNEL_CV: Condvar = Condvar::new();

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

// SAFETY: a wait checks its word and sleeps while holding KERNEL_LOCK, and a
// wake notifies while holding it, so no wake falls between check and sleep;
// the std mutex gives the Release (wake) / Acquire (return of wait) edges.
// Returns are allowed to be spurious (notify_all; timeouts).
unsafe impl Futex for StdPlatform {
    fn wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
        let g = KERNEL_LOCK.lock().unwrap();
        if word.load(Ordering::SeqCst) != expected {
            return;
        }
        match deadline_ns {
            None => drop(KERNEL_CV.wait(g).unwrap()),
            Some(d) => {
                let now = Self::now_ns();
                if d > now {
                    drop(KERNEL_CV.wait_timeout(g, Duration::from_nanos(d - now)).unwrap());
                }
            }
        }
    }
    fn wake_one(_word: &AtomicU32) {
        let _g = KERNEL_LOCK.lock().unwrap();
        // All: every sleeper shares the one condvar and re-checks its word.
        KERNEL_CV.notify_all();
    }
    fn wake_all(word: &AtomicU32) {
        Self::wake_one(word)
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
