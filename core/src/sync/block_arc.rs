//! [`BlockArc`] and [`BlockWeak`]: `Arc` and `Weak` with the same two
//! counts and orderings, over a block from an allocator the type names
//! ([`Blocks`]) instead of the global one. A mailbox's shared half is one
//! (`crate::msg::mailbox`): it comes from the spawning worker's block
//! cache, warm and without a lock, and goes back to the cache of whichever
//! worker drops it last.
//!
//! # Counts
//!
//! ```text
//! Inner { strong, weak, value }
//! ```
//!
//! - `strong` counts the `BlockArc`s; the last one dropped drops `value`.
//! - `weak` counts the `BlockWeak`s, plus one that the `BlockArc`s hold
//!   together while `strong > 0`; the last one dropped frees the block.
//! - [`BlockWeak::upgrade`] takes a strong reference only while `strong >
//!   0` (a compare-and-swap from a non-zero count), so `strong` never
//!   leaves 0: once the value is dropped it stays dropped.
//!
//! Unlike `Arc`, there is no `get_mut`, so nothing locks the weak count:
//! [`BlockArc::downgrade`] is one increment, not a compare-and-swap loop,
//! and [`BlockArc::new_with_weak`] starts with a weak reference already
//! counted (a store, no read-modify-write).
//!
//! Layer 0 (`sync`): the allocator is a type parameter, so this module
//! imports nothing above it; the runtime's cache is `sched`'s
//! `WorkerBlocks`, a model's a counting one (`core/tests/loom_block_arc.rs`).

use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::ops::Deref;
use core::ptr::{addr_of, addr_of_mut, NonNull};

use super::{AtomicUsize, Ordering};

/// Where a [`BlockArc`]'s block comes from and goes back to.
pub trait Blocks {
    /// A block for `layout`; never null (an allocation failure is the
    /// allocator's to report, as `handle_alloc_error`).
    fn alloc(layout: Layout) -> NonNull<u8>;

    /// Gives back a block.
    ///
    /// # Safety
    ///
    /// `block` came from [`alloc`](Self::alloc) with `layout`, is not given
    /// back since, and the caller gives up all access to it.
    unsafe fn free(block: NonNull<u8>, layout: Layout);
}

/// References beyond this are a leak (as `Arc`'s bound).
const MAX_REFS: usize = isize::MAX as usize;

/// Takes one more reference on `count` from one the caller holds.
#[inline(always)]
pub(crate) fn take_ref(count: &AtomicUsize) {
    // Relaxed: a new reference from an existing one: the block is alive
    // and nothing is published by the count.
    let old = count.fetch_add(1, Ordering::Relaxed);
    assert!(old < MAX_REFS, "smarm: reference count overflow");
}

/// Gives back one reference on `count`; `true` if it was the last, and
/// then every other holder's uses happen before the caller's (as
/// `Arc::drop`).
#[inline(always)]
pub(crate) fn give_ref(count: &AtomicUsize) -> bool {
    // Release: this holder's uses happen before the last holder's drop.
    if count.fetch_sub(1, Ordering::Release) != 1 {
        return false;
    }
    // Acquire: pairs with every other holder's Release decrement (a load
    // rather than a fence: ThreadSanitizer does not see fences).
    count.load(Ordering::Acquire);
    true
}

/// Takes one more reference on `count` unless it is 0 (its referent is
/// gone, or not made yet): a compare-and-swap from a non-zero count, so a
/// count at 0 never leaves it here. `true` if it took one.
#[inline]
pub(crate) fn take_ref_if_live(count: &AtomicUsize) -> bool {
    // Relaxed: the CAS below is the Acquire.
    let mut n = count.load(Ordering::Relaxed);
    loop {
        if n == 0 {
            return false;
        }
        assert!(n < MAX_REFS, "smarm: reference count overflow");
        // Acquire: pairs with the Release that published the referent
        // (its making, or the decrements of the references dropped
        // before); a count > 0 keeps it alive from here.
        match count.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => n = now,
        }
    }
}

/// The block: both counts, then the value. Line-aligned and line-sized
/// (the block cache's line classes): the blocks are mailboxes' and
/// channels' shared halves, written by the workers their ends run on, and
/// two allocated in a row (a spawner's two pairs) shared a line that then
/// moved between the pairs' cores on every message (msg_pairs, two pairs
/// on two workers: 0.92x with the blocks line-aligned; docs/benchmarks.md,
/// "Blocks that share a cache line").
#[repr(C, align(64))]
struct Inner<T> {
    strong: AtomicUsize,
    weak: AtomicUsize,
    value: T,
}

/// The layout a `BlockArc<T, _>` asks its blocks for (its counts, then
/// `T`; line-aligned): for the dump's per-actor byte count.
pub(crate) const fn block_layout_of<T>() -> Layout {
    Layout::new::<Inner<T>>()
}

/// Owns a `T` (drop check); `B` only names functions.
type Owns<T, B> = PhantomData<(Inner<T>, fn() -> B)>;

/// A shared reference to a `T` in a block from `B`; derefs to it (see the
/// module doc).
pub struct BlockArc<T, B: Blocks> {
    p: NonNull<Inner<T>>,
    _own: Owns<T, B>,
}

/// A reference to a [`BlockArc`]'s block that does not keep its value
/// alive; [`upgrade`](Self::upgrade) gives a `BlockArc` while one is left.
pub struct BlockWeak<T, B: Blocks> {
    p: NonNull<Inner<T>>,
    _own: Owns<T, B>,
}

// SAFETY: as `Arc<T>`: a `BlockArc` hands out `&T` on any thread (`Sync`)
// and may drop the `T` on any thread (`Send`); `B` is only functions.
unsafe impl<T: Send + Sync, B: Blocks> Send for BlockArc<T, B> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync, B: Blocks> Sync for BlockArc<T, B> {}
// SAFETY: as `Weak<T>`: an upgrade makes a `BlockArc` on this thread.
unsafe impl<T: Send + Sync, B: Blocks> Send for BlockWeak<T, B> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync, B: Blocks> Sync for BlockWeak<T, B> {}

impl<T, B: Blocks> BlockArc<T, B> {
    /// A block holding `make()`, built in place (not on the stack and
    /// copied in), with no weak reference.
    #[inline(always)]
    pub fn new(make: impl FnOnce() -> T) -> Self {
        Self {
            p: Self::make(1, make),
            _own: PhantomData,
        }
    }

    /// A block holding `make()`, built in place, and a weak reference to
    /// it, both counted by the block's first stores (no read-modify-write).
    #[inline(always)]
    pub fn new_with_weak(make: impl FnOnce() -> T) -> (Self, BlockWeak<T, B>) {
        let p = Self::make(2, make);
        (Self { p, _own: PhantomData }, BlockWeak { p, _own: PhantomData })
    }

    /// A block with one strong reference and `weak` weak ones (the strong
    /// side's included). `make` runs after the allocation, so its value is
    /// stored straight into the block; a panic in it leaks the block.
    #[inline(always)]
    fn make(weak: usize, make: impl FnOnce() -> T) -> NonNull<Inner<T>> {
        let p = B::alloc(Layout::new::<Inner<T>>()).cast::<Inner<T>>();
        // SAFETY: a fresh block of `Inner<T>`'s layout, ours alone until
        // returned; each field is written once, through raw pointers.
        unsafe {
            let i = p.as_ptr();
            addr_of_mut!((*i).strong).write(AtomicUsize::new(1));
            addr_of_mut!((*i).weak).write(AtomicUsize::new(weak));
            addr_of_mut!((*i).value).write(make());
        }
        p
    }

    /// A weak reference to this block.
    #[inline]
    pub fn downgrade(this: &Self) -> BlockWeak<T, B> {
        // The strong side's weak reference keeps `weak > 0` while `this`
        // lives, and nothing locks the count (no `get_mut`): one increment.
        take_ref(this.counts().weak());
        BlockWeak {
            p: this.p,
            _own: PhantomData,
        }
    }

    #[cfg(any(test, feature = "internals", smarm_loom))]
    /// The strong references now (a racy snapshot, for tests).
    pub fn strong_count(this: &Self) -> usize {
        this.counts().strong().load(Ordering::Relaxed)
    }

    #[cfg(any(test, feature = "internals", smarm_loom))]
    /// The weak references now, without the strong side's one (a racy
    /// snapshot, for tests).
    pub fn weak_count(this: &Self) -> usize {
        this.counts().weak().load(Ordering::Relaxed) - 1
    }

    #[cfg(any(test, feature = "internals", smarm_loom))]
    /// Whether both point at the same block.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.p == b.p
    }

    #[inline(always)]
    fn counts(&self) -> Counts<'_, T> {
        Counts(self.p, PhantomData)
    }
}

/// The counts of a live block, borrowed for `'a`, through raw field
/// pointers: a reference to the whole `Inner` would cover the value too,
/// which the last strong reference drops while weak ones still read the
/// counts.
struct Counts<'a, T>(NonNull<Inner<T>>, PhantomData<&'a ()>);

impl<'a, T> Counts<'a, T> {
    #[inline(always)]
    fn strong(&self) -> &'a AtomicUsize {
        // SAFETY: the caller holds a reference, so the block is alive.
        unsafe { &*addr_of!((*self.0.as_ptr()).strong) }
    }

    #[inline(always)]
    fn weak(&self) -> &'a AtomicUsize {
        // SAFETY: as above.
        unsafe { &*addr_of!((*self.0.as_ptr()).weak) }
    }
}

impl<T, B: Blocks> Clone for BlockArc<T, B> {
    #[inline]
    fn clone(&self) -> Self {
        take_ref(self.counts().strong());
        Self {
            p: self.p,
            _own: PhantomData,
        }
    }
}

impl<T, B: Blocks> Deref for BlockArc<T, B> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: `strong > 0` while we live: the value is initialised and
        // not dropped, and only shared references to it exist.
        unsafe { &*addr_of!((*self.p.as_ptr()).value) }
    }
}

impl<T, B: Blocks> Drop for BlockArc<T, B> {
    #[inline]
    fn drop(&mut self) {
        if !give_ref(self.counts().strong()) {
            return;
        }
        // SAFETY: the last strong reference, every other holder's uses
        // before this (`give_ref`): the value is ours to drop, once
        // (`strong` never leaves 0 again: `upgrade`).
        unsafe { addr_of_mut!((*self.p.as_ptr()).value).drop_in_place() };
        // The strong side's weak reference.
        drop(BlockWeak::<T, B> {
            p: self.p,
            _own: PhantomData,
        });
    }
}

impl<T, B: Blocks> BlockWeak<T, B> {
    /// A strong reference, if the value is still alive.
    #[inline]
    pub fn upgrade(&self) -> Option<BlockArc<T, B>> {
        // Lazily: a `BlockArc` made and dropped on failure would give back
        // a reference never taken.
        take_ref_if_live(self.counts().strong()).then(|| BlockArc {
            p: self.p,
            _own: PhantomData,
        })
    }

    #[inline(always)]
    fn counts(&self) -> Counts<'_, T> {
        Counts(self.p, PhantomData)
    }

    /// The block's address, giving up this reference without dropping it
    /// (for a holder that cannot name `T`: an overflow recovery's hook).
    pub fn into_raw(this: Self) -> NonNull<()> {
        let p = this.p.cast();
        core::mem::forget(this);
        p
    }

    /// The reference [`into_raw`](Self::into_raw) gave up.
    ///
    /// # Safety
    ///
    /// `p` came from `into_raw` of a `BlockWeak<T, B>` (same `T`, same
    /// `B`), and this is its only `from_raw`.
    pub unsafe fn from_raw(p: NonNull<()>) -> Self {
        Self {
            p: p.cast(),
            _own: PhantomData,
        }
    }
}

impl<T, B: Blocks> Clone for BlockWeak<T, B> {
    fn clone(&self) -> Self {
        take_ref(self.counts().weak());
        Self {
            p: self.p,
            _own: PhantomData,
        }
    }
}

impl<T, B: Blocks> Drop for BlockWeak<T, B> {
    #[inline]
    fn drop(&mut self) {
        if give_ref(self.counts().weak()) {
            // SAFETY: the last reference of either kind (the strong side
            // holds a weak one while `strong > 0`, and the value was
            // dropped before it gave it back): nobody reaches the block any
            // more; it came from `B::alloc` with this layout.
            unsafe { B::free(self.p.cast(), Layout::new::<Inner<T>>()) };
        }
    }
}

impl<T: fmt::Debug, B: Blocks> fmt::Debug for BlockArc<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests;
