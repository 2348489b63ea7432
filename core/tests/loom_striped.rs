#![cfg(smarm_loom)]
//! Loom models of `smarm_core::queue::Striped` (the striped run queue's
//! algorithm with explicit stripe hints): two "workers" on their own stripes
//! push and pop while items spill and are found by the scan. Every model
//! asserts conservation (each item popped exactly once).
//!
//! ```text
//! RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom \
//!     LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_striped
//! ```

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom::sync::Arc;
use loom::thread;
use loom_platform::LoomP;
use smarm_core::lock::FutexLock;
use smarm_core::queue::Striped;

/// Two stripes of two slots each: pushes past them spill to the overflow.
type Q = Striped<u32, FutexLock<LoomP>>;

/// Runs `f` under loom with a preemption bound of 2 unless
/// `LOOM_MAX_PREEMPTIONS` asks for another.
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

/// Asserts that `seen` holds `0..n` exactly once each.
fn assert_conserved(mut seen: Vec<u32>, n: u32) {
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "an item lost or duplicated");
}

/// Pops what is left, quiescent, through both stripes' hints into `seen`.
fn drain(q: &Q, seen: &mut Vec<u32>) {
    for hint in [1, 0] {
        while let Some(v) = q.pop_at(hint, &mut relax) {
            seen.push(v);
        }
    }
}

/// Two workers each push two items on their own stripe and pop twice (own
/// stripe first, then the scan); whatever they did not take is there for
/// a quiescent drain.
#[test]
fn two_workers_push_and_pop() {
    model(|| {
        let q = Arc::new(Q::new(4, 2));
        let workers: Vec<_> = (0..2u32)
            .map(|w| {
                let q = q.clone();
                thread::spawn(move || {
                    q.push_at(w as usize, 2 * w, &mut relax);
                    q.push_at(w as usize, 2 * w + 1, &mut relax);
                    [q.pop_at(w as usize, &mut relax), q.pop_at(w as usize, &mut relax)]
                })
            })
            .collect();
        let mut seen: Vec<u32> = workers
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .flatten()
            .collect();
        while let Some(v) = q.pop_at(0, &mut relax) {
            seen.push(v);
        }
        assert_conserved(seen, 4);
    });
}

/// A producer fills its stripe past capacity (the third item spills) while
/// a worker on the other stripe scans and takes from both the stripe and
/// the overflow.
#[test]
fn spill_races_a_scanning_worker() {
    model(|| {
        let q = Arc::new(Q::new(4, 2));
        let p = q.clone();
        let producer = thread::spawn(move || {
            for v in 0..3 {
                p.push_at(0, v, &mut relax);
            }
        });
        let mut seen: Vec<u32> = (0..2).filter_map(|_| q.pop_at(1, &mut relax)).collect();
        producer.join().unwrap();
        while let Some(v) = q.pop_at(1, &mut relax) {
            seen.push(v);
        }
        assert_conserved(seen, 3);
        assert!(q.is_empty());
    });
}

/// A thief whose stripe is empty takes an item from the owner's stripe and
/// moves a batch onto its own (protocol step 2's batch steal) while the owner pops its
/// stripe and pushes one more: every item is popped exactly once, whether
/// it was moved, popped by the owner mid-move, or left behind.
#[test]
fn batch_steal_races_the_owner() {
    model(|| {
        // Two stripes of four slots; stripe 0 starts with three items.
        let q = Arc::new(Q::new(8, 2));
        for v in 0..3 {
            q.push_at(0, v, &mut relax);
        }
        let o = q.clone();
        let owner = thread::spawn(move || {
            let got = o.pop_at(0, &mut relax);
            o.push_at(0, 3, &mut relax);
            got
        });
        let mut seen: Vec<u32> = q.pop_at(1, &mut relax).into_iter().collect();
        seen.extend(owner.join().unwrap());
        drain(&q, &mut seen);
        assert_conserved(seen, 4);
        assert!(q.is_empty());
    });
}

/// One producer per stripe (`Striped::single_producer`, the scheduler's
/// striped queue when each worker has a stripe): the owner of stripe 0
/// pushes three items and pops one, a second worker pops through its own
/// empty stripe (the scan, and the batch steal that moves an item onto its
/// stripe as that stripe's producer), and meanwhile a plain thread's push
/// aimed at stripe 1 goes to the overflow instead (were it pushed onto
/// stripe 1, two producers would race there). Conservation, and the queue
/// empty once drained.
#[test]
fn single_producer_stripes_owner_thief_and_plain_thread() {
    model(|| {
        // Two stripes of four slots.
        let q = Arc::new(Q::single_producer(8, 2));
        for v in 0..3 {
            // SAFETY: stripe 0's producer until the owner thread starts
            // (the spawn orders these pushes before its calls).
            unsafe { q.push_own(0, v, &mut relax) };
        }
        let o = q.clone();
        let owner = thread::spawn(move || {
            // SAFETY: this thread is stripe 0's only producer now.
            let got = unsafe { o.pop_own(0, &mut relax) };
            // SAFETY: as above.
            unsafe { o.push_own(0, 3, &mut relax) };
            got
        });
        let p = q.clone();
        let plain = thread::spawn(move || p.push_at(1, 4, &mut relax));
        // SAFETY: this thread is stripe 1's only producer.
        let mut seen: Vec<u32> = unsafe { q.pop_own(1, &mut relax) }.into_iter().collect();
        seen.extend(owner.join().unwrap());
        plain.join().unwrap();
        drain(&q, &mut seen);
        assert_conserved(seen, 5);
        assert!(q.is_empty());
    });
}

/// A patient thief (`pop_own_patient`, the scheduler's pop on two or more
/// workers) races the owner of a short stripe: the owner pops its item and
/// pushes another while the thief reads the stripe's counters, waits (a
/// yield here, so the owner may run in the wait or not) and reads them
/// again, and takes or leaves. Whichever way the counters read, each item
/// is taken exactly once (the thief's skip loses nothing, its take
/// duplicates nothing), and the thief waits at most once.
#[test]
fn a_patient_thief_races_the_owner() {
    model(|| {
        let q = Arc::new(Q::single_producer(8, 2));
        // SAFETY: stripe 0's producer until the owner thread starts.
        unsafe { q.push_own(0, 0, &mut relax) };
        let o = q.clone();
        let owner = thread::spawn(move || {
            // SAFETY: this thread is stripe 0's only producer now.
            let got = unsafe { o.pop_own(0, &mut relax) };
            // SAFETY: as above.
            unsafe { o.push_own(0, 1, &mut relax) };
            got
        });
        let mut waits = 0;
        // SAFETY: this thread is stripe 1's only producer.
        let mut seen: Vec<u32> = unsafe {
            q.pop_own_patient(1, &mut relax, &mut || {
                waits += 1;
                thread::yield_now()
            })
        }
        .into_iter()
        .collect();
        assert!(waits <= 1);
        seen.extend(owner.join().unwrap());
        drain(&q, &mut seen);
        assert_conserved(seen, 2);
        assert!(q.is_empty());
    });
}
