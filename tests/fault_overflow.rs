//! Stack overflow: an actor that overflows its stack is reported by id and
//! stack size and the process aborts; a plain thread's overflow still gets
//! std's report; a fault outside any guard page is not called an overflow.
//!
//! Each test re-runs this test binary as a child process with
//! `SMARM_FAULT_CHILD` naming the body to run (the child crashes, the parent
//! checks how). Where the kernel cannot run the binary itself (an aarch64
//! binary under qemu-user on an x86_64 host, without binfmt_misc), the child
//! is started through qemu: `SMARM_TEST_QEMU` gives the command (default
//! `qemu-aarch64 -L /usr/aarch64-linux-gnu`, as in `.cargo/config.toml`).
#![cfg(unix)]

use std::hint::black_box;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use smarm_tests::smarm;

/// Selects the child's body.
const CHILD_ENV: &str = "SMARM_FAULT_CHILD";
/// How long a child may take (qemu runs a debug build ~4x slower).
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);
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

/// If this process is a child started for `body`, runs it (it must not
/// return: a return exits 0, which the parent reports as a failure).
fn child_entry(body: &str, f: fn()) {
    if std::env::var(CHILD_ENV).as_deref() == Ok(body) {
        f();
        eprintln!("child: {body} returned without crashing");
        std::process::exit(0);
    }
}

/// Runs this binary's test `test` as a child with body `body`; returns its
/// output, failing loudly if it does not finish within [`CHILD_TIMEOUT`].
fn run_child(test: &str, body: &str) -> Output {
    let exe = std::env::current_exe().expect("current_exe");
    let args = [test, "--exact", "--nocapture", "--test-threads=1"];
    let child = match launcher() {
        None => spawn(Command::new(&exe).args(args), body)
            .unwrap_or_else(|e| panic!("spawning {} failed: {e}", exe.display())),
        Some(qemu) => {
            let mut words = qemu.split_whitespace();
            let mut cmd = Command::new(words.next().expect("SMARM_TEST_QEMU is empty"));
            cmd.args(words).arg(&exe).args(args);
            spawn(&mut cmd, body).unwrap_or_else(|e| {
                panic!(
                    "this binary cannot be exec'd directly (emulated?) and `{qemu}` failed to \
                     start it: {e}; set SMARM_TEST_QEMU to the emulator command"
                )
            })
        }
    };
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(CHILD_TIMEOUT) {
        Ok(out) => out.expect("waiting for the child"),
        Err(_) => {
            // SAFETY: `pid` is our child, not yet reaped (the waiter thread
            // has not returned), so the pid cannot have been reused.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            let out = rx.recv_timeout(Duration::from_secs(10));
            panic!("child `{body}` hung for {CHILD_TIMEOUT:?} (killed); its output: {out:?}");
        }
    }
}

/// `None` if the kernel runs this binary itself; else the emulator command
/// to start it with. Probed once by running `--list`: under qemu-user the
/// exec of a foreign binary fails in the child (exit 127, no output: qemu
/// turns the vfork of `posix_spawn` into a fork, so the error never
/// reaches `spawn`), while a native exec lists the tests.
fn launcher() -> Option<&'static str> {
    static LAUNCHER: OnceLock<Option<String>> = OnceLock::new();
    LAUNCHER
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("current_exe");
            let probe = Command::new(&exe)
                .args(["--list", "--exact", "no-such-test"])
                .env_remove(CHILD_ENV)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            match probe {
                Ok(s) if s.success() => None,
                _ => Some(
                    std::env::var("SMARM_TEST_QEMU")
                        .unwrap_or_else(|_| "qemu-aarch64 -L /usr/aarch64-linux-gnu".to_owned()),
                ),
            }
        })
        .as_deref()
}

fn spawn(cmd: &mut Command, body: &str) -> io::Result<std::process::Child> {
    cmd.env(CHILD_ENV, body)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?} (signal {:?})\n--- stderr ---\n{}\n--- stdout ---\n{}",
        out.status,
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    )
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
    child_entry("actor", || {
        let rt = smarm::Runtime::builder()
            .workers(1)
            .stack_size(STACK)
            .build()
            .expect("runtime");
        let h = rt.spawn_named("deep", || {
            eprintln!("child: actor id {}", smarm::current_id().expect("in an actor"));
            recurse(0)
        });
        let _ = h.join();
    });
    let out = run_child("actor_overflow_is_reported_and_aborts", "actor");
    let stderr = String::from_utf8_lossy(&out.stderr);
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
    // In-process: the runtime, its worker and the other actors carry on.
    let rt = smarm::Runtime::builder()
        .workers(1)
        .stack_size(STACK)
        .build()
        .expect("runtime");
    let (addr, h) = rt.spawn_actor_named("deep", |_mb: smarm::Mailbox<u32>| {
        assert!(smarm::recover_overflow(true));
        recurse(0)
    });
    let monitor = h.actor_ref().monitor();
    let e = h.join().unwrap_err();
    assert!(
        matches!(&e, smarm::JoinError::StackOverflow { stack_size, .. } if *stack_size == STACK),
        "{e}"
    );
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
