//! Steady-state messaging allocates nothing: after a warm-up, 100,000
//! messages between two actors make zero heap allocations (message nodes
//! are recycled through the worker's node cache; parking and waking reuse
//! the actors' own state).

use smarm_tests::smarm::{self, Addr, Mailbox, Runtime};
use smarm_tests::with_timeout;

#[global_allocator]
static GLOBAL: smarm_tests::CountingAlloc = smarm_tests::CountingAlloc;

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
