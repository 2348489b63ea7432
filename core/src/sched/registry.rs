//! The registry: every live actor of a runtime, for dumps and for
//! shutdown's sweep of parked actors.
//!
//! Each runtime keeps one list of its live actors per worker (and one for
//! plain threads), under its own lock: a spawn appends to its worker's
//! list (an uncontended lock), an exit swap-removes its own entry by the
//! index it keeps. A dump locks each list in turn. The lock is a
//! [`PollLock`](crate::seam::lock::PollLock): its unlock is a plain store,
//! which saves a locked instruction at each spawn and at each exit; a
//! waiter (an exit on another worker, a dump) spins and yields instead of
//! sleeping, which the short sections allow. (A first design kept
//! weak references swept when the list doubled: a dead entry kept its
//! actor's allocation alive until the sweep, which made spawn_join 1.5x
//! slower: fresh, cold memory for every spawn.)

use alloc::vec::Vec;

use crate::actor::{Actor, ActorArc, HELD, PARKED, PARKED_LENT, UNREGISTERED};
use crate::seam::lock::Mutex;
use crate::seam::platform::RawLock;
use crate::sync::Ordering;

/// One shard of the registry: the live actors spawned from one worker (or
/// from plain threads), each knowing its index.
///
/// Entries are plain pointers (no reference count to bump per spawn and
/// exit): an actor is unregistered under the shard's lock before its
/// control block can go (at its exit, before the worker drops it; at
/// shutdown, the registry is cleared before the leftovers are dropped), so
/// an entry read under the lock points at a live actor.
pub(crate) struct Shard<L: RawLock> {
    list: Mutex<L, Entries>,
}

/// The pointers of one shard.
struct Entries(Vec<*const Actor>);

// SAFETY: the pointers are only dereferenced under the shard's lock, while
// the actors they name are alive (see `Shard`); `Actor` is `Send + Sync`.
unsafe impl Send for Entries {}

impl<L: RawLock> Shard<L> {
    pub(crate) fn new() -> Self {
        Shard {
            list: Mutex::new(Entries(Vec::new())),
        }
    }

    /// Registers a new actor (shard number `me`).
    pub(crate) fn add(&self, me: u32, a: &ActorArc) {
        let mut l = self.list.lock();
        // Relaxed: written and read under the shard lock only.
        a.reg
            .store(((me as u64) << 32) | l.0.len() as u64, Ordering::Relaxed);
        l.0.push(ActorArc::as_ptr(a));
    }

    /// Unregisters an actor that ended (`a` belongs to this shard).
    pub(crate) fn remove(&self, a: &Actor) {
        let mut l = self.list.lock();
        // Relaxed: under the shard lock (see `add`). A load and a store,
        // not a swap: the lock already orders every writer, and a swap is
        // a locked instruction of its own on every exit.
        let reg = a.reg.load(Ordering::Relaxed);
        if reg == UNREGISTERED {
            return;
        }
        a.reg.store(UNREGISTERED, Ordering::Relaxed);
        let i = (reg & 0xffff_ffff) as usize;
        l.0.swap_remove(i);
        if let Some(&moved) = l.0.get(i) {
            let shard = reg & !0xffff_ffff;
            // SAFETY: a registered actor is alive (see `Shard`).
            let moved = unsafe { &*moved };
            // Relaxed: under the shard lock.
            moved.reg.store(shard | i as u64, Ordering::Relaxed);
        }
    }

    /// Calls `f` on every registered actor, under the shard's lock (`f`
    /// must not spawn, exit or take this lock).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Actor)) {
        let l = self.list.lock();
        for &a in l.0.iter() {
            // SAFETY: a registered actor is alive (see `Shard`).
            f(unsafe { &*a });
        }
    }

    /// Collects the actors that are parked now (shutdown wakes them).
    pub(crate) fn parked(&self, out: &mut Vec<ActorArc>) {
        let l = self.list.lock();
        for &a in l.0.iter() {
            // SAFETY: a registered actor is alive (see `Shard`); we take a
            // reference of our own before the lock is released.
            let a = unsafe { ActorArc::clone_from_ptr(a) };
            // Relaxed: a candidate; the wake's CAS decides. A `HELD` actor
            // (unwinding, waiting in place) is woken to re-check too: at
            // shutdown its waits give up (`sched::unwinding`).
            if matches!(a.state.load(Ordering::Relaxed), PARKED | PARKED_LENT | HELD) {
                out.push(a);
            }
        }
    }

    /// Forgets every entry (runtime shutdown, before the leftovers are
    /// dropped).
    pub(crate) fn clear(&self) {
        let mut l = self.list.lock();
        for &a in l.0.iter() {
            // SAFETY: a registered actor is alive (see `Shard`).
            // Relaxed: under the shard lock.
            unsafe { (*a).reg.store(UNREGISTERED, Ordering::Relaxed) };
        }
        l.0.clear();
    }
}
