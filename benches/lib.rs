//! Shared helpers for the benches: the host's port crate as `smarm`, and
//! the tokio runtimes each workload is compared against in the same binary.

#[cfg(target_os = "linux")]
pub use smarm_linux as smarm;

#[cfg(target_vendor = "apple")]
pub use smarm_darwin as smarm;

/// The port's name, printed in every bench group so results from different
/// hosts are not mixed up.
pub fn port_name() -> &'static str {
    if cfg!(target_os = "linux") {
        "linux"
    } else {
        "darwin"
    }
}

/// A smarm runtime with `workers` workers.
pub fn smarm_rt(workers: usize) -> smarm::Runtime {
    smarm::Runtime::builder()
        .workers(workers)
        .build()
        .expect("smarm runtime")
}

/// Ping-pong messages for the pair benches: a ball with the sends left.
pub enum Ball {
    /// The partner's address (sent once).
    Peer(smarm::Addr<Ball>),
    /// Sends left after this one.
    Left(u64),
}

/// One smarm player: receives balls and returns each with one fewer until
/// the count runs out. Returns the balls it received.
pub fn smarm_play(mb: &mut smarm::Mailbox<Ball>, peer: &smarm::Addr<Ball>) -> u64 {
    let mut seen = 0;
    loop {
        match mb.recv() {
            Ball::Left(n) => {
                seen += 1;
                if n == 0 {
                    return seen;
                }
                peer.send(Ball::Left(n - 1)).expect("partner alive");
                if n == 1 {
                    return seen;
                }
            }
            Ball::Peer(_) => unreachable!("peer already known"),
        }
    }
}

/// Runs `pairs` smarm ping-pong pairs of `msgs_each` messages (inside an
/// actor); returns the messages counted.
pub fn smarm_pairs(pairs: u64, msgs_each: u64) -> u64 {
    let mut hs = Vec::with_capacity(2 * pairs as usize);
    for _ in 0..pairs {
        let (a, ha) = smarm::spawn_actor(move |mut mb: smarm::Mailbox<Ball>| {
            let Ball::Peer(b) = mb.recv() else {
                unreachable!("peer first")
            };
            b.send(Ball::Left(msgs_each - 1)).expect("partner alive");
            smarm_play(&mut mb, &b)
        });
        let a2 = a.clone();
        let (b, hb) = smarm::spawn_actor(move |mut mb: smarm::Mailbox<Ball>| smarm_play(&mut mb, &a2));
        a.send(Ball::Peer(b)).expect("pinger alive");
        hs.push(ha);
        hs.push(hb);
    }
    hs.into_iter().map(|h| h.join().expect("player")).sum()
}
