//! One allocation per actor: its [`Life`] and its control block
//! ([`Actor`]) share one block, each half with its own count.
//!
//! # Layout and counts
//!
//! ```text
//! Cell { lives, free, life: Life, ctl, actor: MaybeUninit<Actor> }
//! ```
//!
//! - `ctl` counts the [`ActorArc`]s: the run queues and slots, the worker
//!   running the actor, wakers' registrations, the registry. It is 0 until
//!   the control block is made ([`LifeRef::make_actor`]); the last
//!   `ActorArc` dropped drops the control block (its stack if still
//!   attached, its entry, its locals), never the `Life`.
//! - `lives` counts the [`LifeRef`]s (`ActorRef`s, join handles,
//!   mailboxes), plus one that the `ActorArc`s hold together while `ctl >
//!   0` (the control block's `life` field). The last one dropped drops the
//!   `Life` and gives the block back through `free`.
//!
//! So the block lives while either half is referenced, as an `Arc` with a
//! weak count does, except that the weak side (`LifeRef`) reads the `Life`
//! (an actor's id, name, exit hooks outlive its control block). A kill
//! reaches the control block from a `LifeRef` through
//! [`LifeRef::upgrade`], which takes a `ctl` reference only while `ctl >
//! 0`.
//!
//! Invariants:
//!
//! 1. `ctl` leaves 0 once, when the control block is made (a store, made
//!    before the block's `ActorArc` exists; `upgrade` never moves it from
//!    0), and comes back to 0 once, when the control block is dropped.
//! 2. The `actor` half is initialised from the store of invariant 1 until
//!    the drop that follows `ctl`'s return to 0, and read only through an
//!    `ActorArc` (or a pointer a holder of one lent).
//! 3. `lives > 0` while `ctl > 0` (invariant 1's store comes with the
//!    `lives` reference that the control block's `life` field holds).
//! 4. The block is never reached through a reference to the whole `Cell`:
//!    every access goes through raw field pointers, so a `&Life` held on
//!    one thread and the control block written on another never alias.
//!
//! One allocation where there were two (an `Arc<Life>` and an
//! `Arc<Actor>`), from the spawning worker's block cache (`free` gives it
//! back to whichever worker's cache drops it last); and no weak reference
//! from the `Life` to the control block to take and drop (the offset is
//! fixed).

use core::alloc::Layout;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ops::Deref;
use core::ptr::{self, addr_of, addr_of_mut, NonNull};

use crate::actor::life::Life;
use crate::actor::Actor;
use crate::sync::block_arc::{give_ref, take_ref, take_ref_if_live};
use crate::sync::{fence, AtomicUsize, Ordering};

/// Allocates a block for a layout (never null): a worker's block cache, or
/// the global allocator.
pub(crate) type AllocFn = fn(Layout) -> NonNull<u8>;
/// Gives back a block from the matching [`AllocFn`].
pub(crate) type FreeFn = unsafe fn(NonNull<u8>, Layout);

/// The block (see the module doc).
#[repr(C)]
struct Cell {
    lives: AtomicUsize,
    free: FreeFn,
    life: Life,
    /// Beside the control block, on the line its first fields share.
    ctl: AtomicUsize,
    actor: MaybeUninit<Actor>,
}

/// How far into the block the control block starts.
const ACTOR_OFFSET: usize = core::mem::offset_of!(Cell, actor);

/// The block of the control block at `a`.
///
/// `a` must come from the block's own pointer (an [`ActorArc`]'s), never
/// from a reference to the `Actor` alone, so that it may reach the block's
/// other fields.
#[inline(always)]
fn cell_of(a: *const Actor) -> *mut Cell {
    a.cast::<u8>()
        .wrapping_sub(ACTOR_OFFSET)
        .cast::<Cell>()
        .cast_mut()
}

/// A counted reference to an actor's [`Life`] (see the module doc). Derefs
/// to it.
pub(crate) struct LifeRef {
    cell: NonNull<Cell>,
}

// SAFETY: a `LifeRef` gives `&Life` (`Life: Send + Sync`) and moves counts
// with atomics; the control block it may upgrade to is `Send + Sync`.
unsafe impl Send for LifeRef {}
// SAFETY: as above.
unsafe impl Sync for LifeRef {}

impl LifeRef {
    /// A block holding `make()`, its control block not made yet. The
    /// `Life` is made after the allocation, straight into the block (made
    /// before it, it had to wait on the stack across the allocator's call
    /// and was copied in: a `memcpy` of 176 bytes per spawn).
    #[inline(always)]
    pub(crate) fn new(alloc: AllocFn, free: FreeFn, make: impl FnOnce() -> Life) -> Self {
        let cell = alloc(Layout::new::<Cell>()).cast::<Cell>();
        let p = cell.as_ptr();
        // SAFETY: a fresh block for `Cell`'s layout (the allocator's
        // contract), ours alone; each field written once through a raw
        // field pointer (invariant 4). `actor` stays uninitialised (`ctl`
        // 0, invariant 2).
        unsafe {
            addr_of_mut!((*p).lives).write(AtomicUsize::new(1));
            addr_of_mut!((*p).free).write(free);
            addr_of_mut!((*p).ctl).write(AtomicUsize::new(0));
            addr_of_mut!((*p).life).write(make());
        }
        LifeRef { cell }
    }

    fn lives(&self) -> &AtomicUsize {
        // SAFETY: `lives` is initialised for the block's whole life, and
        // our count keeps the block.
        unsafe { &*addr_of!((*self.cell.as_ptr()).lives) }
    }

    fn ctl(&self) -> &AtomicUsize {
        // SAFETY: as `lives`.
        unsafe { &*addr_of!((*self.cell.as_ptr()).ctl) }
    }

    /// Where the control block is (or will be): compared, never
    /// dereferenced (a join's test whether its actor waits in the
    /// joiner's run-next slot).
    #[inline]
    pub(crate) fn actor_ptr(&self) -> *const Actor {
        // SAFETY: in bounds of the live block (no read).
        unsafe { addr_of!((*self.cell.as_ptr()).actor).cast() }
    }

    /// Makes the control block, `build`'s result, in this block. `build`
    /// gets the reference the control block keeps in its `life` field:
    /// this one, moved (no count changes). `shared`: the `Life` is a
    /// reserved actor's, which others may hold already (an `ActorRef` may
    /// kill it meanwhile); a kill that came before is then handed to the
    /// control block's `killed` copy, which the actor checks when it
    /// starts.
    ///
    /// # Safety
    ///
    /// Called once per block.
    pub(crate) unsafe fn make_actor(
        self,
        shared: bool,
        build: impl FnOnce(ManuallyDrop<LifeRef>) -> Actor,
    ) -> ActorArc {
        let me = ManuallyDrop::new(self);
        let cell = me.cell;
        // SAFETY: `actor` is uninitialised and nobody reads it (`ctl` is 0:
        // `upgrade` and the other `LifeRef`s stay off it, invariant 2); a
        // raw field pointer (invariant 4).
        let a = unsafe {
            let a = addr_of_mut!((*cell.as_ptr()).actor).cast::<Actor>();
            a.write(build(ManuallyDrop::new(LifeRef { cell })));
            a
        };
        if !shared {
            // Relaxed: nobody else holds this block yet; the actor's
            // publication (its queue push, its slot, its switch) orders its
            // fields and this count for later readers.
            me.ctl().store(1, Ordering::Relaxed);
        } else {
            // Release: publishes the control block to `upgrade`'s Acquire
            // CAS. Then this side's half of a Dekker pair with `kill`
            // (store, SeqCst fence, load; fences, which loom models, where
            // SeqCst accesses alone it does not): either the kill's upgrade
            // sees 1, or the load below sees the kill.
            me.ctl().store(1, Ordering::Release);
            fence(Ordering::SeqCst);
            // Relaxed: ordered by the fence (the Dekker pair above).
            if me.killed.load(Ordering::Relaxed) {
                // SAFETY: initialised just above; ours.
                // Release: as in `kill` (the actor's own copy).
                unsafe { (*a).killed.store(true, Ordering::Release) };
            }
        }
        ActorArc {
            // SAFETY: not null (in a live block); initialised, and the
            // count just stored is this reference's.
            a: unsafe { NonNull::new_unchecked(a) },
        }
    }

    /// A reference to the control block while it lives (`ctl > 0`); `None`
    /// before it is made and after it is dropped.
    pub(crate) fn upgrade(&self) -> Option<ActorArc> {
        // The helper's first load is Relaxed (a kill orders it after its
        // store with a fence, `kill`); its CAS's Acquire pairs with
        // `make_actor`'s store (the control block's fields are visible); a
        // count > 0 keeps it alive (invariant 1).
        take_ref_if_live(self.ctl()).then(|| ActorArc {
            // SAFETY: a field of a live block: not null.
            a: unsafe { NonNull::new_unchecked(self.actor_ptr().cast_mut()) },
        })
    }

    /// Kills the actor: sets the flag its next resume point checks, and
    /// wakes it if it is parked.
    pub(crate) fn kill(&self) {
        // SeqCst: a hint for the actor's Relaxed check at resume (a parked
        // actor is ordered by the wake's CAS below); with the fence, the
        // kill's half of the Dekker pair with `make_actor` (store, fence,
        // then the upgrade's load of the count).
        self.killed.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if let Some(a) = self.upgrade() {
            // The copy the actor checks at every resume, on its own control
            // block's cache line (Release: as above).
            a.killed.store(true, Ordering::Release);
            if let Some(a) = a.wake() {
                crate::actor::schedule(a);
            }
        }
    }
}

impl Deref for LifeRef {
    type Target = Life;

    #[inline(always)]
    fn deref(&self) -> &Life {
        // SAFETY: `life` is initialised until the last `LifeRef` goes, and
        // this one keeps it; a raw field pointer (invariant 4).
        unsafe { &*addr_of!((*self.cell.as_ptr()).life) }
    }
}

impl Clone for LifeRef {
    #[inline]
    fn clone(&self) -> Self {
        take_ref(self.lives());
        LifeRef { cell: self.cell }
    }
}

impl Drop for LifeRef {
    #[inline]
    fn drop(&mut self) {
        if !give_ref(self.lives()) {
            return;
        }
        let p = self.cell.as_ptr();
        // SAFETY: the last reference: `ctl` is 0 (invariant 3), so the
        // control block was dropped or never made; nobody else can reach
        // the block. The `Life` and the counts are dropped once, then the
        // block goes back as it was allocated.
        unsafe {
            let free = *addr_of!((*p).free);
            ptr::drop_in_place(addr_of_mut!((*p).life));
            ptr::drop_in_place(addr_of_mut!((*p).lives));
            ptr::drop_in_place(addr_of_mut!((*p).ctl));
            free(self.cell.cast(), Layout::new::<Cell>());
        }
    }
}

impl core::fmt::Debug for LifeRef {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LifeRef")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A counted reference to an actor's control block (see the module doc):
/// what `ActorArc` was. Derefs to the [`Actor`].
pub struct ActorArc {
    /// The control block, as a pointer into its whole block (so that
    /// [`cell_of`] may reach the counts).
    a: NonNull<Actor>,
}

// SAFETY: `Actor: Send + Sync`; the counts are atomics.
unsafe impl Send for ActorArc {}
// SAFETY: as above.
unsafe impl Sync for ActorArc {}

impl ActorArc {
    #[inline(always)]
    fn ctl(&self) -> &AtomicUsize {
        // SAFETY: `self.a` points into a live block (our count), derived
        // from the block's pointer (`cell_of`'s contract).
        unsafe { &*addr_of!((*cell_of(self.a.as_ptr())).ctl) }
    }

    /// Gives up the reference as a pointer (for [`from_raw`](Self::from_raw)).
    #[inline(always)]
    pub fn into_raw(this: Self) -> *const Actor {
        ManuallyDrop::new(this).a.as_ptr().cast_const()
    }

    /// Takes back a reference given up by [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    ///
    /// `p` came from `into_raw` and is taken back once.
    #[inline(always)]
    pub unsafe fn from_raw(p: *const Actor) -> Self {
        ActorArc {
            // SAFETY: `into_raw`'s pointers are never null.
            a: unsafe { NonNull::new_unchecked(p.cast_mut()) },
        }
    }

    /// The control block's address (the reference is kept).
    #[inline(always)]
    pub fn as_ptr(this: &Self) -> *const Actor {
        this.a.as_ptr().cast_const()
    }

    /// Whether both are the same actor.
    #[inline(always)]
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.a == b.a
    }

    /// A new reference to the control block at `p` (an `into_raw`
    /// pointer, or one lent by a reference's holder, such as the running
    /// actor's): `Arc::increment_strong_count` and `from_raw` in one.
    ///
    /// # Safety
    ///
    /// `p` points at a live control block, reached from its block's pointer.
    #[inline(always)]
    pub unsafe fn clone_from_ptr(p: *const Actor) -> Self {
        // SAFETY: contract: a live block, reachable from `p`.
        take_ref(unsafe { &*addr_of!((*cell_of(p)).ctl) });
        // SAFETY: contract; the count just taken is this reference's.
        unsafe { Self::from_raw(p) }
    }
}

impl Deref for ActorArc {
    type Target = Actor;

    #[inline(always)]
    fn deref(&self) -> &Actor {
        // SAFETY: initialised while `ctl > 0` (invariant 2), which our
        // count keeps.
        unsafe { self.a.as_ref() }
    }
}

impl Clone for ActorArc {
    #[inline(always)]
    fn clone(&self) -> Self {
        take_ref(self.ctl());
        ActorArc { a: self.a }
    }
}

impl Drop for ActorArc {
    #[inline]
    fn drop(&mut self) {
        if give_ref(self.ctl()) {
            drop_control_block(self.a);
        }
    }
}

/// The last `ActorArc` is gone: drops the control block, then its
/// reference to the `Life` (which frees the block if it was the last).
#[inline(never)]
fn drop_control_block(a: NonNull<Actor>) {
    let a = a.as_ptr();
    // SAFETY: `ctl` reached 0: nobody can reach the control block any more
    // (invariant 1: `upgrade` fails from now on); it was initialised
    // (invariant 2) and is dropped once. Its `life` field is a
    // `ManuallyDrop`, read out before and dropped after, so the block
    // outlives the drop of the control block.
    unsafe {
        let life: ManuallyDrop<LifeRef> = ptr::read(addr_of!((*a).life));
        ptr::drop_in_place(a);
        drop(ManuallyDrop::into_inner(life));
    }
}

impl core::fmt::Debug for ActorArc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ActorArc")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Heap bytes of one actor's block (its `Life` and control block with their
/// counts), for `dump::runtime_bytes_per_actor`.
pub(crate) const fn block_bytes() -> usize {
    crate::lockfree::node_cache::NodeCache::block_layout(Layout::new::<Cell>()).size()
}

/// Blocks from the global allocator, for a `Life` made off the runtime
/// (models and tests).
#[cfg(any(test, feature = "internals", smarm_loom))]
pub(crate) fn global_alloc(layout: Layout) -> NonNull<u8> {
    crate::lockfree::node_cache::NodeCache::alloc_global(layout)
}

/// Gives back a [`global_alloc`] block.
#[cfg(any(test, feature = "internals", smarm_loom))]
///
/// # Safety
///
/// As `NodeCache::free_global`.
pub(crate) unsafe fn global_free(block: NonNull<u8>, layout: Layout) {
    // SAFETY: forwarded contract.
    unsafe { crate::lockfree::node_cache::NodeCache::free_global(block, layout) }
}

/// Loom models and unit tests only: the block's two counts and the kill's
/// reach into a control block (`core/tests/loom_cell.rs`).
#[cfg(any(test, smarm_loom))]
#[doc(hidden)]
pub mod loom_cell;

#[cfg(all(test, not(smarm_loom)))]
mod tests;
