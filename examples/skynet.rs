//! skynet: a 10-ary tree of actors with 1,000,000 leaves (by default); each
//! leaf returns its number, each parent sums its children through `join`.
//!
//! ```text
//! cargo run --release -p smarm-examples --example skynet -- [--leaves N] [--workers W]
//! ```
//!
//! Prints the sum (checked against n(n-1)/2), wall time, workers, peak RSS
//! and the scheduler counters (enqueued == dequeued is checked).
use std::time::Instant;

use smarm_examples::smarm::{spawn, Runtime};

fn skynet(num: u64, size: u64, div: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let child = size / div;
    let handles: Vec<_> = (0..div)
        .map(|i| spawn(move || skynet(num + i * child, child, div)))
        .collect();
    handles.into_iter().map(|h| h.join().expect("skynet child")).sum()
}

fn arg(args: &[String], name: &str) -> Option<u64> {
    let i = args.iter().position(|a| a == name)?;
    let v = args
        .get(i + 1)
        .unwrap_or_else(|| fail(&format!("{name} needs a value")));
    Some(
        v.parse()
            .unwrap_or_else(|_| fail(&format!("{name}: not a number: {v}"))),
    )
}

fn fail(msg: &str) -> ! {
    eprintln!("skynet: {msg}\nusage: skynet [--leaves N (a power of 10)] [--workers W]");
    std::process::exit(2)
}

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        fail("help");
    }
    let leaves = arg(&args, "--leaves").unwrap_or(1_000_000);
    let mut p = 1;
    while p < leaves {
        p *= 10;
    }
    if p != leaves || leaves == 0 {
        fail("--leaves must be a power of 10 (1, 10, 100, ...)");
    }
    let mut b = Runtime::builder().stack_size(32 * 1024);
    if let Some(w) = arg(&args, "--workers") {
        b = b.workers(w as usize);
    }
    let rt = b.build().unwrap_or_else(|e| fail(&e.to_string()));
    let before = rt.counters().total();
    let t = Instant::now();
    let sum = rt.block_on(move || skynet(0, leaves, 10));
    let wall = t.elapsed();
    let after = rt.counters().total();
    let expect = leaves * (leaves - 1) / 2;
    println!(
        "skynet: leaves={leaves} workers={} queue={}",
        rt.workers(),
        rt.queue_name()
    );
    println!("sum={sum} (expected {expect})");
    println!("wall={:.3} ms", wall.as_secs_f64() * 1e3);
    if let Some(kib) = peak_rss_kib() {
        println!("peak_rss={:.1} MiB", kib as f64 / 1024.0);
    }
    println!("counters before: {before}");
    println!("counters after:  {after}");
    for (i, w) in rt.counters().workers.iter().enumerate() {
        println!("  worker {i}: {w}");
    }
    assert_eq!(sum, expect, "wrong sum");
    assert_eq!(after.enqueued, after.dequeued, "enqueued != dequeued");
}
