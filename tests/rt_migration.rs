//! Thread-locals across migration: an actor that hops workers on its yields
//! must always see the worker it is really on. Meant for release builds
//! (`cargo test --release --test rt_migration`, as .ci/run does), where LLVM
//! would be free to cache a thread-local's address across the switch.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use smarm_tests::smarm::{self, Runtime};
use smarm_tests::with_timeout;

/// `std::thread::current()` is itself a thread-local read: inlined into the
/// loop, LLVM may hoist it across `yield_now()` (on aarch64 a plain
/// `mrs tpidr_el0`), which is exactly the hazard under test. Keeping it
/// out of line makes it a fresh read after every switch.
#[inline(never)]
fn thread_name() -> Option<String> {
    std::thread::current().name().map(str::to_owned)
}

#[test]
fn actor_sees_the_right_worker_after_every_yield() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).thread_name("mig").build().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        // Busy yielders keep both workers pulling from the shared queue, so
        // the observed actor lands on either worker after a yield.
        let busy: Vec<_> = (0..3)
            .map(|_| {
                let stop = stop.clone();
                rt.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        smarm::yield_now();
                    }
                })
            })
            .collect();
        let migrations = rt.block_on(|| {
            let mut last = smarm::current_worker().unwrap();
            let mut migrations = 0;
            // Until 100 migrations are seen, at most 2,000,000 yields (a
            // worker thread may be descheduled a while on a busy host).
            for _ in 0..2_000_000 {
                if migrations >= 100 {
                    break;
                }
                smarm::yield_now();
                let w = smarm::current_worker().unwrap();
                let name = thread_name();
                assert_eq!(
                    name.as_deref(),
                    Some(format!("mig-{w}").as_str()),
                    "stale worker slot"
                );
                if w != last {
                    migrations += 1;
                    last = w;
                }
            }
            migrations
        });
        for (i, w) in rt.counters().workers.iter().enumerate() {
            eprintln!("worker {i}: {w}");
        }
        stop.store(true, Ordering::Relaxed);
        for b in busy {
            b.join().unwrap();
        }
        assert!(
            migrations > 0,
            "the actor never migrated; the test proved nothing"
        );
    });
}
