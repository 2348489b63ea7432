//! The stack pool's bookkeeping on the std test platform (stacks from the
//! global allocator, counted per thread; Miri's leak check catches a stack
//! that is never freed): the per-worker cache, the spill of half of it to
//! the shared level, the shared cap, refills, and freeing at shutdown.

use std::vec::Vec;

use super::{StackPool, LOCAL_CAP};
use crate::seam::platform::RawStack;
use crate::seam::test_platform::{stacks_live, stacks_mapped, StdPlatform as P};

const USABLE: usize = 8192;

#[test]
fn get_maps_when_empty_and_reuses_what_was_put() {
    let (live0, mapped0) = (stacks_live(), stacks_mapped());
    let pool = StackPool::<P>::new(USABLE, 4);
    let mut local = Vec::new();
    let s = pool.get(&mut local).unwrap();
    assert!(s.usable() >= USABLE && s.guard >= 4096);
    assert_eq!(s.top() as usize % 16, 0, "the top is 16-byte aligned");
    let base = s.base as usize;
    assert_eq!(stacks_mapped() - mapped0, 1);
    pool.put(&mut local, s);
    assert_eq!(local.len(), 1, "a returned stack goes to the worker's cache");
    let again = pool.get(&mut local).unwrap();
    assert_eq!(again.base as usize, base, "the cached stack is reused");
    assert_eq!(stacks_mapped() - mapped0, 1, "no new mapping");
    pool.put(&mut local, again);
    pool.free_local(&mut local);
    drop(pool);
    assert_eq!(stacks_live(), live0, "every stack freed");
}

#[test]
fn full_cache_spills_half_to_the_shared_level_and_frees_past_its_cap() {
    let live0 = stacks_live();
    let shared_cap = 8;
    let pool = StackPool::<P>::new(USABLE, shared_cap);
    let mut local = Vec::new();
    let mut out: Vec<RawStack> = (0..LOCAL_CAP + 1).map(|_| pool.get_one().unwrap()).collect();
    assert_eq!(stacks_live() - live0, LOCAL_CAP as isize + 1);
    for s in out.drain(..LOCAL_CAP) {
        pool.put(&mut local, s);
    }
    assert_eq!(local.len(), LOCAL_CAP, "the cache fills up to its cap");
    // One more: the cache spills its upper half; the shared level takes
    // `shared_cap` of them and the rest are freed.
    pool.put(&mut local, out.pop().unwrap());
    let total = LOCAL_CAP + 1;
    let kept = total / 2;
    let spilled = total - kept;
    assert_eq!(local.len(), kept);
    assert_eq!(
        stacks_live() - live0,
        (local.len() + shared_cap) as isize,
        "{spilled} spilled, {shared_cap} kept shared, the rest freed"
    );
    // get_one (a thread without a cache) takes from the shared level first.
    let mapped = stacks_mapped();
    let one = pool.get_one().unwrap();
    assert_eq!(stacks_mapped(), mapped, "served from the shared level");
    // A worker with an empty cache refills from the shared level in one go.
    let mut other = Vec::new();
    let s = pool.get(&mut other).unwrap();
    assert_eq!(
        other.len(),
        (shared_cap - 1).min(LOCAL_CAP / 2) - 1,
        "refilled, took one"
    );
    assert_eq!(stacks_mapped(), mapped, "still no new mapping");
    // The shared level is dry now: get_one maps.
    let fresh = pool.get_one().unwrap();
    assert_eq!(
        stacks_mapped(),
        mapped + 1,
        "mapped once the shared level ran dry"
    );
    for x in [one, s, fresh] {
        pool.put(&mut other, x);
    }
    pool.free_local(&mut local);
    pool.free_local(&mut other);
    drop(pool);
    assert_eq!(stacks_live(), live0, "every stack freed exactly once");
}

#[test]
fn dropping_the_pool_frees_the_shared_level() {
    let live0 = stacks_live();
    let pool = StackPool::<P>::new(USABLE, LOCAL_CAP);
    let mut local = Vec::new();
    let stacks: Vec<RawStack> = (0..LOCAL_CAP + 1)
        .map(|_| pool.get(&mut Vec::new()).unwrap())
        .collect();
    for s in stacks {
        pool.put(&mut local, s);
    }
    assert!(
        stacks_live() - live0 > local.len() as isize,
        "some stacks sit in the shared level"
    );
    pool.free_local(&mut local);
    drop(pool);
    assert_eq!(stacks_live(), live0);
}

#[test]
fn fresh_stacks_start_at_colors_below_their_top() {
    use super::{colored_top, COLOR_STEP, STACK_COLORS};
    for (usable, colors) in [
        (16 * 1024, 4),
        (64 * 1024, 16),
        (128 * 1024, STACK_COLORS),
        (1 << 20, STACK_COLORS),
        // 12 pages fit 12 colors; a power of two is used: 8.
        (48 * 1024, 8),
    ] {
        let pool = StackPool::<P>::new(usable, 0);
        let mut local = Vec::new();
        let s = pool.get(&mut local).unwrap();
        let top = s.top() as usize;
        let mut offsets = std::collections::BTreeSet::new();
        for id in 1..=2 * colors as u64 {
            let t = colored_top(&s, id) as usize;
            assert!(
                t <= top && top - t <= s.usable() / 64,
                "{usable}: id {id} starts {} below the top",
                top - t
            );
            assert_eq!(t % COLOR_STEP, 0, "{usable}: id {id}'s start is line-aligned");
            offsets.insert(top - t);
        }
        assert_eq!(offsets.len(), colors, "{usable}: distinct start offsets");
        let (a, b) = (colored_top(&s, 7), colored_top(&s, 8));
        assert_ne!(a, b, "{usable}: consecutive ids start apart");
        pool.put(&mut local, s);
        pool.free_local(&mut local);
    }
}
