//! Loom models of `smarm_core::sync::block_arc` (a mailbox's shared half):
//! `BlockArc` and `BlockWeak` on the real code, over a counting block
//! allocator:
//! - an upgrade racing the last strong reference's drop either gets a
//!   reference to the live value (and the value outlives it) or finds it
//!   gone; the value is dropped once, the block freed once, after the weak
//!   reference's drop;
//! - the last strong and the last weak reference dropped on two threads at
//!   once: one drop of the value, one free, after both;
//! - clones and drops of both kinds on two threads: the value dropped
//!   once, after every strong reference's use.
//!
//! A double free or a drop missed fails the counts; a double drop fails
//! the value's own check, and a read of the value not ordered before its
//! drop (or after its making) is a causality violation.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_block_arc`
#![cfg(smarm_loom)]

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize as StdUsize, Ordering as StdOrdering};

use loom::thread;

use smarm_core::sync::block_arc::{BlockArc, BlockWeak, Blocks};

/// Blocks and drops, process-wide: one model at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
static FREED: StdUsize = StdUsize::new(0);
static DROPPED: StdUsize = StdUsize::new(0);

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn reset() {
    FREED.store(0, StdOrdering::SeqCst);
    DROPPED.store(0, StdOrdering::SeqCst);
}

fn freed() -> usize {
    FREED.load(StdOrdering::SeqCst)
}

fn dropped() -> usize {
    DROPPED.load(StdOrdering::SeqCst)
}

/// The global allocator, counting frees.
struct Counted;

impl Blocks for Counted {
    fn alloc(layout: Layout) -> NonNull<u8> {
        // SAFETY: the block's layout has a non-zero size.
        NonNull::new(unsafe { std::alloc::alloc(layout) }).expect("allocation")
    }

    unsafe fn free(block: NonNull<u8>, layout: Layout) {
        FREED.fetch_add(1, StdOrdering::SeqCst);
        // SAFETY: `Blocks::free`'s contract: from `alloc`, with `layout`.
        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
    }
}

/// A value in a loom cell (a read not ordered before the drop's write is
/// a causality violation) that counts its drops.
struct Value(loom::cell::UnsafeCell<usize>);

// SAFETY: shared references only read the cell; the one write is in the
// drop, which the counts order after every other holder's reads.
unsafe impl Sync for Value {}

impl Value {
    fn new() -> Self {
        Value(loom::cell::UnsafeCell::new(42))
    }

    fn read(&self) -> usize {
        // SAFETY: only the drop writes (see the `Sync` impl).
        self.0.with(|p| unsafe { *p })
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        self.0.with_mut(|p| {
            // SAFETY: `&mut self`.
            unsafe {
                assert_eq!(*p, 42, "the value was dropped twice");
                *p = 0;
            }
        });
        DROPPED.fetch_add(1, StdOrdering::SeqCst);
    }
}

type Arc = BlockArc<Value, Counted>;

#[test]
fn an_upgrade_racing_the_last_strong_drop() {
    let _one = serial();
    loom::model(|| {
        reset();
        let (a, w) = Arc::new_with_weak(Value::new);
        let upgrader = thread::spawn(move || {
            let got = w.upgrade().map(|s| s.read());
            drop(w);
            got
        });
        drop(a);
        let got = upgrader.join().unwrap();
        assert!(got.is_none() || got == Some(42), "an upgrade read {got:?}");
        assert_eq!(dropped(), 1, "the value is dropped once");
        assert_eq!(freed(), 1, "the block is freed once, after both");
    });
}

#[test]
fn the_last_strong_and_weak_dropped_at_once() {
    let _one = serial();
    loom::model(|| {
        reset();
        let (a, w) = Arc::new_with_weak(Value::new);
        let t = thread::spawn(move || drop(w));
        drop(a);
        t.join().unwrap();
        assert_eq!(dropped(), 1);
        assert_eq!(freed(), 1);
    });
}

#[test]
fn clones_and_drops_of_both_kinds_on_two_threads() {
    let _one = serial();
    loom::model(|| {
        reset();
        let a = Arc::new(Value::new);
        let b = a.clone();
        let w = Arc::downgrade(&a);
        let t = thread::spawn(move || {
            let w2: BlockWeak<Value, Counted> = w.clone();
            drop(w);
            assert_eq!(b.read(), 42);
            drop(b);
            w2.upgrade().map(|s| s.read())
        });
        assert_eq!(a.read(), 42);
        drop(a);
        let got = t.join().unwrap();
        assert!(got.is_none() || got == Some(42), "an upgrade read {got:?}");
        assert_eq!(dropped(), 1);
        assert_eq!(freed(), 1);
    });
}
