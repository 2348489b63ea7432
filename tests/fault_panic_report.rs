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
    // The join's report names the actor's id: the hook's line must name
    // the same id, and come before std's own report of the panic.
    let joined = err
        .lines()
        .find_map(|l| l.strip_prefix("joined: actor "))
        .unwrap_or_else(|| panic!("no join report: {err}"));
    let id: u64 = joined
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no id in {joined:?}"));
    assert_eq!(joined, format!("{id} \"ledger\" panicked: balance went negative"));
    let hook = format!("smarm: actor {id} \"ledger\" panicked:");
    let at_hook = err
        .find(&hook)
        .unwrap_or_else(|| panic!("no line {hook:?}: {err}"));
    let at_std = err
        .find("panicked at")
        .unwrap_or_else(|| panic!("no std report: {err}"));
    assert!(at_hook < at_std, "the actor's line comes first: {err}");
    assert!(err[at_std..].contains("balance went negative"), "{err}");
}
