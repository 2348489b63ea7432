//! Running one test of this binary in a child process (for crashes and
//! stderr checks), natively or, where the kernel cannot exec this binary
//! (aarch64 tests under qemu-user without binfmt_misc), through the
//! emulator. Shared by the tests that need it (`mod child;`).
#![allow(dead_code)]

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// The variable that tells a child which body to run.
pub const CHILD_ENV: &str = "SMARM_FAULT_CHILD";

/// How long a child may run before it is killed and the test fails.
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

/// If this process is a child started for `body`, runs it (it must not
/// return: a return exits 0, which the parent reports as a failure).
pub fn child_entry(body: &str, f: fn()) {
    if std::env::var(CHILD_ENV).as_deref() == Ok(body) {
        f();
        eprintln!("child: {body} returned without crashing");
        std::process::exit(0);
    }
}

/// Runs this binary's test `test` as a child with body `body`; returns its
/// output, failing loudly if it does not finish within [`CHILD_TIMEOUT`].
pub fn run_child(test: &str, body: &str) -> Output {
    run_child_env(test, body, &[])
}

/// [`run_child`] with extra environment variables for the child.
pub fn run_child_env(test: &str, body: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("current_exe");
    let args = [test, "--exact", "--nocapture", "--test-threads=1"];
    let child = match launcher() {
        None => spawn(Command::new(&exe).args(args).envs(env.iter().copied()), body)
            .unwrap_or_else(|e| panic!("spawning {} failed: {e}", exe.display())),
        Some(qemu) => {
            let mut words = qemu.split_whitespace();
            let mut cmd = Command::new(words.next().expect("SMARM_TEST_QEMU is empty"));
            cmd.args(words).arg(&exe).args(args).envs(env.iter().copied());
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

/// Runs this binary's test `test` as a child with body `body` (and `env`)
/// and asserts the body ran to its end ([`child_entry`]'s line) and the
/// child exited 0; returns its output.
pub fn expect_child_passes(test: &str, body: &str, env: &[(&str, &str)]) -> Output {
    let out = run_child_env(test, body, env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains(&format!("child: {body} returned without crashing")),
        "the child `{body}` must run to the end and exit 0:\n{}",
        describe(&out)
    );
    out
}

/// `None` if the kernel runs this binary itself; else the emulator command
/// to start it with. Probed once by running `--list`: under qemu-user the
/// exec of a foreign binary fails in the child (exit 127, no output: qemu
/// turns the vfork of `posix_spawn` into a fork, so the error never
/// reaches `spawn`), while a native exec lists the tests.
pub fn launcher() -> Option<&'static str> {
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

pub fn spawn(cmd: &mut Command, body: &str) -> io::Result<std::process::Child> {
    cmd.env(CHILD_ENV, body)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

pub fn describe(out: &Output) -> String {
    format!(
        "status {:?} (signal {:?})\n--- stderr ---\n{}\n--- stdout ---\n{}",
        out.status,
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    )
}
