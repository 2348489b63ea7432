//! A panic inside an actor is reported with the actor's id and name (the
//! port wraps the process's panic hook). Checked in a child process, whose
//! stderr the parent reads.
use std::process::Command;
use std::time::{Duration, Instant};

use smarm_tests::smarm::Runtime;

const CHILD: &str = "SMARM_PANIC_REPORT_CHILD";

#[test]
fn panic_report_names_the_actor() {
    if std::env::var_os(CHILD).is_some() {
        // The child: one named actor panics; the join reports it too.
        let rt = Runtime::builder().workers(1).build().unwrap();
        let e = rt
            .spawn_named("ledger", || panic!("balance went negative"))
            .join()
            .unwrap_err();
        eprintln!("joined: {e}");
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "panic_report_names_the_actor",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("re-run this test binary as a child");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("the child did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {err}");
    assert!(
        err.contains("smarm: actor") && err.contains("\"ledger\" panicked:"),
        "{err}"
    );
    assert!(err.contains("balance went negative"), "{err}");
    assert!(
        err.contains("joined: actor") && err.contains("\"ledger\" panicked: balance went negative"),
        "{err}"
    );
}
