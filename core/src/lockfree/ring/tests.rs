//! Unit tests for the ring, single-threaded and with std threads; small enough
//! for Miri. The loom models are in `core/tests/loom_ring.rs`.

use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::sync::{Arc, Barrier};
use std::vec::Vec;

use super::Ring;

/// Upper bound on any retry loop in these tests: a hang becomes a panic.
const MAX_SPINS: usize = 50_000_000;

fn yield_now() {
    std::thread::yield_now();
}

/// A `relax` that must never be called.
fn no_relax() -> impl FnMut() {
    || panic!("relax called: the ring waited where it should not")
}

#[test]
fn capacity_rounds_up_to_a_power_of_two_at_least_2() {
    for (asked, got) in [(0, 2), (1, 2), (2, 2), (3, 4), (5, 8), (8, 8), (1000, 1024)] {
        assert_eq!(Ring::<u8>::with_capacity(asked).capacity(), got, "{asked}");
    }
}

#[test]
fn fifo_single_thread() {
    let r: Ring<u32> = Ring::with_capacity(8);
    assert!(r.is_empty());
    assert_eq!(r.pop(&mut no_relax()), None);
    for i in 0..5 {
        r.push(i, &mut no_relax()).unwrap();
    }
    assert_eq!(r.len(), 5);
    for i in 0..5 {
        assert_eq!(r.pop(&mut no_relax()), Some(i));
    }
    assert_eq!(r.pop(&mut no_relax()), None);
    assert!(r.is_empty());
}

fn full_at_capacity<const FIX: bool>() {
    let r: Ring<u32, FIX> = Ring::with_capacity(4);
    for i in 0..4 {
        r.push(i, &mut no_relax()).unwrap();
    }
    assert_eq!(r.len(), 4);
    // Truly full: Err at once, with the value handed back, no waiting.
    assert_eq!(r.push(99, &mut no_relax()), Err(99));
    assert_eq!(r.pop(&mut no_relax()), Some(0));
    r.push(4, &mut no_relax()).unwrap();
    assert_eq!(r.push(100, &mut no_relax()), Err(100));
    for i in 1..5 {
        assert_eq!(r.pop(&mut no_relax()), Some(i));
    }
}

#[test]
fn full_at_capacity_returns_the_value() {
    full_at_capacity::<true>();
    full_at_capacity::<false>();
}

#[test]
fn wrap_around_many_laps() {
    let r: Ring<usize> = Ring::with_capacity(4);
    let mut next_in = 0;
    let mut next_out = 0;
    // Varying batch sizes so head and tail cross every cell at every offset.
    for lap in 0..250 {
        for _ in 0..(lap % 4 + 1) {
            r.push(next_in, &mut no_relax()).unwrap();
            next_in += 1;
        }
        while let Some(v) = r.pop(&mut no_relax()) {
            assert_eq!(v, next_out);
            next_out += 1;
        }
    }
    assert_eq!(next_in, next_out);
    assert!(next_in > 100 * r.capacity());
}

/// Counts its drops.
struct Counted(Arc<StdAtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, StdOrdering::Relaxed);
    }
}

#[test]
fn drop_drops_remaining_items() {
    let drops = Arc::new(StdAtomicUsize::new(0));
    let r: Ring<Counted> = Ring::with_capacity(4);
    // Advance the counters past a lap so the leftovers wrap.
    for _ in 0..3 {
        r.push(Counted(drops.clone()), &mut no_relax()).ok().unwrap();
    }
    for _ in 0..3 {
        drop(r.pop(&mut no_relax()).unwrap());
    }
    assert_eq!(drops.load(StdOrdering::Relaxed), 3);
    for _ in 0..3 {
        r.push(Counted(drops.clone()), &mut no_relax()).ok().unwrap();
    }
    assert!(r.push(Counted(drops.clone()), &mut no_relax()).is_ok());
    // The rejected value comes back to us and is dropped here, not leaked.
    let rejected = r.push(Counted(drops.clone()), &mut no_relax());
    assert!(rejected.is_err());
    drop(rejected);
    assert_eq!(drops.load(StdOrdering::Relaxed), 4);
    drop(r);
    assert_eq!(drops.load(StdOrdering::Relaxed), 8);
}

/// A consumer stalled between claim and release; the producer laps onto its
/// cell. With the fix, push backs off (calling `relax`, in which the consumer
/// finishes) and succeeds; occupancy was below capacity all along.
#[test]
fn stalled_consumer_fixed_waits_then_pushes() {
    let r: Ring<u32, true> = Ring::with_capacity(4);
    for i in 0..4 {
        r.push(i, &mut no_relax()).unwrap();
    }
    let stalled = r.test_claim_pop().unwrap();
    assert_eq!(r.len(), 3, "occupancy below capacity");
    let mut stalled = Some(stalled);
    let mut taken = None;
    let mut relaxes = 0;
    let res = r.push(4, &mut || {
        relaxes += 1;
        assert!(relaxes < 1000, "push kept waiting after the release");
        // The preempted consumer gets the CPU back and finishes its pop.
        if let Some(t) = stalled.take() {
            taken = Some(r.test_finish_pop(t));
        }
    });
    assert_eq!(res, Ok(()));
    assert!(relaxes >= 1, "push must yield while waiting for the stall");
    assert_eq!(taken, Some(0));
    for i in 1..5 {
        assert_eq!(r.pop(&mut no_relax()), Some(i));
    }
}

/// The same stall with the classic ring: Full although occupancy < capacity.
#[test]
fn stalled_consumer_classic_reports_full_wrongly() {
    let r: Ring<u32, false> = Ring::with_capacity(4);
    for i in 0..4 {
        r.push(i, &mut no_relax()).unwrap();
    }
    let stalled = r.test_claim_pop().unwrap();
    assert_eq!(r.len(), 3, "occupancy below capacity");
    assert_eq!(r.push(4, &mut no_relax()), Err(4), "the classic bug");
    assert_eq!(r.test_finish_pop(stalled), 0);
    r.push(4, &mut no_relax()).unwrap();
}

/// The fix does not hide a truly full ring: a claimed ticket no longer counts
/// as an item, so the push onto the stalled cell waits and lands; then the
/// ring holds `capacity` items and the next push reports Full at once.
#[test]
fn stalled_consumer_fixed_still_reports_true_full() {
    let r: Ring<u32, true> = Ring::with_capacity(2);
    r.push(0, &mut no_relax()).unwrap();
    r.push(1, &mut no_relax()).unwrap();
    let t = r.test_claim_pop().unwrap();
    let mut t = Some(t);
    r.push(2, &mut || {
        if let Some(t) = t.take() {
            assert_eq!(r.test_finish_pop(t), 0);
        }
    })
    .unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r.push(3, &mut no_relax()), Err(3));
}

/// A producer stalled between claim and publish: pop waits a bounded time
/// (calling `relax`), then reports empty; after the publish the item pops.
#[test]
fn pop_waits_bounded_for_a_producer_mid_publish() {
    let r: Ring<u32> = Ring::with_capacity(4);
    let t = r.test_claim_push().unwrap();
    assert_eq!(r.len(), 1);
    let mut relaxes = 0;
    assert_eq!(r.pop(&mut || relaxes += 1), None);
    assert!(relaxes >= 1, "pop must yield while waiting for the publish");
    assert!(relaxes < 100, "pop's wait must be bounded");
    r.test_finish_push(t, 7);
    assert_eq!(r.pop(&mut no_relax()), Some(7));
    assert_eq!(r.pop(&mut no_relax()), None);
}

/// Producers and consumers on real threads over a tiny ring (so full, empty
/// and stalls all happen): every item is seen exactly once.
fn conservation<const FIX: bool>(producers: usize, consumers: usize, per_producer: usize) {
    let ring: Arc<Ring<usize, FIX>> = Arc::new(Ring::with_capacity(4));
    let total = producers * per_producer;
    let consumed = Arc::new(StdAtomicUsize::new(0));
    let start = Arc::new(Barrier::new(producers + consumers));
    let mut handles = Vec::new();
    for p in 0..producers {
        let (ring, start) = (ring.clone(), start.clone());
        handles.push(std::thread::spawn(move || {
            start.wait();
            for i in 0..per_producer {
                let mut v = p * per_producer + i;
                let mut spins = 0;
                while let Err(back) = ring.push(v, &mut yield_now) {
                    v = back;
                    spins += 1;
                    assert!(spins < MAX_SPINS, "producer {p} stuck on a full ring");
                    yield_now();
                }
            }
            Vec::new()
        }));
    }
    for _ in 0..consumers {
        let (ring, start, consumed) = (ring.clone(), start.clone(), consumed.clone());
        handles.push(std::thread::spawn(move || {
            start.wait();
            let mut seen = Vec::new();
            let mut spins = 0;
            while consumed.load(StdOrdering::Relaxed) < total {
                match ring.pop(&mut yield_now) {
                    Some(v) => {
                        seen.push(v);
                        consumed.fetch_add(1, StdOrdering::Relaxed);
                    }
                    None => {
                        spins += 1;
                        assert!(spins < MAX_SPINS, "consumer stuck on an empty ring");
                        yield_now();
                    }
                }
            }
            seen
        }));
    }
    let mut all: Vec<usize> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    assert_eq!(all.len(), total);
    assert_eq!(all.iter().sum::<usize>(), total * (total - 1) / 2);
    all.sort_unstable();
    assert!(all.iter().copied().eq(0..total), "an item lost or duplicated");
    assert!(ring.is_empty());
}

const PER_PRODUCER: usize = if cfg!(miri) { 200 } else { 20_000 };

#[test]
fn conservation_2_producers_2_consumers() {
    conservation::<true>(2, 2, PER_PRODUCER);
}

#[test]
fn conservation_classic_2_producers_2_consumers() {
    // The classic ring may report a spurious Full; the producer retries, so
    // conservation still holds.
    conservation::<false>(2, 2, PER_PRODUCER);
}

#[test]
fn conservation_3_producers_1_consumer() {
    conservation::<true>(3, 1, PER_PRODUCER / 2);
}

/// The one-producer push: FIFO over many laps, `Err` with the value back
/// only when the ring truly holds `capacity` items, and `len` right after
/// each push and pop.
#[test]
fn push_single_is_fifo_and_full_only_at_capacity() {
    let r: Ring<u32> = Ring::with_capacity(4);
    let mut next_out = 0;
    for lap in 0..5u32 {
        for i in 0..4 {
            // SAFETY: this thread is the ring's only producer.
            assert_eq!(unsafe { r.push_single(lap * 4 + i, &mut no_relax()) }, Ok(()));
            assert_eq!(r.len(), i as usize + 1);
        }
        // SAFETY: as above.
        let full = unsafe { r.push_single(99, &mut no_relax()) };
        assert_eq!(full, Err(99), "full at capacity");
        for _ in 0..4 {
            assert_eq!(r.pop(&mut no_relax()), Some(next_out));
            next_out += 1;
        }
        assert!(r.is_empty());
    }
}

/// A consumer stalled between claim and release on the cell the
/// one-producer push needs: the push waits (calling `relax`, in which the
/// consumer finishes) and succeeds, as `push` does.
#[test]
fn push_single_waits_out_a_stalled_consumer() {
    let r: Ring<u32> = Ring::with_capacity(2);
    for i in 0..2 {
        // SAFETY: this thread is the ring's only producer.
        unsafe { r.push_single(i, &mut no_relax()) }.unwrap();
    }
    let mut stalled = Some(r.test_claim_pop().unwrap());
    let mut taken = None;
    // SAFETY: as above.
    let res = unsafe {
        r.push_single(2, &mut || {
            if let Some(t) = stalled.take() {
                taken = Some(r.test_finish_pop(t));
            }
        })
    };
    assert_eq!(res, Ok(()));
    assert_eq!(taken, Some(0));
    assert_eq!(r.pop(&mut no_relax()), Some(1));
    assert_eq!(r.pop(&mut no_relax()), Some(2));
}

/// One thread pushing with `push_single`, three popping: every item once.
#[test]
fn push_single_against_three_consumers_conserves() {
    const N: usize = if cfg!(miri) { 200 } else { 20_000 };
    let r = Arc::new(Ring::<usize>::with_capacity(8));
    let done = Arc::new(StdAtomicUsize::new(0));
    let consumers: Vec<_> = (0..3)
        .map(|_| {
            let (r, done) = (r.clone(), done.clone());
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut spins = 0;
                while done.load(StdOrdering::SeqCst) < N {
                    match r.pop(&mut yield_now) {
                        Some(v) => {
                            got.push(v);
                            done.fetch_add(1, StdOrdering::SeqCst);
                        }
                        None => {
                            spins += 1;
                            assert!(spins < MAX_SPINS, "consumer starved");
                            yield_now();
                        }
                    }
                }
                got
            })
        })
        .collect();
    for mut v in 0..N {
        let mut spins = 0;
        // SAFETY: this thread is the ring's only producer.
        while let Err(back) = unsafe { r.push_single(v, &mut yield_now) } {
            v = back;
            spins += 1;
            assert!(spins < MAX_SPINS, "producer never found room");
            yield_now();
        }
    }
    let mut seen: Vec<usize> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..N).collect::<Vec<_>>(), "an item lost or duplicated");
}
