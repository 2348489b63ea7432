//! The timer heap against a simple model: a list sorted by (deadline,
//! arming order), under random arm / cancel / fire sequences (Miri runs
//! these too: no atomics, no asm).

use alloc::vec::Vec;
use core::cell::Cell;
use std::rc::Rc;

use super::TimerHeap;

/// xorshift64*: a small deterministic generator (seeded per case).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One armed timer in the test: its id and whether it was cancelled.
#[derive(Clone)]
struct T {
    id: u64,
    cancelled: Rc<Cell<bool>>,
}

/// Runs one random case: `ops` operations with deadlines in `0..spread`
/// (a small spread makes many equal deadlines).
fn case(seed: u64, ops: usize, spread: u64) {
    let mut rng = Rng(seed | 1);
    let mut heap = TimerHeap::<T>::new();
    // The model: (deadline, id, cancelled) in arming order.
    let mut model: Vec<(u64, u64, Rc<Cell<bool>>)> = Vec::new();
    let mut now = 0u64;
    let mut next_id = 0u64;
    for _ in 0..ops {
        match rng.below(10) {
            0..=4 => {
                let d = now + rng.below(spread);
                let c = Rc::new(Cell::new(false));
                heap.push(
                    d,
                    T {
                        id: next_id,
                        cancelled: c.clone(),
                    },
                );
                model.push((d, next_id, c));
                next_id += 1;
            }
            5 | 6 => {
                // Cancel a random live one (lazily, as the runtime does).
                let live: Vec<_> = model.iter().filter(|m| !m.2.get()).collect();
                if !live.is_empty() {
                    let k = rng.below(live.len() as u64) as usize;
                    live[k].2.set(true);
                }
            }
            7 => {
                // Compact, as `Timers::arm` does when many are cancelled.
                heap.retain(|t| !t.cancelled.get());
            }
            _ => {
                now += rng.below(spread / 2 + 1);
                let mut got = Vec::new();
                heap.pop_due(now, |d, t| {
                    assert!(d <= now, "fired early: deadline {d} at {now}");
                    if !t.cancelled.get() {
                        got.push((d, t.id));
                    }
                });
                // Expected: the model's due, uncancelled entries by
                // (deadline, arming order).
                let mut want: Vec<(u64, u64)> = model
                    .iter()
                    .filter(|m| m.0 <= now && !m.2.get())
                    .map(|m| (m.0, m.1))
                    .collect();
                want.sort();
                assert_eq!(got, want, "seed {seed}: fired set or order differs at now={now}");
                model.retain(|m| m.0 > now);
                let live_next = model.iter().filter(|m| !m.2.get()).map(|m| m.0).min();
                // The heap may still hold cancelled entries: its earliest
                // deadline is never later than the live earliest.
                if let Some(n) = live_next {
                    assert!(heap.next_deadline().is_some_and(|h| h <= n));
                }
            }
        }
    }
    // Drain everything: nothing live is lost.
    let mut got = Vec::new();
    heap.pop_due(u64::MAX, |d, t| {
        if !t.cancelled.get() {
            got.push((d, t.id));
        }
    });
    let mut want: Vec<(u64, u64)> = model.iter().filter(|m| !m.2.get()).map(|m| (m.0, m.1)).collect();
    want.sort();
    assert_eq!(got, want, "seed {seed}: final drain");
    assert!(heap.is_empty());
}

#[test]
fn matches_model_random() {
    let cases = if cfg!(miri) { 4 } else { 200 };
    for seed in 0..cases {
        case(seed * 0x9E37_79B9 + 7, 300, 1000);
    }
}

#[test]
fn many_equal_deadlines_fire_in_arming_order() {
    let cases = if cfg!(miri) { 2 } else { 50 };
    for seed in 0..cases {
        // Spread 3: nearly every deadline collides with others.
        case(seed + 1, 300, 3);
    }
    let mut heap = TimerHeap::new();
    for id in 0..100u32 {
        heap.push(5, id);
    }
    let mut order = Vec::new();
    heap.pop_due(4, |_, id| order.push(id));
    assert!(order.is_empty(), "nothing is due before the deadline");
    heap.pop_due(5, |_, id| order.push(id));
    assert_eq!(order, (0..100).collect::<Vec<_>>());
}

#[test]
fn next_deadline_tracks_the_earliest() {
    let mut heap = TimerHeap::new();
    assert_eq!(heap.next_deadline(), None);
    heap.push(30, 'a');
    heap.push(10, 'b');
    heap.push(20, 'c');
    assert_eq!(heap.next_deadline(), Some(10));
    let mut got = Vec::new();
    heap.pop_due(25, |d, v| got.push((d, v)));
    assert_eq!(got, [(10, 'b'), (20, 'c')]);
    assert_eq!(heap.next_deadline(), Some(30));
    assert_eq!(heap.len(), 1);
}

// ---- `Timers` (the heap under its lock, entries, cancel against fire) on
// the std test platform: asm-free, so Miri runs these too.

mod timers {
    use std::sync::atomic::{AtomicU64, Ordering as StdOrdering};
    use std::sync::Arc;
    use std::sync::Mutex as StdMutex;
    use std::thread;
    use std::vec::Vec;

    use super::super::{entry, PokeWith, TimerEntry, Timers, NEVER};
    use crate::seam::platform::Platform;
    use crate::seam::test_platform::{with_timeout, StdPlatform as P};

    type T = Timers<<P as Platform>::Lock>;
    type Log = Arc<StdMutex<Vec<u64>>>;

    fn logged(id: u64, log: &Log) -> Arc<TimerEntry> {
        entry(PokeWith((id, log.clone()), |(id, log): &(u64, Log)| {
            log.lock().unwrap().push(*id)
        }))
    }

    #[test]
    fn fire_pokes_due_entries_in_order_and_skips_cancelled() {
        let t = T::new();
        let log: Log = Arc::default();
        assert_eq!(t.next(), NEVER);
        let es: Vec<_> = (0..6).map(|i| logged(i, &log)).collect();
        // Deadlines 30, 10, 20, 10, 40, 20: ties fire in arming order.
        for (e, d) in es.iter().zip([30, 10, 20, 10, 40, 20]) {
            t.arm(d, e);
        }
        assert_eq!(t.next(), 10);
        assert!(es[5].cancel::<P>(), "an armed entry cancels");
        t.cancelled_one();
        assert!(!es[5].cancel::<P>(), "twice: no");
        assert_eq!(t.fire(25), 3);
        assert_eq!(*log.lock().unwrap(), [1, 3, 2]);
        assert_eq!(t.next(), 30);
        assert!(es[1].has_fired() && !es[0].has_fired());
        assert!(!es[1].cancel::<P>(), "a fired entry cannot be cancelled");
        assert_eq!(t.fire(100), 2);
        assert_eq!(*log.lock().unwrap(), [1, 3, 2, 0, 4]);
        assert_eq!(t.next(), NEVER);
        for e in &es {
            assert_eq!(Arc::strong_count(e), 1, "the heap let go of every entry");
        }
    }

    #[test]
    fn arm_compacts_when_cancelled_entries_dominate() {
        let t = T::new();
        let log: Log = Arc::default();
        let n = 80;
        let es: Vec<_> = (0..n).map(|i| logged(i, &log)).collect();
        for e in &es {
            t.arm(1000, e);
        }
        for e in &es {
            assert!(e.cancel::<P>());
            t.cancelled_one();
        }
        assert!(
            es.iter().all(|e| Arc::strong_count(e) == 2),
            "lazy: still in the heap"
        );
        let late = logged(n, &log);
        t.arm(2000, &late);
        assert!(
            es.iter().all(|e| Arc::strong_count(e) == 1),
            "the arm compacted them out"
        );
        // `next` keeps the stale (earlier) deadline until a fire: early is safe.
        assert_eq!(t.next(), 1000);
        assert_eq!(t.fire(1500), 0);
        assert_eq!(t.next(), 2000);
        assert_eq!(t.fire(2000), 1);
        assert_eq!(*log.lock().unwrap(), [n]);
    }

    #[test]
    fn arm_reports_the_sleeper_to_wake() {
        let t = T::new();
        let log: Log = Arc::default();
        assert!(t.claim(2));
        assert!(!t.claim(1), "one sleeper at a time");
        assert_eq!(
            t.arm(50, &logged(0, &log)),
            Some(2),
            "a new earliest deadline wakes the sleeper"
        );
        assert_eq!(t.arm(60, &logged(1, &log)), None, "a later one does not");
        t.release(2);
        assert_eq!(t.arm(40, &logged(2, &log)), None, "nobody sleeps");
        assert!(t.changed(45));
        assert_eq!(t.fire(100), 3);
    }

    #[test]
    fn cancel_racing_fire_pokes_or_cancels_exactly_once() {
        let rounds = if cfg!(miri) { 8 } else { 500 };
        with_timeout(60, move || {
            let t = Arc::new(T::new());
            let pokes = Arc::new(AtomicU64::new(0));
            for round in 0..rounds {
                let e = entry(PokeWith(pokes.clone(), |p: &Arc<AtomicU64>| {
                    p.fetch_add(1, StdOrdering::SeqCst);
                }));
                t.arm(round, &e);
                let before = pokes.load(StdOrdering::SeqCst);
                let t2 = t.clone();
                let firer = thread::spawn(move || t2.fire(round));
                let cancelled = e.cancel::<P>();
                if cancelled {
                    t.cancelled_one();
                }
                let fired = firer.join().unwrap();
                // When cancel loses, the poke has returned by the time it does.
                let poked = pokes.load(StdOrdering::SeqCst) - before;
                assert_eq!(
                    poked,
                    u64::from(!cancelled),
                    "round {round}: poked {poked}, cancelled {cancelled}"
                );
                assert_eq!(fired, poked);
                assert_eq!(Arc::strong_count(&e), 1);
            }
        });
    }
}
