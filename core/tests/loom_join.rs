//! Loom models of a spawn's join cell (`smarm_core::loom_join`): the real
//! join handle and the real completion paths over a loom platform, with a
//! thread as the joiner (it sleeps on the slot's word through a futex built
//! from a loom condvar). A lost wake-up is a deadlock, which loom reports;
//! the cell's reference count is checked by its two owners letting go on
//! different threads (a free that is not ordered after the other owner's
//! last use is a data race on the slot's cells, which loom reports, and a
//! result dropped twice or never fails the drop count).
//!
//! ```text
//! RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom \
//!     LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_join
//! ```
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use smarm_core::loom_join::spawned;
use smarm_core::JoinError;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

/// A result that counts its drops.
struct Counted(u32, Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }
}

/// The body finishes on one thread while the handle joins on another: the
/// joiner gets the value (the wake is not lost), which is dropped once.
#[test]
fn a_join_racing_the_finish_gets_the_value() {
    model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (h, fin) = spawned::<Counted, LoomP>(1);
        let d = drops.clone();
        let t = thread::spawn(move || fin.finish(Counted(7, d)));
        let v = h.join().map_err(|_| ()).expect("the body finished");
        assert_eq!(v.0, 7);
        drop(v);
        t.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 1);
    });
}

/// The handle is dropped (detached) while the body finishes: whichever
/// lets go last frees the cell, and the untaken result is dropped once.
#[test]
fn a_detach_racing_the_finish_drops_the_result_once() {
    model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (h, fin) = spawned::<Counted, LoomP>(1);
        let d = drops.clone();
        let t = thread::spawn(move || fin.finish(Counted(7, d)));
        drop(h);
        t.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 1);
    });
}

/// The entry is dropped unrun while the handle joins: the joiner is woken
/// and told the actor was cancelled, with its id.
#[test]
fn a_join_racing_an_unrun_drop_reports_cancelled() {
    model(|| {
        let (h, fin) = spawned::<u32, LoomP>(9);
        let t = thread::spawn(move || fin.drop_unrun());
        match h.join() {
            Err(JoinError::Cancelled { id, .. }) => assert_eq!(id, 9),
            other => panic!("{other:?}"),
        }
        t.join().unwrap();
    });
}
