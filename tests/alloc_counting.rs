//! The counting allocator the allocation tests share: a thread that
//! tracks its own allocations counts only its own, whatever another
//! tracking thread allocates meanwhile (the test harness runs a binary's
//! tests on parallel threads).

#[global_allocator]
static GLOBAL: smarm_tests::CountingAlloc = smarm_tests::CountingAlloc;

use std::sync::{Arc, Barrier};

#[test]
fn a_tracking_thread_counts_only_its_own_allocations() {
    smarm_tests::with_timeout(60, || {
        // Two threads track at once; the barriers put all of `busy`'s
        // allocations and frees between `quiet`'s two readings.
        let start = Arc::new(Barrier::new(2));
        let done = Arc::new(Barrier::new(2));
        let (s, d) = (start.clone(), done.clone());
        let busy = std::thread::spawn(move || {
            smarm_tests::track_allocs(true);
            let before = (smarm_tests::allocs(), smarm_tests::frees());
            s.wait();
            let kept: Vec<Box<[u8; 64]>> = (0..1000).map(|_| Box::new([1u8; 64])).collect();
            let freed: Vec<Box<u64>> = (0..500).map(Box::new).collect();
            drop(freed);
            let n = (smarm_tests::allocs() - before.0, smarm_tests::frees() - before.1);
            d.wait();
            smarm_tests::track_allocs(false);
            drop(kept);
            n
        });
        smarm_tests::track_allocs(true);
        let before = (
            smarm_tests::allocs(),
            smarm_tests::frees(),
            smarm_tests::live_bytes(),
        );
        start.wait();
        done.wait();
        let after = (
            smarm_tests::allocs(),
            smarm_tests::frees(),
            smarm_tests::live_bytes(),
        );
        smarm_tests::track_allocs(false);
        assert_eq!(after, before, "another thread's allocations counted on this one");
        // And the busy thread saw its own: at least its 1,500 boxes and
        // the two vectors, at least the 500 frees.
        let (allocs, frees) = busy.join().unwrap();
        assert!(allocs >= 1502, "{allocs} allocations counted");
        assert!(frees >= 500, "{frees} frees counted");
    });
}
