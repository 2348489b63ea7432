//! Actor stacks: an anonymous mapping whose lowest page is a guard; and the
//! page size they are measured in.
//!
//! ```text
//!   base                base + guard                         base + len = top
//!   | PROT_NONE (1 page) | PROT_READ | PROT_WRITE (usable) ...|
//! ```
//!
//! Two VM map entries per stack. When the kernel refuses for lack of memory,
//! address space or map entries (`ENOMEM`; on Linux usually
//! `vm.max_map_count`), [`alloc`] returns [`StackError::OutOfMaps`], never a
//! crash. A port may cap the count itself before the kernel refuses (the
//! Linux port does: `StackError::MapReserve`). Core pools stacks for reuse.
//!
//! The mapping is private and anonymous; on Linux also `MAP_NORESERVE` (no
//! swap reserved for pages never touched) and `MAP_STACK` (a hint the
//! kernel may use to place it). Pages are 16 KiB on Apple silicon (and may
//! be 16 or 64 KiB on aarch64 Linux): the size comes from
//! `sysconf(_SC_PAGESIZE)`, never a constant.

use core::sync::atomic::{AtomicUsize, Ordering};

use smarm_core::{RawStack, StackError};

/// How a port guards its actor stacks (each port's `stack_guard()` says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StackGuard {
    /// Stacks share large reservations (slabs); each stack's guard page is
    /// a guard region (`madvise(MADV_GUARD_INSTALL)`, Linux 6.13), which
    /// does not split the mapping: a million stacks take a few dozen maps.
    Region,
    /// Each stack is a mapping of its own whose lowest page is `PROT_NONE`:
    /// two map entries per stack.
    Mapping,
}

/// The environment variable that, set to `mapping`, makes a port that has
/// guard regions use [`StackGuard::Mapping`] instead (for kernels where
/// guard regions misbehave, and for tests of that path). Read once, at the
/// first stack; other values and ports without guard regions ignore it.
pub const STACK_GUARD_ENV: &str = "SMARM_STACK_GUARD";

/// Flags of every mapping this crate makes (actor stacks and the alternate
/// signal stacks of `fault`) and of the Linux port's stack slabs.
#[cfg(target_os = "linux")]
pub const MAP_FLAGS: libc::c_int =
    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK;
/// Flags of every mapping this crate makes (actor stacks and the alternate
/// signal stacks of `fault`).
#[cfg(not(target_os = "linux"))]
pub const MAP_FLAGS: libc::c_int = libc::MAP_PRIVATE | libc::MAP_ANON;

/// What [`page_size`] falls back to if `sysconf` ever failed: a multiple of
/// every real page size of the OS's usual hardware.
#[cfg(target_vendor = "apple")]
const FALLBACK_PAGE: usize = 16 * 1024;
#[cfg(not(target_vendor = "apple"))]
const FALLBACK_PAGE: usize = 4096;

/// The page size, or 0 before the first read.
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The VM page size (4 KiB on x86_64; 16 KiB on Apple silicon), read once.
pub fn page_size() -> usize {
    // Relaxed: a fixed property of the system; racing first readers store
    // the same value and nothing is published with it.
    match PAGE_SIZE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            // A power of two of at least 4 KiB on every supported system.
            let page = usize::try_from(page)
                .ok()
                .filter(|p| p.is_power_of_two() && *p >= 4096)
                .unwrap_or(FALLBACK_PAGE);
            // Relaxed: as above.
            PAGE_SIZE.store(page, Ordering::Relaxed);
            page
        }
        page => page,
    }
}

/// A failed stack mapping's errno as a `StackError` (ENOMEM: out of maps).
fn stack_error(errno: i32) -> StackError {
    if errno == libc::ENOMEM {
        StackError::OutOfMaps { errno }
    } else {
        StackError::Os { errno }
    }
}

/// The calling thread's `errno`.
pub fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Maps a stack with at least `usable` bytes (rounded up to whole pages, at
/// least one) above a one-page guard.
pub fn alloc(usable: usize) -> Result<RawStack, StackError> {
    let page = page_size();
    // A size that overflows the address space is a request no mapping can
    // satisfy: report it as the kernel would (ENOMEM), don't panic.
    let too_big = StackError::OutOfMaps { errno: libc::ENOMEM };
    let usable = usable.max(1).checked_next_multiple_of(page).ok_or(too_big)?;
    let len = usable.checked_add(page).ok_or(too_big)?;
    // SAFETY: a fresh private anonymous mapping at an address of the
    // kernel's choosing: it aliases nothing.
    let base = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            MAP_FLAGS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(stack_error(last_errno()));
    }
    // SAFETY: `[base, base + page)` is the first page of the mapping we
    // just made and nothing else refers to it yet.
    if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
        let errno = last_errno();
        // SAFETY: unmapping exactly what we mapped above; nothing uses it.
        unsafe { libc::munmap(base, len) };
        return Err(stack_error(errno));
    }
    Ok(RawStack {
        base: base.cast(),
        len,
        guard: page,
    })
}

/// Unmaps a stack from [`alloc`].
///
/// # Safety
///
/// `stack` came from [`alloc`] and nothing runs on it.
pub unsafe fn free(stack: RawStack) {
    // SAFETY: the caller guarantees this is exactly one whole mapping from
    // `alloc` that is no longer in use. munmap of a valid mapping cannot
    // fail; if it somehow did, the only cost is the leaked mapping.
    let rc = unsafe { libc::munmap(stack.base.cast(), stack.len) };
    debug_assert_eq!(rc, 0, "munmap of an actor stack failed");
}
