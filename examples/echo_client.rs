//! echo_client: a load generator for `echo_server`. N connections, each an
//! actor sending a B-byte message and waiting for its echo, again and
//! again for S seconds; prints a progress line per second, then the
//! throughput and the round-trip latency percentiles.
//!
//! ```text
//! cargo run --release -p smarm-examples --example echo_client -- [--addr 127.0.0.1:7878] \
//!     [--connections N] [--duration S] [--size B] [--workers W]
//! ```
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm_examples::smarm::{net::TcpStream, Runtime};

struct Args {
    addr: String,
    connections: usize,
    duration: u64,
    size: usize,
    workers: Option<usize>,
}

fn parse() -> Args {
    let mut a = Args {
        addr: "127.0.0.1:7878".into(),
        connections: 100,
        duration: 5,
        size: 64,
        workers: None,
    };
    let mut it = std::env::args().skip(1);
    let num = |v: Option<String>, what: &str| -> u64 {
        v.and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            eprintln!("echo_client: {what} wants a number");
            std::process::exit(2)
        })
    };
    while let Some(k) = it.next() {
        match k.as_str() {
            "--addr" => a.addr = it.next().unwrap_or_default(),
            "--connections" => a.connections = num(it.next(), "--connections").max(1) as usize,
            "--duration" => a.duration = num(it.next(), "--duration").max(1),
            "--size" => a.size = num(it.next(), "--size").max(1) as usize,
            "--workers" => a.workers = Some(num(it.next(), "--workers").max(1) as usize),
            other => {
                eprintln!(
                    "unknown argument {other:?}; usage: echo_client [--addr A] [--connections N] \
                     [--duration S] [--size B] [--workers W]"
                );
                std::process::exit(2);
            }
        }
    }
    a
}

/// The `q` quantile of sorted `v` (ns).
fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args = parse();
    let mut b = Runtime::builder();
    if let Some(w) = args.workers {
        b = b.workers(w);
    }
    let rt = b.build().expect("runtime");
    let done = Arc::new(AtomicBool::new(false));
    let trips = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let conns: Vec<_> = (0..args.connections)
        .map(|c| {
            let (addr, size, done, trips) = (args.addr.clone(), args.size, done.clone(), trips.clone());
            rt.spawn(move || -> Result<Vec<u64>, String> {
                let s = TcpStream::connect(&addr).map_err(|e| format!("connect {addr}: {e}"))?;
                let _ = s.set_nodelay(true);
                let msg: Vec<u8> = (0..size).map(|i| (i + c) as u8).collect();
                let mut back = vec![0u8; size];
                let mut lat = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    (&s).write_all(&msg).map_err(|e| format!("write: {e}"))?;
                    (&s).read_exact(&mut back).map_err(|e| format!("read: {e}"))?;
                    lat.push(t.elapsed().as_nanos() as u64);
                    if back != msg {
                        return Err("the echo differs from what was sent".into());
                    }
                    trips.fetch_add(1, Ordering::Relaxed);
                }
                Ok(lat)
            })
        })
        .collect();
    let mut last = 0;
    for sec in 1..=args.duration {
        std::thread::sleep(Duration::from_secs(1));
        let now = trips.load(Ordering::Relaxed);
        println!("{sec:>4} s  {:>10} round trips/s", now - last);
        last = now;
    }
    done.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let mut failed = 0;
    for h in conns {
        match h.join() {
            Ok(Ok(l)) => all.extend(l),
            Ok(Err(e)) => {
                failed += 1;
                eprintln!("echo_client: {e}");
            }
            Err(e) => {
                failed += 1;
                eprintln!("echo_client: a connection actor failed: {e}");
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let n = all.len() as f64;
    println!(
        "connections={} size={} B duration={:.1} s round_trips={} ({:.0}/s, {:.1} MB/s each way)",
        args.connections,
        args.size,
        secs,
        all.len(),
        n / secs,
        n * args.size as f64 / secs / 1e6
    );
    println!(
        "latency p50={:.1} us p99={:.1} us p999={:.1} us max={:.1} us",
        quantile(&all, 0.5) as f64 / 1e3,
        quantile(&all, 0.99) as f64 / 1e3,
        quantile(&all, 0.999) as f64 / 1e3,
        all.last().copied().unwrap_or(0) as f64 / 1e3
    );
    if failed > 0 {
        eprintln!("echo_client: {failed} connection(s) failed");
        std::process::exit(1);
    }
}
