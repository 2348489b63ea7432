//! Message nodes for mailboxes and channels: the calling worker's
//! [`NodeCache`], refilled from and spilled to the runtime's [`NodeDepot`]
//! (`RtCore::nodes`), or the global allocator on a plain thread.
//!
//! [`NodeDepot`]: crate::lockfree::node_depot::NodeDepot

use core::ptr::NonNull;

use super::{ctx, WorkerCtx};
use crate::lockfree::mpsc_queue::Node;
use crate::lockfree::node_cache::NodeCache;
use crate::seam::platform::Platform;

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
unsafe fn node_refill<P: Platform>(c: *mut WorkerCtx<P>, layout: core::alloc::Layout) -> NonNull<u8> {
    // SAFETY: caller contract; the core outlives its workers' contexts.
    let (cache, depot) = unsafe { (&mut (*c).nodes, &(*(*c).core).nodes) };
    if let Some(m) = NodeCache::class(layout).and_then(|class| depot.take(class)) {
        // The list was empty (`alloc_cached` just said so): `load` keeps it.
        if let Some(back) = cache.load(m) {
            depot.put(back);
        }
    }
    cache.alloc(layout)
}

/// Returns a spent node to the calling worker's cache (or the global
/// allocator on a plain thread).
#[inline]
pub(crate) fn node_free<T, P: Platform>(node: NonNull<Node<T>>) {
    let c = ctx::<P>();
    // SAFETY: nodes come from `node_alloc` (some worker's cache or the
    // global allocator, interchangeable by `NodeCache`'s contract) and the
    // caller owns `node`; the context is as in `node_alloc`, and its core
    // outlives it.
    unsafe {
        if c.is_null() {
            Node::<T>::free_global(node);
        } else if let Some(m) = (*c).nodes.free_spilling(node.cast(), Node::<T>::layout()) {
            // A full list: to the depot, for a worker whose cache is dry.
            (*(*c).core).nodes.put(m);
        }
    }
}
