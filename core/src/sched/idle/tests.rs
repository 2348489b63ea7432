//! Unit tests of the idle protocol on the std test platform (so they also
//! run under Miri): the sequential fast paths, and one sleeping thread woken
//! or timing out. The interleavings are loom's (`core/tests/loom_idle.rs`).

use std::sync::Arc;

use super::Idle;
use crate::seam::lock::FutexLock;
use crate::seam::platform::Platform;
use crate::seam::test_platform::{with_timeout, StdPlatform};

type TestIdle = Idle<StdPlatform, FutexLock<StdPlatform>>;

#[test]
fn notify_with_nobody_asleep_makes_no_wake() {
    let idle = TestIdle::new(2);
    // Nobody on the idle list: the fast path returns without a wake.
    assert!(!idle.notify_one());
    assert!(!idle.notify_worker(1), "a wake of a worker not on the list");
    idle.notify_all();
    assert_eq!(idle.sleepers(), 0);
}

#[test]
fn a_listed_sleeper_is_woken_once() {
    with_timeout(60, || {
        let idle = Arc::new(TestIdle::new(2));
        let i = idle.clone();
        let sleeper = std::thread::spawn(move || i.sleep(1, || false, None));
        while idle.sleepers() == 0 {
            std::thread::yield_now();
        }
        assert!(!idle.notify_worker(0), "worker 0 is not on the list");
        assert!(idle.notify_one(), "the listed sleeper was not woken");
        assert!(sleeper.join().unwrap(), "the sleep returned without sleeping");
        assert_eq!(idle.sleepers(), 0);
        // The one entry was spent: nobody left to wake.
        assert!(!idle.notify_one());
    });
}

#[test]
fn a_sleep_with_work_found_after_listing_does_not_sleep() {
    let idle = TestIdle::new(1);
    assert!(!idle.sleep(0, || true, None));
    assert_eq!(idle.sleepers(), 0, "the withdrawn sleeper stayed listed");
}

/// The test futex never returns spuriously (a real one may, and then
/// `sleep` may end early: callers re-check), so an early end here is
/// `sleep`'s own.
#[test]
fn a_deadline_ends_the_sleep_and_unlists_the_sleeper() {
    with_timeout(60, || {
        let idle = TestIdle::new(1);
        let deadline = StdPlatform::now_ns() + 5_000_000;
        assert!(idle.sleep(0, || false, Some(deadline)));
        assert!(
            StdPlatform::now_ns() >= deadline,
            "the sleep ended before its deadline"
        );
        assert_eq!(idle.sleepers(), 0, "the timed-out sleeper stayed listed");
        assert!(!idle.notify_one());
    });
}
