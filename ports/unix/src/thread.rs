//! Worker threads, the CPU count, and the current-worker slot
//! ([`current_worker_slot!`](crate::current_worker_slot)).

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

/// Defines the current-worker slot in the calling crate: a module
/// `current_worker_slot` with `get()` and `set(worker)` over a
/// `thread_local!`, each `#[inline(always)]`, to be called from the port's
/// `#[inline(never)]` `Platform::current_worker` / `set_current_worker`
/// (the opaque call makes the thread-local's address computed afresh, on
/// whichever thread the caller now runs, every time).
///
/// A macro rather than a shared static: a thread-local defined in the
/// executable's own crates is read with one instruction (the local-exec
/// TLS model, `mov %fs:OFFSET`); one defined in another crate and reached
/// through an inlined accessor costs an extra load of its offset. Core reads
/// the slot at every send, receive and switch.
#[macro_export]
macro_rules! current_worker_slot {
    () => {
        /// This OS thread's current-worker slot (`smarm_unix::current_worker_slot!`).
        mod current_worker_slot {
            use ::core::cell::Cell;

            ::std::thread_local! {
                /// This OS thread's current worker (null: not a worker).
                static CURRENT_WORKER: Cell<*mut ()> =
                    const { Cell::new(::core::ptr::null_mut()) };
            }

            /// Reads the slot.
            #[inline(always)]
            pub fn get() -> *mut () {
                CURRENT_WORKER.with(Cell::get)
            }

            /// Writes the slot.
            #[inline(always)]
            pub fn set(worker: *mut ()) {
                CURRENT_WORKER.with(|slot| slot.set(worker));
            }
        }
    };
}
