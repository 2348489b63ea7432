//! Loom models of the poller's place in the idle protocol
//! (`smarm_core::idle::Idle::sleep_polling` and the wake that kicks it),
//! with the real `Idle` over the loom futex, and a model poller: a flag the
//! kick sets under the poller's own lock and the poll waits on with a
//! condvar (a kick before the wait still ends it, as an eventfd's or
//! `EVFILT_USER`'s does). (A model poller that consumed its kick with a
//! `swap` deadlocked under loom: loom 0.7.3 lets an RMW read a value older
//! than a store that happens-before it, as the last, ignored test shows.
//! The models never observe a flag with an RMW.)
//!
//! - a push's `notify_one` racing the only worker's way into the poller:
//!   the worker sees the work or is kicked out of the poll (a lost kick is
//!   a loom deadlock: the model poll has no timeout);
//! - two workers, one in the poller and one on its futex word, and two
//!   pushes: both are consumed (each wake reaches the worker it popped,
//!   kicking the poller for the one inside it). Without the kick it
//!   deadlocks (`scripts/mutants.sh idle-no-kick`);
//! - the readiness record (`loom_record`: the real `ticket`, `deliver`,
//!   `join`, `withdraw`, with threads as its waiters): an edge after a
//!   call began is never lost, whatever the reader is doing; an edge of
//!   the other direction wakes nobody and makes only that direction's
//!   callers retry; readiness and a deadline (the timer's poke) wake the
//!   waiter once; a kill's withdrawal racing readiness leaves no entry; one
//!   edge for two readers strands neither (the latch this protocol
//!   replaced failed it).
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_io`
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use smarm_core::idle::Idle;
use smarm_core::lock::FutexLock;
use smarm_core::Futex;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

type TestIdle = Idle<LoomP, FutexLock<LoomP>>;

/// The model poller: `kicked` is the kick's sticky readiness, under the
/// poller's own lock (its "kernel"), with a condvar for the wait.
struct ModelPoller {
    kicked: Mutex<bool>,
    cv: Condvar,
}

impl ModelPoller {
    /// The poll: returns once kicked (consuming the kick).
    fn poll(&self) {
        let mut k = self.kicked.lock().unwrap();
        while !*k {
            k = self.cv.wait(k).unwrap();
        }
        *k = false;
    }
}

/// `Idle`'s kick function.
fn kick(arg: *const ()) {
    // SAFETY: the models pass a live `ModelPoller` (kept alive by an Arc
    // until every thread is joined).
    let p = unsafe { &*arg.cast::<ModelPoller>() };
    *p.kicked.lock().unwrap() = true;
    p.cv.notify_all();
}

/// Worker `i`'s loop: take an item, else sleep (in the poller if `polls`).
fn worker(
    i: usize,
    polls: bool,
    idle: &TestIdle,
    poller: &ModelPoller,
    work: &AtomicUsize,
    done: &AtomicUsize,
    items: usize,
) {
    loop {
        if done.load(Ordering::SeqCst) == items {
            return;
        }
        let n = work.load(Ordering::SeqCst);
        if n > 0 {
            if work
                .compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
                && done.fetch_add(1, Ordering::SeqCst) + 1 == items
            {
                idle.notify_all();
            }
            continue;
        }
        let has_work = || work.load(Ordering::SeqCst) > 0 || done.load(Ordering::SeqCst) == items;
        let arg: *const ModelPoller = poller;
        let slept = if polls {
            idle.sleep_polling(i, has_work, None, arg.cast(), &mut |_| poller.poll())
        } else {
            idle.sleep(i, has_work, None)
        };
        if !slept {
            thread::yield_now();
        }
    }
}

fn model(workers: usize, items: usize) {
    let mut b = loom::model::Builder::new();
    b.max_branches = 100_000;
    b.check(move || {
        let idle = Arc::new(TestIdle::with_kick(workers, Some(kick)));
        let poller = Arc::new(ModelPoller {
            kicked: Mutex::new(false),
            cv: Condvar::new(),
        });
        let work = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..workers)
            .map(|i| {
                let (idle, poller, work, done) = (idle.clone(), poller.clone(), work.clone(), done.clone());
                // Worker 0 sleeps in the poller, the others on their words.
                thread::spawn(move || worker(i, i == 0, &idle, &poller, &work, &done, items))
            })
            .collect();
        for _ in 0..items {
            work.fetch_add(1, Ordering::SeqCst);
            idle.notify_one();
        }
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), items);
    });
}

#[test]
fn a_push_reaches_the_worker_in_the_poller() {
    model(1, 1);
}

#[test]
fn wakes_reach_the_poller_and_the_futex_sleeper() {
    model(2, 2);
}

// The readiness record (`smarm_core::loom_record`: the real `deliver`,
// `join` and `withdraw`, with threads as waiters waiting on a word).

type Rec = smarm_core::loom_record::TestRecord<FutexLock<LoomP>>;

const READ: u32 = smarm_core::poll::READABLE;
const WRITE: u32 = smarm_core::poll::WRITABLE;

/// The thread waiter's futex wake (the record stores its word's 1
/// first).
fn count_wake(word: &smarm_core::sync::AtomicU32) {
    LoomP::wake_all(word);
}

/// A reader as the sockets do it: "call" (take the data if there is
/// some), else check-and-join, wait until woken, withdraw, call again.
/// Returns the joins it made.
fn reader(rec: &Rec, data: &AtomicUsize) -> usize {
    let mut joins = 0;
    loop {
        let ticket = rec.ticket();
        // A load, not a swap (see the last test: loom's RMW artefact).
        if data.load(Ordering::SeqCst) == 1 {
            return joins;
        }
        // EAGAIN: wait for an edge after the ticket.
        let word = std::sync::Arc::new(smarm_core::sync::AtomicU32::new(0));
        if !rec.join(&word, count_wake, READ, ticket) {
            continue; // latched: retry the call
        }
        joins += 1;
        while word.load(Ordering::Acquire) == 0 {
            LoomP::wait(&word, 0, None);
        }
        rec.withdraw(&word, false);
    }
}

#[test]
fn readiness_after_eagain_is_never_lost() {
    // The data arrives (and the poller reports its edge) while the reader
    // is between its failed call and its join, or waiting, or done: it
    // always gets the data (a lost edge is a loom deadlock).
    loom::model(|| {
        let rec = Arc::new(Rec::default());
        let data = Arc::new(AtomicUsize::new(0));
        let r = {
            let (rec, data) = (rec.clone(), data.clone());
            thread::spawn(move || reader(&rec, &data))
        };
        data.store(1, Ordering::SeqCst);
        rec.deliver(READ);
        r.join().unwrap();
        assert_eq!(rec.waiters(), 0, "the reader left an entry behind");
    });
}

#[test]
fn a_write_edge_does_not_wake_a_reader() {
    loom::model(|| {
        let rec = Arc::new(Rec::default());
        let word = std::sync::Arc::new(smarm_core::sync::AtomicU32::new(0));
        let before = rec.ticket();
        assert!(rec.join(&word, count_wake, READ, before));
        let p = {
            let rec = rec.clone();
            thread::spawn(move || rec.deliver(WRITE))
        };
        assert_eq!(p.join().unwrap(), 0);
        assert_eq!(word.load(Ordering::SeqCst), 0, "a write edge woke a reader");
        // A writer whose call began before the edge retries; a reader with
        // the same ticket still waits (a write edge is not a read edge).
        let w2 = std::sync::Arc::new(smarm_core::sync::AtomicU32::new(0));
        assert!(
            !rec.join(&w2, count_wake, WRITE, before),
            "the write edge was missed"
        );
        let r2 = std::sync::Arc::new(smarm_core::sync::AtomicU32::new(0));
        assert!(
            rec.join(&r2, count_wake, READ, before),
            "a write edge made a reader retry"
        );
        assert!(rec.withdraw(&word, false));
        assert!(rec.withdraw(&r2, false));
    });
}

#[test]
fn readiness_and_a_deadline_wake_the_waiter_once() {
    // The poller's delivery and the timer's poke race for one entry:
    // exactly one takes it and wakes the waiter.
    loom::model(|| {
        let rec = Arc::new(Rec::default());
        let word = std::sync::Arc::new(smarm_core::sync::AtomicU32::new(0));
        assert!(rec.join(&word, count_wake, READ, rec.ticket()));
        let poller = {
            let rec = rec.clone();
            thread::spawn(move || rec.deliver(READ))
        };
        let timer = {
            let (rec, word) = (rec.clone(), word.clone());
            thread::spawn(move || rec.withdraw(&word, true))
        };
        let by_poller = poller.join().unwrap();
        let by_timer = timer.join().unwrap();
        assert_eq!(
            by_poller + by_timer as usize,
            1,
            "woken {} times",
            by_poller + by_timer as usize
        );
        assert_eq!(word.load(Ordering::SeqCst), 1);
        // The waiter's own withdrawal after its wake finds nothing.
        assert!(!rec.withdraw(&word, false));
        assert_eq!(rec.waiters(), 0);
    });
}

#[test]
fn a_kill_racing_readiness_leaves_no_entry() {
    // A killed waiter unwinds and withdraws without a wake while the
    // poller delivers: one of them removes the entry; if the poller did,
    // it woke the waiter (a spurious wake for an unwinding actor), and the
    // readiness is not latched either way (nobody needed it).
    loom::model(|| {
        let rec = Arc::new(Rec::default());
        let word = std::sync::Arc::new(smarm_core::sync::AtomicU32::new(0));
        assert!(rec.join(&word, count_wake, READ, rec.ticket()));
        let poller = {
            let rec = rec.clone();
            thread::spawn(move || rec.deliver(READ))
        };
        let left = rec.withdraw(&word, false);
        let woke = poller.join().unwrap();
        assert_eq!(left as usize + woke, 1);
        assert_eq!(word.load(Ordering::SeqCst) == 1, woke == 1);
        assert_eq!(rec.waiters(), 0);
    });
}

#[test]
fn a_select_with_two_arms_on_one_record_leaves_no_entry() {
    // A select with a read arm and a write arm on one registration
    // (`Select::ready` twice) joins the record twice under one identity
    // (its actor); the poller's read edge races the joins, the wait and
    // the two withdrawals. Every entry is removed exactly once (by the
    // delivery, which wakes, or by a withdrawal), the selector is woken if
    // it waited, and the record is left empty.
    loom::model(|| {
        let rec = Arc::new(Rec::default());
        // Taken before the poller's edge (the failed calls came first).
        let ticket = rec.ticket();
        let poller = {
            let rec = rec.clone();
            thread::spawn(move || rec.deliver(READ))
        };
        let word = std::sync::Arc::new(smarm_core::sync::AtomicU32::new(0));
        let mut joined = 0;
        for interest in [READ, WRITE] {
            if !rec.join(&word, count_wake, interest, ticket) {
                break; // ready: the round starts over without waiting
            }
            joined += 1;
        }
        if joined == 2 {
            // Only the read entry can be taken: wait for that wake.
            while word.load(Ordering::Acquire) == 0 {
                LoomP::wait(&word, 0, None);
            }
        }
        let left = (0..joined).filter(|_| rec.withdraw(&word, false)).count();
        let woken = poller.join().unwrap();
        assert_eq!(left + woken, joined, "an entry removed twice, or never");
        assert_eq!(rec.waiters(), 0, "the select left an entry behind");
        assert_eq!(word.load(Ordering::SeqCst) == 1, woken == 1);
    });
}

#[test]
fn two_readers_are_both_woken_by_one_edge() {
    loom::model(|| {
        let rec = Arc::new(Rec::default());
        let data = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (rec, data) = (rec.clone(), data.clone());
                thread::spawn(move || {
                    // Each takes one unit of data (two arrive, one edge).
                    loop {
                        let ticket = rec.ticket();
                        let n = data.load(Ordering::SeqCst);
                        if n > 0
                            && data
                                .compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst)
                                .is_ok()
                        {
                            return;
                        }
                        if n > 0 {
                            continue;
                        }
                        let word = std::sync::Arc::new(smarm_core::sync::AtomicU32::new(0));
                        if !rec.join(&word, count_wake, READ, ticket) {
                            continue;
                        }
                        while word.load(Ordering::Acquire) == 0 {
                            LoomP::wait(&word, 0, None);
                        }
                        rec.withdraw(&word, false);
                    }
                })
            })
            .collect();
        data.store(2, Ordering::SeqCst);
        rec.deliver(READ);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(rec.waiters(), 0);
    });
}

/// Not a model of smarm: loom 0.7.3 itself lets an RMW (`swap`) read a
/// value older than a store that happens-before it (the store is ordered
/// before a Release store the reader's Acquire load reads). The models
/// above therefore never observe a flag with an RMW: they load it. (Two
/// earlier versions of this file's models deadlocked on exactly this: a
/// model poller whose wait consumed its kick with `swap`, and a reader
/// that took its data with `swap`.) Ignored: it fails, and says so.
#[test]
#[ignore = "documents a loom 0.7.3 artefact: an RMW reads a value older than a happens-before store"]
fn loom_rmw_after_acquire_reads_a_stale_value() {
    loom::model(|| {
        let slot: Arc<Mutex<Option<Arc<smarm_core::sync::AtomicU32>>>> = Arc::new(Mutex::new(None));
        let data = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let r = {
            let (slot, data, done) = (slot.clone(), data.clone(), done.clone());
            thread::spawn(move || {
                if data.swap(0, Ordering::SeqCst) == 1 {
                    done.store(1, Ordering::SeqCst);
                    return;
                }
                let word = Arc::new(smarm_core::sync::AtomicU32::new(0));
                *slot.lock().unwrap() = Some(word.clone());
                while word.load(Ordering::Acquire) == 0 {
                    thread::yield_now();
                }
                assert_eq!(
                    data.swap(0, Ordering::SeqCst),
                    1,
                    "loom: the swap read a value older than a happens-before store"
                );
            })
        };
        data.store(1, Ordering::SeqCst);
        loop {
            let w = slot.lock().unwrap().take();
            if let Some(w) = w {
                w.store(1, Ordering::Release);
                break;
            }
            if done.load(Ordering::SeqCst) == 1 {
                break;
            }
            thread::yield_now();
        }
        r.join().unwrap();
    });
}
