//! savina: five actor workloads of the Savina suite, smarm mailboxes vs
//! tokio tasks with unbounded `tokio::sync::mpsc` channels, in the same
//! binary (smarm on its default run queue, `smarm/`, and on the one shared
//! ring, `smarm_ring/`), on each worker count of `SMARM_BENCH_WORKERS` (default 1, 2 and
//! all CPUs; tokio current_thread for 1, multi_thread otherwise). One
//! iteration builds the actors, runs the workload to the end and checks its
//! result (a wrong run panics). Throughput is in messages, so criterion's
//! time per element is ns per message.
//!
//! - `savina_threadring`: 503 actors in a ring pass a token 50,000 hops;
//!   when it reaches 0 its holder stops, and the ring unwinds as each
//!   mailbox closes (the last `Addr` gone).
//! - `savina_counting`: one producer sends 100,000 increments to a counter
//!   actor, then asks for the total (a oneshot reply).
//! - `savina_big`: 128 actors; each sends 200 pings, one at a time, to
//!   random others (a per-actor xorshift, the same sequence on both sides)
//!   and answers every ping it gets with a pong (the first ping once all
//!   know their peers); a sink stops them all once each has had its 200
//!   pongs.
//! - `savina_chameneos`: 32 creatures meet through a meeting-place broker,
//!   which pairs arrivals two by two and tells each the other's colour,
//!   10,000 meetings; then every creature is told to stop.
//! - `savina_fjthroughput`: one producer sends 1,000 messages to each of 32
//!   workers (round robin); each does a small computation per message.
//!
//! `cargo bench -p smarm-benches --bench savina`

#[path = "tokio_side.rs"]
mod tokio_side;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput};
use smarm_benches::{port_name, smarm, smarm_rt, smarm_rt_with, worker_counts};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_side::{in_task, tokio_rt};

// ---------------------------------------------------------------- ThreadRing

const RING: usize = 503;
const HOPS: u64 = 50_000;

enum RingMsg {
    Next(smarm::Addr<RingMsg>),
    Token(u64),
}

/// Returns the hops forwarded, over the whole ring.
fn smarm_threadring() -> u64 {
    let (addrs, hs): (Vec<_>, Vec<_>) = (0..RING)
        .map(|_| {
            smarm::spawn_actor(|mut mb: smarm::Mailbox<RingMsg>| {
                let Ok(RingMsg::Next(next)) = mb.recv() else {
                    unreachable!("the next actor first")
                };
                let mut hops = 0u64;
                // Err: the previous actor stopped (its Addr, the last, is gone).
                while let Ok(m) = mb.recv() {
                    match m {
                        RingMsg::Token(0) => break,
                        RingMsg::Token(n) => {
                            hops += 1;
                            next.send(RingMsg::Token(n - 1)).expect("next alive");
                        }
                        RingMsg::Next(_) => unreachable!("next already known"),
                    }
                }
                hops
            })
        })
        .unzip();
    for (i, a) in addrs.iter().enumerate() {
        a.send(RingMsg::Next(addrs[(i + 1) % RING].clone()))
            .expect("alive");
    }
    addrs[0].send(RingMsg::Token(HOPS)).expect("alive");
    drop(addrs);
    hs.into_iter().map(|h| h.join().expect("ring actor")).sum()
}

async fn tokio_threadring() -> u64 {
    let (txs, rxs): (Vec<UnboundedSender<u64>>, Vec<UnboundedReceiver<u64>>) =
        (0..RING).map(|_| unbounded_channel()).unzip();
    let first = txs[0].clone();
    let mut nexts = txs;
    nexts.rotate_left(1);
    let hs: Vec<_> = rxs
        .into_iter()
        .zip(nexts)
        .map(|(mut rx, next)| {
            tokio::spawn(async move {
                let mut hops = 0u64;
                while let Some(n) = rx.recv().await {
                    if n == 0 {
                        break;
                    }
                    hops += 1;
                    next.send(n - 1).expect("next alive");
                }
                hops
            })
        })
        .collect();
    first.send(HOPS).expect("alive");
    drop(first);
    let mut sum = 0;
    for h in hs {
        sum += h.await.expect("ring task");
    }
    sum
}

// ---------------------------------------------------------------- Counting

const COUNT: u64 = 100_000;

enum CountMsg {
    Inc,
    Get(smarm::OneshotSender<u64>),
}

fn smarm_counting() -> u64 {
    let (counter, h) = smarm::spawn_actor(|mut mb: smarm::Mailbox<CountMsg>| {
        let mut n = 0u64;
        while let Ok(m) = mb.recv() {
            match m {
                CountMsg::Inc => n += 1,
                CountMsg::Get(reply) => reply.send(n).expect("asker alive"),
            }
        }
    });
    for _ in 0..COUNT {
        counter.send(CountMsg::Inc).expect("counter alive");
    }
    let (tx, rx) = smarm::oneshot();
    counter.send(CountMsg::Get(tx)).expect("counter alive");
    let total = rx.recv().expect("total");
    drop(counter);
    h.join().expect("counter");
    total
}

enum TokioCountMsg {
    Inc,
    Get(tokio::sync::oneshot::Sender<u64>),
}

async fn tokio_counting() -> u64 {
    let (counter, mut rx) = unbounded_channel();
    let h = tokio::spawn(async move {
        let mut n = 0u64;
        while let Some(m) = rx.recv().await {
            match m {
                TokioCountMsg::Inc => n += 1,
                TokioCountMsg::Get(reply) => reply.send(n).expect("asker alive"),
            }
        }
    });
    for _ in 0..COUNT {
        counter.send(TokioCountMsg::Inc).expect("counter alive");
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    counter.send(TokioCountMsg::Get(tx)).expect("counter alive");
    let total = rx.await.expect("total");
    drop(counter);
    h.await.expect("counter");
    total
}

// ---------------------------------------------------------------- Big

const BIG_ACTORS: usize = 128;
const BIG_PINGS: u64 = 200;

/// A per-actor xorshift: the same neighbours on both sides.
struct Rng(u64);

impl Rng {
    fn new(seed: usize) -> Self {
        Rng(0x9e37_79b9_7f4a_7c15 ^ (seed as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9))
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// A random index in 0..n other than `me`.
    fn other(&mut self, me: usize, n: usize) -> usize {
        let j = (self.next() % (n as u64 - 1)) as usize;
        if j >= me {
            j + 1
        } else {
            j
        }
    }
}

enum BigMsg<A> {
    Peers(Arc<Vec<A>>),
    /// Sent once every actor knows its peers: send the first ping.
    Start,
    Ping(usize),
    Pong,
    Exit,
}

type SmarmBig = smarm::Addr<BigMsg<SmarmPeer>>;
/// smarm's peer table entry (a newtype: `BigMsg` names its own address type).
struct SmarmPeer(SmarmBig);

/// Returns the pongs received, over all actors (checked by the sink too).
fn smarm_big() -> u64 {
    let (sink, sink_h) = smarm::spawn_actor(|mut mb: smarm::Mailbox<BigMsg<SmarmPeer>>| {
        let Ok(BigMsg::Peers(peers)) = mb.recv() else {
            unreachable!("peers first")
        };
        for _ in 0..BIG_ACTORS {
            let Ok(BigMsg::Pong) = mb.recv() else {
                unreachable!("only done reports")
            };
        }
        for p in peers.iter() {
            p.0.send(BigMsg::Exit).expect("actor alive");
        }
    });
    let (addrs, hs): (Vec<_>, Vec<_>) = (0..BIG_ACTORS)
        .map(|me| {
            let sink = sink.clone();
            smarm::spawn_actor(move |mut mb: smarm::Mailbox<BigMsg<SmarmPeer>>| {
                let Ok(BigMsg::Peers(peers)) = mb.recv() else {
                    unreachable!("peers first")
                };
                let mut rng = Rng::new(me);
                let (mut sent, mut pongs) = (1, 0u64);
                loop {
                    match mb.recv().expect("peers alive") {
                        BigMsg::Start => peers[rng.other(me, BIG_ACTORS)]
                            .0
                            .send(BigMsg::Ping(me))
                            .expect("alive"),
                        BigMsg::Ping(from) => peers[from].0.send(BigMsg::Pong).expect("alive"),
                        BigMsg::Pong => {
                            pongs += 1;
                            if sent < BIG_PINGS {
                                sent += 1;
                                peers[rng.other(me, BIG_ACTORS)]
                                    .0
                                    .send(BigMsg::Ping(me))
                                    .expect("alive");
                            } else {
                                sink.send(BigMsg::Pong).expect("sink alive");
                            }
                        }
                        BigMsg::Exit => return pongs,
                        BigMsg::Peers(_) => unreachable!("peers already known"),
                    }
                }
            })
        })
        .unzip();
    let peers = Arc::new(addrs.into_iter().map(SmarmPeer).collect::<Vec<_>>());
    sink.send(BigMsg::Peers(peers.clone())).expect("sink alive");
    for p in peers.iter() {
        p.0.send(BigMsg::Peers(peers.clone())).expect("actor alive");
    }
    // Pings may reach an actor before its Start, never before its Peers.
    for p in peers.iter() {
        p.0.send(BigMsg::Start).expect("actor alive");
    }
    drop((peers, sink));
    let pongs = hs.into_iter().map(|h| h.join().expect("big actor")).sum();
    sink_h.join().expect("sink");
    pongs
}

/// tokio's peer table entry.
struct TokioPeer(UnboundedSender<BigMsg<TokioPeer>>);

async fn tokio_big() -> u64 {
    let (sink, mut sink_rx) = unbounded_channel::<BigMsg<TokioPeer>>();
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..BIG_ACTORS)
        .map(|_| unbounded_channel::<BigMsg<TokioPeer>>())
        .unzip();
    let peers = Arc::new(txs.into_iter().map(TokioPeer).collect::<Vec<_>>());
    let sink_peers = peers.clone();
    let sink_h = tokio::spawn(async move {
        for _ in 0..BIG_ACTORS {
            let Some(BigMsg::Pong) = sink_rx.recv().await else {
                unreachable!("only done reports")
            };
        }
        for p in sink_peers.iter() {
            p.0.send(BigMsg::Exit).expect("actor alive");
        }
    });
    let hs: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(me, mut rx)| {
            let (sink, peers) = (sink.clone(), peers.clone());
            tokio::spawn(async move {
                let mut rng = Rng::new(me);
                let (mut sent, mut pongs) = (1, 0u64);
                loop {
                    match rx.recv().await.expect("peers alive") {
                        BigMsg::Start => peers[rng.other(me, BIG_ACTORS)]
                            .0
                            .send(BigMsg::Ping(me))
                            .expect("alive"),
                        BigMsg::Ping(from) => peers[from].0.send(BigMsg::Pong).expect("alive"),
                        BigMsg::Pong => {
                            pongs += 1;
                            if sent < BIG_PINGS {
                                sent += 1;
                                peers[rng.other(me, BIG_ACTORS)]
                                    .0
                                    .send(BigMsg::Ping(me))
                                    .expect("alive");
                            } else {
                                sink.send(BigMsg::Pong).expect("sink alive");
                            }
                        }
                        BigMsg::Exit => return pongs,
                        BigMsg::Peers(_) => unreachable!("peers known from the start"),
                    }
                }
            })
        })
        .collect();
    for p in peers.iter() {
        p.0.send(BigMsg::Start).expect("actor alive");
    }
    drop((peers, sink));
    let mut pongs = 0;
    for h in hs {
        pongs += h.await.expect("big task");
    }
    sink_h.await.expect("sink");
    pongs
}

// ---------------------------------------------------------------- Chameneos

const CREATURES: usize = 32;
const MEETINGS: u64 = 10_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Colour {
    Blue,
    Red,
    Yellow,
}

impl Colour {
    fn of(i: usize) -> Self {
        [Colour::Blue, Colour::Red, Colour::Yellow][i % 3]
    }
    /// The shootout's complement: the colour both take after a meeting.
    fn meet(self, other: Colour) -> Colour {
        use Colour::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Blue, Red) | (Red, Blue) => Yellow,
            (Blue, Yellow) | (Yellow, Blue) => Red,
            _ => Blue,
        }
    }
}

/// To the broker: creature `id` of colour `Colour` wants to meet.
struct Meet(usize, Colour);

/// To a creature: met one of this colour, or stop.
enum Reply {
    Met(Colour),
    Stop,
}

/// The broker's state machine, shared by both sides: what to send to whom
/// on an arrival (at most two replies).
struct Broker {
    waiting: Option<Meet>,
    meetings: u64,
    stopped: usize,
}

impl Broker {
    fn new() -> Self {
        Broker {
            waiting: None,
            meetings: 0,
            stopped: 0,
        }
    }
    /// Replies for arrival `m`: once the meetings are done (none is
    /// waiting then: the last one paired it), every arrival is stopped.
    fn arrive(&mut self, m: Meet, mut reply: impl FnMut(usize, Reply)) {
        if self.meetings == MEETINGS {
            self.stopped += 1;
            return reply(m.0, Reply::Stop);
        }
        match self.waiting.take() {
            None => self.waiting = Some(m),
            Some(w) => {
                self.meetings += 1;
                reply(w.0, Reply::Met(m.1));
                reply(m.0, Reply::Met(w.1));
            }
        }
    }
    fn done(&self) -> bool {
        self.stopped == CREATURES
    }
}

/// A creature's loop body: the meetings it had, once stopped.
fn creature_meets(mut colour: Colour, mut ask: impl FnMut(Colour) -> Reply) -> u64 {
    let mut met = 0;
    loop {
        match ask(colour) {
            Reply::Met(other) => {
                met += 1;
                colour = colour.meet(other);
            }
            Reply::Stop => return met,
        }
    }
}

enum BrokerMsg {
    Creatures(Vec<smarm::Addr<Reply>>),
    Meet(Meet),
}

/// (meetings counted by the broker, meetings counted by the creatures).
fn smarm_chameneos() -> (u64, u64) {
    let (broker, bh) = smarm::spawn_actor(|mut mb: smarm::Mailbox<BrokerMsg>| {
        // Creatures may run as soon as they are spawned and arrive
        // before their addresses do: those arrivals wait.
        let mut early = Vec::new();
        let cs = loop {
            match mb.recv().expect("creatures alive") {
                BrokerMsg::Creatures(cs) => break cs,
                BrokerMsg::Meet(m) => early.push(m),
            }
        };
        let mut b = Broker::new();
        for m in early {
            b.arrive(m, |to, r| cs[to].send(r).expect("creature alive"));
        }
        while !b.done() {
            let Ok(BrokerMsg::Meet(m)) = mb.recv() else {
                unreachable!("creatures alive")
            };
            b.arrive(m, |to, r| cs[to].send(r).expect("creature alive"));
        }
        b.meetings
    });
    let (cs, hs): (Vec<_>, Vec<_>) = (0..CREATURES)
        .map(|id| {
            let broker = broker.clone();
            smarm::spawn_actor(move |mut mb: smarm::Mailbox<Reply>| {
                creature_meets(Colour::of(id), |c| {
                    broker.send(BrokerMsg::Meet(Meet(id, c))).expect("broker alive");
                    mb.recv().expect("broker alive")
                })
            })
        })
        .unzip();
    broker.send(BrokerMsg::Creatures(cs)).expect("broker alive");
    drop(broker);
    let met = hs.into_iter().map(|h| h.join().expect("creature")).sum();
    (bh.join().expect("broker"), met)
}

async fn tokio_chameneos() -> (u64, u64) {
    let (broker, mut brx) = unbounded_channel::<Meet>();
    let (cs, crxs): (Vec<_>, Vec<_>) = (0..CREATURES).map(|_| unbounded_channel::<Reply>()).unzip();
    let bh = tokio::spawn(async move {
        let mut b = Broker::new();
        while !b.done() {
            let m = brx.recv().await.expect("creatures alive");
            b.arrive(m, |to, r| cs[to].send(r).expect("creature alive"));
        }
        b.meetings
    });
    let hs: Vec<_> = crxs
        .into_iter()
        .enumerate()
        .map(|(id, mut rx)| {
            let broker = broker.clone();
            tokio::spawn(async move {
                // creature_meets is synchronous; the same loop, awaiting.
                let (mut colour, mut met) = (Colour::of(id), 0u64);
                loop {
                    broker.send(Meet(id, colour)).expect("broker alive");
                    match rx.recv().await.expect("broker alive") {
                        Reply::Met(other) => {
                            met += 1;
                            colour = colour.meet(other);
                        }
                        Reply::Stop => return met,
                    }
                }
            })
        })
        .collect();
    drop(broker);
    let mut met = 0;
    for h in hs {
        met += h.await.expect("creature");
    }
    (bh.await.expect("broker"), met)
}

// ---------------------------------------------------------------- ForkJoin

const FJ_WORKERS: usize = 32;
const FJ_EACH: u64 = 1_000;

/// The per-message work: a few rounds of a multiply-xorshift hash (tens of
/// ns, like Savina's sine and square root).
#[inline(never)]
fn compute(x: u64) -> u64 {
    let mut h = black_box(x);
    for _ in 0..16 {
        h = (h ^ (h >> 31)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    h
}

/// The checksum each worker's messages give (computed once, outside the
/// timing).
fn fj_expect() -> u64 {
    (0..FJ_WORKERS as u64 * FJ_EACH).fold(0u64, |s, i| s.wrapping_add(compute(i)))
}

fn smarm_fjthroughput() -> u64 {
    let (ws, hs): (Vec<_>, Vec<_>) = (0..FJ_WORKERS)
        .map(|_| {
            smarm::spawn_actor(|mut mb: smarm::Mailbox<u64>| {
                let (mut sum, mut n) = (0u64, 0u64);
                while let Ok(x) = mb.recv() {
                    sum = sum.wrapping_add(compute(x));
                    n += 1;
                }
                assert_eq!(n, FJ_EACH, "messages per worker");
                sum
            })
        })
        .unzip();
    for i in 0..FJ_WORKERS as u64 * FJ_EACH {
        ws[(i % FJ_WORKERS as u64) as usize]
            .send(i)
            .expect("worker alive");
    }
    drop(ws);
    hs.into_iter()
        .fold(0, |s, h| s.wrapping_add(h.join().expect("worker")))
}

async fn tokio_fjthroughput() -> u64 {
    let (ws, rxs): (Vec<_>, Vec<_>) = (0..FJ_WORKERS).map(|_| unbounded_channel::<u64>()).unzip();
    let hs: Vec<_> = rxs
        .into_iter()
        .map(|mut rx| {
            tokio::spawn(async move {
                let (mut sum, mut n) = (0u64, 0u64);
                while let Some(x) = rx.recv().await {
                    sum = sum.wrapping_add(compute(x));
                    n += 1;
                }
                assert_eq!(n, FJ_EACH, "messages per worker");
                sum
            })
        })
        .collect();
    for i in 0..FJ_WORKERS as u64 * FJ_EACH {
        ws[(i % FJ_WORKERS as u64) as usize]
            .send(i)
            .expect("worker alive");
    }
    drop(ws);
    let mut sum = 0u64;
    for h in hs {
        sum = sum.wrapping_add(h.await.expect("worker"));
    }
    sum
}

// ---------------------------------------------------------------- main

fn bench(c: &mut Criterion) {
    let port = port_name();
    let fj = fj_expect();
    let big_pongs = BIG_ACTORS as u64 * BIG_PINGS;
    let workers = worker_counts();
    // One group per workload, every worker count in it, smarm then tokio.
    macro_rules! workload {
        ($name:literal, $elements:expr, $smarm:expr, $tokio:expr, $check:expr) => {{
            let mut g = c.benchmark_group(format!("savina_{}/{port}", $name));
            g.throughput(Throughput::Elements($elements));
            for &w in &workers {
                // The default queue (the ring on one worker, the stripes
                // on more), then the ring alone, each runtime dropped
                // before the next is built.
                macro_rules! smarm_row {
                    ($rt:expr, $label:literal) => {{
                        let rt = $rt;
                        g.bench_function(format!(concat!($label, "/{}w"), w), |b| {
                            b.iter(|| {
                                let got = rt.block_on(|| $smarm);
                                $check(got)
                            })
                        });
                    }};
                }
                smarm_row!(smarm_rt(w), "smarm");
                smarm_row!(smarm_rt_with::<smarm::RingQueue>(w), "smarm_ring");
                let tk = tokio_rt(w);
                g.bench_function(format!("tokio/{w}w"), |b| {
                    b.iter(|| {
                        let got = in_task(&tk, $tokio);
                        $check(got)
                    })
                });
            }
            g.finish();
        }};
    }
    workload!(
        "threadring",
        HOPS,
        smarm_threadring(),
        tokio_threadring(),
        |hops| assert_eq!(hops, HOPS)
    );
    workload!(
        "counting",
        COUNT + 2,
        smarm_counting(),
        tokio_counting(),
        |n| assert_eq!(n, COUNT)
    );
    // Messages: a ping and a pong per ping; a start, a done report and an
    // exit per actor.
    workload!(
        "big",
        2 * big_pongs + 3 * BIG_ACTORS as u64,
        smarm_big(),
        tokio_big(),
        |p| assert_eq!(p, big_pongs)
    );
    // Messages: two arrivals and two replies per meeting, then a final
    // arrival and stop per creature.
    workload!(
        "chameneos",
        4 * MEETINGS + 2 * CREATURES as u64,
        smarm_chameneos(),
        tokio_chameneos(),
        |(broker, creatures)| assert_eq!((broker, creatures), (MEETINGS, 2 * MEETINGS))
    );
    workload!(
        "fjthroughput",
        FJ_WORKERS as u64 * FJ_EACH,
        smarm_fjthroughput(),
        tokio_fjthroughput(),
        |sum| assert_eq!(sum, fj)
    );
}

smarm_benches::bench_main!(bench);
