//! Loom models of the link sets (`smarm_core::life`: `Life::add_link`,
//! `remove_link`, `claim_link`), over the real sets and their spin locks
//! (taken in id order):
//! - link idempotence: two actors linking to each other at once, and one
//!   actor linking twice to the same partner at once: exactly one of the
//!   racing calls makes the link, and each side records the other once;
//! - unlink against the partner's exit: `unlink` and the exit hook's claim
//!   race, and exactly one of them finds the link (an `unlink` that
//!   returns `true` means the exit does not propagate; one that returns
//!   `false` means it does), and both sets end empty;
//! - link again (over an `unlink`) against the partner's exit: the exit
//!   propagates exactly once, through the pending hooks or through the
//!   new ones a fresh link installs on the ended partner.
//!
//! - demonitor against the monitored actor's exit hook: a `demonitor`
//!   that returns `true` means no notice was delivered, ever; one that
//!   returns `false` means the notice is delivered and visible to the
//!   caller (it waited out a delivery in progress).
//!
//! A lock-order deadlock shows as a loom deadlock; a lost or doubled
//! record fails the asserts.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_links`
#![cfg(smarm_loom)]

use loom::sync::Arc;
use loom::thread;

use smarm_core::life::loom_links::LinkEnd;
use smarm_core::life::AddLink;
use smarm_core::loom_monitor::MonitorCell;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

#[test]
fn both_sides_link_at_once_one_link() {
    loom::model(|| {
        let (a, b) = (Arc::new(LinkEnd::new(1)), Arc::new(LinkEnd::new(2)));
        let (a2, b2) = (a.clone(), b.clone());
        let t = thread::spawn(move || b2.link::<LoomP>(&a2) == AddLink::New);
        let mine = a.link::<LoomP>(&b) == AddLink::New;
        let theirs = t.join().unwrap();
        assert!(mine ^ theirs, "exactly one call makes the link: {mine} {theirs}");
        assert_eq!(a.links::<LoomP>(), [(2, true)]);
        assert_eq!(b.links::<LoomP>(), [(1, true)]);
    });
}

#[test]
fn one_side_links_twice_at_once_one_link() {
    loom::model(|| {
        let (a, b) = (Arc::new(LinkEnd::new(7)), Arc::new(LinkEnd::new(3)));
        let (a2, b2) = (a.clone(), b.clone());
        let t = thread::spawn(move || a2.link::<LoomP>(&b2) == AddLink::New);
        let first = a.link::<LoomP>(&b) == AddLink::New;
        let second = t.join().unwrap();
        assert!(first ^ second, "{first} {second}");
        assert_eq!(a.links::<LoomP>(), [(3, true)]);
        assert_eq!(b.links::<LoomP>(), [(7, true)]);
    });
}

#[test]
fn unlink_races_the_partners_exit_one_finds_the_link() {
    loom::model(|| {
        let (a, b) = (Arc::new(LinkEnd::new(1)), Arc::new(LinkEnd::new(2)));
        assert_eq!(a.link::<LoomP>(&b), AddLink::New);
        let (a2, b2) = (a.clone(), b.clone());
        // B ends: its exit hook claims the link (from B's side).
        let t = thread::spawn(move || b2.claim::<LoomP>(&a2));
        let unlinked = a.unlink::<LoomP>(&b);
        let propagated = t.join().unwrap();
        assert!(
            unlinked ^ propagated,
            "exactly one finds the link: unlink {unlinked}, exit {propagated}"
        );
        // A's own exit hook for the pair, later: nothing left to claim
        // (B's claim dropped the entry, linked or not).
        assert!(!a.claim::<LoomP>(&b));
        assert_eq!(a.links::<LoomP>(), []);
        assert_eq!(b.links::<LoomP>(), []);
    });
}

#[test]
fn link_again_races_the_partners_exit_which_propagates_once() {
    loom::model(|| {
        let (a, b) = (Arc::new(LinkEnd::new(5)), Arc::new(LinkEnd::new(4)));
        assert_eq!(a.link::<LoomP>(&b), AddLink::New);
        assert!(a.unlink::<LoomP>(&b));
        assert!(!a.unlink::<LoomP>(&b), "unlinked already");
        let (a2, b2) = (a.clone(), b.clone());
        // B ends: its exit hook (installed by the first link) claims.
        let t = thread::spawn(move || b2.claim::<LoomP>(&a2));
        let made = a.link::<LoomP>(&b);
        let by_pending_hook = t.join().unwrap();
        // A new entry gets new hooks; B has ended, so the one added to B
        // runs at once (`ExitHooks::add` on a closed list): it claims too.
        let by_new_hook = made == AddLink::New && b.claim::<LoomP>(&a);
        assert_ne!(made, AddLink::Already);
        assert!(
            by_pending_hook ^ by_new_hook,
            "the exit propagates once: {made:?} {by_pending_hook} {by_new_hook}"
        );
        assert_eq!(a.links::<LoomP>(), []);
        assert_eq!(b.links::<LoomP>(), []);
    });
}

#[test]
fn demonitor_races_the_exit_hook_no_notice_after_it_returns() {
    loom::model(|| {
        let m = Arc::new(MonitorCell::default());
        // The notice: a plain write (loom checks the hand-over to the
        // demonitoring thread), then the flag the model reads.
        let notice = Arc::new(loom::cell::UnsafeCell::new(0u32));
        let (m2, n2) = (m.clone(), notice.clone());
        let hook = thread::spawn(move || {
            // SAFETY: the hook's side writes once; the reader reads only
            // after `demonitor` returned false (the Release/Acquire pair).
            m2.fire(|| n2.with_mut(|p| unsafe { *p = 7 }));
        });
        let cancelled = m.demonitor::<LoomP>();
        // SAFETY: `demonitor` waited out a delivery in progress; a
        // delivery after it returned is what the model catches (loom
        // reports the racing write).
        let seen = notice.with(|p| unsafe { *p });
        if cancelled {
            assert_eq!(seen, 0, "cancelled, yet a notice was delivered");
        } else {
            assert_eq!(seen, 7, "not cancelled, yet no notice is visible");
        }
        hook.join().unwrap();
        // SAFETY: the hook has been joined.
        let after = notice.with(|p| unsafe { *p });
        assert_eq!(after == 7, !cancelled, "a notice after demonitor returned");
    });
}
