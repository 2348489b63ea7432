//! Small blocks from the calling worker's [`NodeCache`], refilled from and
//! spilled to the runtime's [`NodeDepot`] (`RtCore::nodes`), or from the
//! global allocator on a plain thread: message nodes for mailboxes and
//! channels, and a spawn's join cell (`crate::spawn::slot`). A block taken
//! here may be given back on any thread (`NodeCache`'s contract: cached
//! blocks are global-allocator memory of their block layout).
//!
//! [`NodeDepot`]: crate::lockfree::node_depot::NodeDepot

use core::alloc::Layout;
use core::ptr::NonNull;

use super::{ctx, WorkerCtx};
use crate::lockfree::mpsc_queue::Node;
use crate::lockfree::node_cache::{Magazine, NodeCache};
use crate::lockfree::node_depot::NodeDepot;
use crate::seam::platform::{Platform, RawLock};

/// A message node for a `T`: from the calling worker's cache, or the global
/// allocator on a plain thread.
#[inline]
pub(crate) fn node_alloc<T, P: Platform>() -> NonNull<Node<T>> {
    // SAFETY: read just now, on this thread.
    unsafe { node_alloc_in::<T, P>(ctx::<P>()) }
}

/// [`node_alloc`] for a caller that read the current-worker slot already.
///
/// # Safety
///
/// `c` is what `ctx::<P>()` returned on this thread, with no switch since
/// (the caller may have moved to another worker's thread across one).
#[inline]
pub(crate) unsafe fn node_alloc_in<T, P: Platform>(c: *mut WorkerCtx<P>) -> NonNull<Node<T>> {
    if c.is_null() {
        return Node::<T>::alloc_global();
    }
    // SAFETY: a non-null context is this thread's live worker context; no
    // other reference to its cache is live (we hold none across switches).
    match unsafe { (*c).nodes.alloc_cached(Node::<T>::layout()) } {
        Some(node) => node.cast(),
        // SAFETY: as above.
        None => unsafe { node_refill::<P>(c, Node::<T>::layout()) }.cast(),
    }
}

/// A dry cache's slow path: a magazine from the depot, else the global
/// allocator.
///
/// # Safety
///
/// `c` is this thread's live worker context, as in [`node_alloc`].
#[cold]
unsafe fn node_refill<P: Platform>(c: *mut WorkerCtx<P>, layout: Layout) -> NonNull<u8> {
    // SAFETY: caller contract; the core outlives its workers' contexts.
    let (cache, depot) = unsafe { (&mut (*c).nodes, &(*(*c).core).nodes) };
    if let Some(m) = NodeCache::class(layout).and_then(|class| depot.take(class)) {
        // The stack was empty (`alloc_cached` just said so): `load` keeps
        // the magazine, and the class's old array goes round.
        match cache.load(m) {
            Ok(None) => {}
            Ok(Some(empty)) => depot.put_empty(empty),
            Err(back) => spill(cache, depot, back),
        }
    }
    cache.alloc(layout)
}

/// Gives the depot a full magazine from `cache`, and `cache` an empty
/// array for its next spill if the depot has one.
#[cold]
fn spill<L: RawLock>(cache: &mut NodeCache, depot: &NodeDepot<L>, m: Magazine) {
    if let Some(empty) = depot.put(m) {
        // Freed here if the cache has a spare already.
        drop(cache.stock(empty));
    }
}

/// Returns a spent node to the calling worker's cache (or the global
/// allocator on a plain thread).
#[inline]
pub(crate) fn node_free<T, P: Platform>(node: NonNull<Node<T>>) {
    // SAFETY: read just now, on this thread.
    unsafe { node_free_in::<T, P>(ctx::<P>(), node) }
}

/// [`node_free`] for a caller that read the current-worker slot already.
///
/// # Safety
///
/// `c` is as for [`node_alloc_in`].
#[inline]
pub(crate) unsafe fn node_free_in<T, P: Platform>(c: *mut WorkerCtx<P>, node: NonNull<Node<T>>) {
    // SAFETY: nodes come from `node_alloc` (some worker's cache or the
    // global allocator, interchangeable by `NodeCache`'s contract) and the
    // caller owns `node`; the context is as in `node_alloc`, and its core
    // outlives it.
    unsafe {
        if c.is_null() {
            Node::<T>::free_global(node);
        } else if let Some(m) = (*c).nodes.free_spilling(node.cast(), Node::<T>::layout()) {
            // A full stack: to the depot, for a worker whose cache is dry.
            spill(&mut (*c).nodes, &(*(*c).core).nodes, m);
        }
    }
}

/// A block for `layout` (rounded to its [`NodeCache::block_layout`]): from
/// the calling worker's cache, or the global allocator on a plain thread.
/// Never null. Give it back with [`block_free`] and the same layout. (The
/// message-node functions above are this for `Node<T>`'s layout, kept
/// apart so the send and receive paths inline as they did.)
#[inline]
pub(crate) fn block_alloc<P: Platform>(layout: Layout) -> NonNull<u8> {
    let c = ctx::<P>();
    if c.is_null() {
        return NodeCache::alloc_global(layout);
    }
    // SAFETY: a non-null context is this thread's live worker context; no
    // other reference to its cache is live (we hold none across switches).
    match unsafe { (*c).nodes.alloc_cached(layout) } {
        Some(block) => block,
        // SAFETY: as above.
        None => unsafe { node_refill::<P>(c, layout) },
    }
}

/// Gives back a block from [`block_alloc`] (or any `NodeCache` or the
/// global allocator, with the same block layout): to the calling worker's
/// cache, whose full class list goes to the depot, or to the global
/// allocator on a plain thread.
///
/// # Safety
///
/// `block` came from [`block_alloc`] with `layout` (or a layout with the
/// same block layout), is not given back since, and the caller gives up
/// all access to it.
#[inline]
pub(crate) unsafe fn block_free<P: Platform>(block: NonNull<u8>, layout: Layout) {
    let c = ctx::<P>();
    // SAFETY: the caller's contract (blocks of some worker's cache and of
    // the global allocator are interchangeable by `NodeCache`'s); the
    // context is as in `node_alloc`, and its core outlives it.
    unsafe {
        if c.is_null() {
            NodeCache::free_global(block, layout);
        } else if let Some(m) = (*c).nodes.free_spilling(block, layout) {
            // A full stack: to the depot, for a worker whose cache is dry.
            spill(&mut (*c).nodes, &(*(*c).core).nodes, m);
        }
    }
}

/// The calling worker's block cache ([`block_alloc`], [`block_free`]) as a
/// [`Blocks`](crate::sync::block_arc::Blocks): a block taken on one worker
/// goes back to the cache of the worker (or thread) that frees it.
pub(crate) struct WorkerBlocks<P>(core::marker::PhantomData<P>);

impl<P: Platform> crate::sync::block_arc::Blocks for WorkerBlocks<P> {
    #[inline(always)]
    fn alloc(layout: Layout) -> NonNull<u8> {
        block_alloc::<P>(layout)
    }

    #[inline(always)]
    unsafe fn free(block: NonNull<u8>, layout: Layout) {
        // SAFETY: forwarded contract (`Blocks::free`'s is `block_free`'s).
        unsafe { block_free::<P>(block, layout) }
    }
}
