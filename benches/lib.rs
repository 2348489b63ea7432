//! Shared helpers for the benches: the host's port crate as `smarm`, the
//! criterion configuration, the worker counts, the run-queue variants, and
//! the cycle counter read next to wall time. The tokio side lives in
//! `tokio_side.rs` (tokio is a dev-dependency).
//!
//! Environment (all optional; `scripts/bench.py` sets them):
//! - `SMARM_BENCH_WORKERS`: worker counts for the scaling workloads
//!   (`msg_pairs`, `yield_many`), e.g. `1,2,4,8,16`; default `1,2,<cpus>`.
//! - `SMARM_BENCH_CYCLES`: a file to which the cycle counts are appended
//!   (one JSON object a line); they are printed either way.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[doc(hidden)]
pub use criterion as __criterion;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
pub use smarm_core::{Arch, Platform, RunQueue};

#[cfg(target_os = "linux")]
pub use smarm_linux::{self as smarm, Linux as Host};

#[cfg(target_vendor = "apple")]
pub use smarm_darwin::{self as smarm, Darwin as Host};

/// The port's name, printed in every bench group so results from different
/// hosts are not mixed up.
pub fn port_name() -> &'static str {
    if cfg!(target_os = "linux") {
        "linux"
    } else {
        "darwin"
    }
}

/// The criterion configuration every bench binary starts from (flags such
/// as `--measurement-time` still override it).
pub fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

/// A criterion benchmark group measuring wall time.
pub type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// The `main` of a bench binary: runs `$bench` under [`config`] (or the
/// configuration given), then criterion's summary.
#[macro_export]
macro_rules! bench_main {
    ($bench:path) => {
        $crate::bench_main!($bench, $crate::config());
    };
    ($bench:path, $config:expr) => {
        $crate::__criterion::criterion_group! {
            name = benches;
            config = $config;
            targets = $bench
        }
        $crate::__criterion::criterion_main!(benches);
    };
}

/// A smarm runtime with `workers` workers (the default run queue: the ring
/// for one worker, the stripes for more).
pub fn smarm_rt(workers: usize) -> smarm::Runtime {
    smarm_rt_with::<smarm::AutoQueue>(workers)
}

/// A smarm runtime with `workers` workers and run-queue variant `Q`.
pub fn smarm_rt_with<Q: RunQueue<Host>>(workers: usize) -> smarm::RuntimeWith<Q> {
    smarm::BuilderWith::<Q>::new()
        .workers(workers)
        .build()
        .expect("smarm runtime")
}

/// The bench-row prefix of run-queue variant `Q`: `smarm` for the default
/// (`AutoQueue`: what a user gets), `smarm_ring`, `smarm_mutex`,
/// `smarm_striped` for the variants.
pub fn smarm_label<Q: RunQueue<Host>>() -> String {
    match Q::NAME {
        "auto" => "smarm".into(),
        other => format!("smarm_{other}"),
    }
}

/// Calls `$f::<Q>($args)` for the default and each run-queue variant (ring,
/// mutex, striped), so one binary compares them side by side.
#[macro_export]
macro_rules! for_each_queue {
    ($f:ident($($arg:expr),* $(,)?)) => {{
        $f::<$crate::smarm::AutoQueue>($($arg),*);
        $f::<$crate::smarm::RingQueue>($($arg),*);
        $f::<$crate::smarm::MutexQueue>($($arg),*);
        $f::<$crate::smarm::StripedQueue>($($arg),*);
    }};
}

/// The host's CPU count.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Worker counts for the scaling workloads: `SMARM_BENCH_WORKERS` (a comma
/// list, each at most the CPU count) or 1, 2 and all CPUs.
pub fn worker_counts() -> Vec<usize> {
    let mut ws: Vec<usize> = match std::env::var("SMARM_BENCH_WORKERS") {
        Ok(list) => list
            .split(',')
            .map(|w| {
                w.trim()
                    .parse()
                    .expect("SMARM_BENCH_WORKERS: a comma list of counts")
            })
            .collect(),
        Err(_) => vec![1, 2, cpus()],
    };
    ws.retain(|&w| w >= 1 && w <= cpus().max(2));
    ws.sort_unstable();
    ws.dedup();
    ws
}

/// The arch cycle counter (rdtsc / cntvct_el0): a plain, non-serialising
/// read, good for a loop of many iterations.
#[inline]
pub fn cycles() -> u64 {
    <<Host as Platform>::Arch as Arch>::cycles()
}

/// Total (cycles, iterations) per bench row, across criterion's calls.
static CYCLES: Mutex<BTreeMap<String, (u64, u64)>> = Mutex::new(BTreeMap::new());

/// Wall time and cycles around a timed loop, for `iter_custom`.
pub struct Stopwatch {
    t: Instant,
    c: u64,
}

impl Stopwatch {
    /// Starts both clocks.
    #[inline]
    pub fn start() -> Self {
        Stopwatch {
            t: Instant::now(),
            c: cycles(),
        }
    }

    /// Stops both clocks, adds the cycles of `iters` iterations to row
    /// `id`'s total, and returns the wall time for criterion.
    #[inline]
    pub fn stop(self, id: &str, iters: u64) -> Duration {
        let c = cycles().wrapping_sub(self.c);
        let d = self.t.elapsed();
        let mut log = CYCLES.lock().unwrap();
        let e = log.entry(id.to_string()).or_default();
        e.0 += c;
        e.1 += iters;
        d
    }
}

/// Prints the cycles per iteration of every row of `group` timed with
/// [`Stopwatch`] (and appends them to `SMARM_BENCH_CYCLES` if set, keyed
/// `group/row` like criterion's full ids); call after the group finishes.
pub fn report_cycles(group: &str) {
    let log = std::mem::take(&mut *CYCLES.lock().unwrap());
    let mut out = std::env::var_os("SMARM_BENCH_CYCLES").map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .expect("SMARM_BENCH_CYCLES: open")
    });
    for (row, (c, n)) in log {
        let id = format!("{group}/{row}");
        let per = c as f64 / n.max(1) as f64;
        println!("cycles: {id}: {per:.1} cycles/iter over {n} iterations");
        if let Some(f) = out.as_mut() {
            writeln!(
                f,
                "{{\"id\": \"{id}\", \"cycles_per_iter\": {per:.2}, \"iters\": {n}}}"
            )
            .expect("SMARM_BENCH_CYCLES: write");
        }
    }
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
        match mb.recv().unwrap() {
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
            let Ball::Peer(b) = mb.recv().unwrap() else {
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

/// Echoes what `s` reads back to it until end of stream or an error (the
/// echo benches' server side, on smarm's or std's blocking-style streams).
pub fn echo_until_eof<S: std::io::Read + std::io::Write>(mut s: S) {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if s.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

/// In an actor: a listener whose acceptor gives each of `conns`
/// connections an echo actor, and the `conns` client streams connected to
/// it (`TCP_NODELAY` on both ends).
pub fn smarm_echo_pairs(conns: usize) -> Vec<smarm::net::TcpStream> {
    let l = smarm::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    smarm::spawn(move || {
        for _ in 0..conns {
            let (s, _) = l.accept().expect("accept");
            let _ = s.set_nodelay(true);
            smarm::spawn(move || echo_until_eof(&s));
        }
    });
    (0..conns)
        .map(|_| {
            let s = smarm::net::TcpStream::connect(addr).expect("connect");
            let _ = s.set_nodelay(true);
            s
        })
        .collect()
}

/// This process's resident set in bytes, from `/proc/self/statm` (0 where
/// there is none: the RSS reports are Linux only).
pub fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * <Host as Platform>::page_size() as u64
}
