//! The block's two counts on real blocks (`loom_cell`'s model actors),
//! sequentially: what each reference keeps, when the control block and
//! the block go, the raw-pointer round trips. Run under Miri, which also
//! reports a block never freed and an access through a pointer that may
//! not reach it.

use super::loom_cell::{self, Life};
use super::ActorArc;

/// The counts are process-wide: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    loom_cell::reset();
    g
}

#[test]
fn the_control_block_goes_with_its_last_reference_the_block_with_the_last_of_both() {
    let _one = serial();
    let ctl = Life::reserve(11).spawn(false);
    let life = ctl.life();
    let again = life.upgrade().expect("the control block lives");
    assert_eq!(again.id(), 11);
    drop(ctl);
    assert_eq!(
        loom_cell::dropped(),
        0,
        "an upgraded reference keeps the control block"
    );
    drop(again);
    assert_eq!(loom_cell::dropped(), 1, "the last control reference drops it");
    assert!(life.upgrade().is_none(), "no upgrade once it is dropped");
    assert_eq!(loom_cell::freed(), 0, "a `Life` reference keeps the block");
    let other = life.clone();
    drop(life);
    assert_eq!(loom_cell::freed(), 0);
    drop(other);
    assert_eq!(loom_cell::freed(), 1);
    assert_eq!(loom_cell::dropped(), 1);
}

#[test]
fn the_control_block_holds_a_life_reference_of_its_own() {
    let _one = serial();
    // The control block holds the last `Life` reference.
    let ctl = Life::reserve(12).spawn(false);
    drop(ctl.life());
    assert_eq!(loom_cell::freed(), 0);
    let ctl2 = ctl.clone();
    drop(ctl);
    assert_eq!(loom_cell::dropped(), 0);
    drop(ctl2);
    assert_eq!((loom_cell::dropped(), loom_cell::freed()), (1, 1));
}

#[test]
fn a_reservation_dropped_unspawned_frees_its_block_and_drops_no_control_block() {
    let _one = serial();
    let life = Life::reserve(13);
    assert!(life.upgrade().is_none(), "nothing to upgrade to before the spawn");
    life.kill();
    drop(life);
    assert_eq!((loom_cell::dropped(), loom_cell::freed()), (0, 1));
}

#[test]
fn a_kill_before_the_spawn_reaches_the_control_block() {
    let _one = serial();
    let life = Life::reserve(14);
    life.kill();
    assert!(life.killed());
    let ctl = life.spawn(true);
    assert!(ctl.killed());
    let unkilled = Life::reserve(15).spawn(true);
    assert!(!unkilled.killed(), "no kill, no flag");
    unkilled.life().kill();
    assert!(unkilled.killed(), "a kill after the spawn upgrades and sets it");
}

#[test]
fn raw_pointers_round_trip_with_their_counts() {
    let _one = serial();
    let ctl = Life::reserve(16).spawn(false);
    let a: ActorArc = loom_cell::arc(&ctl);
    let p = ActorArc::into_raw(a);
    assert_eq!(
        p,
        loom_cell::actor_ptr(&ctl.life()),
        "the `Life` knows where its control block is"
    );
    // SAFETY: `p` is a live control block from `into_raw`; the count
    // taken here is given back by the second `from_raw`.
    let (b, c) = unsafe { (ActorArc::clone_from_ptr(p), ActorArc::from_raw(p)) };
    assert!(ActorArc::ptr_eq(&b, &c));
    assert_eq!(ActorArc::as_ptr(&b), p);
    drop((b, c, ctl));
    assert_eq!((loom_cell::dropped(), loom_cell::freed()), (1, 1));
}
