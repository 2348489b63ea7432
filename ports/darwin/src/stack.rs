//! Actor stacks: an anonymous mapping whose lowest page is a guard.
//!
//! ```text
//!   base                base + guard                         base + len = top
//!   | PROT_NONE (1 page) | PROT_READ | PROT_WRITE (usable) ...|
//! ```
//!
//! Two VM map entries per stack. Darwin has no small per-process limit like
//! Linux's `vm.max_map_count`; when the kernel refuses for lack of memory
//! or address space (`ENOMEM`), `alloc` returns
//! [`StackError::OutOfMaps`], never a crash. Core pools stacks for reuse.

use core::sync::atomic::{AtomicUsize, Ordering};

use smarm_core::{RawStack, StackError};

/// The page size, or 0 before the first read.
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The VM page size (16 KiB on Apple silicon, 4 KiB on Intel).
pub(crate) fn page_size() -> usize {
    // Relaxed: a fixed property of the system; racing first readers store
    // the same value and nothing is published with it.
    match PAGE_SIZE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            // A power of two of at least 4 KiB on every Darwin; if sysconf
            // ever failed, 16 KiB is a multiple of either real size.
            let page = usize::try_from(page)
                .ok()
                .filter(|p| p.is_power_of_two() && *p >= 4096)
                .unwrap_or(16 * 1024);
            // Relaxed: as above.
            PAGE_SIZE.store(page, Ordering::Relaxed);
            page
        }
        page => page,
    }
}

fn stack_error(errno: i32) -> StackError {
    if errno == libc::ENOMEM {
        StackError::OutOfMaps { errno }
    } else {
        StackError::Os { errno }
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Maps a stack with at least `usable` bytes (rounded up to whole pages, at
/// least one) above a one-page guard.
pub(crate) fn alloc(usable: usize) -> Result<RawStack, StackError> {
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
            libc::MAP_PRIVATE | libc::MAP_ANON,
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
pub(crate) unsafe fn free(stack: RawStack) {
    // SAFETY: the caller guarantees this is exactly one whole mapping from
    // `alloc` that is no longer in use. munmap of a valid mapping cannot
    // fail; if it somehow did, the only cost is the leaked mapping.
    let rc = unsafe { libc::munmap(stack.base.cast(), stack.len) };
    debug_assert_eq!(rc, 0, "munmap of an actor stack failed");
}
