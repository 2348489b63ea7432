//! Unit tests of the striped queue's algorithm ([`Striped`] with explicit
//! stripe hints): asm-free and small under Miri.

use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::vec::Vec;

use super::Striped;
use crate::seam::lock::FutexLock;
use crate::seam::platform::Futex;

/// A futex that never sleeps: `wait` returns at once (a spurious return,
/// which the contract allows; callers loop), so the lock spins with yields.
struct YieldFutex;

// SAFETY: `wait` never sleeps, so no wake can be lost between its check and
// a sleep; the lock built on it gets its ordering from its own atomics.
unsafe impl Futex for YieldFutex {
    fn wait(_word: &AtomicU32, _expected: u32, _deadline_ns: Option<u64>) {
        std::thread::yield_now();
    }
    fn wake_one(_word: &AtomicU32) {}
    fn wake_all(_word: &AtomicU32) {}
}

type Q = Striped<u32, FutexLock<YieldFutex>>;

fn relax() {
    std::thread::yield_now();
}

/// Asserts that `seen` holds `0..n` exactly once each.
fn assert_conserved(mut seen: Vec<u32>, n: u32) {
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "an item lost or duplicated");
}

#[test]
fn stripes_round_up_to_a_power_of_two() {
    assert_eq!(Q::new(64, 0).stripes(), 1);
    assert_eq!(Q::new(64, 3).stripes(), 4);
    assert_eq!(Q::new(64, 16).stripes(), 16);
}

#[test]
fn fifo_within_a_stripe() {
    let q = Q::new(64, 4);
    for v in 0..10 {
        q.push_at(2, v, &mut relax);
    }
    assert_eq!(q.len(), 10);
    let got: Vec<u32> = (0..10).map(|_| q.pop_at(2, &mut relax).unwrap()).collect();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    assert!(q.pop_at(2, &mut relax).is_none());
    assert!(q.is_empty());
}

#[test]
fn pop_scans_other_stripes() {
    let q = Q::new(64, 4);
    q.push_at(3, 7, &mut relax);
    // A worker on stripe 0 finds the item on stripe 3.
    assert_eq!(q.pop_at(0, &mut relax), Some(7));
    assert!(q.pop_at(0, &mut relax).is_none());
}

#[test]
fn a_steal_moves_half_of_the_victims_stripe_in_order() {
    let q = Q::new(64, 4);
    for v in 0..9 {
        q.push_at(3, v, &mut relax);
    }
    // Stripe 0 is empty: the pop takes item 0 from stripe 3 and moves half
    // of the 8 left (items 1..=4) onto stripe 0.
    assert_eq!(q.pop_at(0, &mut relax), Some(0));
    assert_eq!((q.len_at(0), q.len_at(3)), (4, 4));
    let own: Vec<u32> = (0..4).map(|_| q.pop_at(0, &mut relax).unwrap()).collect();
    assert_eq!(own, [1, 2, 3, 4], "the batch keeps its order");
    assert_eq!(
        (q.len_at(0), q.len_at(3)),
        (0, 4),
        "own-stripe pops steal nothing"
    );
    // Empty again: item 5, and half of the 3 left (item 6).
    assert_eq!(q.pop_at(0, &mut relax), Some(5));
    assert_eq!((q.len_at(0), q.len_at(3)), (1, 2));
    let rest: Vec<u32> = core::iter::from_fn(|| q.pop_at(0, &mut relax)).collect();
    assert_eq!(rest, [6, 7, 8]);
}

#[test]
fn a_steal_moves_at_most_a_batch() {
    let q = Q::new(1024, 2);
    for v in 0..200 {
        q.push_at(1, v, &mut relax);
    }
    assert_eq!(q.pop_at(0, &mut relax), Some(0));
    assert_eq!(q.len_at(0), super::striped::STEAL_BATCH);
    assert_eq!(q.len(), 199);
}

#[test]
fn a_fairness_round_moves_no_batch() {
    let q = Q::new(64, 2);
    q.push_at(0, 1000, &mut relax);
    for v in 0..8 {
        q.push_at(1, v, &mut relax);
    }
    // 60 pops of stripe 0 that find it busy; the 61st is a fairness round
    // starting at stripe 1: it takes item 0 there and leaves the rest.
    for _ in 0..60 {
        let v = q.pop_at(0, &mut relax).unwrap();
        assert_eq!(v, 1000);
        q.push_at(0, v, &mut relax);
    }
    assert_eq!(q.pop_at(0, &mut relax), Some(0));
    assert_eq!((q.len_at(0), q.len_at(1)), (1, 7));
}

#[test]
fn full_stripe_spills_and_nothing_is_lost() {
    // 2 stripes of 2 slots: pushes past the second spill to the overflow.
    let q = Q::new(4, 2);
    for v in 0..20 {
        q.push_at(0, v, &mut relax);
    }
    assert_eq!(q.len(), 20);
    let seen: Vec<u32> = core::iter::from_fn(|| q.pop_at(1, &mut relax)).collect();
    assert_conserved(seen, 20);
    assert!(q.is_empty());
}

#[test]
fn a_busy_stripe_cannot_starve_another() {
    let q = Q::new(64, 4);
    q.push_at(0, 0, &mut relax);
    q.push_at(3, 99, &mut relax);
    // Stripe 0 never runs dry: every popped item goes straight back.
    for pops in 1..=61 * 4 {
        let v = q.pop_at(0, &mut relax).unwrap();
        if v == 99 {
            assert!(pops <= 61 * 4, "found after {pops} pops");
            return;
        }
        q.push_at(0, v, &mut relax);
    }
    panic!("the item on stripe 3 starved behind a busy stripe 0");
}

#[test]
fn spilled_items_are_not_starved() {
    let q = Q::new(4, 2);
    for v in 0..3 {
        q.push_at(0, v, &mut relax);
    }
    // Item 2 spilled; items 0 and 1 cycle through stripe 0 forever.
    for _ in 0..61 {
        let v = q.pop_at(0, &mut relax).unwrap();
        if v == 2 {
            return;
        }
        q.push_at(0, v, &mut relax);
    }
    panic!("a spilled item starved");
}

#[test]
fn threads_conserve_items() {
    const THREADS: u32 = 4;
    let per: u32 = if cfg!(miri) { 50 } else { 20_000 };
    // Small stripes so the run also spills and scans.
    let q = Arc::new(Q::new(16, 4));
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                for i in 0..per {
                    q.push_at(t as usize, t * per + i, &mut relax);
                    if let Some(v) = q.pop_at(t as usize, &mut relax) {
                        seen.push(v);
                    }
                }
                seen
            })
        })
        .collect();
    let mut seen: Vec<u32> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
    seen.extend(core::iter::from_fn(|| q.pop_at(0, &mut relax)));
    assert_conserved(seen, THREADS * per);
}

#[test]
fn the_default_queue_is_the_ring_on_one_worker_and_a_stripe_per_worker_on_more() {
    use crate::sched::queue::{AutoQueue, RunQueue};
    use crate::seam::test_platform::StdPlatform;
    let stripes = |workers| match AutoQueue::<StdPlatform>::with_capacity(64, workers) {
        AutoQueue::Ring(_) => None,
        AutoQueue::Striped(q) => Some(q.stripes()),
    };
    assert_eq!(stripes(1), None);
    assert_eq!(stripes(2), Some(2));
    assert_eq!(stripes(3), Some(4));
    assert_eq!(stripes(16), Some(16));
    assert_eq!(stripes(64), Some(super::striped::MAX_STRIPES));
}

/// One producer per stripe: a push from any thread (`push_at`) goes to the
/// overflow, not onto the stripe it names, so the stripe's owner finds its
/// own items first; with the shared-producer stripes the same push lands on
/// the stripe, first in its FIFO.
#[test]
fn single_producer_stripes_send_other_pushes_to_the_overflow() {
    for (q, first) in [(Q::single_producer(64, 2), 0), (Q::new(64, 2), 99)] {
        q.push_at(0, 99, &mut relax);
        for v in 0..3 {
            // SAFETY: this thread is stripe 0's only producer.
            unsafe { q.push_own(0, v, &mut relax) };
        }
        // SAFETY: as above.
        assert_eq!(unsafe { q.pop_own(0, &mut relax) }, Some(first));
        let mut rest: Vec<u32> = core::iter::from_fn(|| q.pop_at(0, &mut relax)).collect();
        rest.push(first);
        assert_conserved(rest.into_iter().map(|v| if v == 99 { 3 } else { v }).collect(), 4);
    }
}

/// With one producer per stripe, a plain thread's pop (`pop_at`) that
/// takes from another stripe moves no batch onto the stripe it was given
/// (it is not that stripe's producer); the owner's pop (`pop_own`) does.
#[test]
fn single_producer_stripes_batch_steal_only_for_the_owner() {
    let q = Q::single_producer(64, 2);
    for v in 0..8 {
        // SAFETY: this thread is stripe 0's only producer.
        unsafe { q.push_own(0, v, &mut relax) };
    }
    assert_eq!(q.pop_at(1, &mut relax), Some(0));
    assert_eq!(q.len_at(1), 0, "a plain pop moved a batch");
    // SAFETY: this thread stands in for stripe 1's owner (its only
    // producer; stripe 0's pushes above are done).
    assert_eq!(unsafe { q.pop_own(1, &mut relax) }, Some(1));
    assert_eq!(q.len_at(1), 3, "the owner's pop moves half of what is left");
    let mut seen = Vec::from([0, 1]);
    for hint in [1, 0] {
        seen.extend(core::iter::from_fn(|| q.pop_at(hint, &mut relax)));
    }
    assert_conserved(seen, 8);
}

/// A patient thief (`pop_own_patient`) waits once before it takes from a
/// stripe holding at most `PATIENT_DEPTH` items; when the stripe's owner
/// pops them during the wait, the thief leaves the stripe alone.
#[test]
fn a_patient_pop_leaves_what_the_owner_took_during_the_wait() {
    let q = Q::single_producer(64, 2);
    // SAFETY: this thread is stripe 0's only producer.
    unsafe { q.push_own(0, 7, &mut relax) };
    let mut waits = 0;
    let mut owner_got = None;
    // SAFETY: this thread stands in for both owners, one call at a time.
    let got = unsafe {
        q.pop_own_patient(1, &mut relax, &mut || {
            waits += 1;
            owner_got = q.pop_own(0, &mut relax);
        })
    };
    assert_eq!(waits, 1, "one wait per pop");
    assert_eq!(owner_got, Some(7));
    assert_eq!(got, None, "the thief took what its owner had already run");
    assert_eq!(q.len(), 0);
}

/// When nobody pops the short stripe during the wait, the thief takes it.
#[test]
fn a_patient_pop_takes_what_the_owner_left() {
    let q = Q::single_producer(64, 2);
    for v in 0..2 {
        // SAFETY: this thread is stripe 0's only producer.
        unsafe { q.push_own(0, v, &mut relax) };
    }
    let mut waits = 0;
    // SAFETY: this thread stands in for stripe 1's owner.
    let got = unsafe { q.pop_own_patient(1, &mut relax, &mut || waits += 1) };
    assert_eq!((waits, got), (1, Some(0)));
    let rest: Vec<u32> = core::iter::from_fn(|| q.pop_at(0, &mut relax)).collect();
    assert_eq!(rest, [1]);
}

/// Items pushed during the wait do not make the thief take: the owner
/// got past everything that was there before the wait, so it keeps up.
/// They stay queued for the next pop.
#[test]
fn a_patient_pop_leaves_a_stripe_whose_owner_kept_up() {
    let q = Q::single_producer(64, 2);
    // SAFETY: this thread is stripe 0's only producer.
    unsafe { q.push_own(0, 0, &mut relax) };
    // SAFETY: this thread stands in for both owners, one call at a time.
    let got = unsafe {
        q.pop_own_patient(1, &mut relax, &mut || {
            assert_eq!(q.pop_own(0, &mut relax), Some(0));
            q.push_own(0, 1, &mut relax);
        })
    };
    assert_eq!(got, None);
    assert_eq!(q.len_at(0), 1, "the newer item stays on its owner's stripe");
    // SAFETY: as above.
    assert_eq!(unsafe { q.pop_own(0, &mut relax) }, Some(1));
}

/// A stripe deeper than `PATIENT_DEPTH` is a backlog: the thief takes
/// from it at once (and moves its batch) without waiting.
#[test]
fn a_patient_pop_takes_a_backlog_at_once() {
    let q = Q::single_producer(64, 2);
    let n = super::striped::PATIENT_DEPTH as u32 + 6;
    for v in 0..n {
        // SAFETY: this thread is stripe 0's only producer.
        unsafe { q.push_own(0, v, &mut relax) };
    }
    // SAFETY: this thread stands in for stripe 1's owner.
    let got = unsafe { q.pop_own_patient(1, &mut relax, &mut || panic!("waited on a backlog")) };
    assert_eq!(got, Some(0));
    assert_eq!(q.len_at(1), (n as usize - 1) / 2, "the batch moved");
    let mut seen = Vec::from([0]);
    for hint in [1, 0] {
        seen.extend(core::iter::from_fn(|| q.pop_at(hint, &mut relax)));
    }
    assert_conserved(seen, n);
}

/// A fairness round (every 61st pop of a stripe, which first looks at the
/// other stripes) is made by a worker that has work of its own: it takes
/// from a short stripe without waiting.
#[test]
fn a_fairness_round_does_not_wait() {
    let q = Q::single_producer(256, 2);
    // SAFETY: this thread is stripe 0's only producer, then stripe 1's.
    unsafe {
        q.push_own(0, 1000, &mut relax);
        for v in 0..100 {
            q.push_own(1, v, &mut relax);
        }
    }
    let mut got = Vec::new();
    for _ in 0..61 {
        // SAFETY: this thread stands in for stripe 1's owner.
        got.push(unsafe { q.pop_own_patient(1, &mut relax, &mut || panic!("a fairness round waited")) });
    }
    assert!(
        got.contains(&Some(1000)),
        "the 61st pop took the other stripe's item"
    );
    assert!(got.iter().all(Option::is_some));
}

#[test]
fn the_pacer_takes_every_61st_pop_and_numbers_its_rounds() {
    use super::{Pacer, FAIRNESS};
    let p = Pacer::new();
    let rounds: Vec<(usize, usize)> = (1..=4 * FAIRNESS)
        .filter_map(|pop| p.tick().map(|r| (pop, r)))
        .collect();
    assert_eq!(
        rounds,
        [
            (FAIRNESS, 0),
            (2 * FAIRNESS, 1),
            (3 * FAIRNESS, 2),
            (4 * FAIRNESS, 3)
        ],
        "rounds at the wrong pops, or misnumbered"
    );
}
