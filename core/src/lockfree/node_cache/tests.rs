//! Unit tests for the node cache; small enough for Miri, whose leak check
//! proves that every block goes back to the global allocator.

use core::alloc::Layout;
use core::ptr::NonNull;
use std::vec::Vec;

use super::{NodeCache, CLASSES};

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

#[test]
fn block_layouts_round_to_classes() {
    for (size, align, block_size, block_align) in [
        (0, 1, 16, 16),
        (1, 1, 16, 16),
        (8, 8, 16, 16),
        (16, 16, 16, 16),
        (17, 1, 32, 16),
        (24, 8, 32, 16),
        (100, 4, 112, 16),
        (512, 16, 512, 16),
        // Aligned past 16 (up to a line): whole lines.
        (0, 64, 64, 64),
        (8, 32, 64, 64),
        (100, 64, 128, 64),
        (512, 64, 512, 64),
        // Bypass: too big, or over-aligned.
        (513, 8, 520, 8),
        (4000, 8, 4000, 8),
        (600, 64, 640, 64),
        (8, 128, 128, 128),
    ] {
        let b = NodeCache::block_layout(layout(size, align));
        assert_eq!(
            (b.size(), b.align()),
            (block_size, block_align),
            "({size}, {align})"
        );
        assert_eq!(NodeCache::block_layout(b), b, "idempotent for ({size}, {align})");
    }
}

#[test]
fn classes_cover_16_to_512_then_lines_to_512() {
    assert_eq!(NodeCache::class(layout(1, 1)), Some(0));
    assert_eq!(NodeCache::class(layout(16, 8)), Some(0));
    assert_eq!(NodeCache::class(layout(17, 8)), Some(1));
    assert_eq!(NodeCache::class(layout(512, 8)), Some(31));
    assert_eq!(NodeCache::class(layout(8, 64)), Some(32));
    assert_eq!(NodeCache::class(layout(65, 32)), Some(33));
    assert_eq!(NodeCache::class(layout(512, 64)), Some(CLASSES - 1));
    assert_eq!(NodeCache::class(layout(513, 8)), None);
    assert_eq!(NodeCache::class(layout(16, 128)), None);
    // Every class's block layout maps back to it.
    for c in 0..CLASSES {
        let size = NodeCache::class_size(c);
        let align = if c < 32 { 16 } else { super::LINE };
        assert_eq!(NodeCache::class(layout(size, align)), Some(c), "class {c}");
    }
}

/// Blocks of a type aligned to a cache line are line-aligned and
/// line-sized, so no two share a line (two mailboxes written from two
/// workers would otherwise contend for it: docs/benchmarks.md, "Blocks
/// that share a cache line").
#[test]
fn line_class_blocks_own_their_lines() {
    let mut c = NodeCache::new();
    let l = layout(200, 64);
    let blocks: Vec<_> = (0..8).map(|_| c.alloc(l)).collect();
    for b in &blocks {
        assert_eq!(
            b.as_ptr() as usize % super::LINE,
            0,
            "a line-class block starts a line"
        );
    }
    assert_eq!(NodeCache::block_layout(l).size() % super::LINE, 0, "and ends one");
    for b in blocks {
        // SAFETY: blocks from `c.alloc(l)`, each freed once.
        unsafe { c.free(b, l) };
    }
    assert_eq!(c.cached(), 8, "line-class blocks are cached");
}

#[test]
fn freed_block_is_reused_lifo() {
    let mut c = NodeCache::new();
    let l = layout(40, 8);
    let a = c.alloc(l);
    let b = c.alloc(l);
    assert_ne!(a, b);
    assert_eq!(a.as_ptr() as usize % 16, 0);
    // SAFETY: blocks from `c.alloc(l)`, each freed once.
    unsafe {
        c.free(a, l);
        c.free(b, l);
    }
    assert_eq!(c.cached(), 2);
    assert_eq!(c.alloc(l), b, "last freed, first reused");
    // A layout of the same class gets the other block.
    assert_eq!(c.alloc(layout(33, 1)), a);
    assert_eq!(c.cached(), 0);
    // A different class does not.
    let d = c.alloc(layout(16, 8));
    assert!(d != a && d != b);
    // SAFETY: each block back once, with a layout of its class.
    unsafe {
        c.free(a, layout(48, 16));
        c.free(b, l);
        c.free(d, layout(16, 8));
    }
    assert_eq!(c.cached(), 3);
}

#[test]
fn blocks_are_writable_over_the_requested_size() {
    let mut c = NodeCache::new();
    for size in [1, 15, 16, 31, 200, 512, 600] {
        let l = layout(size, 8);
        let p = c.alloc(l);
        // SAFETY: a block for `l` has at least `size` writable bytes.
        unsafe {
            p.as_ptr().write_bytes(0xAB, size);
            c.free(p, l);
        }
    }
}

#[test]
fn cap_per_class() {
    let mut c = NodeCache::new();
    let l = layout(64, 8);
    let blocks: Vec<_> = (0..NodeCache::CLASS_CAP + 10).map(|_| c.alloc(l)).collect();
    for p in blocks {
        // SAFETY: from `c.alloc(l)`, freed once.
        unsafe { c.free(p, l) };
    }
    assert_eq!(
        c.cached(),
        NodeCache::CLASS_CAP,
        "the surplus went to the allocator"
    );
    // Another class has its own cap.
    let p = c.alloc(layout(8, 8));
    // SAFETY: as above.
    unsafe { c.free(p, layout(8, 8)) };
    assert_eq!(c.cached(), NodeCache::CLASS_CAP + 1);
    c.clear();
    assert_eq!(c.cached(), 0);
}

#[test]
fn large_and_over_aligned_layouts_bypass_the_cache() {
    let mut c = NodeCache::new();
    for l in [layout(4096, 8), layout(600, 64), layout(32, 128), layout(0, 256)] {
        let p = c.alloc(l);
        assert_eq!(p.as_ptr() as usize % l.align(), 0);
        // SAFETY: from `c.alloc(l)`, freed once.
        unsafe { c.free(p, l) };
        assert_eq!(c.cached(), 0, "{l:?}");
    }
}

#[test]
fn interchangeable_with_the_global_allocator() {
    let l = layout(24, 8);
    let mut c = NodeCache::new();
    // Cache block, freed globally (by the block layout).
    let p = c.alloc(l);
    // SAFETY: a block for `l`, freed once.
    unsafe { NodeCache::free_global(p, l) };
    // Global block, freed into the cache, then reused.
    let g = NodeCache::alloc_global(l);
    // SAFETY: a block for `l`, freed once.
    unsafe { c.free(g, l) };
    assert_eq!(c.alloc(l), g);
    // And `dealloc` with the block layout itself works (it is what
    // `free_global` does, and what `Node::layout` users rely on).
    // SAFETY: allocated with `block_layout(l)`.
    unsafe { alloc::alloc::dealloc(g.as_ptr(), NodeCache::block_layout(l)) };
}

/// A block in flight between threads.
struct Block(core::ptr::NonNull<u8>);

// SAFETY: a block is plain global-allocator memory owned by whoever holds it.
unsafe impl Send for Block {}

#[test]
fn blocks_move_between_caches_and_threads() {
    let l = layout(48, 8);
    let mut a = NodeCache::new();
    let blocks: Vec<Block> = (0..8).map(|_| Block(a.alloc(l))).collect();
    // Another worker frees them into its cache, then its cache moves on.
    let b = std::thread::spawn(move || {
        let mut b = NodeCache::new();
        for p in blocks {
            // SAFETY: blocks for `l` from cache `a`, each freed once.
            unsafe { b.free(p.0, l) };
        }
        b
    })
    .join()
    .unwrap();
    assert_eq!(b.cached(), 8);
    drop(a);
    drop(b); // frees all 8 (Miri's leak check)
}

#[test]
fn drop_frees_everything() {
    let mut c = NodeCache::new();
    let mut blocks = Vec::new();
    for size in (1..=512).step_by(37) {
        blocks.push((c.alloc(layout(size, 8)), layout(size, 8)));
    }
    for (p, l) in blocks {
        // SAFETY: from `c.alloc(l)`, freed once.
        unsafe { c.free(p, l) };
    }
    assert!(c.cached() > 0);
    drop(c);
}

/// Fills class `l`'s list of `c` to the cap with fresh blocks; returns them.
fn fill(c: &mut NodeCache, l: Layout) -> Vec<usize> {
    let blocks: Vec<_> = (0..NodeCache::CLASS_CAP)
        .map(|_| NodeCache::alloc_global(l))
        .collect();
    for &b in &blocks {
        // SAFETY: a fresh block of `l`, given up here.
        let spilled = unsafe { c.free_spilling(b, l) };
        assert!(spilled.is_none(), "spilled before the cap");
    }
    blocks.iter().map(|b| b.as_ptr() as usize).collect()
}

#[test]
fn a_full_list_spills_whole_and_loads_into_a_dry_cache() {
    let l = layout(40, 8);
    let mut a = NodeCache::new();
    let mut freed = fill(&mut a, l);
    assert_eq!(a.cached(), NodeCache::CLASS_CAP);
    // One more: the full list leaves as a magazine, the block stays.
    let extra = NodeCache::alloc_global(l);
    // SAFETY: as in `fill`.
    let m = unsafe { a.free_spilling(extra, l) }.expect("a full list spills");
    assert_eq!(
        (m.len(), m.class()),
        (NodeCache::CLASS_CAP, NodeCache::class(l).unwrap())
    );
    assert_eq!(a.cached(), 1);
    assert_eq!(a.alloc_cached(l), Some(extra));
    assert_eq!(a.alloc_cached(l), None, "the spilled blocks stayed in `a`");

    let mut b = NodeCache::new();
    assert!(
        matches!(b.load(m), Ok(None)),
        "a dry cache takes the magazine (and had no array to give back)"
    );
    assert_eq!(b.cached(), NodeCache::CLASS_CAP);
    // Every block comes out once, the last freed first.
    let mut got: Vec<usize> = core::iter::from_fn(|| b.alloc_cached(l))
        .map(|p| p.as_ptr() as usize)
        .collect();
    assert_eq!(got.first(), freed.last());
    assert_eq!(b.cached(), 0);
    got.sort_unstable();
    freed.sort_unstable();
    assert_eq!(got, freed);
    for p in got.into_iter().chain([extra.as_ptr() as usize]) {
        // SAFETY: each block came out of a cache once and is given up.
        unsafe { NodeCache::free_global(NonNull::new(p as *mut u8).unwrap(), l) };
    }
}

#[test]
fn a_cache_with_blocks_hands_a_magazine_back() {
    let l = layout(64, 16);
    let mut a = NodeCache::new();
    fill(&mut a, l);
    // SAFETY: as in `fill`.
    let m = unsafe { a.free_spilling(NodeCache::alloc_global(l), l) }.unwrap();
    // `a` holds one block of the class again: the magazine comes back
    // whole, and dropping it frees its blocks (Miri's leak check).
    let m = a.load(m).expect_err("a non-empty stack keeps its blocks");
    assert_eq!(m.len(), NodeCache::CLASS_CAP);
    assert_eq!(a.cached(), 1);
    drop(m);
    // Another class's list is empty: that does not make room.
    let other = layout(16, 16);
    assert_ne!(NodeCache::class(other), NodeCache::class(l));
    assert_eq!(a.alloc_cached(other), None);
}

#[test]
fn an_uncached_layout_never_spills() {
    let big = layout(4000, 8);
    let mut c = NodeCache::new();
    for _ in 0..3 {
        // SAFETY: a fresh block of `big`, given up (freed: not cached).
        assert!(unsafe { c.free_spilling(NodeCache::alloc_global(big), big) }.is_none());
    }
    assert_eq!(c.cached(), 0);
    assert_eq!(c.alloc_cached(big), None);
}

#[test]
fn a_cached_block_is_never_written() {
    // Every byte of a block is as the user left it when it comes out of a
    // cache again: on the same cache, and after a spill and a load into
    // another (an intrusive free list wrote its link into the first word).
    let l = layout(48, 8);
    let size = NodeCache::block_layout(l).size();
    let mut a = NodeCache::new();
    let blocks: Vec<_> = (0..=NodeCache::CLASS_CAP).map(|_| a.alloc(l)).collect();
    let mut spilled = None;
    for (i, &p) in blocks.iter().enumerate() {
        // SAFETY: a block of `l` has `size` writable bytes; then it is
        // given up, once.
        unsafe {
            p.as_ptr().write_bytes(i as u8 | 1, size);
            if let Some(m) = a.free_spilling(p, l) {
                spilled = Some(m);
            }
        }
    }
    let index: std::collections::HashMap<NonNull<u8>, usize> =
        blocks.iter().enumerate().map(|(i, &b)| (b, i)).collect();
    let check = |p: NonNull<u8>| {
        let i = *index.get(&p).expect("one of ours");
        // SAFETY: a live block of `size` bytes, written above.
        let bytes = unsafe { core::slice::from_raw_parts(p.as_ptr(), size) };
        assert!(
            bytes.iter().all(|&x| x == i as u8 | 1),
            "block {i} written while cached"
        );
        p
    };
    let last = check(a.alloc_cached(l).expect("the block that spilled"));
    let mut b = NodeCache::new();
    assert!(b.load(spilled.expect("spilled at the cap")).is_ok());
    let out: Vec<_> = core::iter::from_fn(|| b.alloc_cached(l)).map(check).collect();
    assert_eq!(out.len(), NodeCache::CLASS_CAP);
    for p in out.into_iter().chain([last]) {
        // SAFETY: each block came out of a cache once and is given up.
        unsafe { NodeCache::free_global(p, l) };
    }
}

/// Fills class `l`'s stack of `c` to the cap and spills it.
fn spill_one(c: &mut NodeCache, l: Layout) -> super::Magazine {
    fill(c, l);
    // SAFETY: a fresh block of `l`, given up.
    let m = unsafe { c.free_spilling(NodeCache::alloc_global(l), l) };
    // The block that spilled it, back to the allocator.
    let extra = c.alloc_cached(l).expect("the spilling block stays");
    // SAFETY: it came out of the cache once.
    unsafe { NodeCache::free_global(extra, l) };
    m.expect("a full stack spills")
}

#[test]
fn a_loaded_cache_keeps_one_old_array_and_hands_on_the_rest() {
    let l = layout(40, 8);
    let mut producer = NodeCache::new();
    let mut consumer = NodeCache::new();
    let drain = |p: &mut NodeCache| {
        while let Some(b) = p.alloc_cached(l) {
            // SAFETY: out of the cache once, given up.
            unsafe { NodeCache::free_global(b, l) };
        }
    };
    // First load: the class had no array.
    assert!(matches!(producer.load(spill_one(&mut consumer, l)), Ok(None)));
    assert!(!producer.has_spare());
    drain(&mut producer);
    // Second: the first magazine's array, now empty, becomes the spare.
    assert!(matches!(producer.load(spill_one(&mut consumer, l)), Ok(None)));
    assert!(producer.has_spare());
    drain(&mut producer);
    // Third: a spare is held, so the old array is handed on ...
    let empty = producer
        .load(spill_one(&mut consumer, l))
        .expect("the stack was empty")
        .expect("a second empty array goes back");
    // ... to a cache that spills: it keeps it as its spare, and its next
    // spill restarts its stack in it.
    assert!(!consumer.has_spare(), "each spill used a new array");
    assert!(consumer.stock(empty).is_none(), "kept as the spare");
    assert!(consumer.has_spare());
    let m = spill_one(&mut consumer, l);
    assert!(!consumer.has_spare(), "the spill restarted in the spare");
    // A cache with a spare hands a stocked array back.
    drain(&mut producer);
    let e = producer.load(m).expect("empty").expect("handed on");
    assert!(producer.stock(e).is_some(), "one spare at most");
    assert_eq!(producer.cached(), NodeCache::CLASS_CAP);
}
