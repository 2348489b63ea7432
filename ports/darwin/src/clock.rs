//! The monotonic clock: `mach_absolute_time` in nanoseconds.
//!
//! Ticks convert with `mach_timebase_info` (numer/denom: 1/1 on Intel,
//! 125/3 on Apple silicon), read once per process. The clock stops while
//! the machine sleeps and is the one `os_sync`'s `OS_CLOCK_MACH_ABSOLUTE_TIME`
//! timeouts are measured on.

use core::ffi::c_int;
use core::sync::atomic::{AtomicU64, Ordering};

/// `struct mach_timebase_info` (mach/mach_time.h). Declared here rather than
/// taken from libc, which deprecates its copy in favour of the mach2 crate.
#[repr(C)]
struct MachTimebaseInfo {
    numer: u32,
    denom: u32,
}

extern "C" {
    /// Ticks since boot, not counting sleep (macOS 10.0).
    fn mach_absolute_time() -> u64;
    /// The tick-to-nanosecond ratio (macOS 10.0).
    fn mach_timebase_info(info: *mut MachTimebaseInfo) -> c_int;
}

/// `numer << 32 | denom`, or 0 before the first read.
static TIMEBASE: AtomicU64 = AtomicU64::new(0);

#[cold]
fn read_timebase() -> u64 {
    let mut info = MachTimebaseInfo { numer: 0, denom: 0 };
    // SAFETY: `info` is a valid, writable mach_timebase_info.
    let rc = unsafe { mach_timebase_info(&mut info) };
    let (numer, denom) = if rc == 0 && info.numer != 0 && info.denom != 0 {
        (info.numer, info.denom)
    } else {
        (1, 1) // never seen; 1/1 keeps the clock monotonic at worst
    };
    let packed = (u64::from(numer) << 32) | u64::from(denom);
    // Relaxed: the value is a fixed property of the machine; racing first
    // readers compute and store the same value, and nothing else is
    // published with it.
    TIMEBASE.store(packed, Ordering::Relaxed);
    packed
}

/// Nanoseconds on the monotonic clock.
#[inline]
pub(crate) fn now_ns() -> u64 {
    // Relaxed: see `read_timebase`.
    let packed = match TIMEBASE.load(Ordering::Relaxed) {
        0 => read_timebase(),
        p => p,
    };
    // SAFETY: mach_absolute_time has no preconditions.
    let ticks = unsafe { mach_absolute_time() };
    ticks_to_ns(ticks, (packed >> 32) as u32, packed as u32)
}

/// `ticks * numer / denom` without overflow while the result fits in u64.
#[inline]
fn ticks_to_ns(ticks: u64, numer: u32, denom: u32) -> u64 {
    if numer == denom {
        return ticks;
    }
    let (numer, denom) = (u64::from(numer), u64::from(denom));
    // (q·d + r)·n/d = q·n + r·n/d, and r·n < d·n < 2^64.
    (ticks / denom)
        .saturating_mul(numer)
        .saturating_add(ticks % denom * numer / denom)
}

#[cfg(test)]
mod tests {
    use super::ticks_to_ns;

    #[test]
    fn apple_silicon_ratio_converts_exactly() {
        assert_eq!(ticks_to_ns(24_000_000, 125, 3), 1_000_000_000);
        assert_eq!(ticks_to_ns(1, 125, 3), 41);
        assert_eq!(ticks_to_ns(3, 125, 3), 125);
        assert_eq!(ticks_to_ns(u64::MAX, 1, 1), u64::MAX);
        assert_eq!(ticks_to_ns(u64::MAX, 125, 3), u64::MAX); // saturates
    }
}
