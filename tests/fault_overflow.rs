//! Stack overflow: an actor that overflows its stack is reported by id and
//! stack size and the process aborts; a plain thread's overflow still gets
//! std's report; a fault outside any guard page is not called an overflow.
//! An actor that opted in to recovery ends alone, also when it overflows
//! while it unwinds detached (its end's wakes then come from a thread that
//! gave its worker away) or attached (the thread, whose panic count stays
//! raised, gives its worker away).
//!
//! Each test re-runs this test binary as a child process with
//! `SMARM_FAULT_CHILD` naming the body to run (the child crashes, the parent
//! checks how). Where the kernel cannot run the binary itself (an aarch64
//! binary under qemu-user on an x86_64 host, without binfmt_misc), the child
//! is started through qemu: `SMARM_TEST_QEMU` gives the command (default
//! `qemu-aarch64 -L /usr/aarch64-linux-gnu`, as in `.cargo/config.toml`).
#![cfg(unix)]

use std::hint::black_box;
use std::os::unix::process::ExitStatusExt;

use smarm_tests::smarm;

mod child;
use child::{child_entry, describe, expect_child_passes, run_child, run_child_env};

/// The actors' stack size in the child bodies (a multiple of every page
/// size: 4 KiB, 16 KiB on Apple silicon, 64 KiB).
const STACK: usize = 128 * 1024;

/// Recurses without bound, 512 bytes a frame that the optimiser must keep.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth as u8; 512]);
    if black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(depth + 1).wrapping_add(frame[(depth % 512) as usize] as u64)
}

/// A one-worker runtime whose actors have [`STACK`]-sized stacks.
fn one_worker() -> smarm::Runtime {
    smarm::Runtime::builder()
        .workers(1)
        .stack_size(STACK)
        .build()
        .expect("runtime")
}

/// Asserts that `e` says its actor overflowed a [`STACK`]-sized stack.
fn assert_overflowed(e: &smarm::JoinError) {
    assert!(
        matches!(e, smarm::JoinError::StackOverflow { stack_size, .. } if *stack_size == STACK),
        "{e}"
    );
}

/// The id the child printed as `child: actor id N`.
fn printed_id(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("child: actor id "))
        .expect("the child printed its actor id");
    line.trim().parse().expect("an id")
}

#[test]
fn actor_overflow_is_reported_and_aborts() {
    // The host's default guards (guard regions in slabs on Linux 6.13+),
    // then per-stack PROT_NONE mappings, forced.
    let default = format!("{:?}", smarm::stack_guard());
    actor_overflow_is_reported(&[], &default);
    actor_overflow_is_reported(&[(smarm::STACK_GUARD_ENV, "mapping")], "Mapping");
}

fn actor_overflow_is_reported(env: &[(&str, &str)], guard: &str) {
    child_entry("actor", || {
        eprintln!("child: guard {:?}", smarm::stack_guard());
        let rt = one_worker();
        let h = rt.spawn_named("deep", || {
            eprintln!("child: actor id {}", smarm::current_id().expect("in an actor"));
            recurse(0)
        });
        let _ = h.join();
    });
    let out = run_child_env("actor_overflow_is_reported_and_aborts", "actor", env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("child: guard {guard}\n")),
        "the child's stacks are guarded by {guard}:\n{}",
        describe(&out)
    );
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "the child must die by SIGABRT:\n{}",
        describe(&out)
    );
    let id = printed_id(&stderr);
    let want = format!(
        "smarm: actor {id} \"deep\" has overflowed its stack ({} KiB usable; raise Builder::stack_size)",
        STACK / 1024
    );
    assert!(
        stderr.contains(&want),
        "expected `{want}` in:\n{}",
        describe(&out)
    );
    assert!(
        stderr.contains("in the guard page"),
        "the report names the guard page:\n{}",
        describe(&out)
    );
}

#[test]
#[cfg_attr(
    smarm_tsan,
    ignore = "std's own report: under TSan the plain thread's overflow kills the child with a \
              silent SIGSEGV instead of std's abort (TSan's pthread_create interceptor resizes \
              the thread's stack, 131072 -> 137408 bytes, and std does not report the fault)"
)]
fn plain_thread_overflow_keeps_std_report() {
    child_entry("thread", || {
        // A runtime, so smarm's handler is installed and must chain.
        let rt = smarm::Runtime::builder().workers(1).build().expect("runtime");
        let t = std::thread::Builder::new()
            .name("plain".into())
            .stack_size(STACK)
            .spawn(|| recurse(0))
            .expect("spawn");
        let _ = t.join();
        drop(rt);
    });
    let out = run_child("plain_thread_overflow_keeps_std_report", "thread");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "std aborts on a thread's overflow:\n{}",
        describe(&out)
    );
    assert!(
        // std >= 1.89 prints the thread id too: "thread 'plain' (1234) has ...".
        stderr.contains("thread 'plain'") && stderr.contains("has overflowed its stack"),
        "std's report is missing (smarm's handler did not chain):\n{}",
        describe(&out)
    );
    assert!(!stderr.contains("smarm: actor"), "{}", describe(&out));
}

#[test]
fn fault_outside_a_guard_is_not_an_overflow() {
    child_entry("wild", || {
        let rt = smarm::Runtime::builder().workers(1).build().expect("runtime");
        let h = rt.spawn(|| {
            // SAFETY: a fresh anonymous mapping, unmapped at once: `p` then
            // points at an unmapped page (nothing else is mapped there
            // before the write below; the runtime maps nothing meanwhile).
            let p = unsafe {
                let len = 4096;
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(p, libc::MAP_FAILED);
                assert_eq!(libc::munmap(p, len), 0);
                p.cast::<u8>()
            };
            eprintln!("child: writing to unmapped {p:?}");
            // SAFETY: none: a deliberate write to an unmapped page, to check
            // that a fault outside any guard page is not reported as an
            // overflow. The process dies here by SIGSEGV.
            unsafe { std::ptr::write_volatile(p, 1) };
        });
        let _ = h.join();
    });
    let out = run_child("fault_outside_a_guard_is_not_an_overflow", "wild");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "a wild write must die by SIGSEGV (default action after chaining):\n{}",
        describe(&out)
    );
    assert!(
        stderr.contains("child: writing to unmapped"),
        "{}",
        describe(&out)
    );
    assert!(
        !stderr.contains("overflowed"),
        "misreported as an overflow:\n{}",
        describe(&out)
    );
}

#[test]
fn an_opted_in_overflow_ends_only_that_actor() {
    // Bounded: a broken recovery would hang the join (it fails the test).
    smarm_tests::with_timeout(120, opted_in_overflow_body);
}

fn opted_in_overflow_body() {
    // In-process: the runtime, its worker and the other actors carry on.
    let rt = one_worker();
    let (addr, h) = rt.spawn_actor_named("deep", |_mb: smarm::Mailbox<u32>| {
        assert!(smarm::recover_overflow(true));
        recurse(0)
    });
    let monitor = h.actor_ref().monitor();
    let e = h.join().unwrap_err();
    assert_overflowed(&e);
    assert_eq!(e.name(), Some("deep"));
    assert_eq!(
        monitor.recv().map(|d| d.reason),
        Some(smarm::ExitReason::StackOverflow { stack_size: STACK })
    );
    assert!(
        addr.send(1).is_err(),
        "its mailbox is closed: sends fail, none vanish"
    );
    // The same worker runs the next actors, including another recovery.
    assert_eq!(rt.block_on(|| 41 + 1), 42);
    let again = rt.spawn(|| {
        smarm::recover_overflow(true);
        recurse(0)
    });
    assert!(matches!(
        again.join(),
        Err(smarm::JoinError::StackOverflow { .. })
    ));
    assert_eq!(rt.block_on(|| 7), 7);
    // Both recovered actors are retired (the count drops once each
    // worker is back from its last actor).
    smarm_tests::eventually(10, "no live actors", || rt.live_actors() == 0);
}

/// What an actor-local value of the dying actor below sends when it drops.
const NOTICE: u32 = 7;

/// The worker that [`NotifyOnDrop`]'s drop ran as (`current_worker`), set
/// before it sends.
static DROPPED_AS: std::sync::Mutex<Option<Option<usize>>> = std::sync::Mutex::new(None);

/// An actor-local value that, when dropped, sends [`NOTICE`] to the address
/// it holds (a parked actor's mailbox: the send wakes it).
struct NotifyOnDrop(std::cell::Cell<Option<smarm::Addr<u32>>>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        if let Some(addr) = self.0.take() {
            *DROPPED_AS.lock().unwrap() = Some(smarm::current_worker());
            let _ = addr.send(NOTICE);
        }
    }
}

static NOTIFY: smarm::ActorLocal<NotifyOnDrop> =
    smarm::ActorLocal::new(|| NotifyOnDrop(std::cell::Cell::new(None)));

/// Dropped by a panic's unwind: a blocking call detaches the unwinding
/// actor (its worker goes to another thread, the unwind goes on here),
/// then the recursion overflows the stack while detached.
struct OverflowOnUnwind;

impl Drop for OverflowOnUnwind {
    fn drop(&mut self) {
        assert!(std::thread::panicking(), "dropped by the unwind");
        smarm::blocking(|| ());
        black_box(recurse(0));
    }
}

#[test]
fn an_overflow_while_detached_wakes_from_outside_the_worker() {
    child_entry("detached", detached_overflow_body);
    expect_child_passes(
        "an_overflow_while_detached_wakes_from_outside_the_worker",
        "detached",
        &[],
    );
}

/// An actor overflows its stack while it unwinds detached, and its end
/// wakes a parked actor from the thread that gave its worker away: the
/// overflow leaves the actor's locals to its control block, whose drop (at
/// the end of `Shared::detached`'s `Overflowed` branch) sends the wake. That
/// thread must queue the woken actor outside, not in the run-next slot of
/// the worker it handed off (debug builds abort on that, naming the slot).
fn detached_overflow_body() {
    smarm_tests::with_timeout(60, || {
        let rt = one_worker();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = rt.spawn_named("deep-unwind", move || {
            assert!(smarm::recover_overflow(true));
            // Work-first: the waiter runs at once and parks in `recv` on
            // the one worker before this actor goes on.
            smarm_tests::next_spawn_work_first();
            let (addr, _waiter) = smarm::spawn_actor(move |mut mb: smarm::Mailbox<u32>| {
                let _ = tx.send(mb.recv());
            });
            NOTIFY.with(|n| n.0.set(Some(addr)));
            let _deep = OverflowOnUnwind;
            panic!("unwinding into an overflow");
        });
        let e = h.join().unwrap_err();
        assert_overflowed(&e);
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the parked actor was woken and received the notice");
        assert_eq!(got.ok(), Some(NOTICE));
        // Release builds have no serving check: the thread that gave its
        // worker away must not act as that worker (here, nor in the wake).
        assert_eq!(
            *DROPPED_AS.lock().unwrap(),
            Some(None),
            "the overflowed actor's locals dropped on a thread still acting as a worker"
        );
        // The worker carries on under the thread that took it over.
        assert_eq!(rt.block_on(|| 41 + 1), 42);
        smarm_tests::eventually(10, "no live actors", || rt.live_actors() == 0);
    });
}

/// Dropped by a panic's unwind on the worker's own thread (nothing in it
/// parks or blocks, so the actor stays attached): the recursion overflows
/// the stack in the middle of the unwind.
struct OverflowInUnwind;

impl Drop for OverflowInUnwind {
    fn drop(&mut self) {
        assert!(std::thread::panicking(), "dropped by the unwind");
        black_box(recurse(0));
    }
}

#[test]
fn an_overflow_in_an_unwind_leaves_later_actors_a_clean_thread() {
    child_entry("unwind-overflow", unwind_overflow_body);
    expect_child_passes(
        "an_overflow_in_an_unwind_leaves_later_actors_a_clean_thread",
        "unwind-overflow",
        &[],
    );
}

/// An actor overflows its stack while it unwinds on its worker's thread:
/// the abandoned unwind leaves that OS thread's panic count raised (std's
/// `panicking()` stays true there), so every later actor on it would run
/// as if unwinding (its mutex guards poison, its parks detach, its kills
/// are absorbed). The thread must hand the worker to another and retire;
/// the next actors on the one worker run as ever.
fn unwind_overflow_body() {
    smarm_tests::with_timeout(60, || {
        let rt = one_worker();
        let h = rt.spawn_named("deep-unwind", || {
            assert!(smarm::recover_overflow(true));
            let _deep = OverflowInUnwind;
            panic!("unwinding into an overflow");
        });
        let e = h.join().unwrap_err();
        assert_overflowed(&e);
        // The same worker, on whichever thread serves it now. On a thread
        // that still counts the abandoned panic, std's `panicking()` is
        // true for every later actor: a `MutexGuard` dropped there poisons
        // its mutex, a park detaches, a kill is absorbed.
        let m = std::sync::Arc::new(std::sync::Mutex::new(0u32));
        let m2 = m.clone();
        let later = rt.spawn_named("later", move || {
            *m2.lock().unwrap() += 1;
            std::thread::panicking()
        });
        assert_eq!(
            later.join().ok(),
            Some(false),
            "a later actor runs as if unwinding"
        );
        assert!(!m.is_poisoned(), "a later actor's guard poisoned its mutex");
        assert_eq!(*m.lock().unwrap(), 1);
        // An actor parked in a receive is killed, and a panic is an
        // ordinary one, reported to the joiner.
        let (_addr, parked) = rt.spawn_actor(|mut mb: smarm::Mailbox<u32>| mb.recv().unwrap());
        parked.actor_ref().kill();
        let e = parked.join().unwrap_err();
        assert!(e.is_killed(), "{e}");
        let e = rt
            .spawn(|| -> u32 { panic!("an ordinary panic") })
            .join()
            .unwrap_err();
        assert!(e.is_panic(), "{e}");
        assert_eq!(rt.block_on(|| 41 + 1), 42);
        smarm_tests::eventually(10, "no live actors", || rt.live_actors() == 0);
    });
}
