//! Steady-state messaging allocates nothing: after a warm-up, 100,000
//! messages between two actors make zero heap allocations (message nodes
//! are recycled through the worker's node cache; parking and waking reuse
//! the actors' own state).
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use smarm_tests::smarm::{self, Addr, Mailbox, Runtime};
use smarm_tests::with_timeout;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

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

enum Msg {
    Peer(Addr<Msg>),
    N(u64),
}

fn ping_pong(mb: &mut Mailbox<Msg>, peer: &Addr<Msg>, n: u64) {
    for i in 0..n {
        peer.send(Msg::N(i)).unwrap();
        match mb.recv() {
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
                let Msg::Peer(a) = mb.recv() else {
                    panic!("peer first")
                };
                loop {
                    match mb.recv() {
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
                TRACK.with(|t| t.set(true));
                let before = ALLOCS.load(Ordering::Relaxed);
                ping_pong(&mut mb, &b2, 50_000); // 100,000 messages
                let after = ALLOCS.load(Ordering::Relaxed);
                TRACK.with(|t| t.set(false));
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
