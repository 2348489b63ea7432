//! Worker threads, the CPU count, and the current-worker slot.

use core::cell::Cell;

use smarm_core::{Platform, ThreadError};

/// Online CPUs (at least 1; std's count: on Linux within the affinity mask
/// and cgroup quota, on Darwin `sysconf(_SC_NPROCESSORS_ONLN)`).
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// OS stack for a worker thread: it runs only the scheduler loop (actors run
/// on their own stacks). A multiple of the 16 KiB Apple-silicon page.
const WORKER_THREAD_STACK: usize = 256 * 1024;

/// Starts a worker thread: std's thread (names, thread-locals, panics work
/// as usual) that maps its alternate signal stack, then runs `f` (a port's
/// own per-thread start-up goes first in `f`). Before that, installs the
/// overflow handler for `P`, once per process
/// ([`crate::fault::install_handler`]).
pub fn spawn<P: Platform>(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> Result<std::thread::JoinHandle<()>, ThreadError> {
    crate::fault::install_handler::<P>();
    std::thread::Builder::new()
        .name(name)
        .stack_size(WORKER_THREAD_STACK)
        .spawn(move || {
            // An overflowing actor has no stack left for a handler.
            let _alt = crate::fault::AltStack::install();
            f();
        })
        .map_err(|e| ThreadError {
            message: e.to_string(),
        })
}

/// Waits for a worker. A worker that panicked has already reported it
/// through the panic hook; its payload is dropped here.
pub fn join(thread: std::thread::JoinHandle<()>) {
    let _ = thread.join();
}

std::thread_local! {
    /// This OS thread's current worker (null: not a worker).
    static CURRENT_WORKER: Cell<*mut ()> = const { Cell::new(core::ptr::null_mut()) };
}

/// Reads the slot. Inlined into the port's `current_worker`, which is the
/// `#[inline(never)]` boundary: an opaque call, so the thread-local's address
/// is computed afresh, on whichever thread the caller now runs, every time.
#[inline(always)]
pub fn current_worker() -> *mut () {
    CURRENT_WORKER.with(Cell::get)
}

/// Writes the slot (inlined into the port's `set_current_worker`, as above).
#[inline(always)]
pub fn set_current_worker(worker: *mut ()) {
    CURRENT_WORKER.with(|slot| slot.set(worker));
}
