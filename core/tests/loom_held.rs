//! Loom models of the in-place wait of an unwinding actor (the actor state
//! word's `HELD`, `smarm_core::actor` step 7): the real `hold_wait` (the
//! actor's side, run by `sched::park_in_place`) and `wake_word` (every
//! waker's transition, run by `Actor::wake`) over loom's atomics and the
//! loom futex.
//!
//! - a wake racing the actor's hold: the actor returns (a lost wake is a
//!   loom deadlock), and the word ends `RUNNING`: the wake was consumed
//!   exactly once, whether it landed before the hold (`NOTIFIED`, consumed
//!   by the hold's failed CAS) or during it (`HELD → RUNNING` and a futex
//!   wake);
//! - two wakes racing one hold (the second a stale one, as a kill's or a
//!   shutdown sweep's): the actor returns, and a wake that landed after it
//!   is left as `NOTIFIED` for its next wait (never dropped, never a
//!   double unpark);
//! - a hold whose waker also sees `PARKED`-style states: a wake of a word
//!   in neither state does nothing.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_held`
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

use smarm_core::state_word::{hold_wait, wake_word, Woken, HELD, NOTIFIED, RUNNING};
use smarm_core::sync::AtomicU32;
use smarm_core::Futex;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

/// A waker: takes the registration (`reg`, set by the actor before it
/// waits) and wakes the word as `Actor::wake` does (an `Unpark` becomes the
/// runtime's futex wake). Returns whether it took the registration.
fn waker(state: &AtomicU32, reg: &AtomicBool) -> Option<Woken> {
    if !reg.swap(false, Ordering::SeqCst) {
        return None;
    }
    let w = wake_word(state);
    if w == Woken::Unpark {
        LoomP::wake_all(state);
    }
    Some(w)
}

#[test]
fn a_wake_racing_the_hold_is_consumed_once() {
    loom::model(|| {
        let state = Arc::new(AtomicU32::new(RUNNING));
        // The actor registered (published what the waker will take).
        let reg = Arc::new(AtomicBool::new(true));
        let (s2, r2) = (state.clone(), reg.clone());
        let t = thread::spawn(move || waker(&s2, &r2).expect("the registration is there"));
        // The actor waits in place until woken (the wake may land before).
        assert!(hold_wait::<LoomP>(&state));
        let w = t.join().unwrap();
        assert!(matches!(w, Woken::Nothing | Woken::Unpark), "{w:?}");
        // Consumed: nothing left for a later wait.
        assert_eq!(state.load(Ordering::SeqCst), RUNNING);
    });
}

#[test]
fn a_stale_second_wake_is_kept_for_the_next_wait() {
    loom::model(|| {
        let state = Arc::new(AtomicU32::new(RUNNING));
        let reg = Arc::new(AtomicBool::new(true));
        let (s2, r2) = (state.clone(), reg.clone());
        let real = thread::spawn(move || {
            waker(&s2, &r2).expect("the registration is there");
        });
        // A stale wake (a kill, a sweep): no registration, just the word.
        let s3 = state.clone();
        let stale = thread::spawn(move || {
            let w = wake_word(&s3);
            if w == Woken::Unpark {
                LoomP::wake_all(&s3);
            }
        });
        // The hold returns on one of the two wakes (either may be first).
        assert!(hold_wait::<LoomP>(&state));
        stale.join().unwrap();
        real.join().unwrap();
        // Both wakes are in: the word is RUNNING (both consumed) or
        // NOTIFIED (one left, which the next hold consumes at once).
        let s = state.load(Ordering::SeqCst);
        assert!(s == RUNNING || s == NOTIFIED, "state {s}");
        if s == NOTIFIED {
            assert!(hold_wait::<LoomP>(&state));
            assert_eq!(state.load(Ordering::SeqCst), RUNNING);
        }
    });
}

#[test]
fn a_wake_of_a_word_in_no_wake_state_does_nothing() {
    loom::model(|| {
        let state = AtomicU32::new(HELD + 10);
        assert_eq!(wake_word(&state), Woken::Nothing);
        assert_eq!(state.load(Ordering::SeqCst), HELD + 10);
        // And a hold of a word that is not running refuses.
        assert!(!hold_wait::<LoomP>(&state));
    });
}
