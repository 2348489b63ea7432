//! What a parked actor costs on the heap besides its stack, measured with a
//! counting allocator, against the figure the dump prints
//! (`runtime_bytes_per_actor`).

use smarm_tests::smarm::{self, Mailbox, Runtime};
use smarm_tests::with_timeout;

#[global_allocator]
static GLOBAL: smarm_tests::CountingAlloc = smarm_tests::CountingAlloc;

/// Heap bytes per actor of `n` spawned by `spawn` (run inside an actor of a
/// one-worker runtime, so every allocation is on the tracked thread), the
/// actors still parked when measured; then they are woken and joined.
fn heap_per_actor<H>(n: usize, spawn: impl Fn() -> H, finish: impl Fn(H)) -> usize {
    let mut held = Vec::with_capacity(n);
    smarm_tests::track_allocs(true);
    let before = smarm_tests::live_bytes();
    for _ in 0..n {
        held.push(spawn());
    }
    let after = smarm_tests::live_bytes();
    smarm_tests::track_allocs(false);
    for h in held {
        finish(h);
    }
    usize::try_from(after - before).expect("spawning allocates") / n
}

#[test]
fn a_parked_actor_costs_what_the_dump_says() {
    with_timeout(60, || {
        const N: usize = 2000;
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (with_mailbox, without) = rt.block_on(|| {
            let spawn_mb = || smarm::spawn_actor(|mut mb: Mailbox<()>| mb.recv().unwrap());
            let finish_mb = |(a, h): (smarm::Addr<()>, smarm::JoinHandle<()>)| {
                a.send(()).unwrap();
                h.join().unwrap();
            };
            // Warm-up: the registry's and the stack pool's vectors grow once.
            heap_per_actor(N, spawn_mb, finish_mb);
            let with_mailbox = heap_per_actor(N, spawn_mb, finish_mb);
            // Without a mailbox: parked on a oneshot channel instead, whose
            // cost (made before, outside the count) is not the actor's.
            let chans: Vec<_> = (0..N).map(|_| smarm::oneshot::<()>()).collect();
            let chans = std::sync::Mutex::new(chans);
            let without = heap_per_actor(
                N,
                || {
                    let (tx, rx) = chans.lock().unwrap().pop().unwrap();
                    (tx, smarm::spawn(move || rx.recv().unwrap()))
                },
                |(tx, h)| {
                    tx.send(()).unwrap();
                    h.join().unwrap();
                },
            );
            (with_mailbox, without)
        });
        let said = (
            smarm::runtime_bytes_per_actor(true),
            smarm::runtime_bytes_per_actor(false),
        );
        eprintln!(
            "heap per parked actor: {with_mailbox} B with a mailbox, {without} B without; \
             the dump says {} and {} B besides the closure",
            said.0, said.1
        );
        // The dump's figure is what the runtime's own structures take; the
        // measured total adds the closure (stored in the join slot's
        // allocation), the allocator's headers and the mailbox queue's stub
        // node, a couple of hundred bytes, no more.
        for (measured, said) in [(with_mailbox, said.0), (without, said.1)] {
            assert!(
                measured >= said,
                "the dump claims more than is allocated: {measured} < {said}"
            );
            assert!(
                measured - said <= 256,
                "the dump leaves out {} B",
                measured - said
            );
        }
        let d = rt.dump().to_string();
        let first = d.lines().next().unwrap();
        assert!(
            first.contains(&format!(
                "per actor {} B of runtime state ({} with a mailbox)",
                said.1, said.0
            )),
            "{first}"
        );
    });
}
