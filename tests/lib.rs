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

/// Inside an actor: makes the caller's next `spawn` work-first, its child
/// run inside the call, before `spawn` returns. A spawn on a worker with
/// nothing else to run is help-first (the child waits in the run-next
/// slot while its spawner goes on); this spawns a no-op actor that then
/// waits in the slot (or, if work was waiting already, leaves it waiting
/// in the queue), so the next spawn finds work waiting. For tests of what
/// happens while a child runs inside its spawn (a kill of the spawner, a
/// child that fails at once).
pub fn next_spawn_work_first() {
    drop(smarm::spawn(|| ()));
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

/// A global allocator that counts allocations, for the zero-allocation
/// tests: those made on a thread that opted in with [`track_allocs`] go to
/// that thread's own counters, so tests running on parallel threads of one
/// binary never see each other's; while [`track_all_allocs`] is on, every
/// thread's go to shared counters besides. A test binary installs it with
/// `#[global_allocator] static A: smarm_tests::CountingAlloc = smarm_tests::CountingAlloc;`.
pub struct CountingAlloc;

/// Allocations, frees and live bytes, counted.
struct Counts {
    allocs: std::sync::atomic::AtomicU64,
    frees: std::sync::atomic::AtomicU64,
    bytes: std::sync::atomic::AtomicI64,
}

impl Counts {
    const fn new() -> Self {
        Self {
            allocs: std::sync::atomic::AtomicU64::new(0),
            frees: std::sync::atomic::AtomicU64::new(0),
            bytes: std::sync::atomic::AtomicI64::new(0),
        }
    }

    fn add(&self, allocs: u64, frees: u64, bytes: i64) {
        // Relaxed: counters; a reader on another thread reads them after
        // the message edges (joins, round trips) that order the counted
        // increments before its read.
        self.allocs
            .fetch_add(allocs, std::sync::atomic::Ordering::Relaxed);
        self.frees.fetch_add(frees, std::sync::atomic::Ordering::Relaxed);
        self.bytes.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Every thread's, while [`track_all_allocs`] is on.
static ALL: Counts = Counts::new();

thread_local! {
    static TRACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// This thread's, while [`track_allocs`] is on here.
    static MINE: Counts = const { Counts::new() };
}

/// Starts (`true`) or stops counting this thread's allocations, on this
/// thread's own counters. Use it on a one-worker runtime, where the
/// measured actors never migrate, and read the counts on the same thread.
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

/// Reads one count: the calling thread's own plus every thread's.
fn read<T: std::ops::Add<Output = T>>(f: impl Fn(&Counts) -> T) -> T {
    MINE.with(|m| f(m)) + f(&ALL)
}

/// Allocations counted so far: this thread's own (while it tracked) and
/// every thread's (while all were tracked).
pub fn allocs() -> u64 {
    read(|c| c.allocs.load(std::sync::atomic::Ordering::Relaxed))
}

/// Deallocations counted so far, as [`allocs`].
pub fn frees() -> u64 {
    read(|c| c.frees.load(std::sync::atomic::Ordering::Relaxed))
}

/// Bytes allocated minus bytes freed so far, as [`allocs`] (requested
/// sizes, without the allocator's own rounding and headers).
pub fn live_bytes() -> i64 {
    read(|c| c.bytes.load(std::sync::atomic::Ordering::Relaxed))
}

/// Counts an allocator call where it is tracked.
fn count(allocs: u64, frees: u64, bytes: i64) {
    // Relaxed: a switch read on every allocation; the tests flip it from
    // the measured actor itself, and the counting is program-ordered there.
    if TRACK_ALL.load(std::sync::atomic::Ordering::Relaxed) {
        ALL.add(allocs, frees, bytes);
    }
    // `try_with`: an allocation in a thread-local destructor, after this
    // thread's slots are gone, is not counted.
    let _ = TRACK.try_with(|t| {
        if t.get() {
            let _ = MINE.try_with(|m| m.add(allocs, frees, bytes));
        }
    });
}

// SAFETY: forwards every call to the system allocator; counting has no
// effect on the memory returned.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        count(1, 0, l.size() as i64);
        // SAFETY: forwarded contract.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        count(0, 1, -(l.size() as i64));
        // SAFETY: forwarded contract.
        unsafe { std::alloc::System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 {
        count(1, 0, n as i64 - l.size() as i64);
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
