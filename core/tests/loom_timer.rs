//! Loom models of the timers (`smarm_core::timer`) with the real code over
//! loom's atomics and the loom platform's lock:
//! - a fire racing the waiter's cancel: exactly one wins; a losing cancel
//!   returns only after the poke has returned (so no poke lands on a later
//!   wait);
//! - two workers firing at once: every due entry is poked exactly once;
//! - an arm racing a fire: the new entry is poked exactly once, by this
//!   fire or a later one (nothing lost in the heap);
//! - an earlier timer armed while the idle worker that claims the timers
//!   goes to sleep until a later one (or forever): the worker sees the new
//!   deadline or is woken for it (a lost wake is a loom deadlock);
//! - the timer-vs-message race on a mailbox: a timer's poke and a sender
//!   race for the receiver's one registration; the receiver ends its wait
//!   and the message is received exactly once (by the timed receive or by
//!   the receive after it), never lost.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_timer`
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use smarm_core::idle::Idle;
use smarm_core::lock::FutexLock;
use smarm_core::mailbox::{detached, Addr};
use smarm_core::timer::{entry, PokeWith, Timers};

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

type T = Timers<FutexLock<LoomP>>;

/// An entry whose poke counts into `hits`.
fn counting(hits: &Arc<AtomicUsize>) -> std::sync::Arc<smarm_core::timer::TimerEntry> {
    entry(PokeWith(hits.clone(), |h: &Arc<AtomicUsize>| {
        h.fetch_add(1, Ordering::SeqCst);
    }))
}

#[test]
fn fire_racing_cancel() {
    loom::model(|| {
        let timers = Arc::new(T::new());
        let hits = Arc::new(AtomicUsize::new(0));
        let e = counting(&hits);
        timers.arm(5, &e);
        let t = timers.clone();
        let firer = thread::spawn(move || t.fire(10));
        let cancelled = e.cancel::<LoomP>();
        if !cancelled {
            // The poke has returned by the time a losing cancel does.
            assert_eq!(hits.load(Ordering::SeqCst), 1);
        }
        let fired = firer.join().unwrap();
        assert_eq!(hits.load(Ordering::SeqCst), usize::from(!cancelled));
        assert_eq!(fired, u64::from(!cancelled));
    });
}

#[test]
fn two_firers_poke_each_entry_once() {
    loom::model(|| {
        let timers = Arc::new(T::new());
        let hits = Arc::new(AtomicUsize::new(0));
        let es: Vec<_> = (0..2).map(|_| counting(&hits)).collect();
        timers.arm(3, &es[0]);
        timers.arm(4, &es[1]);
        let t = timers.clone();
        let other = thread::spawn(move || t.fire(10));
        let mine = timers.fire(10);
        let theirs = other.join().unwrap();
        // A firer that finds the lock taken leaves the batch to the holder;
        // whatever is left, a later turn fires.
        let rest = timers.fire(10);
        assert_eq!(mine + theirs + rest, 2);
        assert_eq!(hits.load(Ordering::SeqCst), 2);
        assert_eq!(timers.next(), smarm_core::timer::NEVER);
    });
}

#[test]
fn arm_racing_fire_loses_nothing() {
    loom::model(|| {
        let timers = Arc::new(T::new());
        let hits = Arc::new(AtomicUsize::new(0));
        let first = counting(&hits);
        timers.arm(3, &first);
        let t = timers.clone();
        let h = hits.clone();
        let armer = thread::spawn(move || {
            let e = counting(&h);
            t.arm(4, &e);
            e
        });
        let a = timers.fire(10);
        let e = armer.join().unwrap();
        let b = timers.fire(10);
        assert_eq!(a + b, 2, "an entry was lost or fired twice");
        assert!(e.has_fired());
        assert_eq!(hits.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn timer_poke_racing_a_send_for_one_registration() {
    loom::model(|| {
        let (mut mb, addr) = detached::<u32, LoomP>();
        // One push+pop, as a running system has (see `loom_mailbox.rs`:
        // loom does not count initial values as SeqCst stores).
        addr.send(0).unwrap();
        assert_eq!(mb.try_recv(), Ok(0));
        let timers = Arc::new(T::new());
        let e = entry(PokeWith(addr.clone(), |a: &Addr<u32, LoomP>| a.__poke()));
        timers.arm(5, &e);
        let sender = {
            let addr = addr.clone();
            thread::spawn(move || addr.send(1).unwrap())
        };
        let t = timers.clone();
        let timer = thread::spawn(move || t.fire(10));
        // The receiver waits; the poke may end its wait first (then it
        // waits again for the message), or the send does. Under loom the
        // platform wait has no timeout: only a wake ends it, so a lost
        // wake is a deadlock loom reports.
        let got = mb.recv().unwrap();
        sender.join().unwrap();
        timer.join().unwrap();
        assert_eq!(got, 1);
        assert!(mb.try_recv().is_err(), "the message was delivered twice");
        // The timer fired exactly once, whoever took the registration.
        assert!(e.has_fired());
    });
}

#[test]
fn arm_wakes_the_claiming_sleeper() {
    loom::model(|| {
        let timers = Arc::new(T::new());
        let idle = Arc::new(Idle::<LoomP, FutexLock<LoomP>>::new(2));
        // Worker 0 goes idle with no timer armed: it claims the timers and
        // sleeps with no deadline (under loom, only a wake ends a sleep).
        let (t, i) = (timers.clone(), idle.clone());
        let worker = thread::spawn(move || {
            assert!(t.claim(0));
            let deadline = t.next();
            if deadline == smarm_core::timer::NEVER {
                // No timer seen: only a wake (or seeing the new timer once
                // on the idle list) may end this sleep.
                i.sleep(0, || t.changed(deadline), None);
            } else {
                // It saw the new timer: it sleeps until that deadline (a
                // platform timeout, which loom does not model).
                assert_eq!(deadline, 5);
            }
            t.release(0);
        });
        // An actor on worker 1 arms a timer: the earliest one.
        let hits = Arc::new(AtomicUsize::new(0));
        let e = counting(&hits);
        if let Some(w) = timers.arm(5, &e) {
            idle.notify_worker(w);
        }
        worker.join().unwrap();
        assert_eq!(timers.next(), 5);
    });
}
