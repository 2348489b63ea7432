//! Stress for the mailbox park protocol: many short ping-pong pairs on two
//! workers, repeated, so that a receiver's withdraw often loses to a sender
//! (whose wake then lands on a later registration). Before the WAKING state
//! existed, a stale wake resumed a receiver whose registration was still in
//! place and it spun or slept forever (seen about once in 60 runs of
//! msg_pairs --pairs 1024 --rounds 16): this test hung then.
use smarm_tests::smarm::{self, Addr, Mailbox, Runtime};
use smarm_tests::with_timeout;

enum Msg {
    Peer(Addr<Msg>),
    Ball(u32),
}

fn play(mb: &mut Mailbox<Msg>, peer: &Addr<Msg>) -> u32 {
    let mut seen = 0;
    loop {
        match mb.recv() {
            Msg::Ball(n) => {
                seen += 1;
                if n == 0 {
                    return seen;
                }
                peer.send(Msg::Ball(n - 1)).unwrap();
                if n == 1 {
                    return seen;
                }
            }
            Msg::Peer(_) => unreachable!(),
        }
    }
}

#[test]
fn short_pairs_on_two_workers_never_lose_a_wake() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        for round in 0..150 {
            let total = rt.block_on(|| {
                let mut hs = Vec::new();
                for _ in 0..1024 {
                    let (a, ha) = smarm::spawn_actor(|mut mb: Mailbox<Msg>| {
                        let Msg::Peer(b) = mb.recv() else { unreachable!() };
                        b.send(Msg::Ball(31)).unwrap();
                        play(&mut mb, &b)
                    });
                    let a2 = a.clone();
                    let (b, hb) = smarm::spawn_actor(move |mut mb: Mailbox<Msg>| play(&mut mb, &a2));
                    a.send(Msg::Peer(b)).unwrap();
                    hs.push(ha);
                    hs.push(hb);
                }
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
            });
            assert_eq!(total, 1024 * 32, "round {round}: balls lost or duplicated");
        }
    });
}
