//! Helpers shared by the fuzz targets.

use std::cell::Cell;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
}

/// A message that counts its live instances (per thread: each fuzz target
/// runs its input on one thread), so a target can assert that every message
/// is dropped exactly once: never leaked, never dropped twice.
#[derive(Debug, PartialEq, Eq)]
pub struct Tracked(pub u64);

impl Tracked {
    /// A new message carrying `id`.
    pub fn new(id: u64) -> Self {
        LIVE.with(|l| l.set(l.get() + 1));
        Tracked(id)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        LIVE.with(|l| {
            let n = l.get();
            assert!(n > 0, "a message dropped twice (live count underflow)");
            l.set(n - 1);
        });
    }
}

/// Messages alive now on this thread.
pub fn live() -> usize {
    LIVE.with(Cell::get)
}

/// Resets the live count (at the start of an input: a panicking earlier
/// input may have left it non-zero).
pub fn reset_live() {
    LIVE.with(|l| l.set(0));
}
