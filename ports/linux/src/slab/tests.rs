//! The slab bookkeeping against a fake VM (no system calls, so these run
//! under Miri too: `cargo +nightly miri test -p smarm-linux --lib slab`),
//! and the real one on this kernel.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

const PAGE: usize = 4096;

/// A fake address space: reservations are ranges of numbers, never memory.
#[derive(Default)]
struct FakeVm {
    next: usize,
    /// Live reservations: base -> len.
    maps: BTreeMap<usize, usize>,
    /// Guard pages installed, by address.
    guards: BTreeSet<usize>,
    /// Every guard install (to catch a second install of one page).
    installs: usize,
    discards: Vec<(usize, usize)>,
    /// Refuse reservations larger than this.
    max_reserve: usize,
}

impl FakeVm {
    fn new() -> Self {
        FakeVm {
            next: 1 << 30,
            max_reserve: usize::MAX,
            ..FakeVm::default()
        }
    }
}

impl Vm for FakeVm {
    fn reserve(&mut self, len: usize) -> Result<usize, i32> {
        if len > self.max_reserve {
            return Err(libc::ENOMEM);
        }
        let base = self.next;
        // A gap between reservations, as the kernel may leave.
        self.next += len + PAGE;
        self.maps.insert(base, len);
        Ok(base)
    }

    fn guard(&mut self, addr: usize, len: usize) -> Result<(), i32> {
        assert_eq!(len, PAGE);
        let (&b, &l) = self.maps.range(..=addr).next_back().expect("guard inside a map");
        assert!(addr + len <= b + l, "guard outside its map");
        self.installs += 1;
        assert!(self.guards.insert(addr), "guard installed twice at {addr:#x}");
        Ok(())
    }

    fn discard(&mut self, addr: usize, len: usize) {
        self.discards.push((addr, len));
    }

    unsafe fn release(&mut self, base: usize, len: usize) {
        assert_eq!(self.maps.remove(&base), Some(len), "release of a non-map");
        self.guards.retain(|&g| g < base || g >= base + len);
    }
}

/// No discard overlaps the usable range of a stack in `held`.
fn check_discards_spare(discards: &[(usize, usize)], held: &[RawStack]) {
    for st in held {
        let (lo, hi) = st.usable_range();
        for &(d, dl) in discards {
            assert!(
                d + dl <= lo || hi <= d,
                "a discard {d:#x}+{dl:#x} hit a live stack at {lo:#x}"
            );
        }
    }
}

/// Checks a stack against the fake VM: its guard is installed at its base,
/// its range lies in one map and overlaps no other live stack.
fn check_stack(s: &Slabs<FakeVm>, st: &RawStack, live: &BTreeMap<usize, usize>) {
    let base = st.base as usize;
    assert_eq!(st.guard, PAGE);
    assert!(s.vm.guards.contains(&base), "no guard under {base:#x}");
    let (&b, &l) = s.vm.maps.range(..=base).next_back().expect("in a map");
    assert!(base + st.len <= b + l, "stack runs past its slab");
    if let Some((&lo, &len)) = live.range(..=base).next_back() {
        assert!(lo + len <= base, "overlaps the live stack at {lo:#x}");
    }
    if let Some((&hi, _)) = live.range(base..).next() {
        assert!(base + st.len <= hi, "overlaps the live stack at {hi:#x}");
    }
}

#[test]
fn stacks_are_distinct_guarded_and_come_back() {
    let mut s = Slabs::new(FakeVm::new(), PAGE);
    let mut live = BTreeMap::new();
    let mut stacks = Vec::new();
    // Fewer under Miri, still past the first slab (128 slots of 64 KiB).
    let n = if cfg!(miri) { 300 } else { 3000 };
    for _ in 0..n {
        let st = s.alloc(60 * 1024).unwrap();
        assert_eq!(st.usable(), 60 * 1024);
        check_stack(&s, &st, &live);
        live.insert(st.base as usize, st.len);
        stacks.push(st);
    }
    // Geometric slabs: the slots of 64 KiB took a handful of maps.
    let slots_first = FIRST_SLAB_BYTES / (64 * 1024);
    assert!(s.slabs() >= 2 && s.slabs() <= 8, "{} slabs", s.slabs());
    assert_eq!(s.vm.maps.len(), s.slabs());
    assert_eq!(*s.vm.maps.values().next().unwrap(), slots_first * 64 * 1024);
    assert_eq!(s.vm.installs, n, "one guard per slot, once");
    // Free every other one: each freed stack's usable range is discarded,
    // in batches, and no discard touches a live stack.
    for st in stacks.iter().step_by(2) {
        live.remove(&(st.base as usize));
    }
    let mut kept = Vec::new();
    let mut freed = Vec::new();
    for (i, st) in stacks.into_iter().enumerate() {
        if i % 2 == 0 {
            freed.push((st.base as usize + PAGE, st.len - PAGE));
            // SAFETY: from this `alloc`; nothing runs on it.
            unsafe { s.free(st) };
        } else {
            kept.push(st);
        }
    }
    s.flush();
    assert!(s.vm.discards.len() <= freed.len());
    for &(lo, len) in &freed {
        assert!(
            s.vm.discards.iter().any(|&(d, dl)| d <= lo && lo + len <= d + dl),
            "freed stack at {lo:#x} never released"
        );
    }
    check_discards_spare(&s.vm.discards, &kept);
    // Reuse takes freed slots first: no new guard installs, no new maps.
    let maps = s.slabs();
    for _ in 0..n / 2 {
        let st = s.alloc(60 * 1024).unwrap();
        check_stack(&s, &st, &live);
        live.insert(st.base as usize, st.len);
        kept.push(st);
    }
    assert_eq!(s.vm.installs, n);
    assert_eq!(s.slabs(), maps);
    // Everything back: every slab but one is unmapped.
    for st in kept {
        // SAFETY: as above.
        unsafe { s.free(st) };
    }
    s.flush();
    assert_eq!(s.slabs(), 1);
    assert_eq!(s.vm.maps.len(), 1);
    // And it serves again.
    let st = s.alloc(60 * 1024).unwrap();
    check_stack(&s, &st, &BTreeMap::new());
}

#[test]
fn adjacent_frees_are_released_in_one_call_and_reused_only_after() {
    let mut s = Slabs::new(FakeVm::new(), PAGE);
    let stacks: Vec<_> = (0..DISCARD_BATCH + 1)
        .map(|_| s.alloc(28 * 1024).unwrap())
        .collect();
    let first = stacks[0].base as usize;
    let mut it = stacks.into_iter();
    let last = it.next_back().unwrap();
    for st in it.rev() {
        // SAFETY: from this `alloc`; nothing runs on it.
        unsafe { s.free(st) };
    }
    // The batch filled: one call for the whole run (guards inside it).
    assert_eq!(
        s.vm.discards,
        vec![(first + PAGE, DISCARD_BATCH * 32 * 1024 - PAGE)]
    );
    // A pending free is not handed out again before its release.
    // SAFETY: as above.
    unsafe { s.free(last) };
    let again = s.alloc(28 * 1024).unwrap();
    assert_ne!(
        again.base as usize,
        first + DISCARD_BATCH * 32 * 1024,
        "pending slot reused"
    );
    s.flush();
    assert_eq!(s.vm.discards.len(), 2);
    // The second release (of `last`) spares `again`, handed out before it.
    check_discards_spare(&s.vm.discards[1..], core::slice::from_ref(&again));
}

#[test]
fn sizes_get_classes_of_their_own() {
    let mut s = Slabs::new(FakeVm::new(), PAGE);
    let a = s.alloc(16 * 1024).unwrap();
    let b = s.alloc(128 * 1024).unwrap();
    let c = s.alloc(16 * 1024 - 100).unwrap();
    assert_eq!(
        (a.usable(), b.usable(), c.usable()),
        (16 * 1024, 128 * 1024, 16 * 1024)
    );
    assert_eq!(s.slabs(), 2, "one slab per size");
    assert_eq!(c.base as usize, a.base as usize + a.len, "same class: next slot");
    // The last stack of a class's only slab keeps the slab mapped.
    // SAFETY: from this `alloc`; nothing runs on them.
    unsafe {
        s.free(b);
        s.free(a);
        s.free(c);
    }
    s.flush();
    assert_eq!(s.slabs(), 2);
}

#[test]
fn a_refused_reservation_halves_down_to_one_slot_then_errs() {
    let mut vm = FakeVm::new();
    // Room for 3 slots of 64 KiB per reservation.
    vm.max_reserve = 3 * 64 * 1024;
    let mut s = Slabs::new(vm, PAGE);
    let a = s.alloc(60 * 1024).unwrap();
    assert!(*s.vm.maps.values().next().unwrap() <= 3 * 64 * 1024);
    s.vm.max_reserve = 0;
    let mut n = 1;
    let err = loop {
        match s.alloc(60 * 1024) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 10, "the fake refuses every reservation now");
    };
    assert_eq!(err, StackError::OutOfMaps { errno: libc::ENOMEM });
    // The slots already reserved were all handed out first.
    let slots = s.vm.maps.values().next().unwrap() / (64 * 1024);
    assert_eq!(n, slots);
    // SAFETY: from this `alloc`; nothing runs on it.
    unsafe { s.free(a) };
}

#[test]
fn huge_requests_are_an_error_not_a_panic() {
    let mut s = Slabs::new(FakeVm::new(), PAGE);
    assert!(matches!(s.alloc(usize::MAX), Err(StackError::OutOfMaps { .. })));
    assert!(matches!(
        s.alloc(usize::MAX - PAGE),
        Err(StackError::OutOfMaps { .. })
    ));
}

#[test]
fn churn_keeps_the_invariants() {
    // A seeded walk of allocs and frees over three sizes.
    let mut s = Slabs::new(FakeVm::new(), PAGE);
    let mut live: BTreeMap<usize, usize> = BTreeMap::new();
    let mut held: Vec<RawStack> = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let steps = if cfg!(miri) { 400 } else { 20_000 };
    let mut seen = 0;
    for _ in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if held.is_empty() || !x.is_multiple_of(3) {
            let size = [16 * 1024, 64 * 1024, 256 * 1024][(x >> 8) as usize % 3];
            let st = s.alloc(size).unwrap();
            check_stack(&s, &st, &live);
            live.insert(st.base as usize, st.len);
            held.push(st);
        } else {
            let st = held.swap_remove((x >> 16) as usize % held.len());
            live.remove(&(st.base as usize));
            // SAFETY: from this `alloc`; nothing runs on it.
            unsafe { s.free(st) };
        }
        // No release so far touched a stack now handed out.
        let n = s.vm.discards.len();
        check_discards_spare(&s.vm.discards[seen..n], &held);
        seen = n;
        // Every open slab has room, every slab with room is open.
        for c in &s.classes {
            for (&b, slab) in s.slabs.iter().filter(|(_, sl)| sl.slot_len == c.slot_len) {
                assert_eq!(c.open.contains(&b), slab.has_room(), "open list out of step");
            }
        }
        let used: usize = s.slabs.values().map(|sl| sl.used).sum();
        assert_eq!(used, held.len() + s.dirty.len());
    }
}

#[test]
fn this_kernel_installs_real_guard_regions_or_says_not() {
    if cfg!(miri) {
        return;
    }
    // On Linux 6.13 and later the probe must say yes; before, no. Read the
    // kernel's release to know which answer is right.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut nums = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    let new_enough = (major, minor) >= (6, 13);
    let works = guard_regions_work();
    // Under qemu-user (the aarch64 tests on an x86_64 host) the kernel's
    // own arch differs from this binary's, and the emulator may ignore the
    // advice: then the probe must only not lie, which the other tests and
    // the fallback cover.
    let kernel_arch = std::fs::read_to_string("/proc/sys/kernel/arch").unwrap_or_default();
    let emulated = !kernel_arch.trim().is_empty() && kernel_arch.trim() != std::env::consts::ARCH;
    if new_enough && !emulated {
        assert!(
            works,
            "Linux {} has guard regions, the probe says no",
            release.trim()
        );
    } else if !new_enough {
        assert!(
            !works,
            "Linux {} predates guard regions, the probe says yes",
            release.trim()
        );
    }
}

#[test]
fn real_slab_stacks_are_writable_and_come_back_zeroed() {
    if cfg!(miri) || !guard_regions_work() {
        return;
    }
    let page = smarm_unix::page_size();
    let mut s = Slabs::new(Madvise, page);
    let st = s.alloc(32 * 1024).unwrap();
    let (lo, hi) = st.usable_range();
    // SAFETY: `[lo, hi)` is the usable range of a stack we own.
    unsafe {
        core::ptr::write_bytes(lo as *mut u8, 0xA5, hi - lo);
        assert_eq!(*((hi - 1) as *const u8), 0xA5);
    }
    let base = st.base;
    // A neighbour above, freed with it: one release spans both and the
    // guard page between them.
    let above = s.alloc(32 * 1024).unwrap();
    assert_eq!(above.base as usize, base as usize + st.len, "adjacent slots");
    let (alo, ahi) = above.usable_range();
    // SAFETY: the usable range of a stack we own.
    unsafe { core::ptr::write_bytes(alo as *mut u8, 0x5A, ahi - alo) };
    // SAFETY: from this `alloc`; nothing runs on them.
    unsafe {
        s.free(above);
        s.free(st);
    }
    s.flush();
    let again = s.alloc(32 * 1024).unwrap();
    let between = base as usize + 32 * 1024 + page;
    assert!(
        again.base == base || again.base as usize == between,
        "a freed slot comes back first"
    );
    let (lo, hi) = again.usable_range();
    // SAFETY: as above; DONTNEED made the pages read as zeros.
    let all_zero = unsafe { core::slice::from_raw_parts(lo as *const u8, hi - lo) }
        .iter()
        .all(|&b| b == 0);
    assert!(all_zero, "a freed stack's pages were released");
    // The guard below the usable range refuses a kernel read (EFAULT, not
    // a fault of ours).
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: a pipe; then a write of one byte from the guard page, which
    // the kernel must refuse; then both ends closed.
    let (rc, errno) = unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        let rc = libc::write(fds[1], again.base as *const libc::c_void, 1);
        let errno = smarm_unix::stack::last_errno();
        libc::close(fds[0]);
        libc::close(fds[1]);
        (rc, errno)
    };
    assert_eq!((rc, errno), (-1, libc::EFAULT), "the guard region is installed");
    // And the guard between the two slots survived the release over it.
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: as above, from the upper slot's guard page.
    let (rc, errno) = unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        let rc = libc::write(fds[1], between as *const libc::c_void, 1);
        let errno = smarm_unix::stack::last_errno();
        libc::close(fds[0]);
        libc::close(fds[1]);
        (rc, errno)
    };
    assert_eq!(
        (rc, errno),
        (-1, libc::EFAULT),
        "a guard region survives MADV_DONTNEED"
    );
    // SAFETY: from this `alloc`; nothing runs on it.
    unsafe { s.free(again) };
}

/// A runtime's end frees its stacks one by one and never flushes: a slab
/// whose last stacks are pending (fewer than a batch) must still be
/// unmapped once they are all back, or the slab it grew outlives it (the
/// soak's "memory maps grew" at seed 1796659141).
#[test]
fn a_grown_slab_is_unmapped_when_its_last_stack_comes_back() {
    let mut s = Slabs::new(FakeVm::new(), PAGE);
    let slots_first = FIRST_SLAB_BYTES / (64 * 1024);
    // The first slab full, then a few stacks in a second one.
    let extra = 5;
    let mut stacks: Vec<_> = (0..slots_first + extra)
        .map(|_| s.alloc(60 * 1024).unwrap())
        .collect();
    assert_eq!(s.slabs(), 2);
    assert_eq!(s.vm.maps.len(), 2);
    // Free the second slab's stacks (fewer than a batch: no flush by count).
    assert!(extra < DISCARD_BATCH);
    for st in stacks.split_off(slots_first) {
        // SAFETY: from this `alloc`; nothing runs on it.
        unsafe { s.free(st) };
    }
    assert_eq!(
        s.slabs(),
        1,
        "the emptied second slab is unmapped without a flush"
    );
    assert_eq!(s.vm.maps.len(), 1);
    // The first slab, the class's only one now, stays mapped when emptied.
    for st in stacks {
        // SAFETY: as above.
        unsafe { s.free(st) };
    }
    s.flush();
    assert_eq!(
        (s.slabs(), s.vm.maps.len()),
        (1, 1),
        "a class keeps its last slab"
    );
}
