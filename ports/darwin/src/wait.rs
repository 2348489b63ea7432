//! Wait/wake on a 32-bit word: `os_sync_*` when the OS has it, `__ulock_*`
//! otherwise (the crate doc says why).
//!
//! 1. The first call looks the four `os_sync` functions up with `dlsym`
//!    (all four or none) and caches the answer for the process.
//! 2. `wait` turns core's absolute deadline into the time remaining (none
//!    left: return at once) and makes one compare-and-wait call. Wakes,
//!    `EINTR`, time-outs and spurious returns all just return: core's
//!    callers re-check the word and the clock and loop.
//! 3. `wake` retries on `EINTR`; "nobody was waiting" (`ENOENT`) is success.
//!
//! Error policy: an unexpected error from a *wait* is treated as a spurious
//! return (reported once on stderr): the caller loops, so the worst case is
//! a busy worker, never a crash or a hang. An unexpected error from a *wake*
//! aborts with a message, because carrying on would be a silently lost
//! wake-up, a hang nobody could diagnose.

use core::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use smarm_core::sync::AtomicU32;

use crate::clock;

/// Bytes of the word waited on (`AtomicU32`).
const WORD: usize = 4;

// ---------------------------------------------------------------------------
// The private fallback: bsd/sys/ulock.h (xnu), libSystem since macOS 10.12.

extern "C" {
    /// Sleeps while `*addr == value` (compared as a 32-bit word for
    /// `UL_COMPARE_AND_WAIT`), at most `timeout_us` µs (0: forever).
    fn __ulock_wait(operation: u32, addr: *mut c_void, value: u64, timeout_us: u32) -> c_int;
    /// Wakes one (or with `ULF_WAKE_ALL`, every) waiter on `addr`.
    fn __ulock_wake(operation: u32, addr: *mut c_void, wake_value: u64) -> c_int;
}

/// Compare a 32-bit word, process-private.
const UL_COMPARE_AND_WAIT: u32 = 1;
/// Wake every waiter instead of one.
const ULF_WAKE_ALL: u32 = 0x0000_0100;
/// Return `-errno` instead of setting `errno`.
const ULF_NO_ERRNO: u32 = 0x0100_0000;

// ---------------------------------------------------------------------------
// The public API (os/os_sync_wait_on_address.h, macOS 14.4), found at run time.

type WaitFn = unsafe extern "C" fn(*mut c_void, u64, usize, u32) -> c_int;
type WaitTimeoutFn = unsafe extern "C" fn(*mut c_void, u64, usize, u32, u32, u64) -> c_int;
type WakeFn = unsafe extern "C" fn(*mut c_void, usize, u32) -> c_int;

/// The `os_sync` entry points, when this system has all four.
#[derive(Clone, Copy)]
struct OsSync {
    wait: WaitFn,
    wait_with_timeout: WaitTimeoutFn,
    wake_any: WakeFn,
    wake_all: WakeFn,
}

/// Looked up once per process (std's `OnceLock`: its blocking path is std's
/// own, never this module's).
static OS_SYNC: OnceLock<Option<OsSync>> = OnceLock::new();

#[inline]
fn os_sync() -> Option<&'static OsSync> {
    OS_SYNC.get_or_init(lookup_os_sync).as_ref()
}

/// Under Miri, which interprets `os_sync_*` but not `dlsym` or `__ulock_*`:
/// the functions themselves, through libc's declarations.
#[cfg(miri)]
#[cold]
fn lookup_os_sync() -> Option<OsSync> {
    Some(OsSync {
        wait: libc::os_sync_wait_on_address,
        wait_with_timeout: libc::os_sync_wait_on_address_with_timeout,
        wake_any: libc::os_sync_wake_by_address_any,
        wake_all: libc::os_sync_wake_by_address_all,
    })
}

#[cfg(not(miri))]
#[cold]
fn lookup_os_sync() -> Option<OsSync> {
    if std::env::var_os("SMARM_DARWIN_FORCE_ULOCK").is_some_and(|v| v == "1") {
        return None;
    }
    let sym = |name: &core::ffi::CStr| {
        // SAFETY: RTLD_DEFAULT searches every loaded image; `name` is a valid
        // NUL-terminated string. dlsym is thread-safe.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    };
    let wait = sym(c"os_sync_wait_on_address")?;
    let wait_with_timeout = sym(c"os_sync_wait_on_address_with_timeout")?;
    let wake_any = sym(c"os_sync_wake_by_address_any")?;
    let wake_all = sym(c"os_sync_wake_by_address_all")?;
    // SAFETY: each symbol is the libSystem function of that name, whose C
    // signature (os/os_sync_wait_on_address.h) is the pointer type it is
    // transmuted to: `int f(void *, uint64_t, size_t, os_sync_wait_on_address_flags_t)`,
    // `int f(void *, uint64_t, size_t, flags, os_clockid_t, uint64_t)`,
    // `int f(void *, size_t, os_sync_wake_by_address_flags_t)` (both wakes).
    unsafe {
        Some(OsSync {
            wait: core::mem::transmute::<*mut c_void, WaitFn>(wait),
            wait_with_timeout: core::mem::transmute::<*mut c_void, WaitTimeoutFn>(wait_with_timeout),
            wake_any: core::mem::transmute::<*mut c_void, WakeFn>(wake_any),
            wake_all: core::mem::transmute::<*mut c_void, WakeFn>(wake_all),
        })
    }
}

/// Which backend this process uses, for reports and tests.
pub(crate) fn backend() -> &'static str {
    if os_sync().is_some() {
        "os_sync_wait_on_address"
    } else {
        "__ulock_wait"
    }
}

// ---------------------------------------------------------------------------
// Wait

/// The longest single sleep: `u32::MAX` µs, ulock's limit, used for both
/// backends so they behave alike. A longer wait returns early (spuriously).
const MAX_TIMEOUT_NS: u64 = u32::MAX as u64 * 1_000;

pub(crate) fn wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
    let timeout_ns = match deadline_ns {
        None => None,
        Some(deadline) => match deadline.checked_sub(clock::now_ns()) {
            Some(left) if left > 0 => Some(left.min(MAX_TIMEOUT_NS)),
            _ => return, // the deadline has passed
        },
    };
    let addr = word.as_ptr().cast::<c_void>();
    match os_sync() {
        Some(api) => os_sync_wait(api, addr, expected, timeout_ns),
        None => ulock_wait(addr, expected, timeout_ns),
    }
}

fn os_sync_wait(api: &OsSync, addr: *mut c_void, expected: u32, timeout_ns: Option<u64>) {
    // SAFETY: `addr` is a live, aligned 4-byte atomic word (borrowed by the
    // caller for the whole call) and WORD says so; the kernel only reads it.
    // The flags are the documented "none" (process-private).
    let rc = unsafe {
        match timeout_ns {
            None => (api.wait)(
                addr,
                u64::from(expected),
                WORD,
                libc::OS_SYNC_WAIT_ON_ADDRESS_NONE,
            ),
            Some(ns) => (api.wait_with_timeout)(
                addr,
                u64::from(expected),
                WORD,
                libc::OS_SYNC_WAIT_ON_ADDRESS_NONE,
                libc::OS_CLOCK_MACH_ABSOLUTE_TIME,
                ns,
            ),
        }
    };
    if rc < 0 {
        match errno() {
            libc::EINTR | libc::ETIMEDOUT => {}
            e => wait_failed("os_sync_wait_on_address", e),
        }
    }
}

fn ulock_wait(addr: *mut c_void, expected: u32, timeout_ns: Option<u64>) {
    // Round up to whole µs and never to 0, which would mean "forever".
    let timeout_us = match timeout_ns {
        None => 0,
        Some(ns) => u32::try_from(ns.div_ceil(1_000)).unwrap_or(u32::MAX).max(1),
    };
    // SAFETY: as in `os_sync_wait`; UL_COMPARE_AND_WAIT compares 32 bits.
    let rc = unsafe {
        __ulock_wait(
            UL_COMPARE_AND_WAIT | ULF_NO_ERRNO,
            addr,
            u64::from(expected),
            timeout_us,
        )
    };
    if rc < 0 {
        match -rc {
            libc::EINTR | libc::ETIMEDOUT => {}
            e => wait_failed("__ulock_wait", e),
        }
    }
}

/// Reported once: see the module doc's error policy.
#[cold]
fn wait_failed(call: &str, errno: c_int) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    // Relaxed: only de-duplicates a diagnostic; nothing is published with it.
    if !REPORTED.swap(true, Ordering::Relaxed) {
        let err = std::io::Error::from_raw_os_error(errno);
        smarm_unix::report(
            smarm_unix::Severity::Warn,
            format_args!(
                "smarm-darwin: {call} failed: {err}; treated as a spurious wake-up \
                 (reported once)"
            ),
        );
    }
}

// ---------------------------------------------------------------------------
// Wake

pub(crate) fn wake(word: &AtomicU32, all: bool) {
    let addr = word.as_ptr().cast::<c_void>();
    match os_sync() {
        Some(api) => {
            let f = if all { api.wake_all } else { api.wake_any };
            loop {
                // SAFETY: `addr` is a live aligned 4-byte word; the kernel
                // does not touch its memory on a wake.
                let rc = unsafe { f(addr, WORD, libc::OS_SYNC_WAKE_BY_ADDRESS_NONE) };
                if rc >= 0 {
                    return;
                }
                match errno() {
                    libc::ENOENT => return, // nobody was waiting
                    libc::EINTR => continue,
                    e => wake_failed("os_sync_wake_by_address", e),
                }
            }
        }
        None => {
            let op = UL_COMPARE_AND_WAIT | ULF_NO_ERRNO | if all { ULF_WAKE_ALL } else { 0 };
            loop {
                // SAFETY: as above.
                let rc = unsafe { __ulock_wake(op, addr, 0) };
                if rc >= 0 {
                    return;
                }
                match -rc {
                    libc::ENOENT => return, // nobody was waiting
                    libc::EINTR => continue,
                    e => wake_failed("__ulock_wake", e),
                }
            }
        }
    }
}

#[cold]
fn wake_failed(call: &str, errno: c_int) -> ! {
    let err = std::io::Error::from_raw_os_error(errno);
    smarm_unix::abort(&format!(
        "smarm-darwin: {call} failed: {err}; a wake-up would be lost, aborting"
    ))
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
