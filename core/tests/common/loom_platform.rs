//! The loom test platform shared by the loom models (`loom_idle`,
//! `loom_mailbox`, `loom_channel`): plain threads only (the current-worker
//! slot is always null, so core takes its thread paths), and a futex built
//! from a loom mutex + condvar. Included with
//! `#[path = "common/loom_platform.rs"] mod loom_platform;`.
#![allow(dead_code)]

use loom::sync::atomic::Ordering;
use loom::sync::{Condvar, Mutex};
use loom::thread;

use smarm_core::lock::FutexLock;
use smarm_core::sync::AtomicU32;
use smarm_core::{Arch, EntryFn, Futex, PanicPayload, Platform, RawStack, StackError, ThreadError};

loom::lazy_static! {
    /// One "kernel" for every futex word of a model run: a wait checks its
    /// word under the lock and sleeps on the condvar; a wake takes the lock
    /// and notifies, so a wake cannot slip between check and sleep.
    static ref KERNEL: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
}

/// No context switch under loom: no actor ever runs.
pub struct NoArch;

// SAFETY: `switch` and `init_stack` are never called (no actors: the loom
// platform's current-worker slot is always null and it maps no stacks).
unsafe impl Arch for NoArch {
    const NAME: &'static str = "loom";
    const INIT_STACK_BYTES: usize = 0;
    unsafe fn switch(_to: *mut u8) -> *mut u8 {
        unreachable!("no actors under loom")
    }
    unsafe fn init_stack(_top: *mut u8, _entry: EntryFn, _arg: *mut u8) -> *mut u8 {
        unreachable!("no actors under loom")
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
        thread::yield_now();
    }
}

/// Plain threads only, waiting through [`KERNEL`].
pub struct LoomP;

// SAFETY: the check and the sleep are atomic with respect to wakes (both
// hold KERNEL's mutex); loom's mutex gives the Acquire/Release edges.
unsafe impl Futex for LoomP {
    fn wait(word: &AtomicU32, expected: u32, _deadline_ns: Option<u64>) {
        let g = KERNEL.0.lock().unwrap();
        if word.load(Ordering::SeqCst) == expected {
            drop(KERNEL.1.wait(g).unwrap());
        }
    }
    fn wake_one(_word: &AtomicU32) {
        let _g = KERNEL.0.lock().unwrap();
        // Waking all is allowed (waiters re-check their own word).
        KERNEL.1.notify_all();
    }
    fn wake_all(word: &AtomicU32) {
        Self::wake_one(word)
    }
}

// SAFETY: `current_worker` is always null (never set), so core takes its
// thread paths only; no stacks are mapped; `catch_unwind` is never reached
// (no actors run).
unsafe impl Platform for LoomP {
    type Arch = NoArch;
    type Lock = FutexLock<LoomP>;
    type Thread = ();
    const NAME: &'static str = "loom";
    fn yield_thread() {
        thread::yield_now();
    }
    fn now_ns() -> u64 {
        0
    }
    fn cpu_count() -> usize {
        1
    }
    fn page_size() -> usize {
        4096
    }
    fn spawn_thread(_name: String, _f: Box<dyn FnOnce() + Send>) -> Result<(), ThreadError> {
        Err(ThreadError {
            message: "no worker threads under loom".into(),
        })
    }
    fn join_thread(_thread: ()) {}
    fn current_worker() -> *mut () {
        std::ptr::null_mut()
    }
    fn set_current_worker(_worker: *mut ()) {}
    fn stack_alloc(_usable: usize) -> Result<RawStack, StackError> {
        Err(StackError::Os { errno: 0 })
    }
    unsafe fn stack_free(_stack: RawStack) {}
    fn catch_unwind(f: &mut dyn FnMut()) -> Result<(), PanicPayload> {
        f();
        Ok(())
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
