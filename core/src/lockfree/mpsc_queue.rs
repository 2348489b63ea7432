//! The mailbox queue: Dmitry Vyukov's node-based MPSC queue, "Intrusive MPSC
//! node-based queue"
//! (<https://www.1024cores.net/home/lock-free-algorithms/queues/intrusive-mpsc-node-based-queue>),
//! with the rotating stub of its sibling, "Non-intrusive MPSC node-based
//! queue" (<https://www.1024cores.net/home/lock-free-algorithms/queues/non-intrusive-mpsc-node-based-queue>).
//! A send is one `swap` and one store; the single consumer pops with plain
//! loads and stores, no atomic read-modify-write. (The intrusive version
//! keeps its stub inside the queue and re-pushes it, with a `swap`, whenever
//! the consumer would take the last node; moving values out of nodes and
//! handing the spent node to the caller avoids that.)
//!
//! # The algorithm
//!
//! The queue is a singly linked list of [`Node`]s. `head` (consumer-owned)
//! points at a *spent* node, one whose value has been taken (at first the
//! stub given to [`MpscQueue::new`]); the values waiting are in the nodes
//! after it. `tail` (shared by producers) points at the last node swapped in.
//! (Vyukov's names are the other way round: his producers swap `head`.)
//!
//! ```text
//!  head (consumer)                                   tail (producers)
//!    |                                                  |
//!    v                                                  v
//!  [spent] --next--> [v1] --next--> [v2] --next--> ... [vn] --next--> null
//! ```
//!
//! 1. **Push** (any thread): write the value and a null `next` into the
//!    caller's node; `swap` `tail` to the node (SeqCst: the producers'
//!    serialisation point, and the send half of the park protocol below),
//!    getting the previous tail `prev`; store `prev.next = node` (Release:
//!    publishes the node to the consumer).
//! 2. **Pop** (the consumer): load `head.next` (Acquire). If it is a node,
//!    it becomes `head`, its value is moved out, and the *old* head is handed
//!    to the caller as a spent node, to recycle or free. The stub therefore
//!    rotates: the node given to `new` is the first one handed out.
//! 3. If `head.next` is null, compare `tail` with `head`: equal means
//!    [`Pop::Empty`]. Different means [`Pop::Inconsistent`]: a producer has
//!    swapped (step 1) but not linked yet, and its node, with every node
//!    pushed after it, stays out of reach until it does:
//!
//!    ```text
//!    [spent] --> [v1] -x   [v2] <-- tail     (v2's producer is between swap and link)
//!    ```
//!
//!    The window is two instructions, but a producer preempted inside it
//!    holds up the consumer for its time slice: the caller retries with
//!    backoff, and never parks on Inconsistent (a parking receiver asks
//!    [`MpscQueue::is_empty_sc`], which reports "not empty" here).
//!
//! A node is touched by its producer only until its link store; the consumer
//! frees (hands out) a node only after following its `next`, i.e. after that
//! store. So spent nodes can be reused at once, even pushed again while
//! producers are linking behind them.
//!
//! # The park protocol (a Dekker pair)
//!
//! A receiver that finds its mailbox empty parks; a sender must then wake it.
//! The four accesses are SeqCst so they fall in one total order:
//!
//! 1. Sender: push (the SeqCst `swap` of `tail`).
//! 2. Sender: load the receiver's state (SeqCst); if it says WAITING, wake it.
//! 3. Receiver: store WAITING into its state (a SeqCst read-modify-write).
//! 4. Receiver: [`MpscQueue::is_empty_sc`] (a SeqCst load of `tail`, compared
//!    with `head`); if not empty, cancel the park and pop.
//!
//! If 1 precedes 4 in the total order, 4 sees `tail != head`; otherwise
//! 3 < 4 < 1 < 2 and 2 reads WAITING. Either way the message is not left
//! behind a sleeping receiver. (x86-64: `xchg` is a full barrier; AArch64:
//! `swpal` and `ldar` are RCsc, so no extra fence on the send path.)
//!
//! # Selective receive
//!
//! Removing from the middle of this list would race with linking producers,
//! so the queue offers no such operation. The mailbox layer keeps a
//! consumer-private *save queue* instead, as Erlang does: a receive scans the
//! save queue, then pops from here, moving each value that does not match
//! to the back of the save queue (its node is recycled at once). The next
//! receive scans the save queue first, so order is kept.
//!
//! # Nodes and memory
//!
//! Nodes are raw blocks of [`Node::layout`], which is already a
//! [`NodeCache`] block layout: take them from [`Node::alloc_global`] or from
//! any [`NodeCache`] with that layout; free spent ones with
//! [`Node::free_global`] or into any [`NodeCache`]. The queue frees the
//! nodes it still holds (stub included) to the global allocator on drop,
//! or to a cache its owner names first ([`MpscQueue::free_nodes_with`]).
//!
//! Under loom every node holds loom objects; loom's SeqCst is partial (it
//! never lets a SeqCst load read a stale value over a newer SeqCst store, but
//! treats the other accesses as AcqRel, and an atomic's initial value is not
//! a SeqCst store): the park models in `core/tests/loom_mpsc.rs` therefore make
//! the latest store of each word a SeqCst one before the race, as a running
//! system's are.

use core::alloc::Layout;
use core::fmt;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use crate::lockfree::node_cache::NodeCache;
use crate::sync::{AtomicPtr, Ordering, UnsafeCell};

#[cfg(all(test, not(smarm_loom)))]
mod tests;

/// One queue node: the link and the value slot. Callers hold nodes only as
/// raw memory (`NonNull<Node<T>>`): freshly allocated, or spent.
#[repr(C)]
pub struct Node<T> {
    /// The next node, null while this is the last one (step 1).
    next: AtomicPtr<Node<T>>,
    /// Initialised from push until the consumer moves it out (step 2).
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Node<T> {
    /// The layout of every node's memory: `Node<T>`'s own layout rounded to
    /// its [`NodeCache`] block layout, so a node from the global allocator
    /// and one from any cache are interchangeable.
    pub const fn layout() -> Layout {
        NodeCache::block_layout(Layout::new::<Node<T>>())
    }

    /// Memory for one node from the global allocator (uninitialised; push
    /// or [`MpscQueue::new`] initialise it). Never null.
    pub fn alloc_global() -> NonNull<Node<T>> {
        NodeCache::alloc_global(Self::layout()).cast()
    }

    /// Frees a node's memory to the global allocator (its value, if any, is
    /// not dropped: nodes handed out are spent).
    ///
    /// # Safety
    ///
    /// `node` is a block of [`Node::layout`] (from [`Node::alloc_global`] or a
    /// [`NodeCache`]) that the caller owns and is in no queue.
    pub unsafe fn free_global(node: NonNull<Node<T>>) {
        // SAFETY: forwarded contract; `Node::layout` is the block layout.
        unsafe { NodeCache::free_global(node.cast(), Self::layout()) }
    }
}

/// What [`MpscQueue::pop`] found (`V` = `T`), or
/// [`MpscQueue::pop_in_place`] (`V` = a pointer to the value, in place).
#[derive(Debug)]
pub enum Pop<V, T = V> {
    /// The oldest value, and a spent node the caller now owns (push it again
    /// or free it; its contents are garbage).
    Data(V, NonNull<Node<T>>),
    /// No value, and no push in progress.
    Empty,
    /// A producer has swapped `tail` but not linked its node yet (module docs,
    /// step 3): retry shortly; do not park.
    Inconsistent,
}

/// Bytes from the start of `head` to the start of `tail`: two 64-byte
/// lines, so the consumer's `head` and the producers' `tail` never share a
/// line nor an adjacent-line pair (x86's prefetcher pulls lines in
/// 128-byte pairs; 128 is Apple silicon's line size), whatever the
/// queue's address.
const TAIL_OFFSET: usize = 128;

/// Filler between `head` and `tail` (see [`TAIL_OFFSET`]). Padding instead
/// of an over-aligned field: a `#[repr(align(128))]` tail made every
/// mailbox's and channel's shared allocation 128-aligned, which glibc
/// serves on its slow `memalign` path, and rounded a mailbox up to 512
/// bytes.
type Gap = [u8; TAIL_OFFSET.saturating_sub(core::mem::size_of::<UnsafeCell<*mut u8>>())];

/// Vyukov's node-based MPSC queue; see the [module docs](self).
///
/// Any thread may [`push`](Self::push); one consumer at a time may
/// [`pop`](Self::pop), `peek_with` (tests and loom),
/// [`is_empty_sc`](Self::is_empty_sc) and [`drain`](Self::drain) (the
/// consumer role may move between threads with a happens-before edge, as an
/// actor migrating between workers does). `Send + Sync` when `T: Send`.
#[repr(C)]
pub struct MpscQueue<T> {
    /// The spent node before the oldest value; consumer-owned.
    head: UnsafeCell<*mut Node<T>>,
    _gap: Gap,
    /// The last node swapped in; producers swap it. [`TAIL_OFFSET`] bytes
    /// past `head`; what follows the queue (a channel's state, sender count
    /// and waiter slot, which every send touches too) may share its line.
    tail: AtomicPtr<Node<T>>,
}

// SAFETY: the queue owns its values and nodes; sending it sends them.
unsafe impl<T: Send> Send for MpscQueue<T> {}

// SAFETY: through `&MpscQueue` values only move in (push, from any thread)
// and out (pop, by the one consumer the unsafe contracts allow), by value,
// so `T: Send` suffices; each node's value is handed from its producer to
// the consumer through the Release link store / Acquire `next` load.
unsafe impl<T: Send> Sync for MpscQueue<T> {}

impl<T> MpscQueue<T> {
    /// An empty queue around `stub`, a node the caller allocated (contents
    /// uninitialised); the queue owns it from now on.
    ///
    /// # Safety
    ///
    /// `stub` is a block of [`Node::layout`] (from [`Node::alloc_global`] or
    /// a [`NodeCache`]), exclusively owned by the caller and in no queue: the
    /// queue writes it and eventually frees it (its drop frees every node it
    /// holds to the global allocator).
    pub unsafe fn new(stub: NonNull<Node<T>>) -> Self {
        // SAFETY: per the contract the block is ours and fits a `Node<T>`
        // (block layouts only round size and alignment up).
        unsafe { Node::init(stub, MaybeUninit::uninit()) };
        Self {
            head: UnsafeCell::new(stub.as_ptr()),
            _gap: [0; core::mem::size_of::<Gap>()],
            tail: AtomicPtr::new(stub.as_ptr()),
        }
    }

    /// Writes `value` into `node` and appends it (module docs, step 1). Any
    /// thread.
    ///
    /// The `swap` of `tail` is SeqCst, not just AcqRel: it is the sender's
    /// half of the park protocol's Dekker pair (push, then the sender's
    /// SeqCst load of the receiver's state; against the receiver's SeqCst
    /// state RMW, then [`is_empty_sc`](Self::is_empty_sc)).
    ///
    /// # Safety
    ///
    /// `node` is a block of [`Node::layout`] (from [`Node::alloc_global`] or a
    /// [`NodeCache`]), exclusively owned by the caller, and in no queue; the
    /// queue owns it from now on.
    #[inline]
    pub unsafe fn push(&self, node: NonNull<Node<T>>, value: T) {
        // SAFETY: forwarded contract.
        let prev = unsafe { self.swap_in(node, value) };
        // SAFETY: `prev` came from `swap_in` just now.
        unsafe { Self::link(prev, node) };
    }

    /// Step 1, first half: initialises `node` and swaps it into `tail`,
    /// returning the previous tail, which the caller must [`link`](Self::link).
    ///
    /// # Safety
    ///
    /// As for [`push`](Self::push).
    #[inline]
    unsafe fn swap_in(&self, node: NonNull<Node<T>>, value: T) -> NonNull<Node<T>> {
        // SAFETY: per the contract the block is ours and fits a `Node<T>`.
        unsafe { Node::init(node, MaybeUninit::new(value)) };
        // SeqCst: Release publishes the node's initialisation to the next
        // producer, which links to it; Acquire orders the previous producer's
        // initialisation of `prev.next` (null) before our link store; SeqCst
        // for the park protocol (see `push`).
        let prev = self.tail.swap(node.as_ptr(), Ordering::SeqCst);
        // SAFETY: `tail` only ever holds nodes (the stub, then pushed ones).
        unsafe { NonNull::new_unchecked(prev) }
    }

    /// Step 1, second half: links `node` behind `prev`, making it (and the
    /// nodes pushed after it) reachable by the consumer.
    ///
    /// # Safety
    ///
    /// `prev` is what [`swap_in`](Self::swap_in) returned for `node`; called
    /// once.
    #[inline]
    unsafe fn link(prev: NonNull<Node<T>>, node: NonNull<Node<T>>) {
        // SAFETY: `prev` stays allocated until the consumer has followed its
        // `next`, which it cannot do before this store.
        let prev = unsafe { prev.as_ref() };
        // Release: synchronizes with the Acquire `next` load in `pop`, so the
        // node's initialisation (value included) happens-before the
        // consumer's read. This is our last access to either node.
        prev.next.store(node.as_ptr(), Ordering::Release);
    }

    /// Removes the oldest value (module docs, steps 2-3).
    ///
    /// # Safety
    ///
    /// Only the single consumer calls `pop`, [`pop_in_place`](Self::pop_in_place),
    /// `peek_with` (tests and loom), [`is_empty_sc`](Self::is_empty_sc) and
    /// [`drain`](Self::drain): one thread at a time, the role handed between
    /// threads with a happens-before edge.
    #[inline]
    pub unsafe fn pop(&self) -> Pop<T> {
        // SAFETY: forwarded contract.
        match unsafe { self.pop_in_place() } {
            // SAFETY: `pop_in_place` hands the value over, read once here.
            Pop::Data(v, node) => Pop::Data(unsafe { v.as_ptr().read() }, node),
            Pop::Empty => Pop::Empty,
            Pop::Inconsistent => Pop::Inconsistent,
        }
    }

    /// [`pop`](Self::pop), with the value left where it is: a pointer to it
    /// in the node that is now `head` (spent, so nothing reads the value
    /// there again). The caller owns the value and moves it out with one
    /// `read` before its next pop (which may hand that node out) and before
    /// the queue is dropped; one it never reads is leaked, not dropped.
    ///
    /// Why: a value handed up by value through a few `Option` / `Result`
    /// layers (pop, try-receive, the receive loop) is copied at each, and
    /// for an enum with a niche (a message enum holding a `Vec` or a
    /// `String`) those copies come out as overlapping moves of odd sizes
    /// that stall on store-to-load forwarding. A pointer travels in a
    /// register; the value is copied once, into the receiver's result
    /// (docs/benchmarks.md, "A receive's copies").
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    #[inline]
    pub unsafe fn pop_in_place(&self) -> Pop<NonNull<T>, T> {
        // SAFETY: `head` is the consumer's alone (contract).
        let head = self.head.with(|p| unsafe { *p });
        // SAFETY: `head` is a live node: the queue frees nothing it holds.
        let next = unsafe { &(*head).next }.load(Ordering::Acquire);
        // (Acquire above: synchronizes with the Release link store in `link`,
        // so the producer's writes to `next`'s node happen-before our reads.)
        match NonNull::new(next) {
            Some(next) => {
                // SAFETY: consumer-owned, as above.
                self.head.with_mut(|p| unsafe { *p = next.as_ptr() });
                // SAFETY: `next` is a live node (linked, and the queue frees
                // nothing it holds).
                let node = unsafe { next.as_ref() };
                // Its value is initialised (ordered by the Acquire above);
                // `next` is now the spent head, so nobody else reads or
                // writes the value until a later pop hands the node out.
                // The access is taken here (loom checks it here); the read
                // is the caller's, on this thread, before that pop.
                let value = node.value.with(|p| p.cast_mut().cast::<T>());
                // Load the value's first line now (the link shares it), so
                // the caller's read of the value does not start after
                // whatever it does first (a free's stores): without it,
                // freeing the spent node before the read cost a receive
                // loop 1.03x; reading before the free instead cost a
                // two-worker ping-pong 1.06x.
                let _ = node.next.load(Ordering::Relaxed);
                // SAFETY: not null (loaded from `head`, a node pointer); the
                // value pointer is inside the live node `next`.
                unsafe { Pop::Data(NonNull::new_unchecked(value), NonNull::new_unchecked(head)) }
            }
            None => self.empty_or_inconsistent(head),
        }
    }

    /// Step 3: `head.next` was null; does a producer hold the next link?
    #[inline]
    fn empty_or_inconsistent<V>(&self, head: *mut Node<T>) -> Pop<V, T> {
        // Relaxed: only a hint which answer to give; nothing is read through
        // the pointer. It cannot read a tail older than `head`: the Acquire
        // that made `head` reachable ordered head's swap before this load.
        if self.tail.load(Ordering::Relaxed) == head {
            Pop::Empty
        } else {
            Pop::Inconsistent
        }
    }

    /// Whether the queue is empty, for the park protocol (module docs, step
    /// 4): a SeqCst load of `tail` compared with `head`. A push caught
    /// between its swap and its link counts as a value: `false`.
    ///
    /// # Safety
    ///
    /// Consumer only, as for [`pop`](Self::pop).
    #[inline]
    pub unsafe fn is_empty_sc(&self) -> bool {
        // SAFETY: consumer-owned (contract).
        let head = self.head.with(|p| unsafe { *p });
        self.tail.load(Ordering::SeqCst) == head
    }

    /// Runs `f` on the oldest value without removing it; `None` (without
    /// calling `f`) when [`pop`](Self::pop) would not return data.
    ///
    /// # Safety
    ///
    /// Consumer only, as for [`pop`](Self::pop), and `f` does not pop from
    /// this queue.
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub unsafe fn peek_with<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        // SAFETY: consumer-owned (contract).
        let head = self.head.with(|p| unsafe { *p });
        // Acquire: synchronizes with the Release in `link`, as in `pop`.
        // SAFETY: `head` is a live node.
        let next = NonNull::new(unsafe { &(*head).next }.load(Ordering::Acquire))?;
        // SAFETY: a linked node holds an initialised value that only the
        // consumer (us) may move out, and `f` does not (contract).
        Some(
            unsafe { next.as_ref() }
                .value
                .with(|p| f(unsafe { (*p).assume_init_ref() })),
        )
    }

    /// Pops every value, giving each with its spent node to `f` (which owns
    /// both). Returns `true` when it stopped at [`Pop::Empty`], `false` at
    /// [`Pop::Inconsistent`] (a push in progress: call again later; once no
    /// producer can run, e.g. in `Drop`, the queue is always consistent).
    ///
    /// # Safety
    ///
    /// Consumer only, as for [`pop`](Self::pop).
    pub unsafe fn drain(&self, mut f: impl FnMut(T, NonNull<Node<T>>)) -> bool {
        loop {
            // SAFETY: forwarded contract.
            match unsafe { self.pop() } {
                Pop::Data(v, node) => f(v, node),
                Pop::Empty => return true,
                Pop::Inconsistent => return false,
            }
        }
    }
}

impl<T> Node<T> {
    /// Writes a whole node (null link, `value`) into raw memory.
    ///
    /// # Safety
    ///
    /// `node` is writable memory for a `Node<T>` that nobody else accesses.
    #[inline]
    unsafe fn init(node: NonNull<Node<T>>, value: MaybeUninit<T>) {
        let fresh = Node {
            next: AtomicPtr::new(ptr::null_mut()),
            value: UnsafeCell::new(value),
        };
        // SAFETY: per the contract. A plain write: whatever was there is
        // garbage (a spent node's header has no drop glue).
        unsafe { node.as_ptr().write(fresh) };
    }
}

impl<T> MpscQueue<T> {
    /// Drops every value still queued and gives every node, the stub
    /// included, to `free` (a worker's cache, where [`Drop`] would use the
    /// global allocator); the queue holds no node after it, and its drop
    /// frees nothing.
    ///
    /// # Safety
    ///
    /// Nothing uses the queue after it but its drop (its tail is left
    /// dangling).
    pub unsafe fn free_nodes_with(&mut self, mut free: impl FnMut(NonNull<Node<T>>)) {
        // `&mut self`: no push or pop is in flight, and whatever gave us the
        // queue ordered their effects before this, so every swap is linked.
        // SAFETY: exclusive access.
        let mut node = self.head.with(|p| unsafe { *p });
        if node.is_null() {
            return;
        }
        // `head` is spent (its value already gone); the values are after it.
        loop {
            // Relaxed: ordered by the exclusive access (above).
            // SAFETY: `node` is a live node of this queue.
            let next = unsafe { &(*node).next }.load(Ordering::Relaxed);
            // SAFETY: the queue owns `node`, and nothing refers to it any
            // more (we hold `next` already).
            free(unsafe { NonNull::new_unchecked(node) });
            let Some(next) = NonNull::new(next) else { break };
            // SAFETY: a linked node after the head holds an initialised value
            // that nobody has taken; it is dropped once, then its node freed.
            unsafe { next.as_ref() }
                .value
                .with_mut(|p| unsafe { (*p).assume_init_drop() });
            node = next.as_ptr();
        }
        debug_assert_eq!(
            self.tail.load(Ordering::Relaxed),
            node,
            "a push swapped tail but never linked"
        );
        // SAFETY: exclusive access.
        self.head.with_mut(|p| unsafe { *p = ptr::null_mut() });
    }
}

impl<T> Drop for MpscQueue<T> {
    fn drop(&mut self) {
        // SAFETY: this is the drop; every node is a block of
        // `Node::layout` from some cache or the global allocator,
        // interchangeable (`NodeCache`).
        unsafe { self.free_nodes_with(|n| Node::free_global(n)) };
    }
}

impl<T> fmt::Debug for MpscQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MpscQueue").finish_non_exhaustive()
    }
}
