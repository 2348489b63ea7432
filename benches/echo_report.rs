//! echo_report: what criterion's mean time per round trip does not show,
//! side by side in one run: round-trip latency percentiles (p50, p99,
//! p999) of the echo workload (64-byte messages over loopback TCP, closed
//! loop, 1 / 100 / 1,000 connections, each worker count of
//! `SMARM_BENCH_WORKERS`), and the memory (RSS) an idle connection costs:
//! 10,000 connections, each with its echo actor (smarm) or task (tokio)
//! parked on a read.
//!
//! `cargo bench -p smarm-benches --bench echo_report`
//! (`ECHO_REPORT_SECS` sets the seconds per latency row, default 1;
//! `ECHO_REPORT_IDLE` the idle connection count, default 10,000, 0 for
//! none).
//!
//! Each RSS figure is taken in a fresh process of this binary (so neither
//! side inherits the other's heap), with the connections' client ends in
//! another (a child of it: 10,000 connections need 20,000 descriptors,
//! this machine's hard limit, if both ends share a process). RSS counts
//! user memory only (stacks touched, control blocks, buffers), not the
//! kernel's socket buffers, which are the same for both.

#[path = "tokio_side.rs"]
mod tokio_side;

use std::io::{BufRead, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm_benches::smarm::{self, net::TcpListener};
use smarm_benches::{echo_until_eof, port_name, smarm_echo_pairs, smarm_rt, worker_counts};
use tokio_side::{in_task, tokio_echo, tokio_echo_pairs, tokio_rt_io};

const SIZE: usize = 64;
const CONNS: [usize; 3] = [1, 100, 1000];

/// Sets `stop` after `d` (the rows' clock).
fn stop_after(d: Duration) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(d);
        // Relaxed: a flag; the clients' joins order everything else.
        s.store(true, Ordering::Relaxed);
    });
    stop
}

/// Round-trip latencies (ns) of `conns` clients for `d` on smarm.
fn smarm_latencies(workers: usize, conns: usize, d: Duration) -> Vec<u64> {
    let rt = smarm_rt(workers);
    rt.block_on(move || {
        let clients = smarm_echo_pairs(conns);
        let stop = stop_after(d);
        let hs: Vec<_> = clients
            .into_iter()
            .map(|s| {
                let stop = stop.clone();
                smarm::spawn(move || {
                    let (msg, mut back, mut lat) = ([7u8; SIZE], [0u8; SIZE], Vec::new());
                    // Relaxed: see `stop_after`.
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        (&s).write_all(&msg).expect("write");
                        (&s).read_exact(&mut back).expect("read");
                        lat.push(t.elapsed().as_nanos() as u64);
                    }
                    lat
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().expect("client")).collect()
    })
}

/// The same on tokio.
fn tokio_latencies(workers: usize, conns: usize, d: Duration) -> Vec<u64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tk = tokio_rt_io(workers);
    in_task(&tk, async move {
        let clients = tokio_echo_pairs(conns).await;
        let stop = stop_after(d);
        let hs: Vec<_> = clients
            .into_iter()
            .map(|mut s| {
                let stop = stop.clone();
                tokio::spawn(async move {
                    let (msg, mut back, mut lat) = ([7u8; SIZE], [0u8; SIZE], Vec::new());
                    // Relaxed: see `stop_after`.
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        s.write_all(&msg).await.expect("write");
                        s.read_exact(&mut back).await.expect("read");
                        lat.push(t.elapsed().as_nanos() as u64);
                    }
                    lat
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in hs {
            all.extend(h.await.expect("client"));
        }
        all
    })
}

/// (trips per second, p50, p99, p999 in µs).
fn summary(mut lat: Vec<u64>, d: Duration) -> (f64, f64, f64, f64) {
    lat.sort_unstable();
    let q = |p: f64| {
        if lat.is_empty() {
            return f64::NAN;
        }
        let i = ((lat.len() as f64 * p) as usize).min(lat.len() - 1);
        lat[i] as f64 / 1000.0
    };
    (lat.len() as f64 / d.as_secs_f64(), q(0.50), q(0.99), q(0.999))
}

fn latency_rows(d: Duration) {
    println!(
        "echo latency: 64-byte round trips over loopback, closed loop, {:.1} s per row",
        d.as_secs_f64()
    );
    println!(
        "{:>7} {:>6} | {:>9} {:>8} {:>8} {:>8} | {:>9} {:>8} {:>8} {:>8} | {:>6} {:>6}",
        "workers",
        "conns",
        "smarm/s",
        "p50 µs",
        "p99",
        "p999",
        "tokio/s",
        "p50 µs",
        "p99",
        "p999",
        "thr",
        "p99"
    );
    for workers in worker_counts() {
        for conns in CONNS {
            let s = summary(smarm_latencies(workers, conns, d), d);
            let t = summary(tokio_latencies(workers, conns, d), d);
            println!(
                "{workers:>7} {conns:>6} | {:>9.0} {:>8.1} {:>8.1} {:>8.1} | {:>9.0} {:>8.1} {:>8.1} {:>8.1} | {:>6.2} {:>6.2}",
                s.0,
                s.1,
                s.2,
                s.3,
                t.0,
                t.1,
                t.2,
                t.3,
                s.0 / t.0,
                s.2 / t.2
            );
        }
    }
    println!("(thr: smarm's round trips per second / tokio's, higher is better; p99: smarm's / tokio's, lower is better)");
}

// ------------------------------------------------------------------ RSS

/// This process's resident set (KiB).
fn rss_kib() -> u64 {
    smarm_benches::rss_bytes() / 1024
}

/// The client side, in its own process: `n` connections to `addr`, held
/// until stdin closes.
fn client_main(addr: SocketAddr, n: usize) {
    let conns: Vec<std::net::TcpStream> = (0..n)
        .map(|i| std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {i}: {e}")))
        .collect();
    println!("ready");
    std::io::stdout().flush().expect("stdout");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(conns);
}

/// Starts the client process for `n` connections to `addr` and waits for
/// its "ready"; closing its stdin ends it.
fn start_clients(addr: SocketAddr, n: usize) -> std::process::Child {
    let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
        .env("ECHO_REPORT_CLIENT", format!("{addr} {n}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("client process");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("client ready");
    assert_eq!(line.trim(), "ready", "the client process failed");
    child
}

/// Waits (bounded) until `n` connections are accepted, then lets the
/// servers park.
fn settle(accepted: &AtomicU64, n: usize) {
    let t = Instant::now();
    // Relaxed: a count polled for progress.
    while accepted.load(Ordering::Relaxed) < n as u64 {
        assert!(t.elapsed() < Duration::from_secs(120), "accepts stalled");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));
}

/// RSS per idle connection (bytes) of `side` ("smarm" or "tokio"), in
/// this (fresh) process.
fn idle_main(side: &str, n: usize) {
    let accepted = Arc::new(AtomicU64::new(0));
    let a = accepted.clone();
    let per = match side {
        "smarm" => {
            let rt = smarm_rt(1);
            let l = rt.block_on(|| TcpListener::bind("127.0.0.1:0").expect("bind"));
            let addr = l.local_addr().expect("addr");
            let before = rss_kib();
            let acceptor = rt.spawn(move || {
                for _ in 0..n {
                    let (s, _) = l.accept().expect("accept");
                    // Relaxed: see `settle`.
                    a.fetch_add(1, Ordering::Relaxed);
                    smarm::spawn(move || echo_until_eof(&s));
                }
            });
            let child = start_clients(addr, n);
            settle(&accepted, n);
            let after = rss_kib();
            finish(child);
            acceptor.join().expect("acceptor");
            (after.saturating_sub(before)) as f64 * 1024.0 / n as f64
        }
        _ => {
            // One worker thread of its own, as smarm's: the accepts run
            // while this thread waits for the client process.
            let tk = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_io()
                .build()
                .expect("tokio runtime");
            let l = tk.block_on(async { tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind") });
            let addr = l.local_addr().expect("addr");
            let before = rss_kib();
            let acceptor = tk.spawn(async move {
                for _ in 0..n {
                    let (s, _) = l.accept().await.expect("accept");
                    // Relaxed: see `settle`.
                    a.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(tokio_echo(s));
                }
            });
            let child = start_clients(addr, n);
            settle(&accepted, n);
            let after = rss_kib();
            finish(child);
            tk.block_on(acceptor).expect("acceptor");
            (after.saturating_sub(before)) as f64 * 1024.0 / n as f64
        }
    };
    println!("{per:.0}");
}

fn finish(mut child: std::process::Child) {
    drop(child.stdin.take());
    let _ = child.wait();
}

/// Runs `idle_main` for `side` in a fresh process of this binary.
fn idle_rss(side: &str, n: usize) -> f64 {
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .env("ECHO_REPORT_IDLE_SIDE", side)
        .env("ECHO_REPORT_IDLE", n.to_string())
        .output()
        .expect("idle process");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .lines()
        .last()
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("idle {side}: {text} {}", String::from_utf8_lossy(&out.stderr)))
}

fn main() {
    if let Ok(v) = std::env::var("ECHO_REPORT_CLIENT") {
        let mut it = v.split_whitespace();
        let addr = it.next().and_then(|a| a.parse().ok()).expect("client addr");
        let n = it.next().and_then(|n| n.parse().ok()).expect("client count");
        return client_main(addr, n);
    }
    let idle: usize = std::env::var("ECHO_REPORT_IDLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    if let Ok(side) = std::env::var("ECHO_REPORT_IDLE_SIDE") {
        return idle_main(&side, idle);
    }
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let secs: f64 = std::env::var("ECHO_REPORT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    println!("echo_report on {}", port_name());
    if idle == 0 {
        // ECHO_REPORT_IDLE=0: latency rows only.
    } else if cfg!(target_os = "linux") {
        idle_row(idle);
    } else {
        println!("idle connections: RSS is read from /proc (Linux only)");
    }
    latency_rows(Duration::from_secs_f64(secs));
}

fn idle_row(idle: usize) {
    let (s, t) = (idle_rss("smarm", idle), idle_rss("tokio", idle));
    println!(
        "idle connections: {idle}, each with an echo actor/task parked on a read: RSS per connection smarm {:.0} B, tokio {:.0} B, smarm/tokio {:.2}",
        s,
        t,
        s / t
    );
}
