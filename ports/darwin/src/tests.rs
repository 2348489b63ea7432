//! Port tests. They run on a Mac (`cargo test -p smarm-darwin`); from a
//! Linux host they are linked only (`cargo-zigbuild test --no-run`, see
//! docs/platforms.md).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use smarm_core::overflow::{current_stack, overflow_at};
use smarm_core::sync::AtomicU32;
use smarm_core::{Futex, Platform, RawLock, StackError};

use crate::{Darwin, DarwinLock, Runtime};

#[test]
fn reports_a_wait_backend() {
    let b = Darwin::wait_backend();
    assert!(b == "os_sync_wait_on_address" || b == "__ulock_wait", "{b}");
}

#[test]
fn wake_one_wakes_a_parked_waiter() {
    let word = Arc::new(AtomicU32::new(0));
    let waiter = {
        let word = Arc::clone(&word);
        std::thread::spawn(move || {
            // Acquire: pairs with the Release store below.
            while word.load(Ordering::Acquire) == 0 {
                Darwin::wait(&word, 0, None);
            }
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    // Release: the waiter's Acquire load sees it after waking.
    word.store(1, Ordering::Release);
    Darwin::wake_one(&word);
    waiter.join().unwrap();
}

#[test]
fn wake_all_wakes_every_waiter() {
    let word = Arc::new(AtomicU32::new(0));
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let word = Arc::clone(&word);
            std::thread::spawn(move || {
                // Acquire: pairs with the Release store below.
                while word.load(Ordering::Acquire) == 0 {
                    Darwin::wait(&word, 0, None);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    // Release: as in `wake_one_wakes_a_parked_waiter`.
    word.store(1, Ordering::Release);
    Darwin::wake_all(&word);
    for w in waiters {
        w.join().unwrap();
    }
}

#[test]
fn wait_returns_at_once_when_the_word_differs() {
    let word = AtomicU32::new(7);
    Darwin::wait(&word, 0, None); // would hang if it slept
}

#[test]
fn timed_wait_returns_by_its_deadline() {
    let word = AtomicU32::new(0);
    let deadline = Darwin::now_ns() + 20_000_000;
    while Darwin::now_ns() < deadline {
        Darwin::wait(&word, 0, Some(deadline));
    }
    // A passed deadline returns without sleeping.
    Darwin::wait(&word, 0, Some(deadline));
    Darwin::wait(&word, 0, Some(0));
}

#[test]
fn wake_with_no_waiter_is_fine() {
    let word = AtomicU32::new(0);
    Darwin::wake_one(&word);
    Darwin::wake_all(&word);
}

#[test]
fn clock_is_monotonic_and_in_nanoseconds() {
    let a = Darwin::now_ns();
    std::thread::sleep(Duration::from_millis(10));
    let b = Darwin::now_ns();
    assert!(b >= a + 9_000_000, "{a} -> {b}");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Miri's os_unfair_lock shims race with each other (trylock's non-atomic read)"
)]
fn lock_excludes() {
    struct Shared {
        lock: DarwinLock,
        count: std::cell::UnsafeCell<u64>,
    }
    // SAFETY: `count` is only touched with `lock` held.
    unsafe impl Sync for Shared {}
    let shared = Arc::new(Shared {
        lock: DarwinLock::new(),
        count: std::cell::UnsafeCell::new(0),
    });
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    shared.lock.lock();
                    // SAFETY: the lock is held.
                    unsafe { *shared.count.get() += 1 };
                    // SAFETY: locked on this thread just above.
                    unsafe { shared.lock.unlock() };
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // SAFETY: every other thread has finished.
    assert_eq!(unsafe { *shared.count.get() }, 40_000);
}

#[test]
fn try_lock_fails_while_held() {
    let lock = DarwinLock::new();
    assert!(lock.try_lock());
    std::thread::scope(|s| {
        s.spawn(|| assert!(!lock.try_lock()));
    });
    // SAFETY: locked on this thread above.
    unsafe { lock.unlock() };
    assert!(lock.try_lock());
    // SAFETY: as above.
    unsafe { lock.unlock() };
}

#[test]
#[cfg_attr(miri, ignore = "Miri does not support mprotect")]
fn stacks_are_guarded_page_multiples() {
    let page = Darwin::page_size();
    assert!(page.is_power_of_two() && page >= 4096);
    for want in [1, page - 1, page, 64 * 1024 + 3] {
        let stack = Darwin::stack_alloc(want).unwrap();
        assert!(stack.usable() >= want);
        assert!(stack.guard >= page);
        assert_eq!(stack.base as usize % page, 0);
        assert_eq!(stack.top() as usize % 16, 0);
        // The whole usable range is writable.
        // SAFETY: `[base + guard, top)` is mapped read-write.
        unsafe { core::ptr::write_bytes(stack.base.add(stack.guard), 0x5A, stack.usable()) };
        // SAFETY: from stack_alloc; nothing runs on it.
        unsafe { Darwin::stack_free(stack) };
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri does not support mprotect")]
fn impossible_stack_is_an_error_not_a_panic() {
    assert_eq!(
        Darwin::stack_alloc(usize::MAX).unwrap_err(),
        StackError::OutOfMaps { errno: libc::ENOMEM }
    );
    assert!(matches!(
        Darwin::stack_alloc(usize::MAX / 2),
        Err(StackError::OutOfMaps { .. } | StackError::Os { .. })
    ));
}

#[test]
fn current_worker_is_per_thread() {
    let mut here = 0u8;
    let p = (&raw mut here).cast::<()>();
    assert!(Darwin::current_worker().is_null());
    Darwin::set_current_worker(p);
    assert_eq!(Darwin::current_worker(), p);
    std::thread::spawn(|| assert!(Darwin::current_worker().is_null()))
        .join()
        .unwrap();
    Darwin::set_current_worker(core::ptr::null_mut());
}

#[test]
fn worker_threads_run_and_join() {
    let ran = Arc::new(AtomicU32::new(0));
    let r = Arc::clone(&ran);
    let t = Darwin::spawn_thread(
        "smarm-test-worker".into(),
        Box::new(move || {
            assert_eq!(std::thread::current().name(), Some("smarm-test-worker"));
            // Relaxed: the join below orders it.
            r.store(1, Ordering::Relaxed);
        }),
    )
    .unwrap();
    Darwin::join_thread(t);
    // Relaxed: ordered by the join.
    assert_eq!(ran.load(Ordering::Relaxed), 1);
}

#[test]
fn catch_unwind_returns_the_payload() {
    let err = Darwin::catch_unwind(&mut || std::panic::panic_any(42u32)).unwrap_err();
    assert_eq!(err.downcast_ref::<u32>(), Some(&42));
    assert!(Darwin::catch_unwind(&mut || {}).is_ok());
}

#[test]
fn cpu_count_is_positive() {
    assert!(Darwin::cpu_count() >= 1);
}

#[test]
fn core_sees_the_running_actors_stack_and_guard() {
    assert_eq!(
        current_stack::<Darwin>(),
        None,
        "a plain thread has no actor stack"
    );
    assert_eq!(overflow_at::<Darwin>(0x1000), None);
    let rt = Runtime::builder()
        .workers(1)
        .stack_size(64 * 1024)
        .build()
        .unwrap();
    let (id, b, local, hits) = rt.block_on(|| {
        let local = 0u8;
        let b = current_stack::<Darwin>().expect("an actor has a stack");
        let hits = [b.guard_start, b.low - 1, b.low, b.guard_start - 1].map(overflow_at::<Darwin>);
        let local = core::hint::black_box(&local) as *const u8 as usize;
        (crate::current_id().unwrap(), b, local, hits)
    });
    // (Under ASan with detect_stack_use_after_return, an escaping local
    // lives on ASan's heap-allocated fake stack instead.)
    if !cfg!(smarm_asan) {
        assert!(
            b.low <= local && local < b.top,
            "a local lies in the bounds: {b:?} {local:#x}"
        );
    }
    assert_eq!(b.usable(), 64 * 1024);
    let first = hits[0].as_ref().expect("the guard's first byte is an overflow");
    assert_eq!(
        (first.actor, first.usable, first.guard.clone()),
        (id, 64 * 1024, b.guard())
    );
    assert_eq!(hits[1].as_ref().map(|o| o.addr), Some(b.low - 1));
    assert!(
        hits[2].is_none() && hits[3].is_none(),
        "outside the guard: {hits:?}"
    );
}
