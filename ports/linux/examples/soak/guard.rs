//! The soak's guards: the watchdog (no hang), the CPU hogs (OS preemption
//! of workers), the failpoint hook (wider race windows) and the RSS probe.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use smarm_linux::failpoint::{self, Site};

// ---------------------------------------------------------------- watchdog

/// Bumped on every unit of actor progress (a message received, a failed or
/// dropped send, an actor exit): the watchdog's heartbeat.
pub static PROGRESS: AtomicU64 = AtomicU64::new(0);

/// Seconds between progress lines on long runs (0: none).
pub static REPORT_SECS: AtomicU64 = AtomicU64::new(60);

/// The heartbeat now.
pub fn progress() -> u64 {
    // Relaxed: a heartbeat; nothing is read through it.
    PROGRESS.load(Ordering::Relaxed)
}

/// Runs `body` with a watchdog thread beside it: if [`PROGRESS`] does not
/// move for `secs`, the watchdog prints `what`, `dump()` (the runtime's)
/// and `counters()`, and exits the process with status 3. A hang
/// fails the soak; it never blocks its caller.
pub fn watched<R>(
    secs: u64,
    what: &str,
    dump: &(dyn Fn() -> String + Sync),
    counters: fn() -> String,
    body: impl FnOnce() -> R,
) -> R {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let dog = s.spawn(|| {
            let mut last = PROGRESS.load(Ordering::Relaxed);
            let mut since = Instant::now();
            let start = since;
            let mut reported = since;
            // Relaxed: set once before any round.
            let every = Duration::from_secs(REPORT_SECS.load(Ordering::Relaxed));
            // Relaxed: a flag and a heartbeat sampled every 50 ms; the
            // scope's join orders everything that matters.
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if !every.is_zero() && reported.elapsed() >= every {
                    reported = Instant::now();
                    println!("soak: [{what} +{} s] {}", start.elapsed().as_secs(), counters());
                }
                let now = PROGRESS.load(Ordering::Relaxed);
                if now != last {
                    last = now;
                    since = Instant::now();
                } else if since.elapsed() >= Duration::from_secs(secs) {
                    eprintln!("soak: FAIL: no progress for {secs} s during {what} (hang)");
                    eprintln!("{}", dump());
                    eprintln!("soak: counters: {}", counters());
                    std::process::exit(3);
                }
            }
        });
        let r = body();
        done.store(true, Ordering::Relaxed);
        // Joined, not left to the scope: a scoped thread the scope only
        // waits for is detached, and its OS thread and stack may outlive
        // the scope (and show up in the memory checks).
        dog.join().expect("watchdog");
        r
    })
}

/// Runs `body` (a step that makes no [`PROGRESS`], such as dropping the
/// runtime) and exits with status 3 if it takes longer than `secs`.
pub fn deadline<R>(secs: u64, what: &str, body: impl FnOnce() -> R) -> R {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let dog = s.spawn(|| {
            let t = Instant::now();
            // Relaxed: as in `watched`.
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                if t.elapsed() >= Duration::from_secs(secs) {
                    eprintln!("soak: FAIL: {what} took over {secs} s (hang)");
                    std::process::exit(3);
                }
            }
        });
        let r = body();
        done.store(true, Ordering::Relaxed);
        // Joined, not left to the scope: a scoped thread the scope only
        // waits for is detached, and its OS thread and stack may outlive
        // the scope (and show up in the memory checks).
        dog.join().expect("watchdog");
        r
    })
}

/// Panics anywhere in the process (an actor's panic is caught at its edge
/// and would otherwise only end that actor).
pub static PANICS: AtomicU64 = AtomicU64::new(0);

/// Counts every panic, then reports it as the default hook does.
pub fn count_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default(info);
    }));
}

// -------------------------------------------------------------------- hogs

/// OS threads that spin until dropped, so the kernel preempts workers at
/// arbitrary instructions (a worker may lose its CPU mid-protocol).
pub struct Hogs {
    stop: &'static AtomicBool,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl Hogs {
    pub fn start(n: usize) -> Hogs {
        let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let threads = (0..n)
            .map(|i| {
                std::thread::Builder::new()
                    .name(format!("soak-hog-{i}"))
                    .spawn(move || {
                        let mut spins = 0u64;
                        // Relaxed: a stop flag; nothing is published with it.
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                            spins = spins.wrapping_add(1);
                        }
                        spins
                    })
                    .expect("hog thread")
            })
            .collect();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        // Relaxed: see the loop.
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

// -------------------------------------------------------------- failpoints

/// Hits per failpoint site, by `Site as usize`.
pub static HITS: [AtomicU64; Site::ALL.len()] = [const { AtomicU64::new(0) }; Site::ALL.len()];
/// Hits that delayed (spun or yielded).
pub static DELAYS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static FP_RNG: Cell<u64> = const { Cell::new(0) };
}

/// The soak's hook (see `smarm_core::failpoint`'s contract: it never calls
/// into the runtime and never panics). One hit in 32 delays: half of those
/// spin for up to ~4k spin hints, half `sched_yield` the OS thread, so a
/// ring slot stays claimed-but-unpublished, a park CAS is late, a close is
/// half done, while other workers run.
fn hook(site: Site) {
    // Relaxed: statistics.
    HITS[site as usize].fetch_add(1, Ordering::Relaxed);
    // A per-thread xorshift (the hook never switches, so the thread-local
    // is not held across a migration).
    let r = FP_RNG.with(|c| {
        let mut x = c.get();
        if x == 0 {
            x = (c as *const Cell<u64> as u64) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.set(x);
        x
    });
    if r & 31 != 0 {
        return;
    }
    DELAYS.fetch_add(1, Ordering::Relaxed);
    if r & (1 << 20) != 0 {
        std::thread::yield_now();
    } else {
        for _ in 0..(r >> 40) % 4096 {
            std::hint::spin_loop();
        }
    }
}

pub fn install_failpoints() {
    failpoint::set_hook(Some(hook));
}

pub fn remove_failpoints() {
    failpoint::set_hook(None);
}

/// Per-site hits as `name=count` pairs, and whether every site was hit
/// (but those in `unused`: the mutex run queue has no ring).
pub fn failpoint_report(unused: &[Site]) -> (String, bool) {
    let mut all = true;
    let s = Site::ALL
        .iter()
        .map(|&site| {
            // Relaxed: read after the runtime was dropped (threads joined).
            let n = HITS[site as usize].load(Ordering::Relaxed);
            all &= n > 0 || unused.contains(&site);
            format!("{}={n}", site.name())
        })
        .collect::<Vec<_>>()
        .join(" ");
    (s, all)
}

// --------------------------------------------------------------------- RSS

/// Resident set size in KiB (`/proc/self/statm`'s second field), after
/// handing the allocator's free pages back to the kernel (`malloc_trim`), so
/// the figure is what is still allocated or mapped, not what glibc keeps.
pub fn rss_kib() -> u64 {
    // SAFETY: malloc_trim only walks the allocator's own free lists; it is
    // thread-safe in glibc.
    unsafe { libc::malloc_trim(0) };
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm's resident field");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    pages * page / 1024
}

/// Descriptors open in this process (`/proc/self/fd`, less the one the
/// listing itself holds).
pub fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count().saturating_sub(1))
}

/// Memory mappings (`/proc/self/maps` lines: address range and
/// permissions) other than glibc's malloc arenas: a leaked guarded stack is
/// two. An arena is a 64 MiB reservation aligned to 64 MiB (its used part
/// starts at the boundary, its reserve ends at the next), and a later
/// round's threads may add one; skipping mappings that start or end on a
/// 64 MiB boundary leaves them out (a stack lands on one by chance once in
/// 16,384).
pub fn maps() -> Vec<String> {
    const ARENA: u64 = 64 << 20;
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    maps.lines()
        .filter(|l| {
            let range = l.split_whitespace().next().unwrap_or("");
            let mut ends = range.split('-').map(|a| u64::from_str_radix(a, 16).unwrap_or(1));
            let (start, end) = (ends.next().unwrap_or(1), ends.next().unwrap_or(1));
            start % ARENA != 0 && end % ARENA != 0
        })
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect()
}

/// Threads in this process (`/proc/self/status`): a thread the runtime
/// started and never joined outlives it.
pub fn threads() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("the Threads: line")
}

/// Waits (up to 2 s) until the process has `want` threads and returns the
/// count: the kernel drops a thread from the count a moment after a join
/// of it returned.
pub fn settled_threads(want: u64) -> u64 {
    let t = Instant::now();
    loop {
        let n = threads();
        if n == want || t.elapsed() >= Duration::from_secs(2) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// glibc keeps up to 40 MiB of exited threads' stacks for reuse, so the
/// spare threads a runtime starts for `blocking` calls leave mappings and
/// resident pages behind that are no leak. The tunable that turns the cache
/// off is read at process start: re-execute once with it set.
pub fn without_thread_stack_cache() {
    const TUNABLE: &str = "glibc.pthread.stack_cache_size=0";
    let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if current.split(':').any(|t| t == TUNABLE) {
        return;
    }
    let tunables = if current.is_empty() {
        TUNABLE.to_string()
    } else {
        format!("{current}:{TUNABLE}")
    };
    let exe = std::env::current_exe().expect("the soak's own path");
    let err = std::os::unix::process::CommandExt::exec(
        std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env("GLIBC_TUNABLES", tunables),
    );
    eprintln!("soak: could not re-execute with {TUNABLE}: {err}");
    std::process::exit(2);
}

/// Debug: (mapping, Rss KiB) for every mapping (SOAK_SMAPS=1).
pub fn smaps() -> Vec<(String, u64)> {
    let t = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let mut v = Vec::new();
    let mut cur = String::new();
    for l in t.lines() {
        if let Some(r) = l.strip_prefix("Rss:") {
            v.push((cur.clone(), r.trim().trim_end_matches(" kB").parse().unwrap_or(0)));
        } else if !l.contains(':') || l.split_whitespace().next().is_some_and(|f| f.contains('-')) {
            cur = l.to_string();
        }
    }
    v
}

/// `--sabotage leak`: maps a 3 MiB "stack" below a guard page, touches it
/// and never unmaps it, as a runtime that lost a stack would.
pub fn leak_a_stack() {
    const SIZE: usize = 3 << 20;
    const PAGE: usize = 4096;
    // SAFETY: a fresh anonymous private mapping; nothing else refers to it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE + PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap");
    // SAFETY: the first page of the mapping made above (the guard, as the
    // port does): splits it into two mappings.
    assert_eq!(unsafe { libc::mprotect(p, PAGE, libc::PROT_NONE) }, 0, "mprotect");
    // SAFETY: the pages above the guard are ours, readable and writable.
    unsafe { std::ptr::write_bytes(p.cast::<u8>().add(PAGE), 1, SIZE) };
}
