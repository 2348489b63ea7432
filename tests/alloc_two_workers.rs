//! Steady-state messaging on two workers never grows memory. The measured
//! actors migrate between the workers (a wake runs the woken actor on the
//! waker's worker; an idle worker takes queued ones), so a message node may be taken
//! from one worker's node cache and freed into the other's. On one worker
//! messaging allocates nothing at all (`mailbox_alloc`, `channel_alloc`);
//! here the two caches' levels drift apart as actors migrate, a cache that
//! runs dry takes a magazine from the runtime's node depot, or a node from
//! the allocator when there is none, and a full one (at
//! `NodeCache::CLASS_CAP`, 1,024 blocks per size class) spills its list to
//! the depot, or to the allocator when the depot is full, so a few
//! allocations per 10^5 messages happen (docs/reliability.md,
//! "Allocation"). What must hold: every node allocated is freed again or
//! kept in a cache or the depot, so the blocks alive at the end exceed
//! those at the start by at most what two caches and the depot hold. A node leaked or never recycled
//! fails it (one per message). Every thread's allocations are counted
//! while measuring ([`track_all_allocs`]): this binary holds one test, so
//! the harness allocates nothing meanwhile.
//!
//! [`track_all_allocs`]: smarm_tests::track_all_allocs

use smarm_tests::smarm::{self, bounded, channel, Addr, Mailbox, Runtime};
use smarm_tests::with_timeout;

#[global_allocator]
static GLOBAL: smarm_tests::CountingAlloc = smarm_tests::CountingAlloc;

const WARM: u64 = 2_000;
const WORKERS: usize = 2;
const MEASURED: u64 = 50_000;

/// Blocks of one size class (`block` bytes each) that two workers' node
/// caches and the depot between them can hold, plus the nodes in flight:
/// `NodeCache::CLASS_CAP` (1,024) in a cache; in the depot, lists of 1,024
/// up to 1 MiB of blocks per class, at least two (`DEPOT_CLASS_BYTES`,
/// core/src/sched/mod.rs). Each flow below sends more messages than this,
/// so a node leaked or never recycled per message exceeds it.
const fn cached_max(block: i64) -> i64 {
    let lists = (1 << 20) / (1024 * block);
    let depot = if lists > 2 { lists } else { 2 };
    (2 + depot) * 1024 + 16
}

/// A message node's block (`Node<T>`: a link and the message, rounded up
/// to 16 bytes).
const fn block_of<T>() -> i64 {
    let size = 8 + std::mem::size_of::<T>() as i64;
    (size + 15) / 16 * 16
}

/// Every thread's allocations and deallocations while `f` runs.
#[derive(Debug, Clone, Copy)]
struct Counts {
    allocs: u64,
    frees: u64,
}

impl Counts {
    fn growth(self) -> i64 {
        self.allocs as i64 - self.frees as i64
    }
}

fn measure(f: impl FnOnce()) -> Counts {
    smarm_tests::track_all_allocs(true);
    let (a, d) = (smarm_tests::allocs(), smarm_tests::frees());
    f();
    let n = Counts {
        allocs: smarm_tests::allocs() - a,
        frees: smarm_tests::frees() - d,
    };
    smarm_tests::track_all_allocs(false);
    n
}

enum Msg {
    Peer(Addr<Msg>),
    N(u64),
}

/// A mailbox ping-pong between two actors: 2 x `MEASURED` messages.
fn mailboxes(rt: &Runtime) -> (Counts, Vec<usize>) {
    rt.block_on(|| {
        let (b, hb) = smarm::spawn_actor(|mut mb: Mailbox<Msg>| {
            let Msg::Peer(a) = mb.recv().unwrap() else {
                panic!("peer first")
            };
            let mut workers = Vec::with_capacity(WORKERS);
            loop {
                match mb.recv().unwrap() {
                    Msg::N(u64::MAX) => return workers,
                    Msg::N(v) => {
                        note_worker(&mut workers);
                        a.send(Msg::N(v)).unwrap()
                    }
                    Msg::Peer(_) => panic!("one peer"),
                }
            }
        });
        let b2 = b.clone();
        let (a, ha) = smarm::spawn_actor(move |mut mb: Mailbox<Msg>| {
            b2.send(Msg::Peer(mb.addr())).unwrap();
            let mut round = |i: u64| {
                b2.send(Msg::N(i)).unwrap();
                match mb.recv().unwrap() {
                    Msg::N(v) => assert_eq!(v, i),
                    Msg::Peer(_) => panic!("unexpected peer"),
                }
            };
            for i in 0..WARM {
                round(i);
            }
            let n = measure(|| {
                for i in 0..MEASURED {
                    round(i);
                }
            });
            b2.send(Msg::N(u64::MAX)).unwrap();
            n
        });
        drop((a, b));
        let workers = hb.join().unwrap();
        (ha.join().unwrap(), workers)
    })
}

/// A channel ping-pong: one ping and one pong over unbounded channels, then
/// two each way over bounded channels of capacity 1, so the second send of
/// each pair parks until the first is taken: 6 x `MEASURED` messages.
fn channels(rt: &Runtime) -> (Counts, Vec<usize>) {
    rt.block_on(|| {
        let (ping_tx, mut ping_rx) = channel::<u64>();
        let (pong_tx, mut pong_rx) = channel::<u64>();
        let (there_tx, mut there_rx) = bounded::<u64>(1);
        let (back_tx, mut back_rx) = bounded::<u64>(1);
        let echo = smarm::spawn(move || {
            let mut workers = Vec::with_capacity(WORKERS);
            while let Ok(v) = ping_rx.recv() {
                note_worker(&mut workers);
                pong_tx.send(v).unwrap();
                assert_eq!(there_rx.recv(), Ok(v));
                assert_eq!(there_rx.recv(), Ok(v));
                back_tx.send(v).unwrap();
                back_tx.send(v).unwrap();
            }
            workers
        });
        let mut round = |i: u64| {
            ping_tx.send(i).unwrap();
            assert_eq!(pong_rx.recv(), Ok(i));
            there_tx.send(i).unwrap();
            there_tx.send(i).unwrap();
            assert_eq!(back_rx.recv(), Ok(i));
            assert_eq!(back_rx.recv(), Ok(i));
        };
        for i in 0..WARM {
            round(i);
        }
        let n = measure(|| {
            for i in 0..MEASURED {
                round(i);
            }
        });
        drop(ping_tx);
        (n, echo.join().unwrap())
    })
}

/// A one-way flow, Savina's Counting: a producer sends `MEASURED` numbers
/// to a consumer's mailbox without waiting, then one ack request. Nodes
/// are allocated on the producer's worker and freed on the consumer's:
/// with the two on different workers (an idle worker takes the queued
/// consumer while the producer keeps sending), the producer's cache runs
/// dry and the consumer's fills, and the depot between them
/// (`lockfree/node_depot.rs`) brings the blocks back; without it, each
/// message cost the allocator a block and a free.
fn one_way(rt: &Runtime) -> (Counts, Vec<usize>, Vec<usize>) {
    rt.block_on(|| {
        let (ack_tx, mut ack_rx) = channel::<u64>();
        let (consumer, hc) = smarm::spawn_actor(move |mut mb: Mailbox<Option<u64>>| {
            let mut workers = Vec::with_capacity(WORKERS);
            let mut next = 0;
            while let Ok(m) = mb.recv() {
                note_worker(&mut workers);
                match m {
                    Some(v) => {
                        assert_eq!(v, next, "out of order");
                        next += 1;
                    }
                    None => ack_tx.send(next).unwrap(),
                }
            }
            workers
        });
        let producer = smarm::spawn(move || {
            let mut workers = Vec::with_capacity(WORKERS);
            let mut sent = 0;
            let mut flow = |n: u64| {
                for _ in 0..n {
                    consumer.send(Some(sent)).unwrap();
                    sent += 1;
                }
                note_worker(&mut workers);
                consumer.send(None).unwrap();
                assert_eq!(ack_rx.recv(), Ok(sent), "the ack counts every message");
            };
            flow(WARM);
            let n = measure(|| flow(MEASURED));
            (n, workers)
        });
        let (n, pw) = producer.join().unwrap();
        (n, pw, hc.join().unwrap())
    })
}

/// Records the worker the echoing actor runs on, once each: allocation-free,
/// as `workers` was made with room for every worker.
fn note_worker(workers: &mut Vec<usize>) {
    let w = smarm::current_worker().expect("on a worker");
    if !workers.contains(&w) {
        workers.push(w);
    }
}

#[test]
fn steady_state_messaging_on_two_workers_never_grows_memory() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(WORKERS).build().unwrap();
        let (m, mw) = mailboxes(&rt);
        let (c, cw) = channels(&rt);
        let (o, opw, ocw) = one_way(&rt);
        eprintln!(
            "mailboxes: {m:?} in {} messages, echo on workers {mw:?}; \
             channels: {c:?} in {} messages, echo on workers {cw:?}; \
             one way: {o:?} in {MEASURED} messages, producer on {opw:?}, consumer on {ocw:?}",
            2 * MEASURED,
            6 * MEASURED
        );
        let (mb, cb, ob) = (block_of::<Msg>(), block_of::<u64>(), block_of::<Option<u64>>());
        // What the bounds are for: one leaked node per message exceeds them.
        assert!(cached_max(mb) < 2 * MEASURED as i64 && cached_max(ob) < MEASURED as i64);
        assert!(cached_max(cb) < 6 * MEASURED as i64);
        assert!(
            m.growth() <= cached_max(mb),
            "mailbox messaging grew memory: {m:?}"
        );
        assert!(
            c.growth() <= cached_max(cb),
            "channel messaging grew memory: {c:?}"
        );
        assert!(o.growth() <= cached_max(ob), "a one-way flow grew memory: {o:?}");
    });
}
