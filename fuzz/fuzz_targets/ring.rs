//! The MPMC ring against a `VecDeque` model, one operation at a time:
//! small capacities, so inputs wrap the counters around the cells many
//! times and hit full and empty often. Both `STALL_FIX` variants (on one
//! thread they must behave the same). Every step checks the returned value
//! or error, `len`, `is_empty`; single-threaded, `relax` must never be
//! called (no producer or consumer is ever mid-operation), and dropping
//! the ring drops each item still in it exactly once.
#![no_main]

use std::collections::VecDeque;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use smarm_core::ring::Ring;
use smarm_fuzz::{live, reset_live, Tracked};

#[derive(Arbitrary, Debug)]
enum Op {
    /// Push this many items (1..=16).
    Push(u8),
    /// Pop this many times (1..=16).
    Pop(u8),
    /// Push one, pop one (steady state at any fill level).
    PushPop,
    /// Check the observers only.
    Len,
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// Requested capacity (0..=17: the ring rounds up to a power of two, at least 2).
    cap: u8,
    /// The classic queue instead of the stall-fixed one.
    classic: bool,
    ops: Vec<Op>,
}

fn run<const FIX: bool>(cap: usize, ops: &[Op]) {
    let ring: Ring<Tracked, FIX> = Ring::with_capacity(cap);
    let want_cap = cap.max(2).next_power_of_two();
    assert_eq!(ring.capacity(), want_cap, "capacity rounding");
    let mut relax = || panic!("relax called on a single thread (nobody is mid-operation)");
    let mut model: VecDeque<u64> = VecDeque::new();
    let mut next = 0u64;
    let mut push = |ring: &Ring<Tracked, FIX>, model: &mut VecDeque<u64>, relax: &mut dyn FnMut()| {
        let id = next;
        next += 1;
        match ring.push(Tracked::new(id), relax) {
            Ok(()) => {
                assert!(model.len() < want_cap, "push succeeded on a full ring");
                model.push_back(id);
            }
            Err(v) => {
                assert_eq!(model.len(), want_cap, "push failed below capacity");
                assert_eq!(v.0, id, "push handed back another item");
            }
        }
    };
    let pop = |ring: &Ring<Tracked, FIX>, model: &mut VecDeque<u64>, relax: &mut dyn FnMut()| {
        let got = ring.pop(relax).map(|t| t.0);
        assert_eq!(got, model.pop_front(), "pop diverged from the model");
    };
    for op in ops {
        match *op {
            Op::Push(n) => {
                for _ in 0..=(n % 16) {
                    push(&ring, &mut model, &mut relax);
                }
            }
            Op::Pop(n) => {
                for _ in 0..=(n % 16) {
                    pop(&ring, &mut model, &mut relax);
                }
            }
            Op::PushPop => {
                push(&ring, &mut model, &mut relax);
                pop(&ring, &mut model, &mut relax);
            }
            Op::Len => {}
        }
        assert_eq!(ring.len(), model.len(), "len");
        assert_eq!(ring.is_empty(), model.is_empty(), "is_empty");
        assert_eq!(live(), model.len(), "items alive != items queued");
    }
    drop(ring);
    assert_eq!(live(), 0, "dropping the ring leaked or double-dropped items");
}

fuzz_target!(|input: Input| {
    reset_live();
    let cap = usize::from(input.cap % 18);
    if input.classic {
        run::<false>(cap, &input.ops);
    } else {
        run::<true>(cap, &input.ops);
    }
});
