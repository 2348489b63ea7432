//! The counts, sequentially (run under Miri too: its leak check covers the
//! free, its borrow checks the raw field accesses).

use super::*;
use std::sync::atomic::AtomicUsize as StdUsize;
use std::sync::Arc;
use std::sync::Mutex;

/// The global allocator, counting blocks out and back.
struct Counted;

static OUT: StdUsize = StdUsize::new(0);
static BACK: StdUsize = StdUsize::new(0);
/// The counts are process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

impl Blocks for Counted {
    fn alloc(layout: Layout) -> NonNull<u8> {
        OUT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: `Inner` has a non-zero size.
        NonNull::new(unsafe { std::alloc::alloc(layout) }).expect("allocation")
    }

    unsafe fn free(block: NonNull<u8>, layout: Layout) {
        BACK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the contract: from `alloc` with `layout`.
        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
    }
}

fn counts() -> (usize, usize) {
    (
        OUT.load(std::sync::atomic::Ordering::Relaxed),
        BACK.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// A value that counts its drops.
struct Probe(Arc<StdUsize>);

impl Drop for Probe {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn probe() -> (Arc<StdUsize>, impl FnOnce() -> Probe) {
    let drops = Arc::new(StdUsize::new(0));
    let d = drops.clone();
    (drops, move || Probe(d))
}

fn drops(d: &Arc<StdUsize>) -> usize {
    d.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn the_last_strong_drops_the_value_and_frees_the_block() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d, make) = probe();
    let (out, back) = counts();
    let a = BlockArc::<Probe, Counted>::new(make);
    assert_eq!(counts(), (out + 1, back));
    let b = a.clone();
    assert_eq!(BlockArc::strong_count(&a), 2);
    assert!(BlockArc::ptr_eq(&a, &b));
    drop(a);
    assert_eq!(drops(&d), 0, "a strong reference is left");
    assert_eq!(counts(), (out + 1, back));
    drop(b);
    assert_eq!(drops(&d), 1);
    assert_eq!(counts(), (out + 1, back + 1));
}

#[test]
fn a_weak_reference_keeps_the_block_not_the_value() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d, make) = probe();
    let (out, back) = counts();
    let a = BlockArc::<Probe, Counted>::new(make);
    let w = BlockArc::downgrade(&a);
    assert_eq!(BlockArc::weak_count(&a), 1);
    let up = w.upgrade().expect("a strong reference is alive");
    assert_eq!(BlockArc::strong_count(&a), 2);
    drop(up);
    drop(a);
    assert_eq!(drops(&d), 1, "the last strong reference drops the value");
    assert_eq!(counts(), (out + 1, back), "the weak reference keeps the block");
    assert!(w.upgrade().is_none(), "no upgrade once the value is dropped");
    let w2 = w.clone();
    drop(w);
    assert_eq!(counts(), (out + 1, back));
    drop(w2);
    assert_eq!(counts(), (out + 1, back + 1));
    assert_eq!(drops(&d), 1, "the value is dropped once");
}

#[test]
fn new_with_weak_counts_both_and_the_last_of_either_frees() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The weak reference outlives the strong one.
    let (d, make) = probe();
    let (out, back) = counts();
    let (a, w) = BlockArc::<Probe, Counted>::new_with_weak(make);
    assert_eq!((BlockArc::strong_count(&a), BlockArc::weak_count(&a)), (1, 1));
    drop(a);
    assert_eq!(drops(&d), 1);
    assert_eq!(counts(), (out + 1, back));
    drop(w);
    assert_eq!(counts(), (out + 1, back + 1));
    // The strong reference outlives the weak one.
    let (d, make) = probe();
    let (a, w) = BlockArc::<Probe, Counted>::new_with_weak(make);
    drop(w);
    assert_eq!(BlockArc::weak_count(&a), 0);
    assert_eq!(counts(), (out + 2, back + 1));
    drop(a);
    assert_eq!(drops(&d), 1);
    assert_eq!(counts(), (out + 2, back + 2));
}

#[test]
fn a_weak_reference_through_raw_round_trips() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d, make) = probe();
    let (out, back) = counts();
    let (a, w) = BlockArc::<Probe, Counted>::new_with_weak(make);
    let raw = BlockWeak::into_raw(w);
    assert_eq!(BlockArc::weak_count(&a), 1, "into_raw keeps the reference");
    // SAFETY: from `into_raw` of this type, once.
    let w = unsafe { BlockWeak::<Probe, Counted>::from_raw(raw) };
    assert!(w.upgrade().is_some_and(|b| BlockArc::ptr_eq(&a, &b)));
    drop(a);
    assert_eq!(drops(&d), 1);
    drop(w);
    assert_eq!(counts(), (out + 1, back + 1));
}

#[test]
fn a_large_value_is_built_in_place_and_read_back() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d, make) = probe();
    let a = BlockArc::<([u64; 40], Probe), Counted>::new(|| (core::array::from_fn(|i| i as u64 * 3), make()));
    let b = a.clone();
    assert_eq!(b.0[39], 117);
    assert_eq!(a.0.iter().sum::<u64>(), 3 * (0..40).sum::<u64>());
    drop((a, b));
    assert_eq!(drops(&d), 1);
}

/// A block asks its allocator for whole cache lines (the block cache's
/// line classes), so two blocks never share one: a mailbox's counts and
/// queue written by the workers its actors run on would otherwise move
/// a line between two unrelated pairs' cores on every message
/// (docs/benchmarks.md, "Blocks that share a cache line").
#[test]
fn a_block_takes_whole_cache_lines() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let l = Layout::new::<Inner<u8>>();
    assert_eq!(l.align(), 64, "line-aligned");
    assert_eq!(l.size() % 64, 0, "line-sized");
    let a = BlockArc::<u64, Counted>::new(|| 7);
    let p = (&*a as *const u64).addr();
    assert_eq!(
        p % 64,
        2 * core::mem::size_of::<usize>(),
        "the value follows the counts in the block's first line"
    );
    assert_eq!(*a, 7);
}
