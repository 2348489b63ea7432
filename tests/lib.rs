//! Integration tests for smarm, written once against the host's port crate,
//! re-exported here as `smarm` (test files: `use smarm_tests::smarm;`).
//! Test files are named by subsystem (`rt_*.rs`, `mailbox_*.rs`, ...).

#[cfg(all(target_os = "linux", not(feature = "sim")))]
pub use smarm_linux as smarm;

#[cfg(all(target_vendor = "apple", not(feature = "sim")))]
pub use smarm_darwin as smarm;

/// With the `sim` feature the suite runs on the deterministic port
/// (`scripts/sim-seeds.sh` runs it over many seeds: `SMARM_SIM_SEED=S`
/// makes each test's runtime a simulated machine seeded with `S`).
#[cfg(feature = "sim")]
pub use smarm_sim as smarm;

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

/// A global allocator that counts the allocations made on threads that
/// opted in with [`track_allocs`], for the zero-allocation tests. A test
/// binary installs it with
/// `#[global_allocator] static A: smarm_tests::CountingAlloc = smarm_tests::CountingAlloc;`.
pub struct CountingAlloc;

static ALLOCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

thread_local! {
    static TRACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Starts (`true`) or stops counting this thread's allocations. Use it on
/// a one-worker runtime, where the measured actors never migrate.
pub fn track_allocs(on: bool) {
    TRACK.with(|t| t.set(on));
}

static TRACK_ALL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Starts (`true`) or stops counting every thread's allocations: for a
/// runtime with several workers, whose actors migrate between threads.
/// Every thread of the test binary counts meanwhile (the test harness's
/// threads too), so nothing else may run: keep such a test in a binary
/// of its own or make it the binary's only allocating test.
pub fn track_all_allocs(on: bool) {
    TRACK_ALL.store(on, std::sync::atomic::Ordering::SeqCst);
}

/// Allocations counted so far (on tracking threads).
pub fn allocs() -> u64 {
    ALLOCS.load(std::sync::atomic::Ordering::Relaxed)
}

static FREES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Deallocations counted so far (on tracking threads).
pub fn frees() -> u64 {
    // Relaxed, as `allocs`: a counter; the measuring actor reads it after
    // the round trips it counts, whose message edges order the other
    // threads' increments before this read.
    FREES.load(std::sync::atomic::Ordering::Relaxed)
}

fn tracked() -> bool {
    // Relaxed: a switch read on every allocation; the tests flip it from
    // the measured actor itself, and the counting is program-ordered there.
    TRACK_ALL.load(std::sync::atomic::Ordering::Relaxed) || TRACK.with(|t| t.get())
}

static BYTES: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Bytes allocated minus bytes freed so far (on tracking threads; requested
/// sizes, without the allocator's own rounding and headers).
pub fn live_bytes() -> i64 {
    // Relaxed, as `allocs`.
    BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

fn count_if_tracked() {
    if tracked() {
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn add_bytes_if_tracked(n: i64) {
    if tracked() {
        // Relaxed: a counter, as ALLOCS.
        BYTES.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator; counting has no
// effect on the memory returned.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        count_if_tracked();
        add_bytes_if_tracked(l.size() as i64);
        // SAFETY: forwarded contract.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        if tracked() {
            FREES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        add_bytes_if_tracked(-(l.size() as i64));
        // SAFETY: forwarded contract.
        unsafe { std::alloc::System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 {
        count_if_tracked();
        add_bytes_if_tracked(n as i64 - l.size() as i64);
        // SAFETY: forwarded contract.
        unsafe { std::alloc::System.realloc(p, l, n) }
    }
}

/// A ping-pong message: the partner's address, or a ball with the sends
/// left after it.
pub enum Ball {
    /// The partner's address (the first message the serving side gets).
    Peer(smarm::Addr<Ball>),
    /// A ball: `n` more sends follow this one.
    Left(u32),
}

/// One player: returns each ball with one fewer send left; whoever receives
/// `Left(0)`, or sends it, is done. Returns the balls it received.
pub fn play(mb: &mut smarm::Mailbox<Ball>, peer: &smarm::Addr<Ball>) -> u32 {
    let mut got = 0;
    loop {
        match mb.recv().unwrap() {
            Ball::Left(n) => {
                got += 1;
                if n == 0 {
                    return got;
                }
                peer.send(Ball::Left(n - 1)).unwrap();
                if n == 1 {
                    return got;
                }
            }
            Ball::Peer(_) => panic!("a player has one peer"),
        }
    }
}

/// From inside an actor: spawns a pair that plays `first + 1` balls
/// (`first` is the first ball's count); the two handles' results sum to
/// `first + 1` when every ball is received exactly once.
pub fn spawn_pair(first: u32) -> [smarm::JoinHandle<u32>; 2] {
    let (a, ha) = smarm::spawn_actor(move |mut mb: smarm::Mailbox<Ball>| {
        let Ball::Peer(b) = mb.recv().unwrap() else {
            panic!("the peer comes first")
        };
        b.send(Ball::Left(first)).unwrap();
        play(&mut mb, &b)
    });
    let a2 = a.clone();
    let (b, hb) = smarm::spawn_actor(move |mut mb: smarm::Mailbox<Ball>| play(&mut mb, &a2));
    a.send(Ball::Peer(b)).unwrap();
    [ha, hb]
}
