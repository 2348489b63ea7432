//! A panic inside an actor is reported with the actor's id and name (the
//! port wraps the process's panic hook). Checked in a child process, whose
//! stderr the parent reads (through qemu where needed: see `child.rs`).
#![cfg(unix)]

use smarm_tests::smarm::Runtime;

mod child;
use child::{child_entry, describe, run_child};

#[test]
fn panic_report_names_the_actor() {
    child_entry("panic", || {
        // The child: one named actor panics; the join reports it too.
        let rt = Runtime::builder().workers(1).build().unwrap();
        let e = rt
            .spawn_named("ledger", || panic!("balance went negative"))
            .join()
            .unwrap_err();
        eprintln!("joined: {e}");
    });
    let out = run_child("panic_report_names_the_actor", "panic");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {}", describe(&out));
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
