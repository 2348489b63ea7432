//! million: parks N actors at once on their mailboxes (a million by
//! default), then wakes each with one message and joins them all.
//!
//! ```text
//! cargo run --release -p smarm-examples --example million -- [--actors N] [--stack-size B] [--workers W]
//! ```
//!
//! Prints how stacks are guarded (Linux 6.13+: guard regions in shared
//! slabs, so a million guarded stacks take a few dozen memory maps; else
//! one mapping per stack, which `vm.max_map_count` caps near 28,000), the
//! spawn rate, the memory maps and RSS with every actor parked, RSS per
//! parked actor, the time to wake and join them, and maps and RSS after.
//! `--stack-size` sets each actor's stack (`ActorBuilder::stack_size`;
//! default the runtime's, 128 KiB: only touched pages cost memory).
use std::time::Instant;

use smarm_examples::smarm::{self, ActorBuilder, Mailbox, Runtime};

fn arg(args: &[String], name: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == name)?;
    let v = args
        .get(i + 1)
        .unwrap_or_else(|| fail(&format!("{name} needs a value")));
    let v = v.replace('_', "");
    Some(
        v.parse()
            .unwrap_or_else(|_| fail(&format!("{name}: not a number: {v}"))),
    )
}

fn fail(msg: &str) -> ! {
    eprintln!("million: {msg}\nusage: million [--actors N] [--stack-size BYTES] [--workers W]");
    std::process::exit(2)
}

/// Resident memory of this process in bytes, if the OS tells.
fn rss() -> Option<usize> {
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
        // Pages; 4 KiB on every Linux host this runs on but aarch64 with
        // 64 KiB pages, where the figure is a lower bound.
        let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
        return Some(pages * 4096);
    }
    // macOS: ps reports KiB.
    let out = std::process::Command::new("ps")
        .args(["-o", "rss=", "-p", &std::process::id().to_string()])
        .output()
        .ok()?;
    let kib: usize = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some(kib * 1024)
}

/// Memory maps of this process (Linux), the resource `vm.max_map_count`
/// bounds.
fn maps() -> Option<usize> {
    Some(std::fs::read_to_string("/proc/self/maps").ok()?.lines().count())
}

fn show(v: Option<usize>, div: usize, unit: &str) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{} {unit}", v / div))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        fail("help");
    }
    let n = arg(&args, "--actors").unwrap_or(1_000_000);
    if n == 0 {
        fail("--actors must be at least 1");
    }
    let stack = arg(&args, "--stack-size");
    let mut b = Runtime::builder();
    if let Some(w) = arg(&args, "--workers") {
        b = b.workers(w);
    }
    let rt = b.build().unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    println!(
        "million: {n} actors, stack {} KiB, {} workers, guards: {:?}",
        stack.unwrap_or(rt.stack_size()) / 1024,
        rt.workers(),
        smarm::stack_guard()
    );
    let (maps0, rss0) = (maps(), rss());
    let start = Instant::now();
    let report = rt.block_on(move || {
        let mut live = Vec::with_capacity(n);
        let t = Instant::now();
        for i in 0..n {
            let mut b = ActorBuilder::new();
            if let Some(s) = stack {
                b = b.stack_size(s);
            }
            // Each parks on its mailbox (a spawn with work waiting runs it
            // to its `recv` before this loop goes on), then answers its
            // number.
            match b.spawn_actor(move |mut mb: Mailbox<u64>| mb.recv().unwrap() + i as u64) {
                Ok(a) => live.push(a),
                Err(e) => {
                    eprintln!("million: spawn {i} failed: {e}");
                    std::process::exit(1);
                }
            }
        }
        let spawned = t.elapsed();
        let (maps1, rss1) = (maps(), rss());
        let t = Instant::now();
        let mut sum = 0u64;
        for (a, h) in live {
            a.send(1).expect("a parked actor is alive");
            sum += h.join().expect("the actor returns");
        }
        let n64 = n as u64;
        assert_eq!(sum, n64 * (n64 - 1) / 2 + n64, "every actor answered once");
        (spawned, maps1, rss1, t.elapsed())
    });
    let (spawned, maps1, rss1, woken) = report;
    let per_actor = rss1.zip(rss0).map(|(a, b)| a.saturating_sub(b) / n);
    println!(
        "spawned and parked in {:.3} s ({:.0} actors/s)",
        spawned.as_secs_f64(),
        n as f64 / spawned.as_secs_f64()
    );
    println!(
        "parked: maps {} (before {}), rss {} (before {}), {} per parked actor",
        show(maps1, 1, ""),
        show(maps0, 1, ""),
        show(rss1, 1 << 20, "MiB"),
        show(rss0, 1 << 20, "MiB"),
        show(per_actor, 1, "B")
    );
    println!("woken and joined in {:.3} s", woken.as_secs_f64());
    println!(
        "after: maps {}, rss {} (the allocator keeps freed heap for reuse)",
        show(maps(), 1, ""),
        show(rss(), 1 << 20, "MiB")
    );
    println!("total {:.3} s", start.elapsed().as_secs_f64());
}
