//! Steady-state channel messaging allocates nothing: after a warm-up, ping
//! over an unbounded channel and pong over a full bounded one (so sends
//! park too) make zero heap allocations on the worker (message nodes are
//! recycled through the worker's node cache; parking reuses the actors' own
//! state; the bounded wait list keeps its buffer).
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use smarm_tests::smarm::{self, bounded, channel, Runtime};
use smarm_tests::with_timeout;

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Count only allocations made on this thread while set (the worker
    /// running the measured actors; one worker, so no migration).
    static TRACK: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; the counter has no effect on
// the returned memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if TRACK.with(|t| t.get()) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if TRACK.with(|t| t.get()) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_messages_allocate_nothing() {
    with_timeout(60, || {
        const WARM: u64 = 1000;
        const MEASURED: u64 = 20_000;
        let rt = Runtime::builder().workers(1).build().unwrap();
        let allocs = rt.block_on(|| {
            // Ping over an unbounded channel, pong over a bounded one of
            // capacity 1 that the echo actor keeps full, so sends park too.
            let (ping_tx, mut ping_rx) = channel::<u64>();
            let (pong_tx, mut pong_rx) = bounded::<u64>(1);
            let echo = smarm::spawn(move || {
                while let Ok(v) = ping_rx.recv() {
                    pong_tx.send(v).unwrap();
                }
            });
            let mut round = |i: u64| {
                ping_tx.send(i).unwrap();
                ping_tx.send(i).unwrap();
                assert_eq!(pong_rx.recv(), Ok(i));
                assert_eq!(pong_rx.recv(), Ok(i));
            };
            for i in 0..WARM {
                round(i);
            }
            TRACK.with(|t| t.set(true));
            let before = ALLOCS.load(Ordering::Relaxed);
            for i in 0..MEASURED {
                round(i);
            }
            let n = ALLOCS.load(Ordering::Relaxed) - before;
            TRACK.with(|t| t.set(false));
            drop(ping_tx);
            echo.join().unwrap();
            n
        });
        assert_eq!(allocs, 0, "allocations in {MEASURED} steady-state rounds");
    });
}
