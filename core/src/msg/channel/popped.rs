//! A message popped from a channel's queue and not yet moved out of its
//! node ([`Popped`]): what every receive hands up from its pop to its
//! result.

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::lockfree::mpsc_queue::Node;
use crate::sched::{self, WorkerCtx};
use crate::seam::platform::Platform;

/// A message popped from a channel's queue and still in its node (the
/// queue's head now, which nothing else touches before the receiver's next
/// pop), with the spent node the pop gave back. [`take`](Self::take) moves
/// the message out and then gives the spent node to this worker's cache.
/// Every receive takes what it pops before it can unwind; one dropped
/// untaken would leak its message and node. There is no `Drop` to catch
/// that on purpose: its landing pads cost the channel ping-pong 1.03x.
///
/// Why: a message handed up by value through a few `Option` / `Result`
/// layers (pop, try-receive, the receive loop) was copied at each, and for
/// an enum with a niche (a message enum holding a `Vec` or a `String`)
/// those copies came out as overlapping moves of odd sizes that stalled on
/// store-to-load forwarding. Two pointers travel in registers; the message
/// is copied once, into the receiver's result. The pop has already loaded
/// the message's first line (`MpscQueue::pop_in_place`), so the copy
/// does not wait behind the free's stores (docs/benchmarks.md, "A
/// receive's copies").
#[must_use = "a popped message is taken, or leaked with its node"]
pub(crate) struct Popped<T, P: Platform> {
    value: NonNull<T>,
    spent: NonNull<Node<T>>,
    _p: PhantomData<P>,
}

impl<T, P: Platform> Popped<T, P> {
    /// What `MpscQueue::pop_in_place` gave: the message's place and the
    /// spent node.
    #[inline]
    pub(super) fn new(value: NonNull<T>, spent: NonNull<Node<T>>) -> Self {
        Popped {
            value,
            spent,
            _p: PhantomData,
        }
    }

    /// Moves the message out; the spent node goes to this worker's cache.
    #[inline]
    pub(crate) fn take(self) -> T {
        // SAFETY: read just now, on this thread.
        unsafe { self.take_in(sched::ctx::<P>()) }
    }

    /// [`take`](Self::take) for a receive that read the current-worker
    /// slot already (at its safe point, or after its last wait).
    ///
    /// # Safety
    ///
    /// `c` is what `sched::ctx::<P>()` returned on this thread, with no
    /// switch since.
    #[inline]
    pub(crate) unsafe fn take_in(self, c: *mut WorkerCtx<P>) -> T {
        // SAFETY: contract.
        unsafe { sched::node_free_in::<T, P>(c, self.spent) };
        // SAFETY: the message is initialised and ours (`MpscQueue::
        // pop_in_place`), in a node other than the spent one: read once,
        // here (`take_in` consumes `self`).
        unsafe { self.value.as_ptr().read() }
    }
}
