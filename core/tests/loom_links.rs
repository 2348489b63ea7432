//! Loom model of link idempotence (`smarm_core::life`, `Life::add_link`):
//! two actors linking to each other at once, and one actor linking twice
//! to the same partner at once, over the real link sets and their spin
//! locks (taken in id order). Exactly one of the racing calls makes the
//! link, and each side records the other once. A lock-order deadlock shows
//! as a loom deadlock; a lost or doubled record fails the asserts.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_links`
#![cfg(smarm_loom)]

use loom::sync::Arc;
use loom::thread;

use smarm_core::life::loom_links::LinkEnd;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

#[test]
fn both_sides_link_at_once_one_link() {
    loom::model(|| {
        let (a, b) = (Arc::new(LinkEnd::new(1)), Arc::new(LinkEnd::new(2)));
        let (a2, b2) = (a.clone(), b.clone());
        let t = thread::spawn(move || b2.link::<LoomP>(&a2));
        let mine = a.link::<LoomP>(&b);
        let theirs = t.join().unwrap();
        assert!(mine ^ theirs, "exactly one call makes the link: {mine} {theirs}");
        assert_eq!(a.links::<LoomP>(), [2]);
        assert_eq!(b.links::<LoomP>(), [1]);
    });
}

#[test]
fn one_side_links_twice_at_once_one_link() {
    loom::model(|| {
        let (a, b) = (Arc::new(LinkEnd::new(7)), Arc::new(LinkEnd::new(3)));
        let (a2, b2) = (a.clone(), b.clone());
        let t = thread::spawn(move || a2.link::<LoomP>(&b2));
        let first = a.link::<LoomP>(&b);
        let second = t.join().unwrap();
        assert!(first ^ second, "{first} {second}");
        assert_eq!(a.links::<LoomP>(), [3]);
        assert_eq!(b.links::<LoomP>(), [7]);
    });
}
