//! Loom models of the run-next slot (`smarm_core::slot`): the owner puts
//! and takes while a thief steals; every value put in comes out exactly
//! once (taken by the owner, stolen, or displaced by a later put).
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_slot`
#![cfg(smarm_loom)]

use loom::sync::Arc;
use loom::thread;

use smarm_core::slot::Slot;

fn boxed(v: u32) -> *mut u32 {
    Box::into_raw(Box::new(v))
}

/// Takes ownership of a slot value (null → None).
fn own(p: *mut u32) -> Option<u32> {
    // SAFETY: non-null slot values are `Box::into_raw` pointers whose
    // ownership `put`/`take` just handed to us.
    (!p.is_null()).then(|| *unsafe { Box::from_raw(p) })
}

#[test]
fn owner_take_races_a_thief() {
    loom::model(|| {
        let slot = Arc::new(Slot::new());
        assert!(own(slot.put(boxed(1))).is_none());
        let s2 = slot.clone();
        let thief = thread::spawn(move || own(s2.take()));
        let mine = own(slot.take());
        let stolen = thief.join().unwrap();
        // Exactly one of them got it.
        assert_eq!(mine.is_some() as u32 + stolen.is_some() as u32, 1);
        assert_eq!(mine.or(stolen), Some(1));
    });
}

#[test]
fn put_displacing_races_a_thief() {
    loom::model(|| {
        let slot = Arc::new(Slot::new());
        assert!(own(slot.put(boxed(1))).is_none());
        let s2 = slot.clone();
        let thief = thread::spawn(move || own(s2.take()));
        // The owner hands over a second actor (a wake) while the thief steals.
        let displaced = own(slot.put(boxed(2)));
        let left = own(slot.take());
        let stolen = thief.join().unwrap();
        let mut seen: Vec<u32> = [displaced, left, stolen].into_iter().flatten().collect();
        seen.sort();
        assert_eq!(seen, vec![1, 2], "each value exactly once");
    });
}

#[test]
fn two_thieves_and_the_owner() {
    loom::model(|| {
        let slot = Arc::new(Slot::new());
        assert!(own(slot.put(boxed(7))).is_none());
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let s = slot.clone();
                thread::spawn(move || own(s.take()))
            })
            .collect();
        let mine = own(slot.take());
        let got: Vec<u32> = thieves
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .chain(mine)
            .collect();
        assert_eq!(got, vec![7]);
    });
}

/// A slot without thieves (a one-worker runtime) whose owner's duty moves
/// to another thread over a Release/Acquire word, as a blocking call hands
/// a worker to its successor, while a third thread peeks (the idle
/// check): the successor finds the value the first owner left, the value
/// it displaces comes back to it, and each is owned exactly once.
#[test]
fn an_owner_only_slot_changes_threads_over_a_handoff() {
    use loom::sync::atomic::{AtomicBool, Ordering};
    loom::model(|| {
        // SAFETY: `first` puts, then we put and take only after its
        // Release store of `duty` (our Acquire load): one thread at a time,
        // ordered; the peeker only peeks.
        let slot = Arc::new(unsafe { Slot::owner_only() });
        let duty = Arc::new(AtomicBool::new(false));
        let (s1, d1) = (slot.clone(), duty.clone());
        let first = thread::spawn(move || {
            assert!(own(s1.put(boxed(1))).is_none());
            assert_eq!(own(s1.put(boxed(2))), Some(1), "the owner's own put displaces");
            // Release: the duty's handoff, the edge the contract asks for.
            d1.store(true, Ordering::Release);
        });
        let s3 = slot.clone();
        let peeker = thread::spawn(move || {
            // Racy hints only (no value is read through them): the count a
            // thief would compare never moves on a slot without thieves.
            let (_, before) = s3.stamp();
            let _ = s3.peek();
            assert_eq!(s3.stamp().1, before, "an owner-only slot keeps no put count");
        });
        // The successor: takes over once the duty is handed.
        // Acquire: pairs with the Release store above.
        while !duty.load(Ordering::Acquire) {
            thread::yield_now();
        }
        peeker.join().unwrap();
        assert_eq!(
            own(slot.put(boxed(3))),
            Some(2),
            "the successor sees the first owner's put"
        );
        assert_eq!(own(slot.take()), Some(3));
        assert!(own(slot.take()).is_none());
        first.join().unwrap();
    });
}
