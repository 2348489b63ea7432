//! msg_pairs: N independent pairs of actors ping-pong R rounds each (one
//! round = two messages), started together by a parent that then only
//! waits. The main job of the project.
//!
//! ```text
//! cargo run --release -p smarm-examples --example msg_pairs -- [--pairs N] [--rounds R] [--workers W]
//! ```
//!
//! Prints ns per message, wall time, workers, messages counted (checked
//! against 2·N·R) and the scheduler counters before and after.
use std::time::Instant;

use smarm_examples::smarm::{self, spawn_actor, Addr, Runtime};

enum Msg {
    /// The partner's address (sent once, to the pinger).
    Peer(Addr<Msg>),
    /// The ball: rounds left.
    Ball(u64),
}

/// Plays balls until the ball count runs out: a player that receives
/// `Ball(0)` or sends it is done. Returns the balls it received.
fn play(mb: &mut smarm::Mailbox<Msg>, peer: &Addr<Msg>) -> u64 {
    let mut seen = 0;
    loop {
        match mb.recv().unwrap() {
            Msg::Ball(n) => {
                seen += 1;
                if n == 0 {
                    return seen;
                }
                peer.send(Msg::Ball(n - 1)).expect("partner alive");
                if n == 1 {
                    return seen;
                }
            }
            Msg::Peer(_) => unreachable!("the peer is known once play starts"),
        }
    }
}

/// The ponger: told its peer at spawn.
fn ponger(mut mb: smarm::Mailbox<Msg>, peer: Addr<Msg>) -> u64 {
    play(&mut mb, &peer)
}

/// The pinger: learns its peer from the first message, then serves the
/// first ball (2·rounds balls in all, one message each).
fn pinger(mut mb: smarm::Mailbox<Msg>, rounds: u64) -> u64 {
    let Msg::Peer(peer) = mb.recv().unwrap() else {
        unreachable!("the first message is the peer")
    };
    peer.send(Msg::Ball(2 * rounds - 1)).expect("ponger alive");
    play(&mut mb, &peer)
}

fn arg(args: &[String], name: &str) -> Option<u64> {
    let i = args.iter().position(|a| a == name)?;
    let v = args
        .get(i + 1)
        .unwrap_or_else(|| fail(&format!("{name} needs a value")));
    match v.parse() {
        Ok(n) if n > 0 => Some(n),
        _ => fail(&format!("{name}: not a positive number: {v}")),
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("msg_pairs: {msg}\nusage: msg_pairs [--pairs N] [--rounds R] [--workers W]");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        fail("help");
    }
    let pairs = arg(&args, "--pairs").unwrap_or(32);
    let rounds = arg(&args, "--rounds").unwrap_or(5000);
    let mut b = Runtime::builder();
    if let Some(w) = arg(&args, "--workers") {
        b = b.workers(w as usize);
    }
    let rt = b.build().unwrap_or_else(|e| fail(&e.to_string()));
    let before = rt.counters().total();
    let t = Instant::now();
    let counted = rt.block_on(move || {
        let mut handles = Vec::new();
        for _ in 0..pairs {
            let (a, ha) = spawn_actor(move |mb| pinger(mb, rounds));
            let a2 = a.clone();
            let (b, hb) = spawn_actor(move |mb| ponger(mb, a2));
            a.send(Msg::Peer(b)).expect("pinger alive");
            handles.push(ha);
            handles.push(hb);
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("pair actor"))
            .sum::<u64>()
    });
    let wall = t.elapsed();
    let after = rt.counters().total();
    let expect = 2 * pairs * rounds;
    println!(
        "msg_pairs: pairs={pairs} rounds={rounds} workers={} queue={}",
        rt.workers(),
        rt.queue_name()
    );
    println!("messages={counted} (expected {expect})");
    println!("ns/msg={:.1}", wall.as_nanos() as f64 / expect as f64);
    println!("wall={:.3} ms", wall.as_secs_f64() * 1e3);
    println!("counters before: {before}");
    println!("counters after:  {after}");
    for (i, w) in rt.counters().workers.iter().enumerate() {
        println!("  worker {i}: {w}");
    }
    assert_eq!(counted, expect, "messages lost or duplicated");
    assert_eq!(after.enqueued, after.dequeued, "enqueued != dequeued");
}
