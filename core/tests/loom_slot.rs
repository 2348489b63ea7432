//! Loom model of the run-next slot (`smarm_core::slot`): one owner at a
//! time puts and takes, the duty moves between threads over a
//! Release/Acquire edge (a worker's blocking handoff), and other threads
//! only peek; every value put in comes out exactly once (taken, or
//! displaced by a later put).
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

/// One owner at a time (a worker's serving thread) whose duty moves to
/// another thread over a Release/Acquire word, as a blocking call hands a
/// worker to its successor, while a third thread peeks (another worker's
/// idle check, a dump): the successor finds the value the first owner
/// left, the value it displaces comes back to it, each is owned exactly
/// once, and a peek sees the slot empty or holding a value put in it.
#[test]
fn an_owner_only_slot_changes_threads_over_a_handoff() {
    use loom::sync::atomic::{AtomicBool, Ordering};
    loom::model(|| {
        // SAFETY: `first` puts, then we put and take only after its
        // Release store of `duty` (our Acquire load): one thread at a time,
        // ordered; the peeker only peeks.
        let slot = Arc::new(unsafe { Slot::owner_only() });
        let duty = Arc::new(AtomicBool::new(false));
        // Allocated up front: three distinct addresses for the whole model.
        let (b1, b2, b3) = (boxed(1) as usize, boxed(2) as usize, boxed(3) as usize);
        let (s1, d1) = (slot.clone(), duty.clone());
        let first = thread::spawn(move || {
            assert!(own(s1.put(b1 as *mut u32)).is_none());
            assert_eq!(
                own(s1.put(b2 as *mut u32)),
                Some(1),
                "the owner's own put displaces"
            );
            // Release: the duty's handoff, the edge the contract asks for.
            d1.store(true, Ordering::Release);
        });
        let s3 = slot.clone();
        // A racy hint (nothing is read through it).
        let peeker = thread::spawn(move || s3.peek() as usize);
        // The successor: takes over once the duty is handed.
        // Acquire: pairs with the Release store above.
        while !duty.load(Ordering::Acquire) {
            thread::yield_now();
        }
        assert_eq!(
            own(slot.put(b3 as *mut u32)),
            Some(2),
            "the successor sees the first owner's put"
        );
        assert_eq!(own(slot.take()), Some(3));
        assert!(own(slot.take()).is_none());
        first.join().unwrap();
        let seen = peeker.join().unwrap();
        assert!(
            [0, b1, b2, b3].contains(&seen),
            "a peek saw {seen:#x}: neither empty nor a value put in"
        );
    });
}
