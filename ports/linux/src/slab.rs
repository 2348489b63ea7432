//! Slab stacks: actor stacks carved out of a few large reservations, each
//! stack's guard page installed with `madvise(MADV_GUARD_INSTALL)`
//! (Linux 6.13) instead of a `PROT_NONE` mapping of its own.
//!
//! ```text
//!   slab base                                                  base + slots * slot_len
//!   | guard | usable (stack 0) | guard | usable (stack 1) | ... |
//!   '------- slot_len -------'
//! ```
//!
//! A guard region faults like a `PROT_NONE` page but does not split the
//! mapping, so a million guarded stacks cost a few dozen map entries of
//! `vm.max_map_count` instead of two million. The kernel reports a hit as
//! SIGSEGV at the faulting address, which the overflow handler tells from
//! any other fault by the running actor's bounds exactly as for a
//! `PROT_NONE` guard.
//!
//! # The bookkeeping
//!
//! Stacks of one size share a *class*; a class's slabs grow geometrically
//! (the first holds [`FIRST_SLAB_BYTES`], each next one twice as much, up to
//! [`MAX_SLAB_BYTES`]), so small programs map little and a million stacks
//! take a few dozen slabs. A slab hands out slots from a bump index (the
//! guard is installed on a slot's first use and stays for the slab's life)
//! and then from the slots freed back to it. Freed slots' pages are
//! released in batches of [`DISCARD_BATCH`] (`MADV_DONTNEED`, one call per
//! run of adjacent slots: the next touch maps a zero page), so a burst of
//! actors does not pin its peak RSS; a slot rejoins the free list only once
//! its pages are released. A slab whose last slot comes back is unmapped,
//! unless it is its class's only one.
//!
//! Invariants (checked by the tests, also under Miri with a fake VM):
//! - a slot is handed out at most once until it is freed;
//! - every slot handed out has had its guard installed;
//! - `used` of a slab is the number of its slots handed out and not yet
//!   put back (a freed slot whose release is pending still counts);
//! - a class's `open` list holds exactly its slabs with a free slot;
//! - a release (`discard`) never touches a stack handed out, and every
//!   slot on a free list has had its pages released since it was last
//!   used.
//!
//! All of it runs under one lock, taken only when core's stack pool misses
//! (core keeps up to 64 stacks per worker and more in a shared level).

use std::collections::BTreeMap;

use smarm_core::{RawStack, StackError};

/// Bytes of a class's first slab (rounded to whole slots, at least one).
pub(crate) const FIRST_SLAB_BYTES: usize = 8 << 20;

/// The most bytes one slab reserves: address space only (`MAP_NORESERVE`),
/// so this bounds the number of maps, not memory.
pub(crate) const MAX_SLAB_BYTES: usize = 4 << 30;

/// Freed stacks whose pages are released together (a few hundred KiB at
/// most stay resident meanwhile).
pub(crate) const DISCARD_BATCH: usize = 64;

/// The memory calls the slabs make: the real ones in [`Madvise`], a fake in
/// the tests.
pub(crate) trait Vm {
    /// Reserves `len` bytes (page-aligned, readable and writable, nothing
    /// committed) and returns their base, or the errno.
    fn reserve(&mut self, len: usize) -> Result<usize, i32>;
    /// Makes `[addr, addr + len)` fault on any access.
    fn guard(&mut self, addr: usize, len: usize) -> Result<(), i32>;
    /// Releases the pages of `[addr, addr + len)`; the next touch reads
    /// zeros.
    fn discard(&mut self, addr: usize, len: usize);
    /// Unmaps a whole reservation.
    ///
    /// # Safety
    ///
    /// `[base, base + len)` is one reservation from `reserve` that nothing
    /// uses any more.
    unsafe fn release(&mut self, base: usize, len: usize);
}

/// One reservation, cut into slots of one size.
struct Slab {
    len: usize,
    slot_len: usize,
    /// Slots ever handed out: `[0, bumped)` have their guard installed.
    bumped: usize,
    /// Slots handed out and not yet freed.
    used: usize,
    /// Of `used`, the slots freed whose release is pending (in `dirty`).
    pending: usize,
    /// Slot indexes below `bumped` that were freed (LIFO: the most recently
    /// used slot is the likeliest to be warm in the page tables).
    free: Vec<u32>,
}

impl Slab {
    fn slots(&self) -> usize {
        self.len / self.slot_len
    }

    fn has_room(&self) -> bool {
        !self.free.is_empty() || self.bumped < self.slots()
    }
}

/// The slabs of one stack size.
struct Class {
    slot_len: usize,
    /// Bases of this class's slabs with a free slot.
    open: Vec<usize>,
    /// This class's slabs.
    slabs: usize,
    /// Slots of the next slab this class reserves.
    next_slots: usize,
}

/// Every slab of the process.
pub(crate) struct Slabs<V: Vm> {
    vm: V,
    page: usize,
    /// By base address (to find a freed stack's slab).
    slabs: BTreeMap<usize, Slab>,
    classes: Vec<Class>,
    /// Freed stacks whose pages are not yet released (see `free`).
    dirty: Vec<RawStack>,
}

impl<V: Vm> Slabs<V> {
    /// No slabs yet; `page` is the page size (a power of two).
    pub(crate) fn new(vm: V, page: usize) -> Self {
        Slabs {
            vm,
            page,
            slabs: BTreeMap::new(),
            classes: Vec::new(),
            dirty: Vec::with_capacity(DISCARD_BATCH),
        }
    }

    /// A stack with at least `usable` bytes (rounded up to whole pages, at
    /// least one) above a one-page guard region.
    pub(crate) fn alloc(&mut self, usable: usize) -> Result<RawStack, StackError> {
        let page = self.page;
        let too_big = StackError::OutOfMaps { errno: libc::ENOMEM };
        let usable = usable.max(1).checked_next_multiple_of(page).ok_or(too_big)?;
        let slot_len = usable.checked_add(page).ok_or(too_big)?;
        let ci = match self.classes.iter().position(|c| c.slot_len == slot_len) {
            Some(i) => i,
            None => {
                self.classes.push(Class {
                    slot_len,
                    open: Vec::new(),
                    slabs: 0,
                    next_slots: (FIRST_SLAB_BYTES / slot_len).max(1),
                });
                self.classes.len() - 1
            }
        };
        let base = match self.classes[ci].open.last() {
            Some(&b) => b,
            None => self.grow(ci)?,
        };
        let slab = self.slabs.get_mut(&base).expect("an open slab is mapped");
        let index = match slab.free.pop() {
            Some(i) => i as usize,
            None => {
                let i = slab.bumped;
                self.vm
                    .guard(base + i * slot_len, page)
                    .map_err(|errno| StackError::Os { errno })?;
                slab.bumped += 1;
                i
            }
        };
        slab.used += 1;
        if !slab.has_room() {
            self.classes[ci].open.pop();
        }
        Ok(RawStack {
            base: (base + index * slot_len) as *mut u8,
            len: slot_len,
            guard: page,
        })
    }

    /// Reserves a new slab for class `ci` (halving the size on a refusal,
    /// down to one slot) and returns its base, now on the open list.
    fn grow(&mut self, ci: usize) -> Result<usize, StackError> {
        let class = &mut self.classes[ci];
        let mut slots = class.next_slots;
        let base = loop {
            match self.vm.reserve(slots * class.slot_len) {
                Ok(b) => break b,
                Err(_) if slots > 1 => slots /= 2,
                Err(libc::ENOMEM) => return Err(StackError::OutOfMaps { errno: libc::ENOMEM }),
                Err(errno) => return Err(StackError::Os { errno }),
            }
        };
        let most = (MAX_SLAB_BYTES / class.slot_len).max(1);
        class.next_slots = slots.saturating_mul(2).min(most);
        class.slabs += 1;
        class.open.push(base);
        self.slabs.insert(
            base,
            Slab {
                len: slots * class.slot_len,
                slot_len: class.slot_len,
                bumped: 0,
                used: 0,
                pending: 0,
                free: Vec::new(),
            },
        );
        Ok(base)
    }

    /// Takes back a stack from [`alloc`](Self::alloc). Its pages are
    /// released with the next batch (every [`DISCARD_BATCH`] frees: one
    /// `madvise` per run of adjacent slots, which join-in-order exits make
    /// long); until then the slot stays out of the free list, so a slot is
    /// never handed out while a release of its pages is pending. A stack
    /// that is not one of ours (never happens) is left alone.
    ///
    /// # Safety
    ///
    /// `stack` came from this `alloc` and nothing runs on it.
    ///
    /// A slab whose every handed-out slot is now pending (its last stack
    /// came back) is flushed at once when its class has another slab, so it
    /// is unmapped now rather than at some later batch: a runtime's end
    /// (its stack pool dropped) must not leave a slab it grew mapped.
    pub(crate) unsafe fn free(&mut self, stack: RawStack) {
        // (A stack no slab holds is left to `put_back` to reject.)
        let emptied = self
            .slab_of(&stack)
            .and_then(|(_, slab)| {
                slab.pending += 1;
                (slab.pending == slab.used).then_some(slab.slot_len)
            })
            .is_some_and(|slot_len| self.class_of(slot_len).slabs > 1);
        self.dirty.push(stack);
        if emptied || self.dirty.len() >= DISCARD_BATCH {
            self.flush();
        }
    }

    /// Releases the pages of every pending freed stack and frees their
    /// slots (see [`free`](Self::free)).
    pub(crate) fn flush(&mut self) {
        let mut dirty = core::mem::take(&mut self.dirty);
        dirty.sort_unstable_by_key(|s| s.base as usize);
        // Runs of adjacent slots, each released in one call. A run's inner
        // guard pages are in it: a guard region survives MADV_DONTNEED (its
        // marker is not a page; only munmap or MADV_GUARD_REMOVE clears it).
        let mut run: Option<(usize, usize)> = None;
        for s in &dirty {
            let (lo, hi) = (s.base as usize + s.guard, s.base as usize + s.len);
            run = match run {
                Some((start, end)) if end + s.guard == lo => Some((start, hi)),
                Some((start, end)) => {
                    self.vm.discard(start, end - start);
                    Some((lo, hi))
                }
                None => Some((lo, hi)),
            };
        }
        if let Some((start, end)) = run {
            self.vm.discard(start, end - start);
        }
        for s in dirty.drain(..) {
            // SAFETY: from this `alloc`, idle (`free`'s contract), and its
            // pages were just released.
            unsafe { self.put_back(s) };
        }
        // Keep the vector's capacity for the next batch.
        self.dirty = dirty;
    }

    /// Frees the slot of `stack`, whose pages are released; unmaps its slab
    /// if that was the slab's last stack and the class has another.
    ///
    /// # Safety
    ///
    /// As [`free`](Self::free).
    unsafe fn put_back(&mut self, stack: RawStack) {
        let Some((base, slab)) = self.slab_of(&stack) else {
            debug_assert!(false, "freeing a stack no slab holds: {stack:?}");
            return;
        };
        let index = (stack.base as usize - base) / slab.slot_len;
        // (A double free is the caller's bug; looking for it in the free
        // list would make every free O(slots).)
        debug_assert!(index < slab.bumped, "freeing a slot never handed out");
        let was_full = !slab.has_room();
        slab.free.push(index as u32);
        slab.used -= 1;
        slab.pending -= 1;
        let (used, len, slot_len) = (slab.used, slab.len, slab.slot_len);
        let class = self.class_of(slot_len);
        if was_full {
            class.open.push(base);
        }
        if used == 0 && class.slabs > 1 {
            class.open.retain(|&b| b != base);
            class.slabs -= 1;
            self.slabs.remove(&base);
            // SAFETY: the slab is one reservation of `len` bytes and its
            // last slot just came back: nothing uses it.
            unsafe { self.vm.release(base, len) };
        }
    }

    /// The slab that holds `stack` as one of its slots, and its base
    /// (`None`: no slab holds it, which never happens).
    fn slab_of(&mut self, stack: &RawStack) -> Option<(usize, &mut Slab)> {
        let addr = stack.base as usize;
        let (&base, slab) = self.slabs.range_mut(..=addr).next_back()?;
        let offset = addr - base;
        (offset < slab.len && offset.is_multiple_of(slab.slot_len) && stack.len == slab.slot_len)
            .then_some((base, slab))
    }

    /// The class of a slab's slots (every slab's class exists).
    fn class_of(&mut self, slot_len: usize) -> &mut Class {
        self.classes
            .iter_mut()
            .find(|c| c.slot_len == slot_len)
            .expect("a slab's class exists")
    }

    /// Slabs mapped now.
    #[cfg(test)]
    pub(crate) fn slabs(&self) -> usize {
        self.slabs.len()
    }
}

/// The real memory calls.
pub(crate) struct Madvise;

/// `MADV_GUARD_INSTALL` (Linux 6.13; not yet in every libc).
pub(crate) const MADV_GUARD_INSTALL: libc::c_int = 102;

impl Vm for Madvise {
    fn reserve(&mut self, len: usize) -> Result<usize, i32> {
        // SAFETY: a fresh private anonymous mapping at an address of the
        // kernel's choosing: it aliases nothing.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                smarm_unix::stack::MAP_FLAGS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(smarm_unix::stack::last_errno());
        }
        // No transparent huge pages: one would make a stack's first touch
        // cost 2 MiB. (`MAP_STACK` implies this since Linux 6.7; said again
        // for kernels that backport guard regions but not that.) Advice
        // only: a refusal changes nothing that matters.
        // SAFETY: advice on the mapping just made.
        unsafe { libc::madvise(base, len, libc::MADV_NOHUGEPAGE) };
        Ok(base as usize)
    }

    fn guard(&mut self, addr: usize, len: usize) -> Result<(), i32> {
        // SAFETY: `[addr, addr + len)` is a slot's guard page inside one of
        // our reservations; nothing is stored there.
        if unsafe { libc::madvise(addr as *mut libc::c_void, len, MADV_GUARD_INSTALL) } == 0 {
            Ok(())
        } else {
            Err(smarm_unix::stack::last_errno())
        }
    }

    fn discard(&mut self, addr: usize, len: usize) {
        // SAFETY: `[addr, addr + len)` is the usable range of a freed slot:
        // no context runs on it and nothing refers into it. DONTNEED cannot
        // fail on a private anonymous range; if it did, the pages would
        // only stay resident.
        unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    }

    unsafe fn release(&mut self, base: usize, len: usize) {
        // SAFETY: the caller's contract: one whole reservation, unused.
        let rc = unsafe { libc::munmap(base as *mut libc::c_void, len) };
        debug_assert_eq!(rc, 0, "munmap of a stack slab failed");
    }
}

/// Whether this kernel installs guard regions for real: `madvise` must
/// accept `MADV_GUARD_INSTALL` and the kernel must then refuse to read the
/// page (an emulator such as qemu-user acknowledges unknown advice and does
/// nothing; a `write(2)` from the page tells the difference without a
/// fault: the kernel answers EFAULT for a guarded page).
pub(crate) fn guard_regions_work() -> bool {
    let page = smarm_unix::page_size();
    let Ok(base) = Madvise.reserve(2 * page) else {
        return false;
    };
    let mut works = Madvise.guard(base, page).is_ok();
    if works {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a valid out-array of two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            works = false;
        } else {
            // SAFETY: writes at most one byte from `base` (guarded: the
            // kernel must refuse it) and, as a control, one from the page
            // above (plain memory of ours); then closes both ends.
            unsafe {
                let guarded = libc::write(fds[1], base as *const libc::c_void, 1);
                let errno = smarm_unix::stack::last_errno();
                let control = libc::write(fds[1], (base + page) as *const libc::c_void, 1);
                works = guarded == -1 && errno == libc::EFAULT && control == 1;
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
        }
    }
    // SAFETY: the probe's own reservation, no longer used.
    unsafe { Madvise.release(base, 2 * page) };
    works
}

#[cfg(test)]
mod tests;
