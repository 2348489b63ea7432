#![cfg(smarm_loom)]
//! Loom models of `smarm_core::ring::Ring`. Every model asserts conservation
//! (each item seen exactly once); the stalled-consumer model also asserts that
//! push never reports Full while occupancy is below capacity, and must fail
//! for the classic ring (`STALL_FIX = false`).
//!
//! ```text
//! RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom \
//!     LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_ring
//! ```

use loom::sync::Arc;
use loom::thread;
use smarm_core::ring::Ring;
use smarm_core::sync::LOOM;

/// Tiny under loom so the models reach full, empty and wrap-around.
const CAP: usize = if LOOM { 2 } else { 64 };

/// Runs `f` under loom with a preemption bound of 2 unless
/// `LOOM_MAX_PREEMPTIONS` asks for another.
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

/// Under loom the ring never calls `relax` (each wait is a loom yield).
fn relax() {
    thread::yield_now();
}

fn push<const FIX: bool>(ring: &Ring<u32, FIX>, mut v: u32) {
    // A retry on a (truly or, for the classic ring, spuriously) full ring is
    // a loom yield: the model cannot spin forever.
    while let Err(back) = ring.push(v, &mut relax) {
        v = back;
        thread::yield_now();
    }
}

/// Pops until an item comes. Only for a thread that is the sole waiter: loom's
/// scheduler is not fair, so two threads yield-spinning on a third can starve
/// it forever (a "max branches" failure, not a ring bug).
fn pop<const FIX: bool>(ring: &Ring<u32, FIX>) -> u32 {
    loop {
        match ring.pop(&mut relax) {
            Some(v) => return v,
            None => thread::yield_now(),
        }
    }
}

/// Asserts that `seen` holds `0..n` exactly once each.
fn assert_conserved(mut seen: Vec<u32>, n: u32) {
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "an item lost or duplicated");
}

#[test]
fn spsc() {
    model(|| {
        let ring = Arc::new(Ring::<u32>::with_capacity(CAP));
        let r = ring.clone();
        let producer = thread::spawn(move || {
            push(&r, 0);
            push(&r, 1);
        });
        let seen = vec![pop(&ring), pop(&ring)];
        producer.join().unwrap();
        assert_eq!(seen, [0, 1], "SPSC must be FIFO");
        assert!(ring.is_empty());
    });
}

#[test]
fn two_producers_one_consumer() {
    model(|| {
        let ring = Arc::new(Ring::<u32>::with_capacity(CAP));
        let producers: Vec<_> = (0..2)
            .map(|i| {
                let r = ring.clone();
                thread::spawn(move || push(&r, i))
            })
            .collect();
        let seen = vec![pop(&ring), pop(&ring)];
        for p in producers {
            p.join().unwrap();
        }
        assert_conserved(seen, 2);
        assert!(ring.pop(&mut relax).is_none());
    });
}

#[test]
fn one_producer_two_consumers() {
    model(|| {
        let ring = Arc::new(Ring::<u32>::with_capacity(CAP));
        // Each consumer tries twice (a bounded wait, see `pop`); the main
        // thread drains what is left once everyone is done.
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let r = ring.clone();
                thread::spawn(move || {
                    let first = r.pop(&mut relax);
                    thread::yield_now();
                    let second = r.pop(&mut relax);
                    [first, second]
                })
            })
            .collect();
        push(&ring, 0);
        push(&ring, 1);
        let mut seen: Vec<u32> = consumers
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .flatten()
            .collect();
        // Quiescent now: every item left must pop at once.
        while let Some(v) = ring.pop(&mut relax) {
            seen.push(v);
        }
        assert_conserved(seen, 2);
    });
}

#[test]
fn wrap_around() {
    const N: u32 = 4; // two laps of a capacity-2 ring
    model(|| {
        let ring = Arc::new(Ring::<u32>::with_capacity(CAP));
        let r = ring.clone();
        let producer = thread::spawn(move || {
            for i in 0..N {
                push(&r, i);
            }
        });
        let seen: Vec<u32> = (0..N).map(|_| pop(&ring)).collect();
        producer.join().unwrap();
        assert_eq!(seen, (0..N).collect::<Vec<_>>(), "SPSC must be FIFO");
    });
}

/// Wrap-around with two producers: one item is in a ring of two, two
/// producers push one each, so one of them claims (on the second lap) the
/// cell the consumer is reading, and may find the ring full first.
/// Conservation, and the first item out first. (Each producer pushes once:
/// two producers yield-spinning on a full ring can starve the consumer
/// under loom's unfair scheduler, a "max branches" failure.)
#[test]
fn wrap_around_two_producers() {
    model(|| {
        let ring = Arc::new(Ring::<u32>::with_capacity(CAP));
        push(&ring, 0);
        let producers: Vec<_> = (1..3u32)
            .map(|p| {
                let r = ring.clone();
                thread::spawn(move || push(&r, p))
            })
            .collect();
        let seen: Vec<u32> = (0..3).map(|_| pop(&ring)).collect();
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(seen[0], 0, "the first item must come out first");
        assert_conserved(seen, 3);
        assert!(ring.is_empty());
    });
}

/// Items still in the ring when it is dropped are dropped with it (loom
/// reports a leaked `loom::sync::Arc` at the end of an iteration).
#[test]
fn drop_drops_leftovers() {
    model(|| {
        let token = Arc::new(());
        let ring = Arc::new(Ring::<Arc<()>>::with_capacity(CAP));
        let (r, t) = (ring.clone(), token.clone());
        let producer = thread::spawn(move || {
            for _ in 0..2 {
                assert!(r.push(t.clone(), &mut relax).is_ok(), "ring of 2 is not full");
            }
        });
        let popped = ring.pop(&mut relax);
        producer.join().unwrap();
        drop(popped);
        drop(ring);
        assert_eq!(Arc::strong_count(&token), 1, "every clone dropped");
    });
}

/// The stalled consumer: the ring is full, a consumer pops one item (claim,
/// then release), and the producer pushes as soon as it sees occupancy below
/// capacity, landing on the consumer's cell. Loom preempts the consumer
/// between its claim and its release; the push must still succeed.
fn stalled_consumer<const FIX: bool>() {
    model(|| {
        let ring = Arc::new(Ring::<u32, FIX>::with_capacity(2));
        push(&ring, 0);
        push(&ring, 1);
        let r = ring.clone();
        let consumer = thread::spawn(move || pop(&r));
        // Occupancy (enqueue minus dequeue counter) only falls from here on:
        // this thread is the only producer.
        while ring.len() >= ring.capacity() {
            thread::yield_now();
        }
        let res = ring.push(2, &mut relax);
        assert!(res.is_ok(), "push reported Full while occupancy < capacity");
        let mut seen = vec![consumer.join().unwrap()];
        seen.push(pop(&ring));
        seen.push(pop(&ring));
        assert_conserved(seen, 3);
    });
}

#[test]
fn stalled_consumer_fixed() {
    stalled_consumer::<true>();
}

/// As `stalled_consumer`, with a second consumer that empties the other cell
/// meanwhile: the producer must still wait out the stalled one, not fail.
#[test]
fn stalled_consumer_with_a_second_consumer() {
    model(|| {
        let ring = Arc::new(Ring::<u32>::with_capacity(2));
        push(&ring, 0);
        push(&ring, 1);
        // The ring never runs dry for them (3 items, 2 takers): no spinning.
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let r = ring.clone();
                thread::spawn(move || pop(&r))
            })
            .collect();
        while ring.len() >= ring.capacity() {
            thread::yield_now();
        }
        let res = ring.push(2, &mut relax);
        assert!(res.is_ok(), "push reported Full while occupancy < capacity");
        let mut seen: Vec<u32> = consumers.into_iter().map(|c| c.join().unwrap()).collect();
        seen.push(pop(&ring));
        assert_conserved(seen, 3);
    });
}

#[test]
fn stalled_consumer_classic_fails() {
    // Silence the expected panic's message; restore the hook afterwards.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(stalled_consumer::<false>);
    std::panic::set_hook(hook);
    let payload =
        result.expect_err("loom must find the interleaving where the classic ring reports a spurious Full");
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("<non-string panic>");
    assert!(
        msg.contains("push reported Full while occupancy < capacity"),
        "the classic model failed for another reason: {msg}"
    );
}

/// `push_single` (the one-producer push, no CAS on the ticket): pushes
/// until accepted, as `push` does.
fn push_single(ring: &Ring<u32>, mut v: u32) {
    // SAFETY: each model calls this from one thread only (the ring's one
    // producer), and no model mixes it with `push` on the same ring.
    while let Err(back) = unsafe { ring.push_single(v, &mut relax) } {
        v = back;
        thread::yield_now();
    }
}

/// The one-producer push against two consumers, over a lap of a ring of
/// two: the producer pushes two items, pops one itself (so the ring has
/// room whatever the consumers did) and pushes a third onto the first
/// item's cell, which a consumer may be reading. Conservation, and every
/// item left is popped at once when the threads are done (a published
/// item always shows; the counters never hide one).
#[test]
fn one_producer_pushing_single_two_consumers() {
    model(|| {
        let ring = Arc::new(Ring::<u32>::with_capacity(CAP));
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let r = ring.clone();
                thread::spawn(move || r.pop(&mut relax))
            })
            .collect();
        push_single(&ring, 0);
        push_single(&ring, 1);
        let mine = ring.pop(&mut relax);
        push_single(&ring, 2);
        let mut seen: Vec<u32> = consumers.into_iter().filter_map(|c| c.join().unwrap()).collect();
        seen.extend(mine);
        while let Some(v) = ring.pop(&mut relax) {
            seen.push(v);
        }
        assert_conserved(seen, 3);
        assert!(ring.is_empty());
    });
}

/// `stalled_consumer` with the one-producer push: it waits out a consumer
/// stalled between its claim and its release instead of reporting Full.
#[test]
fn stalled_consumer_pushing_single() {
    model(|| {
        let ring = Arc::new(Ring::<u32>::with_capacity(2));
        push_single(&ring, 0);
        push_single(&ring, 1);
        let r = ring.clone();
        let consumer = thread::spawn(move || pop(&r));
        while ring.len() >= ring.capacity() {
            thread::yield_now();
        }
        // SAFETY: this thread is the ring's only producer.
        let res = unsafe { ring.push_single(2, &mut relax) };
        assert!(res.is_ok(), "push reported Full while occupancy < capacity");
        let mut seen = vec![consumer.join().unwrap()];
        seen.push(pop(&ring));
        seen.push(pop(&ring));
        assert_conserved(seen, 3);
    });
}
