//! A per-worker cache of raw memory blocks by size class, so that steady-state
//! messaging allocates nothing: a mailbox node freed after a receive is the
//! block the next send on that worker gets.
//!
//! # Blocks and classes
//!
//! Every block, cached or not, is allocated from the global allocator with a
//! *block layout*: the requested [`Layout`] rounded by [`NodeCache::block_layout`].
//!
//! | requested layout               | block layout                                 | cached? |
//! |--------------------------------|----------------------------------------------|---------|
//! | `align <= 16`, `size <= 512`   | size rounded up to 16 (at least 16), align 16 | yes, class `size / 16 - 1` |
//! | anything else                  | size at least 1, padded to `align`           | no (straight to the allocator) |
//!
//! So there are 32 classes (16, 32, ..., 512 bytes), and all blocks of one
//! class have the same block layout. Rounding is idempotent: the block layout
//! of a block layout is itself. Hence the invariant that makes blocks
//! interchangeable between caches and with the global allocator:
//!
//! > A block for layout `L` is memory from `alloc::alloc::alloc(block_layout(L))`.
//! > It may be freed by [`NodeCache::free_spilling`] on *any* cache or by
//! > [`NodeCache::free_global`], given `L` or any layout with the same block
//! > layout; never by `dealloc` with `L` itself (unless `L` is already a block
//! > layout, as [`Node::layout`](crate::lockfree::mpsc_queue::Node::layout) is).
//!
//! # The cache
//!
//! 1. [`NodeCache::alloc`] pops the block from the class's free list, or asks
//!    the global allocator when the list is empty (or the layout is not
//!    cached). It never returns null: out of memory calls
//!    [`handle_alloc_error`].
//! 2. [`NodeCache::free_spilling`] pushes the block on its class's list;
//!    a list that already holds [`NodeCache::CLASS_CAP`] blocks leaves
//!    whole first (see *Magazines*), and a block of an uncached layout
//!    goes back to the global allocator. (`NodeCache::free`, for tests,
//!    frees the block to the allocator instead of spilling.)
//! 3. A free list is intrusive: a cached block's first word holds the next
//!    cached block (blocks are at least 16 bytes, 16-aligned). LIFO, so the
//!    block reused first is the one freed last, likely still in cache.
//! 4. Dropping the cache frees every cached block.
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
//! class list out whole, as a [`Magazine`] (O(1): the list is already
//! linked), and [`NodeCache::load`] installs one as an empty class's list;
//! a shared depot between the two ([`NodeDepot`](super::node_depot::NodeDepot))
//! moves the blocks back to where they are allocated, a lock round per
//! [`NodeCache::CLASS_CAP`] blocks.

use alloc::alloc::{alloc, dealloc, handle_alloc_error};
use core::alloc::Layout;
use core::fmt;
use core::ptr::{self, NonNull};

#[cfg(all(test, not(smarm_loom)))]
mod tests;

/// Class step and the alignment of every cached block.
const STEP: usize = 16;

/// The largest cached block size.
const MAX_CACHED: usize = 512;

/// The number of size classes: 16, 32, ..., 512 bytes.
pub const CLASSES: usize = MAX_CACHED / STEP;

/// One class's free list: the most recently freed block and the count.
#[derive(Clone, Copy)]
struct FreeList {
    /// The first cached block (null when empty); its first word holds the
    /// next one.
    head: *mut u8,
    /// Blocks on this list.
    len: usize,
}

impl FreeList {
    const EMPTY: Self = Self {
        head: ptr::null_mut(),
        len: 0,
    };
}

/// Free lists of raw blocks by size class; see the [module docs](self).
pub struct NodeCache {
    lists: [FreeList; CLASSES],
    /// Blocks cached over all classes.
    cached: usize,
}

// SAFETY: the cache only holds pointers to global-allocator blocks it owns
// exclusively; nothing ties them to the thread that freed them.
unsafe impl Send for NodeCache {}

impl NodeCache {
    /// At most this many blocks are kept per class; frees beyond it go back
    /// to the global allocator.
    pub const CLASS_CAP: usize = 1024;

    /// An empty cache (allocates nothing).
    pub const fn new() -> Self {
        Self {
            lists: [FreeList::EMPTY; CLASSES],
            cached: 0,
        }
    }

    /// The layout blocks for `layout` are really allocated with (the table
    /// in the [module docs](self)). Idempotent.
    pub const fn block_layout(layout: Layout) -> Layout {
        let (size, align) = if layout.align() <= STEP && layout.size() <= MAX_CACHED {
            (round_up(max(layout.size(), 1), STEP), STEP)
        } else {
            (round_up(max(layout.size(), 1), layout.align()), layout.align())
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
        } else {
            None
        }
    }

    /// The block size of class `class` (below [`CLASSES`]): `16 * (class + 1)`.
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

    /// A cached block for `layout`, `None` when its class's list is empty
    /// (or the layout is not cached).
    #[inline]
    pub fn alloc_cached(&mut self, layout: Layout) -> Option<NonNull<u8>> {
        let c = Self::class(layout)?;
        let list = &mut self.lists[c];
        let block = NonNull::new(list.head)?;
        // SAFETY: `block` is a cached block of this class: at least 16
        // bytes, 16-aligned, owned by the cache, and its first word was
        // written by `push` in this cache or in the one that filled the
        // magazine it came in (step 3).
        list.head = unsafe { block.cast::<*mut u8>().as_ptr().read() };
        list.len -= 1;
        self.cached -= 1;
        Some(block)
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
            // SAFETY: forwarded contract; the list has room.
            Some(c) if self.lists[c].len < Self::CLASS_CAP => unsafe { self.push(c, ptr) },
            // SAFETY: forwarded contract.
            _ => unsafe { Self::free_global(ptr, layout) },
        }
    }

    /// Gives a block back: cached if its class has room; if the class's
    /// list is full, the whole list leaves the cache as a [`Magazine`]
    /// (returned) and the block starts a new one. `None`: the block was
    /// cached, or freed to the global allocator (an uncached layout).
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
        let full = if self.lists[c].len >= Self::CLASS_CAP {
            self.take_list(c)
        } else {
            None
        };
        // SAFETY: forwarded contract; the list has room (it had, or it
        // just left whole).
        unsafe { self.push(c, ptr) };
        full
    }

    /// Pushes `ptr` on class `c`'s list (step 3).
    ///
    /// # Safety
    ///
    /// As for [`free_spilling`](Self::free_spilling), with `c` the class
    /// of its layout, and the list below [`CLASS_CAP`](Self::CLASS_CAP).
    #[inline]
    unsafe fn push(&mut self, c: usize, ptr: NonNull<u8>) {
        let list = &mut self.lists[c];
        // SAFETY: per the contract the block is ours now, at least 16 bytes
        // and 16-aligned (a cached class's block layout), so its first word
        // can hold the list link.
        unsafe { ptr.cast::<*mut u8>().as_ptr().write(list.head) };
        list.head = ptr.as_ptr();
        list.len += 1;
        self.cached += 1;
    }

    /// Class `c`'s whole list as a magazine (`None` when it is empty); the
    /// list is empty after.
    #[cold]
    fn take_list(&mut self, c: usize) -> Option<Magazine> {
        let list = core::mem::replace(&mut self.lists[c], FreeList::EMPTY);
        self.cached -= list.len;
        NonNull::new(list.head).map(|head| Magazine {
            head,
            len: list.len,
            class: c,
        })
    }

    /// Installs `m` as its class's list if that list is empty (its blocks
    /// are the cache's now); otherwise hands it back.
    pub fn load(&mut self, m: Magazine) -> Option<Magazine> {
        let list = &mut self.lists[m.class];
        if !list.head.is_null() {
            return Some(m);
        }
        let m = core::mem::ManuallyDrop::new(m);
        *list = FreeList {
            head: m.head.as_ptr(),
            len: m.len,
        };
        self.cached += m.len;
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

    /// Frees every cached block to the global allocator.
    pub fn clear(&mut self) {
        for c in 0..CLASSES {
            // The magazine's drop frees the list's blocks.
            drop(self.take_list(c));
        }
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
        f.debug_struct("NodeCache").field("cached", &self.cached).finish()
    }
}

/// A class's free list taken out of a cache whole (see the module docs,
/// *Magazines*): its blocks, linked through their first words, belong to
/// it. Dropping it frees them to the global allocator.
pub struct Magazine {
    /// The first block; its first word holds the next (null after the last).
    head: NonNull<u8>,
    /// Blocks in the list (at least 1).
    len: usize,
    /// Their class.
    class: usize,
}

// SAFETY: a magazine owns its blocks exclusively, and they are plain
// global-allocator memory, tied to no thread.
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
        let mut p = self.head.as_ptr();
        while !p.is_null() {
            // SAFETY: each block of the list is ours (the magazine owns
            // them), was allocated with its class's block layout, and has
            // the next block's address in its first word (step 3); it is
            // read before the block is freed.
            unsafe {
                let next = p.cast::<*mut u8>().read();
                dealloc(p, block);
                p = next;
            }
        }
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

/// The block layout of class `c`: size `16 * (c + 1)`, align 16.
const fn class_layout(c: usize) -> Layout {
    match Layout::from_size_align(STEP * (c + 1), STEP) {
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
