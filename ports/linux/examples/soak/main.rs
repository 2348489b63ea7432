//! soak: a random message graph across many actors, checked end to end,
//! with the workers oversubscribed and preempted by CPU hogs, and
//! (optionally) the runtime's failpoints stretching its race windows.
//!
//! ```text
//! cargo run --release -p smarm-linux --features failpoints --example soak -- \
//!     [--actors 1024] [--messages 1000000] [--workers 4xCPUs] [--hogs CPUs] \
//!     [--seed 1] [--failpoints] [--watchdog-secs 30] [--warmup N] \
//!     [--sabotage lose|dup|hang|leak] [--report-secs 60] [--queue auto|ring|striped|mutex]
//! ```
//!
//! Each of `--actors` slots holds one actor; an actor answers every data
//! message it receives with one to a random slot (`graph.rs` has the
//! accounting and the checks), sometimes through a short-lived helper
//! actor, sometimes after a yield, a sleep, a `blocking` call, a timed or
//! a selective receive, or an IO turn (an echo round trip over a fresh
//! socket pair through a helper actor, racing a random read timeout, or a
//! helper killed while parked on a socket read), and now and then exits
//! and is replaced. Faults are
//! part of the mix: an incarnation now and then panics or kills itself (its
//! destructor then yields, sleeps, makes a `blocking` call, sends and spawns
//! its successor while unwinding), and links to other incarnations (every
//! incarnation traps exits, so a partner's abnormal end arrives as a
//! message). `main` injects messages from its OS thread
//! until `--messages` have been made, waits until none is in flight, stops
//! every actor and waits for them to exit.
//!
//! Checked, and the exit status is 1 on any violation: every message
//! received, failed (`SendError`, to an exited actor) or dropped by its
//! receiver's exit (0 lost); per (sender, receiver) pair, sequence numbers
//! exactly +1 (0 duplicated, 0 reordered); checksums; with `--failpoints`,
//! every failpoint site hit; every unwinding destructor saw
//! `thread::panicking()` and no healthy turn did (so no std mutex can be
//! poisoned by an actor that did not panic), and exactly one unwinding
//! replacement per injected panic or kill. A watchdog exits with status 3 and prints the
//! runtime dump if progress stops for `--watchdog-secs` (no hang).
//! `--sabotage` commits one fault on purpose (a message forgotten, one
//! sent twice, an actor that never exits, a guarded stack never unmapped)
//! to show that each check fails when it should.
//!
//! Memory: a warm-up round runs first on its own runtime; RSS is read after
//! that runtime is dropped (the baseline) and again after the main round's
//! runtime is dropped. Dropping a runtime unmaps its stack pool (up to
//! 4,096 shared + 64 per worker cached stacks), so the two figures compare
//! like with like; the end may exceed the baseline by at most
//! [`RSS_TOLERANCE_KIB`], the number of memory mappings by at most
//! [`MAPS_TOLERANCE`] (a leaked guarded stack is two mappings), and the
//! number of threads and of open descriptors not at all (back to `main`
//! and the hogs; every socket and the runtime's poller closed). The soak re-executes itself once with
//! glibc's cache of exited threads' stacks turned off, so the spare
//! threads of `blocking` calls leave nothing behind.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smarm_core::RunQueue;
use smarm_linux::failpoint::Site;
use smarm_linux::{AutoQueue, Linux, MutexQueue, RingQueue, RuntimeWith, StripedQueue};

mod graph;
mod guard;

use graph::{get, Carry, Rng, Sender, World};

/// How far RSS after the main round may exceed the warm-up's baseline.
/// Both are read with the runtime dropped (its stacks unmapped, its node
/// caches freed, its threads joined), glibc's cache of exited threads'
/// stacks off (see `guard::without_thread_stack_cache`) and after
/// `malloc_trim`, so what may legitimately differ is page-granular
/// fragmentation in glibc's arenas: up to 16 of them on 2 cores (8 per
/// core), each keeping tens of KiB more or less at its top depending on
/// which blocks happened to outlive the round. Measured: +0 to +608 KiB at
/// 10^6 messages and +224/+280 KiB at 3 and 6 x 10^7 (no growth with the
/// message count; `SOAK_SMAPS=1` prints the per-mapping change). 2 MiB
/// catches a leak of 1 KiB per actor exit at 10^6 messages (~2,000 exits)
/// and of 64 bytes per 100 messages on the long run. Leaked messages need
/// no RSS: the accounting counts them lost.
const RSS_TOLERANCE_KIB: u64 = 2 * 1024;

/// How many more memory mappings (glibc's arenas aside, see `guard::maps`)
/// than the baseline the end may have: none. A guarded stack is two
/// mappings, so one leaked stack fails the soak.
const MAPS_TOLERANCE: u64 = 0;

struct Config {
    actors: usize,
    messages: u64,
    warmup: u64,
    workers: usize,
    hogs: usize,
    seed: u64,
    failpoints: bool,
    watchdog_secs: u64,
    sabotage: u8,
    queue: String,
    report_secs: Option<u64>,
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "soak: {msg}\nusage: soak [--actors N] [--messages N] [--warmup N] [--workers N] [--hogs N] \
         [--seed N] [--failpoints] [--watchdog-secs N] [--sabotage lose|dup|hang|leak] [--report-secs 60] [--queue auto|ring|striped|mutex]"
    );
    std::process::exit(2)
}

fn parse() -> Config {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |name: &str| -> Option<u64> {
        let i = args.iter().position(|a| a == name)?;
        let v = args
            .get(i + 1)
            .unwrap_or_else(|| usage(&format!("{name} needs a value")));
        Some(
            v.parse()
                .unwrap_or_else(|_| usage(&format!("{name}: not a number: {v}"))),
        )
    };
    for a in &args {
        if a.starts_with("--") {
            let known = [
                "--actors",
                "--messages",
                "--warmup",
                "--workers",
                "--hogs",
                "--seed",
                "--failpoints",
                "--watchdog-secs",
                "--sabotage",
                "--report-secs",
                "--queue",
            ];
            if !known.contains(&a.as_str()) {
                usage(&format!("unknown flag {a}"));
            }
        }
    }
    let messages = num("--messages").unwrap_or(1_000_000);
    let c = Config {
        actors: num("--actors").unwrap_or(1024) as usize,
        messages,
        warmup: num("--warmup").unwrap_or((messages / 4).min(250_000)),
        workers: num("--workers").map_or(4 * cpus, |n| n as usize),
        hogs: num("--hogs").map_or(cpus, |n| n as usize),
        seed: num("--seed").unwrap_or(1),
        failpoints: args.iter().any(|a| a == "--failpoints"),
        watchdog_secs: num("--watchdog-secs").unwrap_or(30),
        report_secs: num("--report-secs"),
        queue: match args.iter().position(|a| a == "--queue").map(|i| args.get(i + 1)) {
            None => "auto".into(),
            Some(Some(q)) => q.clone(),
            Some(None) => usage("--queue needs a value"),
        },
        sabotage: match args
            .iter()
            .position(|a| a == "--sabotage")
            .map(|i| args.get(i + 1))
        {
            None => graph::NONE,
            Some(Some(k)) if k == "lose" => graph::LOSE,
            Some(Some(k)) if k == "dup" => graph::DUP,
            Some(Some(k)) if k == "hang" => graph::HANG,
            Some(Some(k)) if k == "leak" => graph::LEAK,
            Some(_) => usage("--sabotage takes lose, dup, hang or leak"),
        },
    };
    if c.actors == 0 || c.workers == 0 || c.watchdog_secs == 0 {
        usage("--actors, --workers and --watchdog-secs must be positive");
    }
    c
}

/// What one round measured.
struct Round {
    wall: Duration,
    counters: String,
    violations: Vec<String>,
    rss_drained_kib: u64,
}

fn counters_line() -> String {
    graph::snapshot()
}

/// One round on a fresh runtime: spawn, inject `budget` messages, wait until
/// none is in flight, stop everyone, wait for every exit, drop the runtime.
fn round<Q: RunQueue<Linux>>(c: &Config, budget: u64, seed: u64, what: &str) -> Round {
    graph::reset();
    let rt = RuntimeWith::<Q>::builder()
        .workers(c.workers)
        .build()
        .unwrap_or_else(|e| usage(&e.to_string()));
    let w = Arc::new(World {
        seed,
        budget,
        table: (0..c.actors).map(|_| Mutex::new(None)).collect(),
        trapping: (0..c.actors)
            .map(|_| std::sync::atomic::AtomicU32::new(u32::MAX))
            .collect(),
    });
    let t = Instant::now();
    let (stop_retries, stalled) = guard::watched(
        c.watchdog_secs,
        what,
        &|| rt.dump().to_string(),
        counters_line,
        || {
            for slot in 0..c.actors {
                let w2 = w.clone();
                let carry = Carry {
                    sender: Sender::new(slot as u32, c.actors),
                    inc: 0,
                };
                let (addr, h) = rt.spawn_actor(move |mb| graph::actor(mb, w2, carry));
                drop(h);
                w.publish(slot, 0, addr);
            }
            // Inject from this OS thread (the last sender slot) until the budget
            // is made, keeping about two messages per actor in flight.
            let target = 2 * c.actors as u64;
            let mut me = Sender::new(c.actors as u32, c.actors);
            let mut rng = Rng::new(seed, u64::MAX, 0);
            // When the budget is made, wait for the messages in flight to end.
            // If they stop ending for half the watchdog's time (a message lost
            // inside the runtime, or a receiver never woken), say so with a
            // dump, then stop everyone anyway: the final accounting tells the
            // two apart (a stuck message is received or dropped by then).
            let stall = Duration::from_millis(c.watchdog_secs * 500);
            let mut stalled = None;
            let (mut last, mut since) = (guard::progress(), Instant::now());
            loop {
                if get(&graph::CLAIMED) >= budget {
                    let n = graph::in_flight();
                    if n == 0 {
                        break;
                    }
                    if guard::progress() != last {
                        (last, since) = (guard::progress(), Instant::now());
                    } else if since.elapsed() >= stall {
                        eprintln!(
                            "soak: {n} messages in flight and no progress for {stall:?}:\n{}",
                            rt.dump()
                        );
                        stalled = Some(n);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                } else if graph::in_flight() < target {
                    graph::send_one(&w, &mut me, &mut rng, false);
                } else {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            // Stop every slot's current actor and wait until all have exited.
            let mut retries = 0u64;
            for slot in 0..c.actors {
                let mut tries = 0;
                loop {
                    let addr = w.table[slot]
                        .lock()
                        .expect("table")
                        .as_ref()
                        .expect("filled")
                        .addr
                        .clone();
                    if addr.send(graph::Msg::Stop).is_ok() {
                        break;
                    }
                    // Only after a stall (a replacement completes before its
                    // trigger is counted) or a panic (the slot's actor died):
                    // counted as a violation below; give up after ~1 s.
                    retries += 1;
                    tries += 1;
                    if tries == 1000 {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            while rt.live_actors() > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            (retries, stalled)
        },
    );
    let wall = t.elapsed();
    let rss_drained_kib = guard::rss_kib();
    drop(w);
    guard::deadline(c.watchdog_secs, &format!("dropping the {what} runtime"), || {
        drop(rt)
    });

    let mut v = Vec::new();
    let created = get(&graph::CREATED);
    let ended = get(&graph::RECEIVED) + get(&graph::FAILED) + get(&graph::DROPPED);
    if created > ended {
        v.push(format!("{} lost", created - ended));
    }
    if ended > created {
        v.push(format!("{} accounted twice", ended - created));
    }
    if created != budget {
        v.push(format!("created {created} != budget {budget}"));
    }
    let (unwound, injected) = (get(&graph::UNWOUND), get(&graph::PANICS) + get(&graph::KILLS));
    if unwound != injected {
        v.push(format!(
            "{unwound} unwinding replacements for {injected} injected panics and kills"
        ));
    }
    if get(&graph::SENT) + get(&graph::FAILED) != created {
        v.push("sent + failed != created".into());
    }
    for (name, n) in [
        ("duplicated", get(&graph::DUPLICATED)),
        ("reordered", get(&graph::REORDERED)),
        ("bad checksum", get(&graph::BAD_SUM)),
        ("misdelivered", get(&graph::MISDELIVERED)),
        ("SendError from an open mailbox", get(&graph::FALSE_FAIL)),
        ("late after Stop", get(&graph::LATE)),
        (
            "unwinding destructors without panicking()",
            get(&graph::BAD_UNWIND),
        ),
        ("healthy turns that saw panicking()", get(&graph::PANICKING)),
        ("Stop sends that failed", stop_retries),
        ("in flight when progress stalled", stalled.unwrap_or(0)),
        ("panics", guard::PANICS.load(std::sync::atomic::Ordering::SeqCst)),
        ("IO turns that went wrong", get(&graph::IO_BAD)),
    ] {
        if n > 0 {
            v.push(format!("{n} {name}"));
        }
    }
    Round {
        wall,
        counters: counters_line(),
        violations: v,
        rss_drained_kib,
    }
}

fn main() {
    let c = parse();
    guard::without_thread_stack_cache();
    let round = match c.queue.as_str() {
        "auto" => round::<AutoQueue>,
        "ring" => round::<RingQueue>,
        "striped" => round::<StripedQueue>,
        "mutex" => round::<MutexQueue>,
        q => usage(&format!("--queue: auto, ring, striped or mutex, not {q}")),
    };
    println!(
        "soak: actors={} messages={} warmup={} workers={} hogs={} seed={} failpoints={} watchdog={}s queue={}",
        c.actors, c.messages, c.warmup, c.workers, c.hogs, c.seed, c.failpoints, c.watchdog_secs, c.queue
    );
    if let Some(n) = c.report_secs {
        // Relaxed: before any thread that reads it.
        guard::REPORT_SECS.store(n, std::sync::atomic::Ordering::Relaxed);
    }
    guard::count_panics();
    let hogs = guard::Hogs::start(c.hogs);
    if c.failpoints {
        guard::install_failpoints();
    }
    let rss_start = guard::rss_kib();
    let warm = round(&c, c.warmup.max(1), c.seed ^ 0x5EED, "warm-up");
    // `main` and the hogs: every runtime thread has been joined.
    let want = 1 + c.hogs as u64;
    let threads_base = guard::settled_threads(want);
    let (rss_base, maps_base) = (guard::rss_kib(), guard::maps());
    let fds_base = guard::fds();
    let sm_base = guard::smaps();
    // Relaxed: set before the main round's runtime (and its threads) exist.
    graph::SABOTAGE.store(c.sabotage, std::sync::atomic::Ordering::Relaxed);
    let main = round(&c, c.messages, c.seed, "main round");
    if c.sabotage == graph::LEAK {
        guard::leak_a_stack();
    }
    let threads_end = guard::settled_threads(want);
    let (rss_end, maps_end) = (guard::rss_kib(), guard::maps());
    let fds_end = guard::fds();
    if std::env::var_os("SOAK_SMAPS").is_some() {
        for (m, r) in guard::smaps() {
            let start = |n: &str| n.split('-').next().unwrap_or("").to_string();
            let b = sm_base
                .iter()
                .find(|(n, _)| start(n) == start(&m))
                .map_or(0, |x| x.1);
            if r != b {
                println!("smaps: {r:>6} (was {b:>6}) {m}");
            }
        }
    }
    if c.failpoints {
        guard::remove_failpoints();
    }
    drop(hogs);

    let secs = main.wall.as_secs_f64();
    println!(
        "soak: warm-up: {:.2} s; {}",
        warm.wall.as_secs_f64(),
        warm.counters
    );
    println!("soak: main:    {secs:.2} s; {}", main.counters);
    let mut fail: Vec<String> = warm.violations.iter().map(|v| format!("warm-up: {v}")).collect();
    fail.extend(main.violations.iter().cloned());
    if c.failpoints {
        let unused: &[Site] = if c.queue == "mutex" {
            &[Site::RingClaimed]
        } else {
            &[]
        };
        let (hits, all) = guard::failpoint_report(unused);
        // Relaxed: the runtimes are dropped; nothing hits any more.
        let delays = guard::DELAYS.load(std::sync::atomic::Ordering::Relaxed);
        println!("soak: failpoint hits: {hits} (delayed {delays})");
        if !all {
            fail.push("a failpoint site was never hit".into());
        }
    }
    let growth = rss_end.saturating_sub(rss_base);
    if growth > RSS_TOLERANCE_KIB {
        fail.push(format!(
            "RSS grew {growth} KiB over the baseline (tolerance {RSS_TOLERANCE_KIB} KiB)"
        ));
    }
    let new_maps: Vec<&String> = maps_end.iter().filter(|m| !maps_base.contains(m)).collect();
    if maps_end.len() > maps_base.len() {
        println!("soak: mappings not in the baseline: {new_maps:?}");
    }
    let (maps_base, maps_end) = (maps_base.len() as u64, maps_end.len() as u64);
    if maps_end > maps_base + MAPS_TOLERANCE {
        fail.push(format!(
            "memory maps grew from {maps_base} to {maps_end} (tolerance {MAPS_TOLERANCE}): \
             a leaked stack is two"
        ));
    }
    if fds_end != fds_base {
        fail.push(format!(
            "{fds_base} open descriptors after the warm-up, {fds_end} at the end (sockets or the poller leaked)"
        ));
    }
    if get(&graph::IO_ROUNDS) + get(&graph::IO_KILLS) == 0 && c.messages >= 100_000 {
        fail.push("no IO turn ran".into());
    }
    if threads_base != want || threads_end != want {
        fail.push(format!(
            "{threads_base} threads after the warm-up, {threads_end} at the end (want {want}: main and the hogs)"
        ));
    }
    let lost = get(&graph::CREATED)
        .saturating_sub(get(&graph::RECEIVED) + get(&graph::FAILED) + get(&graph::DROPPED));
    println!(
        "soak: messages={} in {secs:.2} s = {:.0} msg/s; lost={lost} duplicated={} reordered={}; \
         rss KiB: start={rss_start} baseline={rss_base} drained(rt alive)={} end={rss_end} (+{growth}); maps: baseline={maps_base} end={maps_end}; fds: {fds_base} -> {fds_end}; threads: {threads_base} -> {threads_end}",
        get(&graph::CREATED),
        get(&graph::CREATED) as f64 / secs,
        get(&graph::DUPLICATED),
        get(&graph::REORDERED),
        main.rss_drained_kib,
    );
    if fail.is_empty() {
        println!("soak: OK");
    } else {
        println!("soak: FAIL: {}", fail.join("; "));
        std::process::exit(1);
    }
}
