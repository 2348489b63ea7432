//! Unit tests for the MPSC queue, single-threaded and with std threads; small
//! enough for Miri, which also checks that every node and value is freed.
//! The loom models are in `core/tests/loom_mpsc.rs`.

use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::sync::{Arc, Barrier};
use std::vec::Vec;

use super::{MpscQueue, Node, Pop};
use crate::lockfree::node_cache::NodeCache;

/// Upper bound on any retry loop in these tests: a hang becomes a panic.
const MAX_SPINS: usize = 50_000_000;

fn queue<T>() -> MpscQueue<T> {
    // SAFETY: a fresh block of `Node::layout`.
    unsafe { MpscQueue::new(Node::alloc_global()) }
}

/// Pushes `v` in a fresh global node.
fn push<T>(q: &MpscQueue<T>, v: T) {
    // SAFETY: a fresh block of `Node::layout`.
    unsafe { q.push(Node::alloc_global(), v) }
}

/// Pops one value and frees its spent node; `None` on Empty, panics on
/// Inconsistent (single-threaded tests never see it).
fn pop<T>(q: &MpscQueue<T>) -> Option<T> {
    // SAFETY: the test thread is the only consumer.
    match unsafe { q.pop() } {
        Pop::Data(v, node) => {
            // SAFETY: a spent node, ours now.
            unsafe { Node::free_global(node) };
            Some(v)
        }
        Pop::Empty => None,
        Pop::Inconsistent => panic!("Inconsistent without a concurrent producer"),
    }
}

/// `is_empty_sc` from the test thread, the only consumer.
fn is_empty<T>(q: &MpscQueue<T>) -> bool {
    // SAFETY: the test thread is the only consumer.
    unsafe { q.is_empty_sc() }
}

/// `peek_with` (copying the value) from the test thread, the only consumer.
fn peek<T: Copy>(q: &MpscQueue<T>) -> Option<T> {
    // SAFETY: the test thread is the only consumer.
    unsafe { q.peek_with(|v| *v) }
}

/// A value that counts its drops.
struct Counted(Arc<StdAtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, StdOrdering::Relaxed);
    }
}

#[test]
fn node_layout_is_its_own_block_layout() {
    fn check<T>() {
        let l = Node::<T>::layout();
        assert_eq!(NodeCache::block_layout(l), l);
        assert!(l.size() >= core::mem::size_of::<Node<T>>());
        assert!(l.align() >= core::mem::align_of::<Node<T>>());
    }
    check::<()>();
    check::<u8>();
    check::<u64>();
    check::<[u8; 100]>();
    check::<[u8; 4000]>();
}

#[test]
fn head_and_tail_are_a_line_pair_apart_without_over_alignment() {
    use core::mem::{align_of, offset_of};
    // Never on one line or one adjacent-line pair, wherever the queue
    // lies; and no alignment above a pointer's, so a mailbox's or
    // channel's allocation stays on the allocator's ordinary path (an
    // over-aligned one takes glibc's memalign).
    assert_eq!(offset_of!(MpscQueue<u64>, head), 0);
    assert_eq!(offset_of!(MpscQueue<u64>, tail), super::TAIL_OFFSET);
    assert_eq!(
        offset_of!(MpscQueue<[u8; 100]>, tail),
        offset_of!(MpscQueue<u64>, tail)
    );
    assert!(align_of::<MpscQueue<u64>>() <= align_of::<usize>());
}

#[test]
fn fifo_single_thread() {
    let q = queue::<u32>();
    assert!(is_empty(&q));
    assert_eq!(pop(&q), None);
    for i in 0..5 {
        push(&q, i);
    }
    assert!(!is_empty(&q));
    assert_eq!(peek(&q), Some(0));
    for i in 0..5 {
        assert_eq!(pop(&q), Some(i));
    }
    assert_eq!(pop(&q), None);
    assert_eq!(peek(&q), None);
    assert!(is_empty(&q));
}

#[test]
fn stub_rotates_out_first() {
    let stub = Node::<u32>::alloc_global();
    // SAFETY: a fresh block of `Node::layout`.
    let q = unsafe { MpscQueue::new(stub) };
    let n1 = Node::alloc_global();
    // SAFETY: a fresh node; the test thread is the only consumer.
    unsafe { q.push(n1, 7) };
    // SAFETY: the only consumer.
    match unsafe { q.pop() } {
        Pop::Data(7, spent) => {
            assert_eq!(spent, stub, "the first spent node is the stub");
            // SAFETY: spent, ours.
            unsafe { Node::free_global(spent) };
        }
        other => panic!("expected Data(7, stub), got {other:?}"),
    }
    // n1 is the head now and is freed by the queue's drop.
}

/// A value that counts its drops in a static (no heap: a value the test
/// leaks on purpose leaves nothing for Miri to report).
struct StaticCounted(&'static StdAtomicUsize, u64);

impl Drop for StaticCounted {
    fn drop(&mut self) {
        self.0.fetch_add(1, StdOrdering::Relaxed);
    }
}

/// `pop_in_place` leaves each value in the node that becomes `head`, and
/// that node is the spent one the next pop hands out; the caller's one
/// read is the value's only move (the queue's drop does not drop a value
/// left in `head`, read or not).
#[test]
fn pop_in_place_leaves_the_value_in_the_new_head() {
    static DROPS: StdAtomicUsize = StdAtomicUsize::new(0);
    let q = queue::<StaticCounted>();
    for i in 0..3 {
        push(&q, StaticCounted(&DROPS, i));
    }
    let mut last: Option<*mut StaticCounted> = None;
    for i in 0..3 {
        // SAFETY: the test thread is the only consumer.
        let Pop::Data(v, spent) = (unsafe { q.pop_in_place() }) else {
            panic!("value {i} was pushed");
        };
        if let Some(prev) = last {
            // The spent node handed out now held the previous value.
            // SAFETY: a pointer into `spent`'s memory (not dereferenced).
            let slot = unsafe {
                (*spent.as_ptr())
                    .value
                    .with(|p| p.cast_mut().cast::<StaticCounted>())
            };
            assert_eq!(
                slot, prev,
                "pop {i}: the spent node is the one the last value was left in"
            );
        }
        if i < 2 {
            // SAFETY: the value is ours, read once, before the next pop.
            let got = unsafe { v.as_ptr().read() };
            assert_eq!(got.1, i);
        } else {
            // The last one is left unread: leaked, not dropped.
            // SAFETY: reads a plain field of the live value in place.
            assert_eq!(unsafe { (*v.as_ptr()).1 }, 2);
        }
        last = Some(v.as_ptr());
        // SAFETY: a spent node, ours now.
        unsafe { Node::free_global(spent) };
    }
    // SAFETY: the test thread is the only consumer.
    assert!(matches!(unsafe { q.pop_in_place() }, Pop::Empty));
    assert_eq!(
        DROPS.load(StdOrdering::Relaxed),
        2,
        "the two values read were dropped once each"
    );
    drop(q);
    assert_eq!(
        DROPS.load(StdOrdering::Relaxed),
        2,
        "the queue's drop left the unread head value alone"
    );
}

#[test]
fn inconsistent_until_linked() {
    let q = queue::<u32>();
    push(&q, 1);
    let node = Node::alloc_global();
    // SAFETY: a fresh node; the matching `link` follows below.
    let prev = unsafe { q.swap_in(node, 2) };
    push(&q, 3); // queued behind the unlinked node
    assert_eq!(pop(&q), Some(1));
    // SAFETY: the test thread is the only consumer.
    assert!(matches!(unsafe { q.pop() }, Pop::Inconsistent));
    assert!(!is_empty(&q), "a swapped push counts as a value");
    assert_eq!(peek(&q), None);
    // SAFETY: the only consumer.
    let complete = unsafe { q.drain(|_, _| panic!("nothing is reachable")) };
    assert!(!complete);
    // SAFETY: `prev` came from `swap_in` for `node`.
    unsafe { MpscQueue::link(prev, node) };
    assert_eq!(pop(&q), Some(2));
    assert_eq!(pop(&q), Some(3));
    assert_eq!(pop(&q), None);
}

#[test]
fn spent_nodes_can_be_pushed_again() {
    let q = queue::<u32>();
    push(&q, 0);
    for i in 1..100 {
        // SAFETY: the only consumer; the spent node is ours to push again.
        match unsafe { q.pop() } {
            Pop::Data(v, node) => {
                assert_eq!(v, i - 1);
                // SAFETY: the spent node is ours and in no queue.
                unsafe { q.push(node, i) };
            }
            other => panic!("expected data, got {other:?}"),
        }
    }
    assert_eq!(pop(&q), Some(99));
    assert_eq!(pop(&q), None);
}

#[test]
fn drain_hands_out_everything() {
    let q = queue::<u32>();
    for i in 0..10 {
        push(&q, i);
    }
    let mut seen = Vec::new();
    // SAFETY: the only consumer; each spent node is freed once.
    let complete = unsafe {
        q.drain(|v, node| {
            seen.push(v);
            Node::free_global(node);
        })
    };
    assert!(complete);
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
    assert_eq!(pop(&q), None);
}

#[test]
fn drop_drops_remaining_values_and_frees_nodes() {
    let drops = Arc::new(StdAtomicUsize::new(0));
    let q = queue::<Counted>();
    for _ in 0..5 {
        push(&q, Counted(drops.clone()));
    }
    drop(pop(&q));
    assert_eq!(drops.load(StdOrdering::Relaxed), 1);
    drop(q);
    assert_eq!(drops.load(StdOrdering::Relaxed), 5, "4 left in the queue");
    // Miri's leak check covers the nodes.
}

#[test]
fn drop_of_an_empty_queue_frees_the_stub() {
    drop(queue::<Counted>());
    let q = queue::<Counted>();
    push(&q, Counted(Arc::new(StdAtomicUsize::new(0))));
    drop(pop(&q));
    drop(q);
}

#[test]
fn zero_sized_values() {
    static DROPS: StdAtomicUsize = StdAtomicUsize::new(0);
    struct Zst;
    impl Drop for Zst {
        fn drop(&mut self) {
            DROPS.fetch_add(1, StdOrdering::Relaxed);
        }
    }
    let q = queue::<()>();
    push(&q, ());
    push(&q, ());
    assert_eq!(pop(&q), Some(()));
    drop(q);

    let q = queue::<Zst>();
    for _ in 0..3 {
        push(&q, Zst);
    }
    drop(pop(&q));
    assert_eq!(DROPS.load(StdOrdering::Relaxed), 1);
    drop(q);
    assert_eq!(DROPS.load(StdOrdering::Relaxed), 3);
}

#[test]
fn nodes_round_trip_through_caches() {
    let mut cache = NodeCache::new();
    // SAFETY: a block of `Node::layout` from a cache.
    let q = unsafe { MpscQueue::<u64>::new(cache.alloc(Node::<u64>::layout()).cast()) };
    for round in 0..3u64 {
        for i in 0..8 {
            let node = cache.alloc(Node::<u64>::layout()).cast();
            // SAFETY: a block of `Node::layout` from a cache.
            unsafe { q.push(node, round * 8 + i) };
        }
        for i in 0..8 {
            // SAFETY: the only consumer; spent nodes go back to the cache.
            match unsafe { q.pop() } {
                Pop::Data(v, node) => {
                    assert_eq!(v, round * 8 + i);
                    // SAFETY: spent, ours; a block of `Node::layout`.
                    unsafe { cache.free(node.cast(), Node::<u64>::layout()) };
                }
                other => panic!("expected data, got {other:?}"),
            }
        }
        // After the first round the cache holds 8 blocks and serves the next
        // 8 pushes from them: steady state allocates nothing.
        assert_eq!(cache.cached(), 8, "round {round}");
    }
    // The queue frees its head (a cache block) with the global allocator:
    // allowed, since `Node::layout` is a block layout.
    drop(q);
}

/// `producers` threads push `0..per` each (as `(producer, i)`), in nodes from
/// their own caches; the test thread pops, checks per-producer FIFO and
/// exactly-once delivery, and frees spent nodes into its own cache.
fn conservation(producers: usize, per: usize) {
    let q = Arc::new(queue::<(usize, usize)>());
    let start = Arc::new(Barrier::new(producers + 1));
    let handles: Vec<_> = (0..producers)
        .map(|p| {
            let (q, start) = (q.clone(), start.clone());
            std::thread::spawn(move || {
                let mut cache = NodeCache::new();
                start.wait();
                for i in 0..per {
                    let node = cache.alloc(Node::<(usize, usize)>::layout()).cast();
                    // SAFETY: a block of `Node::layout` from a cache.
                    unsafe { q.push(node, (p, i)) };
                }
            })
        })
        .collect();
    start.wait();
    let mut cache = NodeCache::new();
    let mut next = std::vec![0; producers];
    let (mut got, mut spins, mut inconsistent) = (0, 0, 0);
    while got < producers * per {
        // SAFETY: the test thread is the only consumer.
        match unsafe { q.pop() } {
            Pop::Data((p, i), node) => {
                assert_eq!(i, next[p], "producer {p} out of order");
                next[p] += 1;
                got += 1;
                // SAFETY: spent, ours; a block of `Node::layout`.
                unsafe { cache.free(node.cast(), Node::<(usize, usize)>::layout()) };
            }
            Pop::Empty => std::thread::yield_now(),
            Pop::Inconsistent => {
                inconsistent += 1;
                std::thread::yield_now();
            }
        }
        spins += 1;
        assert!(spins < MAX_SPINS, "stuck at {got} of {}", producers * per);
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(next, std::vec![per; producers]);
    assert_eq!(pop(&q), None, "nothing beyond what was pushed");
    std::eprintln!("conservation({producers}, {per}): {inconsistent} Inconsistent pops");
}

const PER_PRODUCER: usize = if cfg!(miri) { 100 } else { 50_000 };

#[test]
fn conservation_1_producer() {
    conservation(1, PER_PRODUCER);
}

#[test]
fn conservation_4_producers() {
    conservation(4, PER_PRODUCER);
}

#[test]
fn values_with_drop_across_threads() {
    let drops = Arc::new(StdAtomicUsize::new(0));
    let q = Arc::new(queue::<Counted>());
    let n = if cfg!(miri) { 20 } else { 1000 };
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (q, drops) = (q.clone(), drops.clone());
            std::thread::spawn(move || {
                for _ in 0..n {
                    push(&q, Counted(drops.clone()));
                }
            })
        })
        .collect();
    // Pop about half, concurrently; the rest go with the queue.
    let mut popped = 0;
    for _ in 0..MAX_SPINS {
        if popped == n {
            break;
        }
        // SAFETY: the test thread is the only consumer.
        if let Pop::Data(v, node) = unsafe { q.pop() } {
            drop(v);
            // SAFETY: spent, ours.
            unsafe { Node::free_global(node) };
            popped += 1;
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(drops.load(StdOrdering::Relaxed), popped);
    drop(q);
    assert_eq!(drops.load(StdOrdering::Relaxed), 2 * n);
}

#[test]
fn consumer_role_moves_between_threads() {
    let q = Arc::new(queue::<u32>());
    for i in 0..4 {
        push(&q, i);
    }
    assert_eq!(pop(&q), Some(0));
    // The spawn and the join are the happens-before edges of the hand-over.
    let q2 = q.clone();
    let seen = std::thread::spawn(move || [pop(&q2), pop(&q2)]).join().unwrap();
    assert_eq!(seen, [Some(1), Some(2)]);
    assert_eq!(pop(&q), Some(3));
    assert_eq!(pop(&q), None);
}
