//! Integration tests for smarm, written once against the host's port crate,
//! re-exported here as `smarm` (test files: `use smarm_tests::smarm;`).
//! Test files are named by subsystem (`rt_*.rs`, `mailbox_*.rs`, ...).

#[cfg(target_os = "linux")]
pub use smarm_linux as smarm;

#[cfg(target_vendor = "apple")]
pub use smarm_darwin as smarm;

use std::sync::mpsc;
use std::time::Duration;

/// Runs `f` on its own thread and fails loudly if it takes longer than
/// `secs` seconds, so a lost wake-up or a deadlock fails the test instead
/// of hanging CI. A panic in `f` is re-raised here.
pub fn with_timeout<T, F>(secs: u64, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let t = std::thread::Builder::new()
        .name("test-body".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("spawn test thread");
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => {
            let _ = t.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("test timed out after {secs} s (a lost wake-up or a deadlock?)")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match t.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!("the body returned without sending"),
        },
    }
}

/// Spins (yielding the thread) until `cond` holds, failing loudly after
/// `secs` seconds. For state that settles right after a result is
/// delivered (an actor's exit bookkeeping follows its join result).
pub fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        std::thread::yield_now();
    }
}
