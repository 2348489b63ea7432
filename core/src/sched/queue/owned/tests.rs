//! Unit tests of [`WorkerRing`]: the owner's FIFO, the fairness round that
//! serves outside pushes, and what the shared pop may not touch. Asm-free
//! and small under Miri.

use std::sync::Arc;
use std::vec::Vec;

use super::WorkerRing;
use crate::sched::queue::FAIRNESS;
use crate::seam::platform::Platform;
use crate::seam::test_platform::StdPlatform;

type Q<T> = WorkerRing<T, <StdPlatform as Platform>::Lock>;

fn relax() {
    std::thread::yield_now();
}

/// The owner's push and pop (every call in these tests runs on the test's
/// one thread, so it is the owner).
fn push_own<T>(q: &Q<T>, v: T) {
    // SAFETY: this thread is the queue's only owner (module doc).
    unsafe { q.push_owner(v, &mut relax) }
}

fn pop_own<T>(q: &Q<T>) -> Option<T> {
    // SAFETY: as in `push_own`.
    unsafe { q.pop_owner(&mut relax) }
}

#[test]
fn the_owner_s_pushes_come_back_in_order_and_are_counted() {
    let q = Q::new(4, true);
    // More than the ring holds: the owner's FIFO has no bound.
    for v in 0..10u32 {
        push_own(&q, v);
    }
    assert_eq!(q.len(), 10);
    let got: Vec<u32> = core::iter::from_fn(|| pop_own(&q)).collect();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    assert_eq!(q.len(), 0);
}

#[test]
fn a_shared_pop_never_takes_the_owner_s_items() {
    let q = Q::new(8, true);
    push_own(&q, 1u32);
    q.push(2, &mut relax);
    // Only the outside item is the shared pop's to take.
    assert_eq!(q.pop(&mut relax), Some(2));
    assert_eq!(q.pop(&mut relax), None);
    assert_eq!(q.len(), 1);
    assert_eq!(pop_own(&q), Some(1));
}

#[test]
fn the_owner_takes_outside_pushes_once_its_fifo_is_empty() {
    let q = Q::new(2, true);
    // Three outside pushes on a two-slot ring: one spills to the overflow.
    for v in 10..13u32 {
        q.push(v, &mut relax);
    }
    push_own(&q, 1);
    assert_eq!(q.len(), 4);
    let mut got: Vec<u32> = core::iter::from_fn(|| pop_own(&q)).collect();
    assert_eq!(got[0], 1, "the owner's FIFO first");
    got.sort_unstable();
    assert_eq!(got, [1, 10, 11, 12]);
}

#[test]
fn an_outside_push_waits_at_most_one_fairness_round() {
    // A yield storm: the owner pops one item and pushes it back, so its
    // FIFO never runs dry. An outside push must still come out within
    // FAIRNESS pops of being pushed, wherever the pacer stands.
    for skew in [0, 1, FAIRNESS / 2, FAIRNESS - 2, FAIRNESS - 1] {
        let q = Q::new(8, true);
        for v in 0..4u32 {
            push_own(&q, v);
        }
        for _ in 0..skew {
            let v = pop_own(&q).unwrap();
            push_own(&q, v);
        }
        q.push(99, &mut relax);
        let waited = (1..=FAIRNESS).find(|_| {
            let v = pop_own(&q).unwrap();
            if v == 99 {
                return true;
            }
            push_own(&q, v);
            false
        });
        assert!(
            waited.is_some(),
            "an outside push starved behind the owner's FIFO (skew {skew})"
        );
    }
}

#[test]
fn unowned_the_worker_calls_are_the_shared_ones() {
    // A queue of a runtime with several workers: the worker's push goes to
    // the ring, where any worker's pop (and a shared one) finds it.
    let q = Q::new(8, false);
    push_own(&q, 5u32);
    assert_eq!(q.pop(&mut relax), Some(5));
    q.push(6, &mut relax);
    assert_eq!(pop_own(&q), Some(6));
    assert_eq!(q.len(), 0);
}

#[test]
fn dropping_the_queue_drops_what_the_owner_kept() {
    let item = Arc::new(());
    {
        let q = Q::new(4, true);
        push_own(&q, item.clone());
        q.push(item.clone(), &mut relax);
        assert_eq!(Arc::strong_count(&item), 3);
    }
    assert_eq!(Arc::strong_count(&item), 1, "a queued item leaked");
}

#[test]
fn an_outside_thread_s_pushes_all_reach_the_owner() {
    let per: u32 = if cfg!(miri) { 40 } else { 20_000 };
    let q = Arc::new(Q::new(16, true));
    let pusher = {
        let q = q.clone();
        std::thread::spawn(move || {
            for v in 0..per {
                q.push(v, &mut relax);
            }
        })
    };
    // The owner keeps its own FIFO busy meanwhile (values above `per`).
    let mut seen = Vec::new();
    let mut own_next = per;
    while seen.len() < per as usize {
        push_own(&q, own_next);
        own_next += 1;
        if let Some(v) = pop_own(&q) {
            if v < per {
                seen.push(v);
            }
        }
        std::thread::yield_now();
    }
    pusher.join().unwrap();
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..per).collect::<Vec<_>>(),
        "an outside push lost or duplicated"
    );
}
