//! Steady-state channel messaging allocates nothing: after a warm-up, ping
//! over an unbounded channel and pong over a full bounded one (so sends
//! park too) make zero heap allocations on the worker (message nodes are
//! recycled through the worker's node cache; parking reuses the actors' own
//! state; the bounded wait list keeps its buffer).

use smarm_tests::smarm::{self, bounded, channel, Runtime};
use smarm_tests::with_timeout;

#[global_allocator]
static GLOBAL: smarm_tests::CountingAlloc = smarm_tests::CountingAlloc;

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
            smarm_tests::track_allocs(true);
            let before = smarm_tests::allocs();
            for i in 0..MEASURED {
                round(i);
            }
            let n = smarm_tests::allocs() - before;
            smarm_tests::track_allocs(false);
            drop(ping_tx);
            echo.join().unwrap();
            n
        });
        assert_eq!(allocs, 0, "allocations in {MEASURED} steady-state rounds");
    });
}

/// One worker: an actor's first yields allocate nothing. A yield on one
/// worker goes to the worker's own FIFO in the run queue
/// (`core/src/sched/queue/owned.rs`), which starts with room for a few
/// actors; it used to start empty and grow at its first push, so the first
/// yield (or timeslice expiry) of a runtime's life allocated. That showed
/// as one allocation in the measured rounds above under TSan, whose
/// slowness made the first expiry that queued anything fall in them.
#[test]
fn first_yields_on_one_worker_allocate_nothing() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let allocs = rt.block_on(|| {
            smarm_tests::track_allocs(true);
            let before = smarm_tests::allocs();
            for _ in 0..10 {
                smarm::yield_now();
            }
            let n = smarm_tests::allocs() - before;
            smarm_tests::track_allocs(false);
            n
        });
        assert_eq!(allocs, 0, "allocations in the first 10 yields");
    });
}
