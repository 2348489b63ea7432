//! Steady-state messaging allocates nothing: after a warm-up, 100,000
//! messages between two actors make zero heap allocations (message nodes
//! are recycled through the worker's node cache; parking and waking reuse
//! the actors' own state), and a burst of queued messages like one before
//! it reuses that one's nodes (through the runtime's node depot).

use smarm_tests::smarm::{self, Addr, Mailbox, Runtime};
use smarm_tests::with_timeout;

#[global_allocator]
static GLOBAL: smarm_tests::CountingAlloc = smarm_tests::CountingAlloc;

/// The allocation counter is one for the whole binary: the tests take
/// turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

enum Msg {
    Peer(Addr<Msg>),
    N(u64),
}

fn ping_pong(mb: &mut Mailbox<Msg>, peer: &Addr<Msg>, n: u64) {
    for i in 0..n {
        peer.send(Msg::N(i)).unwrap();
        match mb.recv().unwrap() {
            Msg::N(v) => assert_eq!(v, i),
            Msg::Peer(_) => panic!("unexpected peer"),
        }
    }
}

#[test]
fn hundred_thousand_messages_allocate_nothing_after_warm_up() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let allocs = rt.block_on(|| {
            // `b` echoes every number back to the peer it is told first.
            let (b, hb) = smarm::spawn_actor(|mut mb: Mailbox<Msg>| {
                let Msg::Peer(a) = mb.recv().unwrap() else {
                    panic!("peer first")
                };
                loop {
                    match mb.recv().unwrap() {
                        Msg::N(u64::MAX) => return,
                        Msg::N(v) => a.send(Msg::N(v)).unwrap(),
                        Msg::Peer(_) => panic!("one peer"),
                    }
                }
            });
            let b2 = b.clone();
            let (a, ha) = smarm::spawn_actor(move |mut mb: Mailbox<Msg>| {
                b2.send(Msg::Peer(mb.addr())).unwrap();
                ping_pong(&mut mb, &b2, 1000); // warm-up: fills the node cache
                smarm_tests::track_allocs(true);
                let before = smarm_tests::allocs();
                ping_pong(&mut mb, &b2, 50_000); // 100,000 messages
                let after = smarm_tests::allocs();
                smarm_tests::track_allocs(false);
                b2.send(Msg::N(u64::MAX)).unwrap();
                after - before
            });
            drop((a, b));
            hb.join().unwrap();
            ha.join().unwrap()
        });
        assert_eq!(allocs, 0, "steady-state messaging allocated {allocs} times");
    });
}

/// Queues `n` numbers in the calling actor's own mailbox, then takes them
/// all back, in order.
fn burst(mb: &mut Mailbox<u64>, n: u64) {
    let me = mb.addr();
    for i in 0..n {
        me.send(i).unwrap();
    }
    for i in 0..n {
        assert_eq!(mb.try_recv().unwrap(), i);
    }
}

#[test]
fn a_burst_of_queued_messages_comes_back_without_allocating() {
    // 20,000 queued nodes are 20 magazines beyond the worker's cache: the
    // runtime's node depot keeps them after the first burst's receives
    // (it keeps 1 MiB per size class), and the second burst's sends take
    // them back instead of the allocator (with a depot of one magazine per
    // worker, ~17,000 of them came from the allocator in every burst).
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    with_timeout(60, || {
        const N: u64 = 20_000;
        let rt = Runtime::builder().workers(1).build().unwrap();
        let allocs = rt.block_on(|| {
            let (_, h) = smarm::spawn_actor(|mut mb: Mailbox<u64>| {
                burst(&mut mb, N); // warm-up: the nodes come from the allocator
                smarm_tests::track_allocs(true);
                let before = smarm_tests::allocs();
                burst(&mut mb, N);
                let after = smarm_tests::allocs();
                smarm_tests::track_allocs(false);
                after - before
            });
            h.join().unwrap()
        });
        assert_eq!(allocs, 0, "a second burst of {N} allocated {allocs} times");
    });
}
