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
    // Rounded to the nearest byte: one block that another actor's exit
    // left in the worker's cache meanwhile (the previous `block_on`'s own
    // actor) is reused unseen, a fraction of a byte per actor.
    (usize::try_from(after - before).expect("spawning allocates") + n / 2) / n
}

/// A fresh one-worker runtime, warmed up: `n` actors spawned, parked and
/// joined, so the registry's and the stack pool's vectors have grown. Each
/// warm-up actor's closure carries 600 bytes, which puts its join cell
/// (the slot and the closure, one block) above the worker's block cache's
/// largest class: those cells go back to the allocator when freed. Each
/// actor's own block (its control block and `Life`) comes from the cache
/// too and goes back to the cache of the thread that drops its last
/// reference: the warm-up's addresses are dropped here, on a plain
/// thread, so those blocks go back to the allocator. So the cache holds no
/// block that the measured spawns could reuse unseen.
fn warmed_up_runtime(n: usize) -> Runtime {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let addrs = rt.block_on(|| {
        let held: Vec<_> = (0..n)
            .map(|_| {
                let pad = [7u8; 600];
                smarm::spawn_actor(move |mut mb: Mailbox<()>| {
                    mb.recv().unwrap();
                    std::hint::black_box(&pad);
                })
            })
            .collect();
        let mut addrs = Vec::with_capacity(n);
        for (a, h) in held {
            a.send(()).unwrap();
            h.join().unwrap();
            addrs.push(a);
        }
        addrs
    });
    drop(addrs);
    rt
}

#[test]
fn a_parked_actor_costs_what_the_dump_says() {
    with_timeout(60, || {
        const N: usize = 2000;
        // Each figure on a runtime of its own: a spawn's join cell comes
        // from the worker's block cache, where the cells of a round that
        // ended go back, so a second round on one runtime would reuse them
        // without allocating.
        let rt = warmed_up_runtime(N);
        let with_mailbox = rt.block_on(|| {
            heap_per_actor(
                N,
                || smarm::spawn_actor(|mut mb: Mailbox<()>| mb.recv().unwrap()),
                |(a, h): (smarm::Addr<()>, smarm::JoinHandle<()>)| {
                    a.send(()).unwrap();
                    h.join().unwrap();
                },
            )
        });
        drop(rt);
        let rt = warmed_up_runtime(N);
        let without = rt.block_on(|| {
            // Without a mailbox: parked on a oneshot channel instead, whose
            // cost (made before, outside the count) is not the actor's.
            let chans: Vec<_> = (0..N).map(|_| smarm::oneshot::<()>()).collect();
            let chans = std::sync::Mutex::new(chans);
            heap_per_actor(
                N,
                || {
                    let (tx, rx) = chans.lock().unwrap().pop().unwrap();
                    (tx, smarm::spawn(move || rx.recv().unwrap()))
                },
                |(tx, h)| {
                    tx.send(()).unwrap();
                    h.join().unwrap();
                },
            )
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

/// Allocations of `round()` on the calling actor's worker, after one
/// round of warm-up.
fn allocs_of(round: impl Fn()) -> u64 {
    round();
    smarm_tests::track_allocs(true);
    let before = smarm_tests::allocs();
    round();
    let n = smarm_tests::allocs() - before;
    smarm_tests::track_allocs(false);
    n
}

/// A spawn takes its two blocks, the join cell (the slot and the closure)
/// and the actor's own (its control block and `Life`), from the worker's
/// block cache, and each goes back there when its last owner lets go:
/// after a warm-up, spawns and joins allocate nothing, whether the actors
/// end one by one or a thousand are alive at once.
#[test]
fn spawns_reuse_their_blocks() {
    with_timeout(60, || {
        const N: u64 = 1000;
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (one_by_one, all_at_once) = rt.block_on(|| {
            let one_by_one = allocs_of(|| {
                for i in 0..N {
                    assert_eq!(smarm::spawn(move || i * 3).join().unwrap(), i * 3);
                }
            });
            let all_at_once = allocs_of(|| {
                let hs: Vec<_> = (0..N).map(|i| smarm::spawn(move || i * 3)).collect();
                for (i, h) in (0..N).zip(hs) {
                    assert_eq!(h.join().unwrap(), i * 3);
                }
            });
            (one_by_one, all_at_once)
        });
        eprintln!("allocations per spawn and join: {one_by_one} / {N} one by one, {all_at_once} / {N} a thousand at once");
        // The handles' vector is the one allocation outside the spawns.
        assert_eq!(one_by_one, 0, "{one_by_one} allocations for {N} spawns and joins");
        assert!(
            all_at_once <= 1,
            "{all_at_once} allocations for {N} spawns and joins"
        );
    });
}

/// Runs `step(0..N)` for `N` = 1,000 on a one-worker runtime after a
/// warm-up round and asserts that the round allocated nothing; `what`
/// names a step in the messages.
fn assert_steps_allocate_nothing(what: &'static str, step: fn(u64)) {
    with_timeout(60, move || {
        const N: u64 = 1000;
        let rt = Runtime::builder().workers(1).build().unwrap();
        let n = rt.block_on(|| allocs_of(|| (0..N).for_each(step)));
        eprintln!("allocations per {what}: {n} / {N}");
        assert_eq!(n, 0, "{n} allocations for {N} of {what}");
    });
}

/// An actor spawned with a mailbox adds the mailbox's shared half, a block
/// from the same cache (it went to the global allocator before): after a
/// warm-up, a spawn with a mailbox, a message and a join allocate nothing.
#[test]
fn mailboxes_reuse_their_blocks() {
    assert_steps_allocate_nothing("spawn with a mailbox, send and join", |i| {
        let (addr, h) = smarm::spawn_actor(|mut mb: Mailbox<u64>| mb.recv().unwrap() * 3);
        addr.send(i).unwrap();
        drop(addr);
        assert_eq!(h.join().unwrap(), i * 3);
    });
}

/// An unbounded channel's shared half and its queue's nodes come from the
/// worker's block cache and go back there when the last half is dropped:
/// after a warm-up, making a channel, a message through it and dropping
/// both halves allocate nothing (two per channel before: the shared half
/// and, freed to the global allocator, its queue's stub node).
#[test]
fn channels_reuse_their_blocks() {
    assert_steps_allocate_nothing("channel, send and receive", |i| {
        let (tx, mut rx) = smarm::channel::<u64>();
        tx.send(i).unwrap();
        drop(tx);
        assert_eq!(rx.recv(), Ok(i));
        assert!(rx.recv().is_err(), "the channel outlived its one sender");
    });
}

/// A oneshot per request (the reply slot of a call) takes its block from
/// the worker's cache and gives it back.
#[test]
fn oneshots_reuse_their_blocks() {
    assert_steps_allocate_nothing("oneshot, send and receive", |i| {
        let (tx, rx) = smarm::oneshot::<u64>();
        tx.send(i).unwrap();
        assert_eq!(rx.recv(), Ok(i));
    });
}

/// A bounded channel's shared half and its queue's nodes come from the
/// worker's cache too (filled to its capacity, then drained).
#[test]
fn bounded_channels_reuse_their_blocks() {
    assert_steps_allocate_nothing("bounded channel, fill and drain", |i| {
        let (tx, mut rx) = smarm::bounded::<u64>(2);
        tx.send(i).unwrap();
        tx.send(i + 1).unwrap();
        assert!(tx.try_send(i + 2).is_err(), "a channel of 2 took a third message");
        drop(tx);
        assert_eq!((rx.recv(), rx.recv()), (Ok(i), Ok(i + 1)));
        assert!(rx.recv().is_err(), "the channel outlived its one sender");
    });
}

/// A receive on an actor's own mailbox registers without a reference (the
/// mailbox pins its actor instead, until its last address goes), and the
/// parked actor keeps its worker's reference for the waker that moves it
/// out. Each round here parks an actor in a receive and ends it through
/// one of those wakes: a send (the registration's waker), or a kill (a
/// waker with a reference of its own, which must drop that one). Every
/// block comes back: a reference kept once too often would leave an
/// actor's control block allocated per round (a pin never released, a
/// killer's reference never dropped), and the worker's block cache would
/// have to allocate anew for each round's spawn.
#[test]
fn actors_woken_or_killed_in_a_receive_leave_nothing_behind() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let round = |i: u32| {
                // Work-first: the child runs inside the spawn, up to its
                // park in `recv`, before the spawn returns.
                smarm_tests::next_spawn_work_first();
                let (a, h) = smarm::spawn_actor(|mut mb: Mailbox<u32>| mb.recv().unwrap());
                if i.is_multiple_of(2) {
                    a.send(i).unwrap();
                    assert_eq!(h.join().unwrap(), i);
                } else {
                    h.actor_ref().kill();
                    assert!(h.join().unwrap_err().is_killed());
                }
                drop(a);
            };
            // Warm-up: the registry's and the stack pool's vectors grow.
            for i in 0..256 {
                round(i);
            }
            smarm_tests::track_allocs(true);
            let before = smarm_tests::live_bytes();
            const ROUNDS: u32 = 2000;
            for i in 0..ROUNDS {
                round(i);
            }
            let grew = smarm_tests::live_bytes() - before;
            smarm_tests::track_allocs(false);
            // A control block is a few hundred bytes: one kept per round
            // would be hundreds of KiB.
            assert!(
                grew < 16 * 1024,
                "{grew} B still allocated after {ROUNDS} rounds ({} B a round)",
                grew / i64::from(ROUNDS)
            );
        });
    });
}
