//! Stack high-water marks for dumps, from `mincore(2)`: the resident pages
//! of an actor's usable stack, counted from the top (stacks grow down)
//! down to the lowest resident page.

use std::vec::Vec;

/// Bytes of `[lo, hi)` from the lowest resident page to `hi`; `None` if
/// the range is empty or `mincore` fails.
pub fn touched(lo: usize, hi: usize, page: usize) -> Option<usize> {
    if lo >= hi || page == 0 || !lo.is_multiple_of(page) {
        return None;
    }
    let pages = (hi - lo) / page;
    let mut vec: Vec<u8> = std::vec![0; pages];
    // SAFETY: `[lo, hi)` is page-aligned; `vec` holds one byte per page;
    // mincore only reads the page tables (ENOMEM if part of the range is
    // unmapped, which we report as `None`).
    let r = unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, vec.as_mut_ptr().cast()) };
    if r != 0 {
        return None;
    }
    match vec.iter().position(|&b| b & 1 != 0) {
        Some(first) => Some((pages - first) * page),
        None => Some(0),
    }
}
