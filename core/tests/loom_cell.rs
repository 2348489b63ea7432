//! Loom models of an actor's block (`smarm_core::actor::cell`): its `Life`
//! and its control block in one allocation, each half with its own count,
//! on real blocks (a real `Life` and `Actor`, whose entry and stack do
//! nothing):
//! - a kill racing the spawn of a reserved actor reaches the control
//!   block either way (the Dekker pair of `make_actor` and `kill`): the
//!   actor's own copy of the flag is set once both are done;
//! - a kill racing the last control-block reference's drop, and another
//!   `Life` reference's drop: the kill's upgrade either gets a reference
//!   (and the control block outlives it) or finds it gone; the control
//!   block is dropped once, and the block given back once, after the last
//!   reference of either kind;
//! - two threads dropping the last `Life` and the last control reference
//!   at once: one free, no use after it.
//!
//! A double free or a drop missed fails the counts; a use after free of
//! the counts shows as a loom access to a dropped atomic.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_cell`
#![cfg(smarm_loom)]

use loom::thread;

use smarm_core::loom_cell::{self, Life};

/// The block counts are process-wide: one model at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_kill_racing_a_reserved_actors_spawn_reaches_it() {
    let _one = serial();
    loom::model(|| {
        loom_cell::reset();
        let life = Life::reserve(7);
        let by_ref = life.clone();
        let killer = thread::spawn(move || by_ref.kill());
        let ctl = life.spawn(true);
        killer.join().unwrap();
        assert!(ctl.life().killed());
        assert!(
            ctl.killed(),
            "the kill was lost between the spawn and the upgrade"
        );
        drop(ctl);
        assert_eq!(loom_cell::dropped(), 1);
        assert_eq!(loom_cell::freed(), 1);
    });
}

#[test]
fn a_kill_racing_the_last_control_reference() {
    let _one = serial();
    loom::model(|| {
        loom_cell::reset();
        let ctl = Life::reserve(3).spawn(false);
        let (life, other) = (ctl.life(), ctl.life());
        let killer = thread::spawn(move || {
            life.kill();
            // An upgrade after the drop below finds nothing; one before
            // holds the control block alive while it reads it.
            life.upgrade().map(|c| (c.id(), c.killed()))
        });
        let dropper = thread::spawn(move || drop(ctl));
        let seen = killer.join().unwrap();
        dropper.join().unwrap();
        if let Some((id, killed)) = seen {
            assert_eq!(id, 3);
            assert!(killed, "the kill set the copy before its upgrade read it");
        }
        assert_eq!(loom_cell::dropped(), 1, "the control block is dropped once");
        assert_eq!(loom_cell::freed(), 0, "a `Life` reference keeps the block");
        assert!(other.killed());
        drop(other);
        assert_eq!(loom_cell::freed(), 1, "the last reference frees the block");
    });
}

#[test]
fn the_last_references_of_both_kinds_drop_at_once() {
    let _one = serial();
    loom::model(|| {
        loom_cell::reset();
        let ctl = Life::reserve(5).spawn(false);
        let life = ctl.life();
        let a = thread::spawn(move || drop(ctl));
        let b = thread::spawn(move || drop(life));
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(loom_cell::dropped(), 1);
        assert_eq!(loom_cell::freed(), 1);
    });
}
