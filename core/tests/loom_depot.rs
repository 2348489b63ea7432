#![cfg(smarm_loom)]
//! Loom models of `smarm_core::node_depot::NodeDepot` (the runtime-wide
//! level behind the workers' node caches), with the real lock a runtime
//! uses (`FutexLock`): magazines put and taken concurrently are each taken
//! at most once, a refused one is gone (freed), and the depot's count
//! agrees with what it holds; an empty array given while a spilling cache
//! puts a magazine is handed to it once or kept.
//!
//! ```text
//! RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom \
//!     LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_depot
//! ```

#[path = "common/loom_platform.rs"]
mod loom_platform;

use std::alloc::Layout;

use loom::sync::Arc;
use loom::thread;
use loom_platform::LoomP;
use smarm_core::lock::FutexLock;
use smarm_core::node_cache::{EmptyMagazine, Magazine, NodeCache};
use smarm_core::node_depot::NodeDepot;

type Depot = NodeDepot<FutexLock<LoomP>>;

/// Runs `f` under loom with a preemption bound of 2 unless
/// `LOOM_MAX_PREEMPTIONS` asks for another.
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

fn layout() -> Layout {
    Layout::from_size_align(40, 8).unwrap()
}

fn class() -> usize {
    NodeCache::class(layout()).unwrap()
}

/// A full magazine: a cache filled to the cap, then one more free (the
/// spilling cache keeps that block and frees it when dropped).
fn magazine() -> Magazine {
    let l = layout();
    let mut c = NodeCache::new();
    for _ in 0..NodeCache::CLASS_CAP {
        // SAFETY: a fresh block of `l`, given up.
        assert!(unsafe { c.free_spilling(NodeCache::alloc_global(l), l) }.is_none());
    }
    // SAFETY: as above.
    unsafe { c.free_spilling(NodeCache::alloc_global(l), l) }.expect("spills at the cap")
}

#[test]
fn a_put_racing_a_take_is_taken_once_or_kept() {
    model(|| {
        let d = Arc::new(Depot::new(2));
        let m = magazine();
        let putter = {
            let d = d.clone();
            thread::spawn(move || d.put(m))
        };
        let taken = d.take(class());
        putter.join().unwrap();
        if let Some(m) = &taken {
            assert_eq!((m.class(), m.len()), (class(), NodeCache::CLASS_CAP));
        }
        // Taken, or still held: never both, never neither.
        assert_eq!(usize::from(taken.is_some()) + d.held(), 1);
    });
}

#[test]
fn two_puts_over_the_cap_and_a_take_conserve_what_is_kept() {
    model(|| {
        let d = Arc::new(Depot::new(1));
        let putters: Vec<_> = (0..2)
            .map(|_| {
                let d = d.clone();
                let m = magazine();
                thread::spawn(move || d.put(m))
            })
            .collect();
        let taken = d.take(class());
        for p in putters {
            p.join().unwrap();
        }
        // The class keeps one: with one taken early, the other was kept;
        // taken late, the refused one was freed.
        assert!(d.held() <= 1, "over the cap: {d:?}");
        assert!(
            usize::from(taken.is_some()) + d.held() >= 1,
            "both magazines lost: {d:?}"
        );
        // What the count says is there comes out, once.
        let held = d.held();
        assert_eq!(d.take(class()).is_some(), held == 1, "{d:?}");
        assert_eq!(d.held(), 0);
        assert!(d.take(class()).is_none(), "a magazine taken twice");
    });
}

#[test]
fn an_empty_array_given_while_a_cache_spills_is_handed_out_once_or_kept() {
    model(|| {
        let d = Arc::new(Depot::new(2));
        let e = EmptyMagazine::alloc();
        let m = magazine();
        let giver = {
            let d = d.clone();
            thread::spawn(move || d.put_empty(e))
        };
        let got = d.put(m);
        giver.join().unwrap();
        // Handed to the spiller (the give came first) or kept: never both,
        // never lost to neither.
        assert_eq!(usize::from(got.is_some()) + d.empties(), 1, "{d:?}");
        assert_eq!(d.held(), 1, "the magazine is kept");
    });
}
