//! Actor-local storage across migrations, and the debug-build check for a
//! safe point reached while a thread-local borrow may be held.
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use smarm_tests::smarm::{self, ActorLocal, Runtime};
use smarm_tests::with_timeout;

static DROPS: AtomicUsize = AtomicUsize::new(0);

struct Counter(Cell<u32>);

impl Drop for Counter {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

static COUNT: ActorLocal<Counter> = ActorLocal::new(|| Counter(Cell::new(0)));

#[test]
fn actor_locals_follow_the_actor_across_workers_and_drop_at_its_end() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let before = DROPS.load(Ordering::SeqCst);
        let hs: Vec<_> = (0..100)
            .map(|_| {
                rt.spawn(|| {
                    for _ in 0..50 {
                        COUNT.with(|c| c.0.set(c.0.get() + 1));
                        smarm::yield_now(); // may resume on the other worker
                    }
                    COUNT.with(|c| c.0.get())
                })
            })
            .collect();
        for h in hs {
            assert_eq!(
                h.join().unwrap(),
                50,
                "each actor sees only its own value, wherever it runs"
            );
        }
        assert_eq!(
            DROPS.load(Ordering::SeqCst) - before,
            100,
            "one value per actor, dropped at its end"
        );
    });
}

#[test]
fn a_safe_point_inside_no_switch_is_caught_in_debug_builds() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let h = rt.spawn(|| smarm::no_switch(smarm::yield_now));
        let r = h.join();
        if cfg!(debug_assertions) {
            let e = r.unwrap_err();
            let m = e.panic_message().unwrap();
            assert!(m.contains("inside no_switch") && m.contains("migration"), "{m}");
        } else {
            r.unwrap();
        }
        // Outside the section, and off actors, nothing is checked.
        rt.block_on(smarm::yield_now);
        assert_eq!(smarm::no_switch(|| 3), 3);
    });
}
