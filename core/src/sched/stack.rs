//! The stack pool: guarded stacks are expensive (two mmap entries and a
//! syscall each way, and `vm.max_map_count` bounds how many exist at once),
//! so finished actors' stacks are reused.
//!
//! Two levels:
//! 1. a per-worker cache (a `Vec` only its worker touches: no lock) of up to
//!    [`LOCAL_CAP`] stacks — the fast path of a spawn right after an exit;
//! 2. a shared list under the platform lock of up to `shared_cap` stacks,
//!    which a worker refills from / spills half its cache to.
//!
//! A stack beyond both caps is unmapped. Every stack in the pool has the
//! runtime's one stack size; a stack of another size (an
//! [`ActorBuilder::stack_size`](crate::ActorBuilder::stack_size)) is
//! unmapped when its actor exits.

use alloc::vec::Vec;

use crate::seam::lock::Mutex;
use crate::seam::platform::{Platform, RawStack, StackError};

/// Stacks a worker keeps for itself.
pub const LOCAL_CAP: usize = 64;

/// Most distinct start offsets ("colors") of a fresh actor's stack.
const STACK_COLORS: usize = 32;

/// Bytes between two colors: one x86 cache line (half of Apple's).
const COLOR_STEP: usize = 64;

/// Where a fresh actor's first frame goes: `stack.top()` less a color
/// offset picked by the low bits of the actor's `id`, a multiple of
/// [`COLOR_STEP`] below `colors * COLOR_STEP`, where `colors` is
/// `min(STACK_COLORS, usable / 4096)` rounded down to a power of two (so
/// the pick is a mask, not a division, on the spawn path): at most 1/64 of
/// the stack, 256 bytes of the smallest.
///
/// Every mapping's top is page-aligned and every actor runs the same code,
/// so uncolored, the frames an actor parks and resumes in (its yield,
/// receive, the switch's saved registers) sit at one page offset in every
/// stack: one L1 set (64 B lines, 4 KiB per way) and a few L2 sets for all
/// of them, and a worker cycling through a thousand actors missed both
/// caches on every resume (`yield_many`: the switch's first load from the
/// new stack took 23% of the time). Consecutive ids get consecutive colors.
pub fn colored_top(stack: &RawStack, id: u64) -> *mut u8 {
    let fit = (stack.usable() / 4096).clamp(1, STACK_COLORS);
    let colors = 1usize << fit.ilog2();
    // Only the low bits are kept: the truncating cast is the point.
    let color = id as usize & (colors - 1);
    stack.top().wrapping_sub(color * COLOR_STEP)
}

/// The shared level of the pool.
pub struct StackPool<P: Platform> {
    shared: Mutex<P::Lock, Vec<RawStack>>,
    shared_cap: usize,
    usable: usize,
}

impl<P: Platform> StackPool<P> {
    /// A pool of stacks with `usable` bytes each, keeping up to `shared_cap`
    /// spare stacks in the shared level.
    pub fn new(usable: usize, shared_cap: usize) -> Self {
        StackPool {
            shared: Mutex::new(Vec::new()),
            shared_cap,
            usable,
        }
    }

    /// Takes one stack for a thread with no cache of its own (an outside
    /// thread's `Runtime::spawn`): the shared level, then a new mapping.
    pub fn get_one(&self) -> Result<RawStack, StackError> {
        if let Some(s) = self.shared.lock().pop() {
            return Ok(s);
        }
        P::stack_alloc(self.usable)
    }

    /// Takes a stack: the worker's cache, then the shared level, then a new
    /// mapping.
    pub fn get(&self, local: &mut Vec<RawStack>) -> Result<RawStack, StackError> {
        if let Some(s) = local.pop() {
            return Ok(s);
        }
        {
            let mut shared = self.shared.lock();
            if !shared.is_empty() {
                // Refill half the local cache in one lock hold.
                let take = shared.len().min(LOCAL_CAP / 2);
                let at = shared.len() - take;
                local.extend(shared.drain(at..));
            }
        }
        match local.pop() {
            Some(s) => Ok(s),
            None => P::stack_alloc(self.usable),
        }
    }

    /// Usable bytes of the stacks this pool keeps.
    pub fn usable(&self) -> usize {
        self.usable
    }

    /// Returns a stack no context runs on any more (one of another size
    /// than the pool's is unmapped).
    pub fn put(&self, local: &mut Vec<RawStack>, stack: RawStack) {
        if stack.usable() != self.usable {
            // SAFETY: the stack came from `P::stack_alloc` and no context
            // runs on it (the caller's contract).
            unsafe { P::stack_free(stack) };
            return;
        }
        if local.len() < LOCAL_CAP {
            local.push(stack);
            return;
        }
        local.push(stack);
        let spill_from = local.len() / 2;
        let mut extra = Vec::new();
        {
            let mut shared = self.shared.lock();
            for s in local.drain(spill_from..) {
                if shared.len() < self.shared_cap {
                    shared.push(s);
                } else {
                    extra.push(s);
                }
            }
        }
        for s in extra {
            // SAFETY: the stack came from `P::stack_alloc` and no context
            // runs on it (the caller's contract).
            unsafe { P::stack_free(s) };
        }
    }

    /// Unmaps every stack in `local` (a worker's cache, at shutdown).
    pub fn free_local(&self, local: &mut Vec<RawStack>) {
        for s in local.drain(..) {
            // SAFETY: pooled stacks are idle by construction.
            unsafe { P::stack_free(s) };
        }
    }
}

impl<P: Platform> Drop for StackPool<P> {
    fn drop(&mut self) {
        for s in self.shared.lock().drain(..) {
            // SAFETY: pooled stacks are idle by construction.
            unsafe { P::stack_free(s) };
        }
    }
}

#[cfg(test)]
mod tests;
