//! What outlives an actor's control block (`Life`: id, name, kill flag,
//! exit hooks, trap, mailbox counters) and the [`ActorRef`] that points at
//! it. The operations built on them (monitors, links, trapping exits) are
//! in `crate::supervise::link`; the model they implement is described there.
//!
//! # Mechanism
//!
//! Each actor carries a list of exit hooks: a lock-free stack of boxed
//! closures, closed (swapped to a sentinel) when the actor ends, after its
//! reason is stored. A hook added before the close runs at the actor's
//! exit, on its own stack; one that finds the list closed runs at once with
//! the stored reason. So every hook runs exactly once, whichever side wins.
//!
//! A kill sets the actor's kill flag and wakes it; the actor unwinds at its
//! next resume point (a yield, a wait, a timeslice expiry, a `blocking`
//! call: the places where it switches out), running destructors. An actor
//! that never switches out is not killed until it does (the long-hold
//! monitor reports such actors). An actor unwinds at most once: a kill that
//! arrives while it unwinds (a panic, an earlier kill, a cancellation) or
//! once its body has returned is absorbed, so its destructors and exit
//! hooks run to the end and it ends with the reason it was ending with.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::ptr;

pub use crate::actor::actor_ref::ActorRef;
use crate::actor::cell::{AllocFn, FreeFn, LifeRef};
use crate::actor::exit::{Down, ExitReason};
use crate::seam::platform::Platform;
use crate::sync::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering, RawCell};

/// One exit hook.
pub(crate) type Hook = Box<dyn FnOnce(&Down) + Send>;

struct HookNode {
    hook: Hook,
    next: *mut HookNode,
}

/// The `head` value once the actor has ended.
const CLOSED: *mut HookNode = ptr::dangling_mut::<HookNode>();

/// An actor's exit hooks (see the module doc).
pub(crate) struct ExitHooks {
    head: AtomicPtr<HookNode>,
    /// Written once by the ending actor, before the close.
    down: RawCell<Option<Down>>,
}

// SAFETY: `head` is an atomic; the nodes it links are owned by the list
// and handed over whole by the closing swap; `down` is written once before
// the closing swap (Release) and read only after observing it (Acquire).
unsafe impl Send for ExitHooks {}
// SAFETY: as above.
unsafe impl Sync for ExitHooks {}

impl ExitHooks {
    pub(crate) fn new() -> Self {
        ExitHooks {
            head: AtomicPtr::new(ptr::null_mut()),
            down: RawCell::new(None),
        }
    }

    /// Adds `hook`, or, if the actor has ended, runs it now.
    pub(crate) fn add(&self, hook: Hook) {
        let node = Box::into_raw(Box::new(HookNode {
            hook,
            next: ptr::null_mut(),
        }));
        // Acquire: on CLOSED, pairs with the closing swap (the stored
        // `down` is visible).
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            if head == CLOSED {
                // SAFETY: `node` was never published: ours.
                let node = unsafe { Box::from_raw(node) };
                // SAFETY: CLOSED was observed with Acquire after the closer
                // wrote `down`; nobody writes it again.
                if let Some(down) = unsafe { &*self.down.get() } {
                    (node.hook)(down);
                }
                return;
            }
            // SAFETY: `node` is still ours (not yet published).
            unsafe { (*node).next = head };
            // Release: publishes the node to the closing swap (Acquire).
            match self
                .head
                .compare_exchange(head, node, Ordering::Release, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// The actor ended: stores `down` and runs every hook once, in the
    /// order they were added.
    pub(crate) fn close(&self, down: Down) {
        // SAFETY: only the ending actor writes `down`, once, before the
        // list is closed; readers wait for CLOSED.
        unsafe { *self.down.get() = Some(down) };
        // AcqRel: Release publishes `down` to adders that see CLOSED;
        // Acquire takes the nodes adders published.
        let mut p = self.head.swap(CLOSED, Ordering::AcqRel);
        let mut hooks = alloc::vec::Vec::new();
        while !p.is_null() && p != CLOSED {
            // SAFETY: the swap handed the whole list to us.
            let node = unsafe { Box::from_raw(p) };
            p = node.next;
            hooks.push(node.hook);
        }
        // SAFETY: written above, never again.
        let down = unsafe { (*self.down.get()).as_ref() }.expect("stored above");
        for h in hooks.into_iter().rev() {
            crate::seam::failpoint::hit(crate::seam::failpoint::Site::ExitHook);
            h(down);
        }
    }

    /// Whether the actor has ended.
    pub(crate) fn is_closed(&self) -> bool {
        // Acquire: pairs with the closing swap.
        self.head.load(Ordering::Acquire) == CLOSED
    }
}

impl Drop for ExitHooks {
    fn drop(&mut self) {
        // An actor dropped without ending (abandoned at shutdown): its
        // hooks never run; free them.
        // Relaxed: `&mut self` (no other reference; the last `LifeRef`'s drop
        // synchronised with every former owner): no read-modify-write.
        let mut p = self.head.load(Ordering::Relaxed);
        while !p.is_null() && p != CLOSED {
            // SAFETY: `&mut self`: the list is ours.
            let node = unsafe { Box::from_raw(p) };
            p = node.next;
        }
    }
}

/// What outlives an actor's control block: its id and name, its kill
/// flag, its exit hooks (and, once it ended, its exit reason), its trap.
/// Shared by the actor, its join handle, its mailbox and every
/// [`ActorRef`] (as [`LifeRef`]s), in one block with the control block
/// (`crate::actor::cell`).
pub(crate) struct Life {
    pub(crate) id: u64,
    pub(crate) name: Option<Arc<str>>,
    /// Set by a kill; the actor unwinds at its next resume point.
    pub(crate) killed: AtomicBool,
    pub(crate) hooks: ExitHooks,
    /// Set once by `trap_exits_into` (a leaked `Box<TrapFn>`, freed on drop).
    trap: AtomicPtr<TrapFn>,
    /// What the actor waits on when parked (`dump::WAIT_*`; a hint).
    pub(crate) wait: AtomicU8,
    /// The descriptor of an IO wait (`WAIT_IO_*`; a hint).
    pub(crate) wait_fd: crate::sync::AtomicI32,
    /// Whether a mailbox of this actor counts its sends (set at `new`).
    depths: bool,
    /// Messages sent to / taken from its mailbox (with the `counters`
    /// feature and `depths`; for dumps). `u64::MAX` sent: not counted (no
    /// mailbox, or depths off).
    pub(crate) sent: AtomicU64,
    pub(crate) taken: AtomicU64,
    /// The usable stack range `[lo, hi)` (for dumps and overflow reports):
    /// written once, before the actor is registered or runs (at `new`, or
    /// by `set_stack` when a reserved actor is spawned); nobody reads it
    /// before.
    stack: RawCell<(usize, usize)>,
    /// Opted in to ending by `StackOverflow` instead of aborting.
    pub(crate) recover_overflow: AtomicBool,
    /// Closes the actor's mailbox when its owner can no longer drop it
    /// (an overflow recovery abandons the frame that holds it); set once,
    /// before the `Life` is shared.
    pub(crate) mailbox: RawCell<Option<DeadMailbox>>,
    /// The link entries with other actors, under `links_lock`: `(id,
    /// linked)`. An entry exists, in both actors' sets at once, while the
    /// exit hooks the first `link` installed on both sides are pending
    /// (neither's exit has claimed it); `linked` is false once `unlink`ed,
    /// and a later `link` sets it again without new hooks.
    links: crate::sync::UnsafeCell<alloc::vec::Vec<(u64, bool)>>,
    /// A spin lock for `links` (held for a lookup and a push: links are
    /// rare, and a link never waits while holding it).
    links_lock: AtomicBool,
}

/// What [`Life::add_link`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddLink {
    /// A new entry in both sets: install the exit hooks.
    New,
    /// The entry was there, unlinked: linked again (its hooks are pending).
    Relinked,
    /// Linked already: nothing changed.
    Already,
}

/// Sets the `linked` flag of `id`'s entry (present: the sets change
/// together).
fn set_entry(set: &mut [(u64, bool)], id: u64, linked: bool) {
    if let Some(e) = set.iter_mut().find(|e| e.0 == id) {
        e.1 = linked;
    }
}

/// A weak reference to an actor's mailbox, its type erased: closes the
/// mailbox when its owner is gone without dropping it (an overflow
/// recovery abandons the frame that holds it). `crate::msg::mailbox`
/// makes it.
pub(crate) struct DeadMailbox {
    /// The mailbox's weak reference, as its maker erased it.
    weak: ptr::NonNull<()>,
    /// Closes the mailbox behind `weak`, if it is still alive (later
    /// sends fail; what is queued is dropped).
    close: unsafe fn(ptr::NonNull<()>),
    /// Gives `weak` back.
    release: unsafe fn(ptr::NonNull<()>),
}

// SAFETY: `weak` is a weak reference to a mailbox's shared half, which is
// `Send + Sync` (its maker's contract, `DeadMailbox::new`).
unsafe impl Send for DeadMailbox {}
// SAFETY: as above.
unsafe impl Sync for DeadMailbox {}

impl DeadMailbox {
    /// Wraps an erased weak reference.
    ///
    /// # Safety
    ///
    /// `weak` is a weak reference to something `Send + Sync` that `close`
    /// and `release` are made for: `release` gives it back (once, from
    /// the drop), `close` only reads through it.
    pub(crate) unsafe fn new(
        weak: ptr::NonNull<()>,
        close: unsafe fn(ptr::NonNull<()>),
        release: unsafe fn(ptr::NonNull<()>),
    ) -> Self {
        Self { weak, close, release }
    }

    /// Closes the mailbox (later sends fail) and drops what is queued, if
    /// it is still alive.
    ///
    /// # Safety
    ///
    /// The owning `Mailbox` will never run again (its frame was abandoned):
    /// the caller becomes the queue's single consumer.
    pub(crate) unsafe fn close(&self) {
        // SAFETY: `new`'s contract, and ours.
        unsafe { (self.close)(self.weak) }
    }
}

impl Drop for DeadMailbox {
    fn drop(&mut self) {
        // SAFETY: `new`'s contract: the one give-back.
        unsafe { (self.release)(self.weak) }
    }
}

/// What a trapping actor does with a linked actor's abnormal exit (returns
/// whether it was delivered).
pub(crate) type TrapFn = Box<dyn Fn(&Down) -> bool + Send + Sync>;

// SAFETY: `stack` is written only before the actor is registered or runs
// (its readers come after); `links` is touched only under `links_lock`;
// the rest are atomics or `Sync` (ExitHooks).
unsafe impl Send for Life {}
// SAFETY: as above.
unsafe impl Sync for Life {}

impl Life {
    /// A new `Life` in a block of its own, where its control block is made
    /// later (`crate::actor::cell`). `depths`: count its mailbox's sends
    /// (`Builder::mailbox_depths`). The block comes from `alloc` and goes
    /// back through `free`.
    pub(crate) fn new_block(
        id: u64,
        name: Option<Arc<str>>,
        stack: (usize, usize),
        depths: bool,
        alloc: AllocFn,
        free: FreeFn,
    ) -> LifeRef {
        LifeRef::new(alloc, free, || Life {
            id,
            depths,
            name,
            killed: AtomicBool::new(false),
            hooks: ExitHooks::new(),
            trap: AtomicPtr::new(ptr::null_mut()),
            wait: AtomicU8::new(0),
            wait_fd: crate::sync::AtomicI32::new(-1),
            sent: AtomicU64::new(u64::MAX),
            taken: AtomicU64::new(0),
            stack: RawCell::new(stack),
            recover_overflow: AtomicBool::new(false),
            mailbox: RawCell::new(None),
            links: crate::sync::UnsafeCell::new(alloc::vec::Vec::new()),
            links_lock: AtomicBool::new(false),
        })
    }

    /// A `Life` in a block of the global allocator (models and tests).
    #[cfg(any(test, feature = "internals", smarm_loom))]
    pub(crate) fn detached(id: u64, depths: bool) -> LifeRef {
        Self::new_block(
            id,
            None,
            (0, 0),
            depths,
            crate::actor::cell::global_alloc,
            crate::actor::cell::global_free,
        )
    }

    /// The usable stack range `[lo, hi)`.
    pub(crate) fn stack(&self) -> (usize, usize) {
        // SAFETY: written only before the actor is registered or runs
        // (field doc), which every reader comes after.
        unsafe { *self.stack.get() }
    }

    /// A reserved actor's stack, once spawned.
    ///
    /// # Safety
    ///
    /// Before the actor is registered or runs, once, by its spawn.
    pub(crate) unsafe fn set_stack(&self, range: (usize, usize)) {
        // SAFETY: contract: nobody reads it yet.
        unsafe { *self.stack.get() = range };
    }

    /// Marks the actor as owning a mailbox; returns whether its sends are
    /// to be counted (its depth then shows in dumps).
    pub(crate) fn has_mailbox(&self) -> bool {
        let counted = self.depths && cfg!(feature = "counters");
        if counted {
            // Relaxed: set before the mailbox is shared.
            self.sent.store(0, Ordering::Relaxed);
        }
        counted
    }

    /// A send to the actor's mailbox (the mailbox calls it only when
    /// [`has_mailbox`](Self::has_mailbox) said to count).
    #[inline(always)]
    pub(crate) fn count_sent(&self) {
        // Relaxed: statistics for dumps.
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// A message taken by the mailbox's owner (single writer; called as
    /// [`count_sent`](Self::count_sent) is).
    #[inline(always)]
    pub(crate) fn count_taken(&self) {
        // Relaxed: single writer (the receiver); statistics for dumps.
        let t = self.taken.load(Ordering::Relaxed);
        self.taken.store(t + 1, Ordering::Relaxed);
    }

    /// Messages in the mailbox, if it counts them (`None`: no mailbox,
    /// depths off, or no `counters` feature: `sent` stayed `u64::MAX`).
    pub(crate) fn mailbox_depth(&self) -> Option<u64> {
        // Relaxed: statistics; a send counted before the take it matches
        // may show as one extra.
        let sent = self.sent.load(Ordering::Relaxed);
        if sent == u64::MAX {
            return None;
        }
        Some(sent.saturating_sub(self.taken.load(Ordering::Relaxed)))
    }

    /// Installs the trap (the first call wins; later ones are ignored).
    pub(crate) fn set_trap(&self, f: TrapFn) {
        let p = Box::into_raw(Box::new(f));
        // AcqRel: Release publishes the closure to `trap_exit`'s Acquire.
        if self
            .trap
            .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `p` was never published.
            drop(unsafe { Box::from_raw(p) });
        }
    }

    /// Takes the `links` lock (spinning, then yielding the thread).
    fn lock_links<P: Platform>(&self) {
        let mut backoff = crate::sync::Backoff::new();
        // Acquire: pairs with the Release store in `unlock_links`.
        while self
            .links_lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            if backoff.snooze() {
                P::yield_thread();
            }
        }
    }

    fn unlock_links(&self) {
        // Release: publishes the `links` writes to the next locker.
        self.links_lock.store(false, Ordering::Release);
    }

    /// Runs `f` on both link sets (`self`'s, `other`'s) with both locks
    /// held, taken in id order (no deadlock). Not for a self-link.
    fn with_links<P: Platform, R>(
        &self,
        other: &Life,
        f: impl FnOnce(&mut alloc::vec::Vec<(u64, bool)>, &mut alloc::vec::Vec<(u64, bool)>) -> R,
    ) -> R {
        debug_assert!(!ptr::eq(self, other), "a self-link has no entry");
        let (lo, hi) = if self.id < other.id {
            (self, other)
        } else {
            (other, self)
        };
        lo.lock_links::<P>();
        hi.lock_links::<P>();
        let r = self.links.with_mut(|mine| {
            other.links.with_mut(|theirs| {
                // SAFETY: both locks are held: no other access to either
                // set (two `Life`s: two distinct sets).
                unsafe { f(&mut *mine, &mut *theirs) }
            })
        });
        hi.unlock_links();
        lo.unlock_links();
        r
    }

    /// Records a link with `other` (not `self`) in both sets: whether it
    /// is new (the caller installs the exit hooks), made again over an
    /// `unlink` (the hooks are still pending), or already there.
    pub fn add_link<P: Platform>(&self, other: &Life) -> AddLink {
        let (me, them) = (self.id, other.id);
        self.with_links::<P, _>(other, |mine, theirs| {
            match mine.iter_mut().find(|e| e.0 == them) {
                Some((_, true)) => AddLink::Already,
                Some(e) => {
                    e.1 = true;
                    set_entry(theirs, me, true);
                    AddLink::Relinked
                }
                None => {
                    mine.push((them, true));
                    theirs.push((me, true));
                    AddLink::New
                }
            }
        })
    }

    /// `unlink`: clears the link with `other` in both sets; whether there
    /// was one (an exit that claimed it first leaves none).
    pub(crate) fn remove_link<P: Platform>(&self, other: &Life) -> bool {
        let (me, them) = (self.id, other.id);
        self.with_links::<P, _>(other, |mine, theirs| {
            match mine.iter_mut().find(|e| e.0 == them) {
                Some(e) if e.1 => {
                    e.1 = false;
                    set_entry(theirs, me, false);
                    true
                }
                _ => false,
            }
        })
    }

    /// The exit hook of a link (this actor ended): drops the entry with
    /// `other` from both sets; whether it was linked, so the exit reaches
    /// `other`. Of a racing `unlink` and this, exactly one finds the link.
    pub(crate) fn claim_link<P: Platform>(&self, other: &Life) -> bool {
        let (me, them) = (self.id, other.id);
        self.with_links::<P, _>(other, |mine, theirs| {
            let Some(i) = mine.iter().position(|e| e.0 == them) else {
                return false;
            };
            let linked = mine.swap_remove(i).1;
            theirs.retain(|e| e.0 != me);
            linked
        })
    }

    /// Delivers a linked actor's abnormal exit through the trap, if set.
    pub(crate) fn trap_exit(&self, d: &Down) -> bool {
        // Acquire: pairs with the Release CAS in `set_trap`.
        let p = self.trap.load(Ordering::Acquire);
        // SAFETY: a published trap lives until the `Life` is dropped (the
        // caller holds a reference to it).
        !p.is_null() && unsafe { (*p)(d) }
    }

    /// The actor ended with `reason`: runs its exit hooks.
    pub(crate) fn end(&self, reason: ExitReason) {
        let name = self.name.as_deref();
        crate::seam::trace::exited(self.id, name, &reason, reason.is_abnormal());
        if let ExitReason::Panicked(message) = &reason {
            crate::seam::trace::panicked(self.id, name, message);
        }
        self.hooks.close(Down {
            id: self.id,
            name: self.name.clone(),
            reason,
        });
    }
}

impl Drop for Life {
    fn drop(&mut self) {
        // Relaxed: `&mut self`, as in `ExitHooks::drop`.
        let trap = self.trap.load(Ordering::Relaxed);
        if !trap.is_null() {
            // SAFETY: `&mut self`: nobody else can read the trap any more.
            drop(unsafe { Box::from_raw(trap) });
        }
    }
}

/// Loom models only: the link sets' lock and check
/// (`core/tests/loom_links.rs`), on real `Life`s.
#[cfg(smarm_loom)]
#[doc(hidden)]
pub mod loom_links {
    use alloc::vec::Vec;

    use crate::seam::platform::Platform;

    /// One actor's `Life` (no actor behind it).
    pub struct LinkEnd(crate::actor::cell::LifeRef);

    impl LinkEnd {
        /// A `Life` with id `id`.
        pub fn new(id: u64) -> Self {
            LinkEnd(super::Life::detached(id, false))
        }

        /// `link`'s bookkeeping.
        pub fn link<P: Platform>(&self, other: &LinkEnd) -> super::AddLink {
            self.0.add_link::<P>(&other.0)
        }

        /// `unlink`'s bookkeeping: `true` if a link was removed.
        pub fn unlink<P: Platform>(&self, other: &LinkEnd) -> bool {
            self.0.remove_link::<P>(&other.0)
        }

        /// The exit hook's claim (this end ended): `true` if the exit
        /// reaches `other`.
        pub fn claim<P: Platform>(&self, other: &LinkEnd) -> bool {
            self.0.claim_link::<P>(&other.0)
        }

        /// The entries recorded, `(partner id, linked)` (call once the
        /// linkers are joined).
        pub fn links<P: Platform>(&self) -> Vec<(u64, bool)> {
            self.0.lock_links::<P>();
            // SAFETY: the lock is held.
            let v = self.0.links.with(|l| unsafe { (*l).clone() });
            self.0.unlock_links();
            v
        }
    }
}
