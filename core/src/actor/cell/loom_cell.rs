//! Loom models only: the block's two counts and the kill's reach into a
//! control block (`core/tests/loom_cell.rs`), on real blocks holding a
//! real `Life` and `Actor` (with an entry and a stack that do nothing).

use core::alloc::Layout;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize as StdCount, Ordering as StdOrdering};

use super::{ActorArc, LifeRef};
use crate::actor::{Actor, Entry, EntryVt, Schedule};
use crate::seam::platform::RawStack;
use crate::sync::{AtomicU32, Ordering};

/// Blocks given back, control blocks dropped (their entries dropped
/// unrun): reset by [`reset`] at the start of each model run.
static FREED: StdCount = StdCount::new(0);
static ENTRIES: StdCount = StdCount::new(0);

/// Zeroes the counts (call first in each model run).
pub fn reset() {
    FREED.store(0, StdOrdering::SeqCst);
    ENTRIES.store(0, StdOrdering::SeqCst);
}

/// Blocks given back so far.
pub fn freed() -> usize {
    FREED.load(StdOrdering::SeqCst)
}

/// Control blocks dropped so far.
pub fn dropped() -> usize {
    ENTRIES.load(StdOrdering::SeqCst)
}

unsafe fn count_free(block: NonNull<u8>, layout: Layout) {
    FREED.fetch_add(1, StdOrdering::SeqCst);
    // SAFETY: a `global_alloc` block (the model's `alloc`).
    unsafe { super::global_free(block, layout) }
}

/// A runtime nobody reaches: a model's actor stays `RUNNABLE`, so a
/// kill's wake never schedules it.
struct NoRuntime;

impl Schedule for NoRuntime {
    fn schedule(&self, _: ActorArc) {
        unreachable!("a model's actor is never parked")
    }
    fn unpark(&self, _: &AtomicU32) {
        unreachable!("a model's actor is never held")
    }
    fn pop_queued(&self, _: usize) -> Option<ActorArc> {
        None
    }
    fn requeue(&self, _: ActorArc, _: usize) {}
    fn nothing_queued_here(&self, _: usize) -> bool {
        true
    }
    fn put_run_next_here(&self, _: ActorArc, _: usize) {}
    fn queue_here(&self, _: ActorArc, _: usize) {}
}

static NO_RUNTIME: NoRuntime = NoRuntime;

unsafe fn never_run(_: NonNull<u8>, _: &Actor) -> Option<ActorArc> {
    unreachable!("a model's actor never runs")
}

unsafe fn count_entry(_: NonNull<u8>) {
    ENTRIES.fetch_add(1, StdOrdering::SeqCst);
}

static VT: EntryVt = EntryVt {
    run: never_run,
    drop: count_entry,
};

unsafe fn no_stack(_: RawStack) {}

/// An actor's `Life` before its control block is made (a reservation).
pub struct Life(LifeRef);

impl Clone for Life {
    fn clone(&self) -> Self {
        Life(self.0.clone())
    }
}

impl Life {
    /// A reserved actor's `Life`, in a block of its own.
    pub fn reserve(id: u64) -> Self {
        Life(crate::actor::life::Life::new_block(
            id,
            None,
            (0, 0),
            false,
            super::global_alloc,
            count_free,
        ))
    }

    /// Makes its control block (`shared`: as a reservation's spawn;
    /// else as a plain spawn, before the `Life` is shared).
    pub fn spawn(self, shared: bool) -> Control {
        let id = self.0.id;
        // SAFETY: the entry's vt neither runs nor reads the body.
        let entry = unsafe { Entry::new(NonNull::dangling(), &VT) };
        let stack = RawStack {
            base: core::ptr::null_mut(),
            len: 0,
            guard: 0,
        };
        let rt = NonNull::from(&NO_RUNTIME as &dyn Schedule);
        // SAFETY: the model spawns each `Life` once.
        Control(unsafe {
            self.0
                .make_actor(shared, |life| Actor::new(id, entry, stack, no_stack, rt, life))
        })
    }

    /// `ActorRef::kill`.
    pub fn kill(&self) {
        self.0.kill();
    }

    /// Whether a kill reached the `Life`.
    pub fn killed(&self) -> bool {
        self.0.killed.load(Ordering::SeqCst)
    }

    /// A reference to the control block, if it lives.
    pub fn upgrade(&self) -> Option<Control> {
        self.0.upgrade().map(Control)
    }
}

/// A reference to a model actor's control block.
#[derive(Clone)]
pub struct Control(ActorArc);

impl Control {
    /// The control block's copy of the kill flag (what the actor checks
    /// at each resume).
    pub fn killed(&self) -> bool {
        self.0.killed.load(Ordering::SeqCst)
    }

    /// A counted reference to its `Life`.
    pub fn life(&self) -> Life {
        Life((*self.0.life).clone())
    }

    /// Its id, read through the control block's reference to its `Life`.
    pub fn id(&self) -> u64 {
        self.0.life.id
    }
}

/// A reference of the block's own type to a model actor's control block.
pub fn arc(c: &Control) -> ActorArc {
    c.0.clone()
}

/// Where the `Life` says its control block is.
pub fn actor_ptr(l: &Life) -> *const Actor {
    l.0.actor_ptr()
}
