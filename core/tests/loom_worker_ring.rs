#![cfg(smarm_loom)]
//! Loom models of `smarm_core::queue::WorkerRing` with the one worker's own
//! FIFO (`owned`): the worker pushes and pops its own items while a plain
//! thread pushes onto the ring, and the worker's duty moves to another
//! thread mid-way, as `Shared::hand_off` moves it (a Release store the
//! successor reads with Acquire). The own FIFO is a loom `UnsafeCell`, so a
//! successor whose calls were not ordered after its predecessor's would be
//! reported; every model asserts conservation (each item popped exactly
//! once).
//!
//! ```text
//! RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom \
//!     LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_worker_ring
//! ```

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_platform::LoomP;
use smarm_core::lock::FutexLock;
use smarm_core::queue::WorkerRing;

/// A two-slot ring: a third outside push spills to the overflow.
type Q = WorkerRing<u32, FutexLock<LoomP>>;

fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

fn relax() {
    thread::yield_now();
}

/// The worker's push (the caller serves the worker: see each model).
fn push_own(q: &Q, v: u32) {
    // SAFETY: each model makes one thread at a time the worker, each
    // ordered after the previous one.
    unsafe { q.push_owner(v, &mut relax) }
}

/// The worker's pop (as `push_own`).
fn pop_own(q: &Q) -> Option<u32> {
    // SAFETY: as in `push_own`.
    unsafe { q.pop_owner(&mut relax) }
}

/// Asserts that `seen` holds `0..n` exactly once each.
fn assert_conserved(mut seen: Vec<u32>, n: u32) {
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "an item lost or duplicated");
}

/// The worker pushes two of its own and pops one while a plain thread
/// pushes three onto the two-slot ring (one spills); what is left is popped
/// by the worker after the join.
#[test]
fn an_outside_push_races_the_worker_s_own_calls() {
    model(|| {
        let q = Arc::new(Q::new(2, true));
        let outside = {
            let q = q.clone();
            thread::spawn(move || {
                for v in 2..5 {
                    q.push(v, &mut relax);
                }
            })
        };
        push_own(&q, 0);
        let mut seen: Vec<u32> = pop_own(&q).into_iter().collect();
        push_own(&q, 1);
        outside.join().unwrap();
        seen.extend(core::iter::from_fn(|| pop_own(&q)));
        assert_conserved(seen, 5);
        assert_eq!(q.len(), 0);
    });
}

/// The worker's duty moves to a second thread (`Shared::hand_off`'s
/// Release store, read with Acquire by the successor) with items in the
/// own FIFO; a plain thread pushes meanwhile. The successor pops what its
/// predecessor kept; loom's cell checks its calls are ordered after them.
#[test]
fn the_worker_s_duty_moves_with_its_fifo() {
    model(|| {
        let q = Arc::new(Q::new(2, true));
        let handed = Arc::new(AtomicBool::new(false));
        let successor = {
            let (q, handed) = (q.clone(), handed.clone());
            thread::spawn(move || {
                // Acquire: pairs with the predecessor's Release below.
                while !handed.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                let mut seen = Vec::new();
                push_own(&q, 2);
                seen.extend(core::iter::from_fn(|| pop_own(&q)));
                seen
            })
        };
        let outside = {
            let q = q.clone();
            thread::spawn(move || q.push(3, &mut relax))
        };
        push_own(&q, 0);
        push_own(&q, 1);
        let mut seen: Vec<u32> = pop_own(&q).into_iter().collect();
        // Release: the hand-off (everything this worker did is visible to
        // its successor).
        handed.store(true, Ordering::Release);
        seen.extend(successor.join().unwrap());
        outside.join().unwrap();
        // An outside push the successor missed (pushed after its last pop).
        seen.extend(q.pop(&mut relax));
        assert_conserved(seen, 4);
    });
}
