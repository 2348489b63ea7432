//! million_report: N actors parked at once (smarm actors on their
//! mailboxes, tokio tasks on an unbounded mpsc channel each, goroutines on
//! a channel each when `go` is installed), side by side in one run: the
//! time to spawn them until every one is parked, the RSS each parked one
//! costs, and the time to wake each with one message and join them all.
//!
//! `cargo bench -p smarm-benches --bench million_report`
//! (`MILLION_REPORT_ACTORS` sets N, default 1,000,000; worker counts from
//! `SMARM_BENCH_WORKERS`; the Go side is `benches/go/million.go`, built
//! into `target/` with the `go` on `PATH`, skipped without one).
//!
//! Each side runs in a fresh process of this binary (or of the Go program),
//! so none inherits another's heap. RSS is read from /proc (Linux only).

#[path = "tokio_side.rs"]
mod tokio_side;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm_benches::smarm::{self, Mailbox};
use smarm_benches::{port_name, smarm_rt, worker_counts};

/// One side's figures: seconds to spawn and park, RSS bytes per parked
/// one, seconds to wake and join.
struct Row {
    spawn: f64,
    per: f64,
    wake: f64,
}

impl Row {
    fn print(&self) {
        println!("{:.4} {:.0} {:.4}", self.spawn, self.per, self.wake);
    }

    fn parse(text: &str) -> Option<Row> {
        let line = text.trim().lines().last()?;
        let mut it = line.split_whitespace().map(|v| v.parse::<f64>().ok());
        Some(Row {
            spawn: it.next()??,
            per: it.next()??,
            wake: it.next()??,
        })
    }
}

fn smarm_side(workers: usize, n: usize) -> Row {
    let rt = smarm_rt(workers);
    // Warm the runtime (first slab, worker threads) outside the count.
    rt.block_on(|| smarm::spawn(|| ()).join().expect("warm-up"));
    let before = smarm_benches::rss_bytes();
    rt.block_on(move || {
        let t = Instant::now();
        // A spawn with work waiting runs its child to its `recv` before
        // the loop goes on (the first waits in the queue until the loop
        // ends), so every actor is parked or runnable when it ends.
        let live: Vec<_> = (0..n)
            .map(|i| smarm::spawn_actor(move |mut mb: Mailbox<u64>| mb.recv().unwrap() + i as u64))
            .collect();
        let spawn = t.elapsed().as_secs_f64();
        let per = smarm_benches::rss_bytes().saturating_sub(before) as f64 / n as f64;
        let t = Instant::now();
        let mut sum = 0;
        for (a, h) in live {
            a.send(1).expect("parked actor");
            sum += h.join().expect("join");
        }
        assert_eq!(sum, (n as u64) * (n as u64 + 1) / 2);
        Row {
            spawn,
            per,
            wake: t.elapsed().as_secs_f64(),
        }
    })
}

fn tokio_side(workers: usize, n: usize) -> Row {
    let tk = tokio_side::tokio_rt(workers);
    tk.block_on(async { tokio::spawn(async {}).await.expect("warm-up") });
    let before = smarm_benches::rss_bytes();
    tokio_side::in_task(&tk, async move {
        let parked = Arc::new(AtomicUsize::new(0));
        let t = Instant::now();
        let live: Vec<_> = (0..n)
            .map(|i| {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
                let parked = parked.clone();
                let h = tokio::spawn(async move {
                    // Relaxed: a count polled below until all are parked.
                    parked.fetch_add(1, Ordering::Relaxed);
                    rx.recv().await.expect("one message") + i as u64
                });
                (tx, h)
            })
            .collect();
        // Tasks first run when polled: wait until each has reached its
        // `recv` (the spawner yields so they run), bounded.
        // Relaxed: see above.
        while parked.load(Ordering::Relaxed) < n {
            assert!(t.elapsed() < Duration::from_secs(600), "tasks never ran");
            tokio::task::yield_now().await;
        }
        let spawn = t.elapsed().as_secs_f64();
        let per = smarm_benches::rss_bytes().saturating_sub(before) as f64 / n as f64;
        let t = Instant::now();
        let mut sum = 0;
        for (tx, h) in live {
            tx.send(1).expect("parked task");
            sum += h.await.expect("join");
        }
        assert_eq!(sum, (n as u64) * (n as u64 + 1) / 2);
        Row {
            spawn,
            per,
            wake: t.elapsed().as_secs_f64(),
        }
    })
}

/// Runs `side` in a fresh process of this binary.
fn run_side(side: &str, workers: usize, n: usize) -> Row {
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .env("MILLION_REPORT_SIDE", side)
        .env("MILLION_REPORT_WORKERS", workers.to_string())
        .env("MILLION_REPORT_ACTORS", n.to_string())
        .output()
        .expect("side process");
    let text = String::from_utf8_lossy(&out.stdout);
    Row::parse(&text).unwrap_or_else(|| panic!("{side}: {text} {}", String::from_utf8_lossy(&out.stderr)))
}

/// Builds benches/go/million.go into target/ if `go` is installed.
fn go_binary() -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("go/million.go");
    let out = root.join("../target/million-go");
    let built = std::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(&src)
        .env("GOCACHE", root.join("../target/go-cache"))
        .status()
        .ok()?;
    built.success().then_some(out)
}

fn go_side(bin: &std::path::Path, workers: usize, n: usize) -> Option<Row> {
    let out = std::process::Command::new(bin)
        .args(["-n", &n.to_string()])
        .env("GOMAXPROCS", workers.to_string())
        .output()
        .ok()?;
    Row::parse(&String::from_utf8_lossy(&out.stdout))
}

fn main() {
    let n: usize = std::env::var("MILLION_REPORT_ACTORS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    if let Ok(side) = std::env::var("MILLION_REPORT_SIDE") {
        let w = std::env::var("MILLION_REPORT_WORKERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        return match side.as_str() {
            "smarm" => smarm_side(w, n),
            _ => tokio_side(w, n),
        }
        .print();
    }
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !cfg!(target_os = "linux") {
        println!("million_report: RSS is read from /proc (Linux only)");
        return;
    }
    println!(
        "million_report on {}: {n} parked at once; stacks guarded by {:?}",
        port_name(),
        smarm::stack_guard()
    );
    let go = go_binary();
    if go.is_none() {
        println!("(no `go` on PATH: the Go column is skipped)");
    }
    println!("| workers | side | spawn+park s | RSS per parked B | wake+join s |");
    println!("|---|---|---|---|---|");
    for w in worker_counts() {
        let s = run_side("smarm", w, n);
        let t = run_side("tokio", w, n);
        let g = go.as_deref().and_then(|b| go_side(b, w, n));
        let mut rows = vec![("smarm", &s), ("tokio", &t)];
        if let Some(g) = &g {
            rows.push(("go", g));
        }
        for (name, r) in rows {
            println!("| {w} | {name} | {:.3} | {:.0} | {:.3} |", r.spawn, r.per, r.wake);
        }
        println!(
            "| {w} | smarm/tokio | {:.2} | {:.2} | {:.2} |",
            s.spawn / t.spawn,
            s.per / t.per,
            s.wake / t.wake
        );
        if let Some(g) = &g {
            println!(
                "| {w} | smarm/go | {:.2} | {:.2} | {:.2} |",
                s.spawn / g.spawn,
                s.per / g.per,
                s.wake / g.wake
            );
        }
    }
}
