//! The timers against `BTreeMap` models, one operation at a time.
//!
//! Two structures are driven by the same operations:
//! - core's `TimerHeap` (the pure heap: push, `pop_due`, `retain`,
//!   `next_deadline`, `len`) against a `BTreeMap<(deadline, arming order), id>`;
//! - core's `Timers` (the runtime's timer set: `arm`, entry `cancel`,
//!   `fire`, lazy cancellation with compaction, the `next` word and the
//!   sleeper claim) against a model that mirrors every word it keeps: which
//!   entries are still in the heap (checked through each entry's `Arc`
//!   count), the cancelled-entries hint, `next`, the sleeper. Each `fire`
//!   must poke exactly the due, uncancelled entries, earliest first and
//!   ties in arming order; `next` must never be later than the earliest live
//!   deadline (a missed timer).
#![no_main]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use smarm_core::timer::{entry, PokeWith, TimerEntry, TimerHeap, Timers, NEVER};
use smarm_core::Platform;
use smarm_linux::Linux;

thread_local! {
    /// Ids poked by `Timers::fire`, in order.
    static POKED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Most entries one input arms (keeps every input fast).
const MAX_ENTRIES: usize = 1024;

#[derive(Arbitrary, Debug)]
enum Op {
    /// Arm `count % 128 + 1` entries at `now + delta + i * spread % 8`.
    Arm { delta: u8, count: u8, spread: u8 },
    /// Cancel the entry picked by `pick` (and the next `count % 128`).
    Cancel { pick: u16, count: u8 },
    /// Advance the clock by `advance` and fire what is due.
    Fire { advance: u8 },
    /// Worker `i % 4` claims the sleeper role.
    Claim(u8),
    /// Worker `i % 4` gives it up.
    Release(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Armed,
    Cancelled,
    Fired,
}

struct ModelEntry {
    id: u64,
    deadline: u64,
    seq: u64,
    state: State,
    in_heap: bool,
    arc: Arc<TimerEntry>,
}

type Lock = <Linux as Platform>::Lock;

fn poke(id: &u64) {
    POKED.with(|p| p.borrow_mut().push(*id));
}

fuzz_target!(|ops: Vec<Op>| {
    POKED.with(|p| p.borrow_mut().clear());
    let timers: Timers<Lock> = Timers::new();
    let mut heap: TimerHeap<u64> = TimerHeap::new();
    let mut heap_model: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut entries: Vec<ModelEntry> = Vec::new();
    let mut next_word = NEVER;
    let mut cancelled_hint: usize = 0;
    let mut sleeper: Option<usize> = None;
    let mut now: u64 = 1000;
    // Entries in the timer set's heap (cancelled ones included).
    let mut heap_len: usize = 0;

    for op in &ops {
        match *op {
            Op::Arm { delta, count, spread } => {
                for i in 0..=u64::from(count % 128) {
                    if entries.len() >= MAX_ENTRIES {
                        break;
                    }
                    let id = entries.len() as u64;
                    let deadline = now - 8 + u64::from(delta) + (i * u64::from(spread)) % 8;
                    // The pure heap.
                    heap.push(deadline, id);
                    heap_model.insert((deadline, id), id);
                    // The timer set: compaction first, as `arm` does.
                    let dead = cancelled_hint.min(heap_len);
                    if dead > 64 && dead * 2 > heap_len {
                        for e in entries.iter_mut() {
                            if e.in_heap && e.state == State::Cancelled {
                                e.in_heap = false;
                                heap_len -= 1;
                            }
                        }
                        cancelled_hint = 0;
                    }
                    heap_len += 1;
                    let arc = entry(PokeWith(id, poke));
                    let woke = timers.arm(deadline, &arc);
                    let earliest = deadline < next_word;
                    if earliest {
                        next_word = deadline;
                    }
                    let want = if earliest { sleeper } else { None };
                    assert_eq!(woke, want, "arm's wake-the-sleeper answer");
                    entries.push(ModelEntry {
                        id,
                        deadline,
                        seq: id,
                        state: State::Armed,
                        in_heap: true,
                        arc,
                    });
                }
            }
            Op::Cancel { pick, count } => {
                if entries.is_empty() {
                    continue;
                }
                for k in 0..=usize::from(count % 128) {
                    let i = (usize::from(pick) + k) % entries.len();
                    let e = &mut entries[i];
                    let got = e.arc.cancel::<Linux>();
                    assert_eq!(got, e.state == State::Armed, "cancel's answer");
                    if got {
                        e.state = State::Cancelled;
                        timers.cancelled_one();
                        cancelled_hint = cancelled_hint.wrapping_add(1);
                        // The pure heap's compaction of this entry.
                        let id = e.id;
                        heap.retain(|&v| v != id);
                        heap_model.remove(&(e.deadline, e.seq));
                    }
                }
            }
            Op::Fire { advance } => {
                now += u64::from(advance);
                // The pure heap.
                let mut got = Vec::new();
                heap.pop_due(now, |d, v| got.push((d, v)));
                let mut want = Vec::new();
                while let Some((&(d, s), &v)) = heap_model.first_key_value() {
                    if d > now {
                        break;
                    }
                    heap_model.remove(&(d, s));
                    want.push((d, v));
                }
                assert_eq!(got, want, "TimerHeap::pop_due");
                // The timer set.
                POKED.with(|p| p.borrow_mut().clear());
                let fired = timers.fire(now);
                let mut due: Vec<&mut ModelEntry> = entries
                    .iter_mut()
                    .filter(|e| e.in_heap && e.deadline <= now)
                    .collect();
                due.sort_by_key(|e| (e.deadline, e.seq));
                let mut want_poked = Vec::new();
                for e in due {
                    e.in_heap = false;
                    heap_len -= 1;
                    match e.state {
                        State::Armed => {
                            e.state = State::Fired;
                            want_poked.push(e.id);
                        }
                        State::Cancelled => cancelled_hint = cancelled_hint.wrapping_sub(1),
                        State::Fired => unreachable!("a fired entry left in the heap"),
                    }
                }
                let poked = POKED.with(|p| std::mem::take(&mut *p.borrow_mut()));
                assert_eq!(poked, want_poked, "Timers::fire poked the wrong entries or order");
                assert_eq!(fired, want_poked.len() as u64, "fire's count");
                next_word = entries
                    .iter()
                    .filter(|e| e.in_heap)
                    .map(|e| e.deadline)
                    .min()
                    .unwrap_or(NEVER);
            }
            Op::Claim(i) => {
                let i = usize::from(i % 4);
                let got = timers.claim(i);
                assert_eq!(got, sleeper.is_none(), "claim");
                if got {
                    sleeper = Some(i);
                }
            }
            Op::Release(i) => {
                let i = usize::from(i % 4);
                timers.release(i);
                if sleeper == Some(i) {
                    sleeper = None;
                }
            }
        }
        // Observers, after every step.
        assert_eq!(heap.len(), heap_model.len(), "TimerHeap::len");
        assert_eq!(heap.is_empty(), heap_model.is_empty(), "TimerHeap::is_empty");
        assert_eq!(
            heap.next_deadline(),
            heap_model.first_key_value().map(|(&(d, _), _)| d),
            "TimerHeap::next_deadline"
        );
        assert_eq!(timers.next(), next_word, "Timers::next");
        let earliest_live = entries
            .iter()
            .filter(|e| e.in_heap && e.state == State::Armed)
            .map(|e| e.deadline)
            .min()
            .unwrap_or(NEVER);
        assert!(
            next_word <= earliest_live,
            "next is later than a live deadline: a missed timer"
        );
        assert_eq!(
            timers.maybe_due(|| now),
            next_word != NEVER && now >= next_word,
            "maybe_due"
        );
        for e in &entries {
            // In the heap: the heap's clone and ours.
            let want = if e.in_heap { 2 } else { 1 };
            assert_eq!(
                Arc::strong_count(&e.arc),
                want,
                "heap membership of entry {}",
                e.id
            );
            assert_eq!(e.arc.has_fired(), e.state != State::Armed, "has_fired");
        }
    }
    drop(timers);
    for e in &entries {
        assert_eq!(Arc::strong_count(&e.arc), 1, "dropping Timers leaked an entry");
    }
});
