//! Density: per-spawn stack sizes (`ActorBuilder`), and many parked actors
//! at once under the default `vm.max_map_count` (Linux: every stack
//! guarded by a guard region in a shared slab, so maps stay few).

use smarm_tests::smarm::{self, ActorBuilder, Mailbox, Runtime, SpawnError};
use smarm_tests::with_timeout;

mod child;

/// The stack size of the running actor, from a dump of `rt`.
fn stack_of(rt: &Runtime, id: u64) -> usize {
    rt.dump()
        .actors
        .iter()
        .find(|a| a.id == id)
        .expect("the actor is live")
        .stack_size
}

#[test]
fn a_spawn_gets_the_stack_size_it_asks_for() {
    with_timeout(60, || {
        let rt = Runtime::builder()
            .workers(2)
            .stack_size(64 * 1024)
            .build()
            .unwrap();
        let rt = std::sync::Arc::new(rt);
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let r = rt.clone();
        let sizes = rt.block_on(move || {
            let mut sizes = Vec::new();
            // Default, own size, default again, own again: a pooled stack of
            // the other size must never be handed out.
            for ask in [
                None,
                Some(32 * 1024),
                None,
                Some(32 * 1024),
                Some(20_000),
                Some(256 * 1024),
            ] {
                let mut b = ActorBuilder::new().name("sized");
                if let Some(s) = ask {
                    b = b.stack_size(s);
                }
                let r2 = r.clone();
                let (addr, h) = b
                    .spawn_actor(move |mut mb: Mailbox<()>| {
                        let me = smarm::current_id().unwrap();
                        let size = stack_of(&r2, me);
                        let name = smarm::current_name();
                        mb.recv().unwrap();
                        (size, name)
                    })
                    .unwrap();
                addr.send(()).unwrap();
                let (size, name) = h.join().unwrap();
                assert_eq!(name.as_deref(), Some("sized"));
                sizes.push(size);
            }
            sizes
        });
        let round = |b: usize| b.div_ceil(page) * page;
        assert_eq!(
            sizes,
            vec![
                64 * 1024,
                32 * 1024,
                64 * 1024,
                32 * 1024,
                round(20_000),
                256 * 1024
            ]
        );
        // From a plain thread, too.
        let r = rt.clone();
        let h = ActorBuilder::new()
            .stack_size(48 * 1024)
            .spawn_on(&rt, move || stack_of(&r, smarm::current_id().unwrap()))
            .unwrap();
        assert_eq!(h.join().unwrap(), 48 * 1024);
        let (a, h) = ActorBuilder::new()
            .spawn_actor_on(&rt, |mut mb: Mailbox<u32>| mb.recv().unwrap() + 1)
            .unwrap();
        a.send(41).unwrap();
        assert_eq!(h.join().unwrap(), 42);
    });
}

/// The running code's stack pointer (not a local's address: ASan moves
/// locals to its fake stack).
#[inline(always)]
fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads a register into a local; no memory, no flags touched.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        // Copy rsp into the output register.
        std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        // Copy sp into the output register.
        std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    sp
}

/// Stack coloring: every mapping's top is page-aligned, so without an
/// offset every actor's frames would sit at one page offset in every stack
/// and share a few cache sets. Consecutive spawns start their stacks at
/// different offsets (32 of them on the default 128 KiB stack).
#[test]
fn consecutive_actors_start_their_stacks_at_different_offsets() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let offsets = rt.block_on(|| {
            (0..64)
                .map(|_| smarm::spawn(|| stack_pointer() % 4096).join().unwrap())
                .collect::<std::collections::BTreeSet<usize>>()
        });
        assert!(
            offsets.len() >= 16,
            "64 spawns started at only {} distinct page offsets: {offsets:?}",
            offsets.len()
        );
    });
}

#[test]
fn a_stack_size_out_of_bounds_is_an_error() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        for bad in [
            0,
            1,
            smarm::MIN_STACK_SIZE - 1,
            smarm::MAX_STACK_SIZE + 1,
            usize::MAX,
        ] {
            let err = ActorBuilder::new()
                .stack_size(bad)
                .spawn_on(&rt, || ())
                .unwrap_err();
            assert_eq!(
                err,
                SpawnError::StackSize {
                    requested: bad,
                    minimum: smarm::MIN_STACK_SIZE,
                    maximum: smarm::MAX_STACK_SIZE
                }
            );
            assert!(err.to_string().contains("stack size must be"), "{err}");
            let inside = rt.block_on(move || {
                ActorBuilder::new()
                    .stack_size(bad)
                    .spawn_actor(|_: Mailbox<()>| ())
                    .map(|_| ())
                    .unwrap_err()
            });
            assert!(matches!(inside, SpawnError::StackSize { .. }));
        }
        // The bounds themselves are fine.
        for ok in [smarm::MIN_STACK_SIZE, 1 << 20] {
            let h = ActorBuilder::new().stack_size(ok).spawn_on(&rt, || 7).unwrap();
            assert_eq!(h.join().unwrap(), 7);
        }
        // Outside an actor, `spawn` says so.
        assert_eq!(
            ActorBuilder::new().spawn(|| ()).map(|_| ()).unwrap_err(),
            SpawnError::NoRuntime
        );
    });
}

/// Memory maps of this process now (lines of `/proc/self/maps`).
#[cfg(target_os = "linux")]
fn maps() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .expect("/proc/self/maps")
        .lines()
        .count()
}

/// Resident bytes of this process now (`/proc/self/statm`).
#[cfg(target_os = "linux")]
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("rss");
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// A field of `/proc/meminfo` in bytes.
#[cfg(target_os = "linux")]
fn meminfo(field: &str) -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with(field))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What one parked actor of the child below may cost at most (its stack's
/// touched pages, control block, mailbox, join slot, the parent's `Addr`
/// and handle), for sizing the count to this machine's memory.
#[cfg(target_os = "linux")]
const BUDGET_PER_ACTOR: usize = 12 * 1024;

/// Gives freed heap memory back to the OS (glibc's `malloc_trim`).
#[cfg(target_os = "linux")]
fn trim_heap() {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: malloc_trim has no preconditions; it only releases free
        // memory.
        unsafe { libc::malloc_trim(0) };
    }
}

/// Parks N actors on their mailboxes at once (half a million, or what half
/// of this machine's available memory holds at [`BUDGET_PER_ACTOR`] each,
/// at least 200,000), far past the ~28,000 guarded stacks per-stack mappings
/// allow under the default `vm.max_map_count`; checks the maps stay few;
/// wakes and joins them all; checks maps and memory come back.
#[cfg(target_os = "linux")]
#[test]
#[cfg_attr(
    any(smarm_tsan, smarm_asan),
    ignore = "the sanitizers' shadow memory makes each actor cost far more than the budget"
)]
fn many_parked_actors_take_few_maps_and_give_back_their_memory() {
    child::child_entry("many", || {
        assert_eq!(smarm::stack_guard(), smarm::StackGuard::Region);
        let avail = meminfo("MemAvailable:").unwrap_or(4 << 30);
        // At most half a million: a million took 107-121 s of the child's
        // 120 s in a debug build on a 2-core VM (mostly the kernel zeroing
        // stack pages); `million_report` measures the million.
        let n = (avail / 2 / BUDGET_PER_ACTOR).clamp(200_000, 500_000);
        eprintln!("child: {n} actors ({} MiB available)", avail >> 20);
        let rt = Runtime::builder()
            .workers(2)
            .stack_size(64 * 1024)
            .build()
            .unwrap();
        // Parks `n` actors; returns (maps, rss) then, and, once all but
        // every `KEEP`-th are woken and joined (the kept ones still parked,
        // so every slab keeps a live stack and only released pages can
        // bring RSS down), maps and RSS (after trimming glibc's freed heap,
        // which it keeps resident for reuse) and RSS before that trim; then
        // wakes and joins the rest.
        const KEEP: usize = 64;
        let round = |rt: &Runtime, n: usize| {
            rt.block_on(move || {
                let mut live = Vec::with_capacity(n);
                for i in 0..n {
                    live.push(smarm::spawn_actor(move |mut mb: Mailbox<u64>| {
                        mb.recv().unwrap() + i as u64
                    }));
                }
                let parked = (maps(), rss());
                let mut kept = Vec::with_capacity(n / KEEP + 1);
                for (i, (a, h)) in live.into_iter().enumerate() {
                    if i % KEEP == 0 {
                        kept.push((i, a, h));
                        continue;
                    }
                    a.send(1).unwrap();
                    assert_eq!(h.join().unwrap(), i as u64 + 1);
                }
                let untrimmed = rss();
                trim_heap();
                let after = (maps(), rss(), untrimmed);
                for (i, a, h) in kept {
                    a.send(1).unwrap();
                    assert_eq!(h.join().unwrap(), i as u64 + 1);
                }
                (parked, after)
            })
        };
        // A first round warms the slabs, the stack pool and the allocator.
        round(&rt, 10_000);
        trim_heap();
        let (maps0, rss0) = (maps(), rss());
        let ((maps1, rss1), (_, rss2, untrimmed)) = round(&rt, n);
        trim_heap();
        let maps3 = maps();
        eprintln!(
            "child: maps {maps0} -> {maps1} parked -> {maps3} after; rss {} -> {} MiB parked -> \
             {} MiB with 1 in {KEEP} still parked ({} before malloc_trim); {} B per parked actor",
            rss0 >> 20,
            rss1 >> 20,
            rss2 >> 20,
            untrimmed >> 20,
            (rss1 - rss0) / n
        );
        // (The parent runs this child with one malloc arena: glibc's
        // per-thread arenas are 64 MiB maps each, kept once grown, and would
        // be counted here as if they were the runtime's.)
        assert!(
            maps1 < maps0 + 100,
            "{n} parked actors took {} maps",
            maps1 - maps0
        );
        assert!(
            rss1 - rss0 < n * BUDGET_PER_ACTOR,
            "over budget: {} B each",
            (rss1 - rss0) / n
        );
        // With one actor in 64 still parked, what the others took is given
        // back: their stacks' pages (no slab is empty yet) and their heap,
        // but for the stack pool's caches (a few hundred stacks).
        assert!(
            rss2.saturating_sub(rss0) < (rss1 - rss0) / 10,
            "rss not given back: {rss0} -> {rss1} -> {rss2}"
        );
        // Once all are gone the slabs are unmapped, but those still holding
        // a pooled stack.
        assert!(maps3 <= maps0 + 8, "maps not given back: {maps0} -> {maps3}");
        drop(rt);
    });
    if child::launcher().is_some() {
        eprintln!("skipped under emulation (qemu-user has no guard regions)");
        return;
    }
    if smarm::stack_guard() != smarm::StackGuard::Region {
        eprintln!(
            "skipped: this kernel has no guard regions (Linux 6.13+); the map-limit test covers the fallback"
        );
        return;
    }
    let out = child::expect_child_passes(
        "many_parked_actors_take_few_maps_and_give_back_their_memory",
        "many",
        &[("MALLOC_ARENA_MAX", "1")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprint!(
        "{}",
        stderr
            .lines()
            .filter(|l| l.starts_with("child:"))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
}

/// The runtime's own frames fit the smallest stack: actors with
/// `MIN_STACK_SIZE` stacks park in each kind of wait (mailbox, channel,
/// join, timer), show in a dump with what they touched, and wake and
/// finish. (Prints the touched sizes `docs/density.md` quotes.)
#[test]
fn the_smallest_stack_holds_every_kind_of_wait() {
    with_timeout(60, || {
        let rt = std::sync::Arc::new(Runtime::builder().workers(1).build().unwrap());
        let small = || ActorBuilder::new().stack_size(smarm::MIN_STACK_SIZE);
        let (tx, mut rx) = smarm::channel::<u32>();
        let (mb_addr, on_mailbox) = small()
            .name("mailbox")
            .spawn_actor_on(&rt, |mut mb: Mailbox<u32>| mb.recv().unwrap())
            .unwrap();
        let on_channel = small()
            .name("channel")
            .spawn_on(&rt, move || rx.recv().unwrap())
            .unwrap();
        let (gate, gate_rx) = smarm::oneshot::<u32>();
        let on_join = small()
            .name("join")
            .spawn_on(&rt, move || {
                let inner = small().spawn(move || gate_rx.recv().unwrap()).unwrap();
                inner.join().unwrap()
            })
            .unwrap();
        // Sleeps until killed (an hour of timer: the kill below ends it).
        let on_timer = small()
            .name("timer")
            .spawn_on(&rt, move || smarm::sleep(std::time::Duration::from_secs(3600)))
            .unwrap();
        let names = ["mailbox", "channel", "join", "timer"];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let touched = loop {
            let d = rt.dump();
            let parked: Vec<_> = names
                .iter()
                .filter_map(|n| {
                    let a = d.actors.iter().find(|a| a.name.as_deref() == Some(n))?;
                    let waiting = match *n {
                        "timer" => a.state == smarm::ActorState::Sleeping,
                        _ => !matches!(a.state, smarm::ActorState::Running | smarm::ActorState::Runnable),
                    };
                    waiting.then_some((*n, a.stack_size, a.stack_touched))
                })
                .collect();
            if parked.len() == names.len() {
                break parked;
            }
            assert!(std::time::Instant::now() < deadline, "not all parked: {d}");
            std::thread::yield_now();
        };
        for (name, size, t) in &touched {
            assert_eq!(*size, smarm::MIN_STACK_SIZE, "{name}");
            eprintln!("parked on {name}: {t:?} bytes of {size} touched");
            if let Some(t) = t {
                assert!(*t <= *size, "{name}: {t} > {size}");
            }
        }
        mb_addr.send(1).unwrap();
        tx.send(2).unwrap();
        gate.send(3).unwrap();
        on_timer.actor_ref().kill();
        let got = [
            on_mailbox.join().unwrap(),
            on_channel.join().unwrap(),
            on_join.join().unwrap(),
        ];
        assert_eq!(got, [1, 2, 3]);
        assert!(
            matches!(on_timer.join(), Err(smarm::JoinError::Killed { .. })),
            "the sleeper ends by the kill, woken from its timer"
        );
    });
}
