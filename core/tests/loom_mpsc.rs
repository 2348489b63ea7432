#![cfg(smarm_loom)]
//! Loom models of `smarm_core::mpsc_queue::MpscQueue`: conservation (each item
//! exactly once, each producer's items in order), spent-node reuse, the
//! consumer role moving between threads, drop, and the park protocol's
//! Dekker pair (no lost wake-up), with a broken variant that loom must catch.
//!
//! ```text
//! RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom \
//!     LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_mpsc
//! ```
//!
//! loom's scheduler is unfair, so no thread spins without bound: a consumer
//! that sees Empty or Inconsistent yields and retries a few times, and the
//! main thread drains what is left once the producers are joined (then the
//! queue must be consistent).

use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;
use smarm_core::mpsc_queue::{MpscQueue, Node, Pop};

/// Runs `f` under loom with a preemption bound of 2 unless
/// `LOOM_MAX_PREEMPTIONS` asks for another.
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

fn new_queue<T>() -> MpscQueue<T> {
    // SAFETY: a fresh block of `Node::layout`, in no queue.
    unsafe { MpscQueue::new(Node::alloc_global()) }
}

/// Pushes `v` in a fresh node.
fn push<T>(q: &MpscQueue<T>, v: T) {
    // SAFETY: a fresh block of `Node::layout`, in no queue.
    unsafe { q.push(Node::alloc_global(), v) }
}

/// Up to `tries` pops, yielding after each Empty / Inconsistent; the spent
/// node is freed.
///
/// # Safety
///
/// The caller is the queue's only consumer (at this time).
unsafe fn try_pop<T>(q: &MpscQueue<T>, tries: usize) -> Option<T> {
    for _ in 0..tries {
        // SAFETY: forwarded contract.
        match unsafe { q.pop() } {
            Pop::Data(v, node) => {
                // SAFETY: a spent node, ours now.
                unsafe { Node::free_global(node) };
                return Some(v);
            }
            Pop::Empty | Pop::Inconsistent => thread::yield_now(),
        }
    }
    None
}

/// Pops everything left once no producer runs: the queue must be consistent.
///
/// # Safety
///
/// The caller is the only consumer, and every push has happened-before.
unsafe fn drain_quiescent<T>(q: &MpscQueue<T>, into: &mut Vec<T>) {
    // SAFETY: forwarded contract; spent nodes are ours to free.
    let complete = unsafe {
        q.drain(|v, node| {
            into.push(v);
            Node::free_global(node);
        })
    };
    assert!(complete, "Inconsistent after every producer was joined");
}

/// `seen` holds `(producer, i)` for `i in 0..counts[producer]`, each exactly
/// once, and each producer's items in order.
fn assert_conserved_fifo(seen: &[(u32, u32)], counts: &[u32]) {
    for (p, &n) in counts.iter().enumerate() {
        let mine: Vec<u32> = seen.iter().filter(|s| s.0 == p as u32).map(|s| s.1).collect();
        assert_eq!(
            mine,
            (0..n).collect::<Vec<_>>(),
            "producer {p}: lost, duplicated or reordered"
        );
    }
    assert_eq!(seen.len() as u32, counts.iter().sum::<u32>(), "an unknown item");
}

#[test]
fn spsc_fifo() {
    model(|| {
        let q = Arc::new(new_queue::<(u32, u32)>());
        let q1 = q.clone();
        let producer = thread::spawn(move || {
            push(&q1, (0, 0));
            push(&q1, (0, 1));
            push(&q1, (0, 2));
        });
        let mut seen = Vec::new();
        for _ in 0..3 {
            // SAFETY: this thread is the only consumer.
            seen.extend(unsafe { try_pop(&q, 2) });
        }
        producer.join().unwrap();
        // SAFETY: the only consumer; the producer is joined.
        unsafe { drain_quiescent(&q, &mut seen) };
        assert_conserved_fifo(&seen, &[3]);
    });
}

#[test]
fn two_producers_one_consumer() {
    model(|| {
        let q = Arc::new(new_queue::<(u32, u32)>());
        let producers: Vec<_> = (0..2u32)
            .map(|p| {
                let q = q.clone();
                thread::spawn(move || {
                    push(&q, (p, 0));
                    push(&q, (p, 1));
                })
            })
            .collect();
        let mut seen = Vec::new();
        for _ in 0..2 {
            // SAFETY: this thread is the only consumer.
            seen.extend(unsafe { try_pop(&q, 2) });
        }
        for p in producers {
            p.join().unwrap();
        }
        // SAFETY: the only consumer; the producers are joined.
        unsafe { drain_quiescent(&q, &mut seen) };
        assert_conserved_fifo(&seen, &[2, 2]);
    });
}

#[test]
fn three_producers_one_consumer() {
    model(|| {
        let q = Arc::new(new_queue::<(u32, u32)>());
        let producers: Vec<_> = (0..3u32)
            .map(|p| {
                let q = q.clone();
                thread::spawn(move || push(&q, (p, 0)))
            })
            .collect();
        let mut seen = Vec::new();
        for _ in 0..2 {
            // SAFETY: this thread is the only consumer.
            seen.extend(unsafe { try_pop(&q, 2) });
        }
        for p in producers {
            p.join().unwrap();
        }
        // SAFETY: the only consumer; the producers are joined.
        unsafe { drain_quiescent(&q, &mut seen) };
        assert_conserved_fifo(&seen, &[1, 1, 1]);
    });
}

/// The consumer pushes each spent node straight back (a self-send on a
/// recycled node) while a producer links behind it.
#[test]
fn spent_node_pushed_again() {
    model(|| {
        let q = Arc::new(new_queue::<(u32, u32)>());
        let q1 = q.clone();
        let producer = thread::spawn(move || {
            push(&q1, (0, 0));
            push(&q1, (0, 1));
        });
        let mut seen = Vec::new();
        let mut resent = 0;
        for _ in 0..3 {
            // SAFETY: this thread is the only consumer.
            match unsafe { q.pop() } {
                Pop::Data(v, node) => {
                    seen.push(v);
                    if resent < 2 {
                        // SAFETY: the spent node is ours and in no queue.
                        unsafe { q.push(node, (1, resent)) };
                        resent += 1;
                    } else {
                        // SAFETY: spent, ours.
                        unsafe { Node::free_global(node) };
                    }
                }
                Pop::Empty | Pop::Inconsistent => thread::yield_now(),
            }
        }
        producer.join().unwrap();
        // SAFETY: the only consumer; the producer is joined.
        unsafe { drain_quiescent(&q, &mut seen) };
        assert_conserved_fifo(&seen, &[2, resent]);
    });
}

/// The consumer role moves from one thread to another through a
/// Release/Acquire flag, as an actor migrates between workers; loom checks
/// that the consumer-owned `head` is never accessed concurrently.
#[test]
fn consumer_moves_between_threads() {
    model(|| {
        let q = Arc::new(new_queue::<(u32, u32)>());
        let handed_over = Arc::new(AtomicBool::new(false));
        let q1 = q.clone();
        let producer = thread::spawn(move || {
            push(&q1, (0, 0));
            push(&q1, (0, 1));
        });
        let (q2, h2) = (q.clone(), handed_over.clone());
        let first = thread::spawn(move || {
            // SAFETY: this thread is the consumer until the hand-over.
            let got = unsafe { try_pop(&q2, 2) };
            // Release: the hand-over edge, with the Acquire below.
            h2.store(true, Ordering::Release);
            got
        });
        // The main thread is the only spinner, on a thread that never waits.
        while !handed_over.load(Ordering::Acquire) {
            thread::yield_now();
        }
        let mut seen = Vec::new();
        // SAFETY: the consumer role was handed over (Acquire above).
        seen.extend(unsafe { try_pop(&q, 2) });
        seen.extend(first.join().unwrap());
        producer.join().unwrap();
        // SAFETY: the only consumer; everyone else is joined.
        unsafe { drain_quiescent(&q, &mut seen) };
        seen.sort_unstable(); // two consumers: order across them is not FIFO-checked
        assert_conserved_fifo(&seen, &[2]);
    });
}

/// Values still queued when the queue is dropped are dropped with it (loom
/// reports a leaked `loom::sync::Arc` at the end of an iteration).
#[test]
fn drop_drops_leftovers() {
    model(|| {
        let token = Arc::new(());
        let q = Arc::new(new_queue::<Arc<()>>());
        let (q1, t) = (q.clone(), token.clone());
        let producer = thread::spawn(move || {
            push(&q1, t.clone());
            push(&q1, t);
        });
        // SAFETY: this thread is the only consumer.
        let popped = unsafe { try_pop(&q, 1) };
        producer.join().unwrap();
        drop(popped);
        drop(q);
        assert_eq!(Arc::strong_count(&token), 1, "every clone dropped");
    });
}

const RUNNING: u32 = 0;
const WAITING: u32 = 1;

/// What the receiver in a park model did.
#[derive(Debug, PartialEq)]
enum Receiver {
    /// Took the message (before or after announcing WAITING).
    Got,
    /// Committed to sleeping: it needs a wake.
    Parked,
    /// Cancelled the park (the queue was not empty) but the message was still
    /// being linked when the model's retry bound ran out: the receiver stays
    /// runnable and will pop it, so it needs no wake.
    Runnable,
}

/// The park protocol's Dekker pair (module docs of `mpsc_queue`): a receiver finds
/// the mailbox empty and parks, racing a sender. `announce_first` is the
/// correct order (announce WAITING, then check); `false` checks before
/// announcing, which can lose the wake-up.
fn park_protocol(announce_first: bool) {
    model(move || {
        let q = Arc::new(new_queue::<u32>());
        let state = Arc::new(AtomicU32::new(RUNNING));
        // loom's SeqCst is partial: a SeqCst load never returns a stale
        // value over a newer SeqCst store, but the initial values are not
        // SeqCst stores. Make the latest store of each word a SeqCst one,
        // as in a running system (every send swaps `tail`).
        state.store(RUNNING, Ordering::SeqCst);
        push(&q, 99);
        // SAFETY: this thread is the only consumer (before the spawns).
        assert_eq!(unsafe { try_pop(&q, 1) }, Some(99));

        let (q1, s1) = (q.clone(), state.clone());
        let sender = thread::spawn(move || {
            push(&q1, 1); // step 1: SeqCst swap
            s1.load(Ordering::SeqCst) == WAITING // step 2: wake if WAITING
        });
        let (q2, s2) = (q.clone(), state.clone());
        let receiver = thread::spawn(move || {
            // The receiver thread is the queue's only consumer until joined.
            // One pop, no retry: a yield here would let loom stop offering
            // this thread stale values (its anti-starvation rule), hiding
            // the weak-memory outcomes the model is about.
            // SAFETY: the only consumer.
            if let Pop::Data(_, node) = unsafe { q2.pop() } {
                // SAFETY: a spent node, ours now.
                unsafe { Node::free_global(node) };
                return Receiver::Got;
            }
            let empty = if announce_first {
                s2.swap(WAITING, Ordering::SeqCst); // step 3
                                                    // SAFETY: the only consumer.
                unsafe { q2.is_empty_sc() } // step 4
            } else {
                // SAFETY: the only consumer.
                let empty = unsafe { q2.is_empty_sc() };
                s2.swap(WAITING, Ordering::SeqCst);
                empty
            };
            if empty {
                return Receiver::Parked;
            }
            // Cancel the park; the message is there (or being linked).
            s2.store(RUNNING, Ordering::SeqCst);
            // SAFETY: the only consumer.
            match unsafe { try_pop(&q2, 2) } {
                Some(_) => Receiver::Got,
                None => Receiver::Runnable,
            }
        });
        let woke = sender.join().unwrap();
        let r = receiver.join().unwrap();
        assert!(
            r != Receiver::Parked || woke,
            "lost wake-up: receiver parked, sender saw no WAITING"
        );
        // The message is consumed once, by the receiver or after the wake.
        let mut rest = Vec::new();
        // SAFETY: the only consumer now; everyone is joined.
        unsafe { drain_quiescent(&q, &mut rest) };
        assert_eq!(rest.len(), usize::from(r != Receiver::Got));
    });
}

#[test]
fn park_no_lost_wakeup() {
    park_protocol(true);
}

/// Checking the queue before announcing WAITING loses wake-ups; loom must
/// find the interleaving (which shows the model can see the bug it guards).
#[test]
fn park_check_before_announce_loses_wakeups() {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(|| park_protocol(false));
    std::panic::set_hook(hook);
    let payload = result.expect_err("loom must find the lost wake-up of the broken order");
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("<non-string panic>");
    assert!(
        msg.contains("lost wake-up"),
        "the broken model failed for another reason: {msg}"
    );
}
