//! Stress for the mailbox park protocol: many short ping-pong pairs on two
//! workers, repeated, so that a receiver's withdraw often loses to a sender
//! (whose wake then lands on a later registration). Before the WAKING state
//! existed, a stale wake resumed a receiver whose registration was still in
//! place and it spun or slept forever (seen about once in 60 runs of
//! msg_pairs --pairs 1024 --rounds 16): this test hung then.
use smarm_tests::smarm::Runtime;
use smarm_tests::{spawn_pair, with_timeout};

#[test]
fn short_pairs_on_two_workers_never_lose_a_wake() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // Under the sanitizers (10-20x slower) a tenth of the rounds fits
        // the timeout; the window each round opens is the same.
        let rounds = if cfg!(any(smarm_tsan, smarm_asan)) {
            15
        } else {
            150
        };
        for round in 0..rounds {
            let total = rt.block_on(|| {
                let mut hs = Vec::new();
                for _ in 0..1024 {
                    hs.extend(spawn_pair(31));
                }
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
            });
            assert_eq!(total, 1024 * 32, "round {round}: balls lost or duplicated");
        }
    });
}
