//! Unit tests for the node depot; small enough for Miri, whose leak check
//! proves that a magazine the depot refuses or keeps until its drop gives
//! every block back.

use core::alloc::Layout;
use std::sync::Arc;
use std::vec::Vec;

use super::NodeDepot;
use crate::lockfree::node_cache::{EmptyMagazine, Magazine, NodeCache, CLASSES};
use crate::seam::lock::FutexLock;
use crate::seam::test_platform::StdPlatform;

type Depot = NodeDepot<FutexLock<StdPlatform>>;

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

/// A magazine of class `l`: a cache filled to the cap, then one more free.
fn magazine(l: Layout) -> Magazine {
    let mut c = NodeCache::new();
    for _ in 0..NodeCache::CLASS_CAP {
        // SAFETY: a fresh block of `l`, given up.
        assert!(unsafe { c.free_spilling(NodeCache::alloc_global(l), l) }.is_none());
    }
    // SAFETY: as above.
    unsafe { c.free_spilling(NodeCache::alloc_global(l), l) }.expect("spills at the cap")
}

#[test]
fn magazines_are_kept_by_class() {
    let d = Depot::new(2);
    let (small, big) = (layout(24), layout(200));
    let class = |l| NodeCache::class(l).unwrap();
    assert!(d.take(class(small)).is_none(), "an empty depot");
    d.put(magazine(small));
    assert_eq!(d.held(), 1);
    assert!(d.take(class(big)).is_none(), "no magazine of that class");
    let m = d.take(class(small)).expect("the magazine put");
    assert_eq!((m.class(), m.len()), (class(small), NodeCache::CLASS_CAP));
    assert_eq!(d.held(), 0);
    assert!(d.take(class(small)).is_none(), "taken once");
}

#[test]
fn a_class_keeps_at_most_cap_and_the_rest_is_freed() {
    let d = Depot::new(1);
    let l = layout(48);
    d.put(magazine(l));
    // Refused: freed on the spot (Miri's leak check sees it go).
    d.put(magazine(l));
    assert_eq!(d.held(), 1);
    // Another class has its own room.
    d.put(magazine(layout(100)));
    assert_eq!(d.held(), 2);
    // Dropping the depot frees what it holds.
    drop(d);
}

#[test]
fn a_one_way_flow_between_two_threads_goes_round_the_depot() {
    // The producer's cache is dry and the consumer's full: the consumer
    // spills, the producer refills, and no block is lost or doubled.
    let d = Arc::new(Depot::new(2));
    let l = layout(40);
    let class = NodeCache::class(l).unwrap();
    let rounds = 3;
    let consumer = {
        let d = d.clone();
        std::thread::spawn(move || {
            let mut c = NodeCache::new();
            let mut spilled = 0;
            while spilled < rounds {
                // SAFETY: a fresh block of `l`, given up.
                if let Some(m) = unsafe { c.free_spilling(NodeCache::alloc_global(l), l) } {
                    if let Some(e) = d.put(m) {
                        drop(c.stock(e));
                    }
                    spilled += 1;
                }
            }
            c.cached()
        })
    };
    let mut p = NodeCache::new();
    let mut got = 0;
    let mut blocks = Vec::new();
    while got < 2 {
        match d.take(class) {
            Some(m) => {
                match p.load(m) {
                    Ok(Some(e)) => d.put_empty(e),
                    Ok(None) => {}
                    Err(_) => panic!("the producer's stack is dry"),
                }
                blocks.extend(core::iter::from_fn(|| p.alloc_cached(l)));
                got += 1;
            }
            None => std::thread::yield_now(),
        }
    }
    let left_in_consumer = consumer.join().unwrap();
    assert_eq!(blocks.len(), 2 * NodeCache::CLASS_CAP);
    let mut addrs: Vec<usize> = blocks.iter().map(|b| b.as_ptr() as usize).collect();
    addrs.sort_unstable();
    addrs.dedup();
    assert_eq!(addrs.len(), blocks.len(), "a block handed out twice");
    // The third is kept, or was refused while two were held.
    assert!(d.held() <= rounds - 2, "{d:?}");
    assert_eq!(left_in_consumer, 1, "the consumer keeps the block that spilled");
    for b in blocks {
        // SAFETY: each block came out of the producer's cache once.
        unsafe { NodeCache::free_global(b, l) };
    }
}

#[test]
fn a_byte_budget_keeps_more_magazines_of_small_blocks() {
    // 64 KiB per class: 4 magazines of 16-byte blocks (16 KiB each), the
    // minimum of 1 for 400-byte ones (400 KiB each, over the budget).
    let d = Depot::with_budget(1, 64 << 10);
    let (small, big) = (layout(16), layout(400));
    let class = |l| NodeCache::class(l).unwrap();
    assert_eq!(d.cap(class(small)), 4);
    assert_eq!(d.cap(class(big)), 1);
    for _ in 0..5 {
        d.put(magazine(small));
    }
    d.put(magazine(big));
    d.put(magazine(big));
    assert_eq!(d.held(), 5, "4 small kept, the 5th freed; 1 big kept");
    for _ in 0..4 {
        assert_eq!(d.take(class(small)).expect("kept").len(), NodeCache::CLASS_CAP);
    }
    assert!(d.take(class(small)).is_none(), "the fifth was freed, not kept");
    assert!(d.take(class(big)).is_some());
    assert!(d.take(class(big)).is_none(), "the second big one was freed");
}

#[test]
fn empty_arrays_go_from_a_loading_cache_to_a_spilling_one() {
    let d = Depot::new(2);
    let l = layout(40);
    // No empty array kept: a put hands none back.
    assert!(d.put(magazine(l)).is_none());
    assert_eq!(d.empties(), 0);
    d.put_empty(EmptyMagazine::alloc());
    assert_eq!(d.empties(), 1);
    // The next put hands it out, once.
    assert!(d.put(magazine(l)).is_some(), "the kept empty array");
    assert_eq!(d.empties(), 0);
    // A refused magazine (the class is at its cap of 2) hands one out too.
    d.put_empty(EmptyMagazine::alloc());
    assert!(d.put(magazine(l)).is_some());
    assert_eq!((d.held(), d.empties()), (2, 0));
}

#[test]
fn the_depot_holds_no_more_arrays_than_it_may_hold_magazines() {
    // One magazine per class: `CLASSES` arrays, full or empty, at most.
    let d = Depot::new(1);
    let l = layout(40);
    assert!(d.put(magazine(l)).is_none());
    for _ in 0..CLASSES + 8 {
        d.put_empty(EmptyMagazine::alloc());
    }
    assert_eq!((d.held(), d.empties()), (1, CLASSES - 1), "the rest were freed");
    // A magazine taken makes room for one more empty array.
    let m = d.take(NodeCache::class(l).unwrap()).expect("kept");
    d.put_empty(EmptyMagazine::alloc());
    d.put_empty(EmptyMagazine::alloc());
    assert_eq!((d.held(), d.empties()), (0, CLASSES));
    // A put keeps the magazine and hands an empty array out: still `CLASSES`.
    assert!(d.put(m).is_some());
    assert_eq!((d.held(), d.empties()), (1, CLASSES - 1));
}
