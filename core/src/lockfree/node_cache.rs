//! A per-worker cache of raw memory blocks by size class, so that steady-state
//! messaging allocates nothing: a mailbox node freed after a receive is the
//! block the next send on that worker gets.
//!
//! # Blocks and classes
//!
//! Every block, cached or not, is allocated from the global allocator with a
//! *block layout*: the requested [`Layout`] rounded by [`NodeCache::block_layout`].
//!
//! | requested layout                  | block layout                                  | cached? |
//! |-----------------------------------|-----------------------------------------------|---------|
//! | `align <= 16`, `size <= 512`      | size rounded up to 16 (at least 16), align 16 | yes, class `size / 16 - 1` |
//! | `16 < align <= 64`, `size <= 512` | size rounded up to 64, align 64 (a line)      | yes, class `31 + size / 64` |
//! | anything else                     | size at least 1, padded to `align`            | no (straight to the allocator) |
//!
//! So there are 40 classes (16, 32, ..., 512 bytes, then 64, 128, ..., 512
//! bytes line-aligned), and all blocks of one class have the same block
//! layout. A type asks for whole cache lines with its alignment
//! (`#[repr(align(64))]`): two such blocks never share a line. A
//! mailbox's or channel's shared half does (`sync::block_arc`): it is
//! written by the workers its sender and receiver run on, and two that
//! shared a line (neighbours a spawner allocated in a row, their actors
//! run on two workers) made every message of both pay for the line's
//! moves (docs/benchmarks.md, "Blocks that share a cache line"). Message
//! nodes, control blocks and join cells stay in the small classes: a deep
//! queue holds many nodes, and line-sized ones slowed a one-way flow
//! (Savina Counting 1.16x); line-aligned control blocks cost a spawn tree
//! memory (skynet 1M peak RSS 1.11x) and bought nothing measurable.
//!
//! Rounding is idempotent: the block layout of a block layout is itself.
//! Hence the invariant that makes blocks interchangeable between caches
//! and with the global allocator:
//!
//! > A block for layout `L` is memory from `alloc::alloc::alloc(block_layout(L))`.
//! > It may be freed by [`NodeCache::free_spilling`] on *any* cache or by
//! > [`NodeCache::free_global`], given `L` or any layout with the same block
//! > layout; never by `dealloc` with `L` itself (unless `L` is already a block
//! > layout, as [`Node::layout`](crate::lockfree::mpsc_queue::Node::layout) is).
//!
//! # The cache
//!
//! 1. [`NodeCache::alloc`] pops the block from the class's stack, or asks
//!    the global allocator when the stack is empty (or the layout is not
//!    cached). It never returns null: out of memory calls
//!    [`handle_alloc_error`].
//! 2. [`NodeCache::free_spilling`] pushes the block on its class's stack;
//!    a stack that already holds [`NodeCache::CLASS_CAP`] blocks leaves
//!    whole first (see *Magazines*), and a block of an uncached layout
//!    goes back to the global allocator. (`NodeCache::free`, for tests,
//!    frees the block to the allocator instead of spilling.)
//! 3. A class's stack is an array of [`NodeCache::CLASS_CAP`] block
//!    pointers, allocated when the class first caches a block. The blocks
//!    themselves are never read or written while cached: freeing a block
//!    and taking it again touch only the array, which lives in the
//!    worker's own cache lines. (An intrusive list, the link in the
//!    block's first word, made a cross-worker flow pay a cache miss per
//!    message on each side: the freeing worker wrote the link into a line
//!    the sender's core had written, and the allocating worker read it
//!    back before it could pop the next one; docs/benchmarks.md, "Where
//!    ForkJoin's two workers go".) LIFO, so the block reused first is the
//!    one freed last, likely still in cache.
//! 4. Dropping the cache frees every cached block and every array.
//!
//! A cache has one owner (`&mut self` everywhere; `!Sync`): each worker owns
//! one. It is `Send`, and a block freed into one worker's cache may have been
//! allocated by another's: blocks are plain global-allocator memory.
//!
//! # Magazines
//!
//! Messages that flow one way (a producer on one worker, its consumer on
//! another) allocate on one cache and free into the other: the first runs
//! dry and asks the global allocator for every block, the second fills up
//! and frees every block to it. [`NodeCache::free_spilling`] hands a full
//! class stack out whole, as a [`Magazine`] (O(1): the array moves, not
//! the blocks), and [`NodeCache::load`] installs one as an empty class's
//! stack; a shared depot between the two
//! ([`NodeDepot`](super::node_depot::NodeDepot)) moves the blocks back to
//! where they are allocated, a lock round per [`NodeCache::CLASS_CAP`]
//! blocks. The arrays go round too: the cache that loads a magazine is
//! left with its class's old array, empty ([`EmptyMagazine`]); it keeps
//! one as its spare, for its own next spill, and hands the rest back for
//! the depot to give a spilling cache, so a steady flow allocates no
//! arrays either.

use alloc::alloc::{alloc, dealloc, handle_alloc_error};
use core::alloc::Layout;
use core::fmt;
use core::mem::ManuallyDrop;
use core::ptr::{self, NonNull};

#[cfg(all(test, not(smarm_loom)))]
mod tests;

/// The step and alignment of the small classes.
const STEP: usize = 16;

/// The step and alignment of the line classes: a cache line.
const LINE: usize = 64;

/// The largest cached block size.
const MAX_CACHED: usize = 512;

/// The number of small classes: 16, 32, ..., 512 bytes.
const SMALL_CLASSES: usize = MAX_CACHED / STEP;

/// The number of size classes: the small ones, then the line classes
/// (64, 128, ..., 512 bytes, 64-aligned).
pub const CLASSES: usize = SMALL_CLASSES + MAX_CACHED / LINE;

/// The layout of a class's stack: [`NodeCache::CLASS_CAP`] block pointers
/// (8 KiB on a 64-bit target).
const SLOTS: Layout = Layout::new::<[*mut u8; NodeCache::CLASS_CAP]>();

/// One class's stack (step 3).
#[derive(Clone, Copy)]
struct FreeList {
    /// The array, owned by the cache; null until the class first caches a
    /// block (and after its array left in a magazine).
    slots: *mut *mut u8,
    /// Blocks on the stack: `slots[..len]` hold them, the last freed at
    /// `len - 1`. Zero whenever `slots` is null.
    len: usize,
}

impl FreeList {
    const EMPTY: Self = Self {
        slots: ptr::null_mut(),
        len: 0,
    };
}

/// Stacks of raw blocks by size class; see the [module docs](self).
pub struct NodeCache {
    lists: [FreeList; CLASSES],
    /// An empty array kept for the next class that needs one (a spill, or
    /// a class's first block); `None` when the cache has none.
    spare: Option<EmptyMagazine>,
    /// Blocks cached over all classes.
    cached: usize,
}

// SAFETY: the cache only holds pointers to global-allocator blocks and
// arrays it owns exclusively; nothing ties them to the thread that freed
// them.
unsafe impl Send for NodeCache {}

impl NodeCache {
    /// At most this many blocks are kept per class (the length of a class's
    /// stack); a free beyond it spills the stack whole.
    pub const CLASS_CAP: usize = 1024;

    /// An empty cache (allocates nothing).
    pub const fn new() -> Self {
        Self {
            lists: [FreeList::EMPTY; CLASSES],
            spare: None,
            cached: 0,
        }
    }

    /// The layout blocks for `layout` are really allocated with (the table
    /// in the [module docs](self)). Idempotent.
    pub const fn block_layout(layout: Layout) -> Layout {
        let size = max(layout.size(), 1);
        let (size, align) = if layout.align() <= STEP && size <= MAX_CACHED {
            (round_up(size, STEP), STEP)
        } else if layout.align() <= LINE && size <= MAX_CACHED {
            (round_up(size, LINE), LINE)
        } else {
            (round_up(size, layout.align()), layout.align())
        };
        match Layout::from_size_align(size, align) {
            Ok(l) => l,
            // Unreachable: a `Layout`'s size padded to its (power-of-two)
            // alignment never exceeds `isize::MAX`, and small sizes stay small.
            Err(_) => panic!("block layout overflow"),
        }
    }

    /// The class of `layout` (below [`CLASSES`]), `None` when it bypasses
    /// the cache.
    #[inline]
    pub const fn class(layout: Layout) -> Option<usize> {
        let block = Self::block_layout(layout);
        if block.align() == STEP && block.size() <= MAX_CACHED {
            Some(block.size() / STEP - 1)
        } else if block.align() == LINE && block.size() <= MAX_CACHED {
            Some(SMALL_CLASSES + block.size() / LINE - 1)
        } else {
            None
        }
    }

    /// The block size of class `class` (below [`CLASSES`]): `16 * (class +
    /// 1)` for the small classes, then `64 * (class - 31)`.
    pub const fn class_size(class: usize) -> usize {
        class_layout(class).size()
    }

    /// A block for `layout`: a cached one of its class, else a fresh one from
    /// the global allocator (with the block layout). Never null.
    #[inline]
    pub fn alloc(&mut self, layout: Layout) -> NonNull<u8> {
        match self.alloc_cached(layout) {
            Some(block) => block,
            None => Self::alloc_global(layout),
        }
    }

    /// A cached block for `layout`, `None` when its class's stack is empty
    /// (or the layout is not cached).
    #[inline]
    pub fn alloc_cached(&mut self, layout: Layout) -> Option<NonNull<u8>> {
        let c = Self::class(layout)?;
        let list = &mut self.lists[c];
        if list.len == 0 {
            return None;
        }
        list.len -= 1;
        self.cached -= 1;
        // SAFETY: a non-empty stack has its array (`FreeList::len`), whose
        // first `len + 1` slots hold its blocks; the slot at the new `len`
        // is the last one pushed (by `free_spilling` here or in the cache
        // that filled the magazine it came in).
        let block = unsafe { list.slots.add(list.len).read() };
        // SAFETY: only blocks (non-null) are pushed.
        Some(unsafe { NonNull::new_unchecked(block) })
    }

    /// Gives a block back: cached if its class has room, else freed to the
    /// global allocator. For tests and tools: the runtime gives its blocks
    /// back with [`free_spilling`](Self::free_spilling).
    ///
    /// # Safety
    ///
    /// As for [`free_spilling`](Self::free_spilling).
    #[cfg(any(test, feature = "internals", smarm_loom))]
    #[inline]
    pub unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout) {
        match Self::class(layout) {
            Some(c) if self.lists[c].len < Self::CLASS_CAP => {
                // SAFETY: forwarded contract. The stack has room, so
                // nothing spills.
                let spilled = unsafe { self.free_spilling(ptr, layout) };
                debug_assert!(spilled.is_none());
            }
            // SAFETY: forwarded contract.
            _ => unsafe { Self::free_global(ptr, layout) },
        }
    }

    /// Gives a block back: cached if its class has room; if the class's
    /// stack is full, the whole stack leaves the cache as a [`Magazine`]
    /// (returned) and the block starts a new one. `None`: the block was
    /// cached, or freed to the global allocator (an uncached layout, or no
    /// memory for a new array).
    ///
    /// # Safety
    ///
    /// `ptr` is a block for `layout` (or for a layout with the same
    /// [`block_layout`](Self::block_layout)) from [`alloc`](Self::alloc) on
    /// any cache or from [`alloc_global`](Self::alloc_global), not freed
    /// since; the caller gives up all access to it.
    #[inline]
    pub unsafe fn free_spilling(&mut self, ptr: NonNull<u8>, layout: Layout) -> Option<Magazine> {
        let Some(c) = Self::class(layout) else {
            // SAFETY: forwarded contract.
            unsafe { Self::free_global(ptr, layout) };
            return None;
        };
        let list = &mut self.lists[c];
        if list.len < Self::CLASS_CAP && !list.slots.is_null() {
            // SAFETY: the array has `CLASS_CAP` slots and `len` is below it;
            // the block is the cache's now (forwarded contract).
            unsafe { list.slots.add(list.len).write(ptr.as_ptr()) };
            list.len += 1;
            self.cached += 1;
            return None;
        }
        // SAFETY: forwarded contract.
        unsafe { self.push_slow(c, ptr) }
    }

    /// [`free_spilling`](Self::free_spilling) when class `c`'s stack is
    /// full or has no array: the full stack leaves as a magazine, and the
    /// block starts a stack in the spare array or a new one.
    ///
    /// # Safety
    ///
    /// As for [`free_spilling`](Self::free_spilling), with `c` the class
    /// of its layout.
    #[cold]
    unsafe fn push_slow(&mut self, c: usize, ptr: NonNull<u8>) -> Option<Magazine> {
        let full = if self.lists[c].len >= Self::CLASS_CAP {
            self.take_list(c)
        } else {
            None
        };
        // Either way the class has no array now: its full one just left,
        // or it never had one (the fast path takes every other case).
        debug_assert!(self.lists[c].slots.is_null() && self.lists[c].len == 0);
        let Some(array) = self.spare.take().or_else(EmptyMagazine::new) else {
            // No memory for an array: the block goes back to the allocator
            // rather than the runtime aborting on a free.
            // SAFETY: forwarded contract; `class_layout(c)` is the block
            // layout of the caller's layout.
            unsafe { Self::free_global(ptr, class_layout(c)) };
            return full;
        };
        let list = &mut self.lists[c];
        // The list owns the array from here (freed by `take_list`'s
        // magazine or empty array).
        list.slots = ManuallyDrop::new(array).slots.as_ptr();
        // SAFETY: the array has `CLASS_CAP` slots and the stack is empty
        // (`len` is 0: a full one just left whole); the block is ours.
        unsafe { list.slots.add(list.len).write(ptr.as_ptr()) };
        list.len += 1;
        self.cached += 1;
        full
    }

    /// Class `c`'s whole stack as a magazine (`None` when it is empty); the
    /// class has no array after. An empty stack's array becomes the spare
    /// (or is freed, if there is one).
    #[cold]
    fn take_list(&mut self, c: usize) -> Option<Magazine> {
        let list = core::mem::replace(&mut self.lists[c], FreeList::EMPTY);
        self.cached -= list.len;
        let array = EmptyMagazine {
            slots: NonNull::new(list.slots)?,
        };
        if list.len == 0 {
            // Dropped (freed) when the cache has a spare already.
            drop(self.stock(array));
            return None;
        }
        Some(Magazine {
            array: ManuallyDrop::new(array),
            len: list.len,
            class: c,
        })
    }

    /// Installs `m` as its class's stack if that stack is empty (its blocks
    /// are the cache's now): `Ok`, with the class's old array when the
    /// cache already has a spare (give it to the depot, for a cache that
    /// spills). `Err(m)`: the stack has blocks, `m` is handed back.
    pub fn load(&mut self, m: Magazine) -> Result<Option<EmptyMagazine>, Magazine> {
        let list = &mut self.lists[m.class];
        if list.len != 0 {
            return Err(m);
        }
        // Never dropped: its array and blocks are the stack's now.
        let m = ManuallyDrop::new(m);
        let old = list.slots;
        *list = FreeList {
            slots: m.array.slots.as_ptr(),
            len: m.len,
        };
        self.cached += m.len;
        Ok(NonNull::new(old).and_then(|slots| self.stock(EmptyMagazine { slots })))
    }

    /// Keeps `e` as the spare array if the cache has none; otherwise hands
    /// it back.
    pub fn stock(&mut self, e: EmptyMagazine) -> Option<EmptyMagazine> {
        if self.spare.is_some() {
            return Some(e);
        }
        self.spare = Some(e);
        None
    }

    /// A block for `layout` straight from the global allocator (with the
    /// block layout), interchangeable with cached ones. Never null.
    pub fn alloc_global(layout: Layout) -> NonNull<u8> {
        let block = Self::block_layout(layout);
        // SAFETY: a block layout never has size 0.
        let p = unsafe { alloc(block) };
        match NonNull::new(p) {
            Some(p) => p,
            None => handle_alloc_error(block),
        }
    }

    /// Frees a block to the global allocator, bypassing any cache.
    ///
    /// # Safety
    ///
    /// As for [`free_spilling`](Self::free_spilling).
    pub unsafe fn free_global(ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: per the contract the block was allocated with this block
        // layout (every path allocates with it) and is ours to free.
        unsafe { dealloc(ptr.as_ptr(), Self::block_layout(layout)) }
    }

    /// Blocks held over all classes.
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub fn cached(&self) -> usize {
        self.cached
    }

    /// Whether the cache holds a spare array.
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub fn has_spare(&self) -> bool {
        self.spare.is_some()
    }

    /// Frees every cached block and every array to the global allocator.
    pub fn clear(&mut self) {
        for c in 0..CLASSES {
            // The magazine's drop frees the stack's blocks and array.
            drop(self.take_list(c));
        }
        self.spare = None;
    }
}

impl Default for NodeCache {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NodeCache {
    fn drop(&mut self) {
        self.clear();
    }
}

impl fmt::Debug for NodeCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeCache")
            .field("cached", &self.cached)
            .field("spare", &self.spare.is_some())
            .finish()
    }
}

/// A class's array of [`NodeCache::CLASS_CAP`] block pointers, holding no
/// blocks: what a cache that loads a [`Magazine`] is left with, for a cache
/// that spills (see the module docs, *Magazines*). Arrays have no class.
/// Dropping it frees the array.
pub struct EmptyMagazine {
    /// The array (`SLOTS`), from the global allocator, owned.
    slots: NonNull<*mut u8>,
}

// SAFETY: an empty magazine owns its array exclusively, plain
// global-allocator memory tied to no thread.
unsafe impl Send for EmptyMagazine {}

impl EmptyMagazine {
    /// A new array, for tests and tools (a cache makes its own). Never
    /// fails: out of memory calls [`handle_alloc_error`].
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub fn alloc() -> Self {
        Self::new().unwrap_or_else(|| handle_alloc_error(SLOTS))
    }

    /// A new array, `None` when the allocator has no memory for it.
    #[cold]
    fn new() -> Option<Self> {
        // SAFETY: `SLOTS` has a non-zero size.
        let slots = NonNull::new(unsafe { alloc(SLOTS) })?;
        Some(EmptyMagazine { slots: slots.cast() })
    }
}

impl Drop for EmptyMagazine {
    fn drop(&mut self) {
        // SAFETY: the array was allocated with `SLOTS` and is ours.
        unsafe { dealloc(self.slots.as_ptr().cast(), SLOTS) }
    }
}

impl fmt::Debug for EmptyMagazine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EmptyMagazine")
    }
}

/// A class's stack taken out of a cache whole (see the module docs,
/// *Magazines*): its array and the blocks in it belong to it. Dropping it
/// frees them to the global allocator.
pub struct Magazine {
    /// The array; `array.slots[..len]` hold the blocks. (`ManuallyDrop`:
    /// the drop frees the blocks first, then the array.)
    array: ManuallyDrop<EmptyMagazine>,
    /// Blocks in it (at least 1, at most `CLASS_CAP`).
    len: usize,
    /// Their class.
    class: usize,
}

// SAFETY: a magazine owns its array and blocks exclusively, plain
// global-allocator memory tied to no thread.
unsafe impl Send for Magazine {}

impl Magazine {
    /// How many blocks it holds (at least 1).
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a magazine holds at least one block.
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The class of its blocks (see [`NodeCache::class`]).
    pub fn class(&self) -> usize {
        self.class
    }
}

impl Drop for Magazine {
    fn drop(&mut self) {
        let block = class_layout(self.class);
        let slots = self.array.slots.as_ptr();
        for i in 0..self.len {
            // SAFETY: the first `len` slots hold the magazine's blocks, each
            // allocated with its class's block layout and owned here.
            unsafe { dealloc(slots.add(i).read(), block) };
        }
        // SAFETY: the array is dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut self.array) };
    }
}

impl fmt::Debug for Magazine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Magazine")
            .field("class", &self.class)
            .field("len", &self.len)
            .finish()
    }
}

/// The block layout of class `c`: size `16 * (c + 1)`, align 16, for the
/// small classes; size `64 * (c - 31)`, align 64, for the line classes.
const fn class_layout(c: usize) -> Layout {
    let (size, align) = if c < SMALL_CLASSES {
        (STEP * (c + 1), STEP)
    } else {
        (LINE * (c - SMALL_CLASSES + 1), LINE)
    };
    match Layout::from_size_align(size, align) {
        Ok(l) => l,
        Err(_) => panic!("class out of range"),
    }
}

/// `x` rounded up to a multiple of `align` (a power of two); callers keep it
/// below `isize::MAX` (see `block_layout`).
#[inline]
const fn round_up(x: usize, align: usize) -> usize {
    (x + align - 1) & !(align - 1)
}

#[inline]
const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}
