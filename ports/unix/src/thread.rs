//! Worker threads, their QoS class, and the current-worker slot.

use core::cell::Cell;

use smarm_core::{Platform, ThreadError};

/// Online CPUs (at least 1).
pub fn cpu_count() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// OS stack for a worker thread: it runs only the scheduler loop (actors run
/// on their own stacks). A multiple of the 16 KiB Apple-silicon page.
const WORKER_THREAD_STACK: usize = 256 * 1024;

/// Starts a worker thread: std's thread (names, thread-locals, panics work
/// as usual) that first raises its own QoS class (see the crate doc).
pub fn spawn<P: Platform>(
    name: String,
    f: Box<dyn FnOnce() + Send>,
) -> Result<std::thread::JoinHandle<()>, ThreadError> {
    crate::fault::install_handler::<P>();
    std::thread::Builder::new()
        .name(name)
        .stack_size(WORKER_THREAD_STACK)
        .spawn(move || {
            #[cfg(target_vendor = "apple")]
            set_worker_qos();
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

/// Asks for the user-initiated QoS class. It is a scheduling hint: if the
/// call fails (a sandbox or an older system), the thread runs at the
/// default class, which is correct, only slower on some cores.
#[cfg(target_vendor = "apple")]
fn set_worker_qos() {
    if cfg!(miri) {
        return; // Miri does not model QoS classes
    }
    // SAFETY: applies to the calling thread only; no pointers involved.
    let _ = unsafe { libc::pthread_set_qos_class_self_np(libc::qos_class_t::QOS_CLASS_USER_INITIATED, 0) };
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
