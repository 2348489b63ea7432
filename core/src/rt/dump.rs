//! The runtime dump: every live actor (id, name, state, what it waits on,
//! mailbox depth, worker) and per-worker counters, the way Go prints its
//! goroutines. [`Runtime::dump`](crate::Runtime::dump) takes one; its
//! `Display` prints it.
//!
//! # The registry
//!
//! Each runtime keeps one list of its live actors per worker (and one for
//! plain threads), under its own lock: a spawn appends to its worker's
//! list (an uncontended lock), an exit swap-removes its own entry by the
//! index it keeps. A dump locks each list in turn. (A first design kept
//! weak references swept when the list doubled: a dead entry kept its
//! actor's allocation alive until the sweep, which made spawn_join 1.5x
//! slower: fresh, cold memory for every spawn.)

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::actor::{Actor, DONE, HELD, NOTIFIED, PARKED, RUNNABLE, RUNNING};
use crate::sched::counters::CounterSnapshot;
use crate::seam::platform::RawLock;
use crate::sync::lock::Mutex;
use crate::sync::{AtomicU8, Ordering};

/// What a parked actor waits on (set just before it parks).
pub(crate) const WAIT_NONE: u8 = 0;
/// A mailbox receive.
pub(crate) const WAIT_MAILBOX: u8 = 1;
/// A channel receive or a bounded send.
pub(crate) const WAIT_CHANNEL: u8 = 2;
/// A join.
pub(crate) const WAIT_JOIN: u8 = 3;
/// A sleep.
pub(crate) const WAIT_TIMER: u8 = 4;
/// Inside `blocking` (off the workers).
pub(crate) const WAIT_BLOCKING: u8 = 5;

/// Records what the calling actor is about to wait on (a Relaxed store:
/// a hint for dumps only).
pub(crate) fn waiting_on(a: *const Actor, what: u8) {
    // SAFETY: callers pass the running actor, alive while it runs.
    let a: &Actor = unsafe { &*a };
    let w: &AtomicU8 = &a.life.wait;
    // Relaxed: read only by dumps, which tolerate staleness.
    w.store(what, Ordering::Relaxed);
}

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

/// An actor's place in the registry: `shard << 32 | index`, or
/// [`UNREGISTERED`]. Written only under the shard's lock.
pub(crate) const UNREGISTERED: u64 = u64::MAX;

impl<L: RawLock> Shard<L> {
    pub(crate) fn new() -> Self {
        Shard {
            list: Mutex::new(Entries(Vec::new())),
        }
    }

    /// Registers a new actor (shard number `me`).
    pub(crate) fn add(&self, me: u32, a: &Arc<Actor>) {
        let mut l = self.list.lock();
        // Relaxed: written and read under the shard lock only.
        a.reg
            .store(((me as u64) << 32) | l.0.len() as u64, Ordering::Relaxed);
        l.0.push(Arc::as_ptr(a));
    }

    /// Unregisters an actor that ended (`a` belongs to this shard).
    pub(crate) fn remove(&self, a: &Actor) {
        let mut l = self.list.lock();
        // Relaxed: under the shard lock (see `add`).
        let reg = a.reg.swap(UNREGISTERED, Ordering::Relaxed);
        if reg == UNREGISTERED {
            return;
        }
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

    fn collect(&self, out: &mut Vec<ActorInfo>, touched: fn(usize, usize) -> Option<usize>) {
        let l = self.list.lock();
        for &a in l.0.iter() {
            // SAFETY: a registered actor is alive (see `Shard`).
            if let Some(info) = ActorInfo::of(unsafe { &*a }, touched) {
                out.push(info);
            }
        }
    }

    /// Collects the actors that are parked now (shutdown wakes them).
    pub(crate) fn parked(&self, out: &mut Vec<Arc<Actor>>) {
        let l = self.list.lock();
        for &a in l.0.iter() {
            // SAFETY: a registered actor is alive (see `Shard`); we take a
            // reference of our own before the lock is released.
            let a = unsafe {
                Arc::increment_strong_count(a);
                Arc::from_raw(a)
            };
            // Relaxed: a candidate; the wake's CAS decides. A `HELD` actor
            // (unwinding, waiting in place) is woken to re-check too: at
            // shutdown its waits give up (`sched::unwinding`).
            if matches!(a.state.load(Ordering::Relaxed), PARKED | HELD) {
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

/// What an actor is doing, as a dump sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorState {
    /// On a worker right now.
    Running,
    /// Queued (or in a run-next slot), ready to run.
    Runnable,
    /// Parked on a mailbox receive.
    WaitingMailbox,
    /// Parked on a channel (receive, or a send on a full bounded channel).
    WaitingChannel,
    /// Parked joining another actor.
    WaitingJoin,
    /// Parked in a sleep (a timer wakes it).
    Sleeping,
    /// Parked on something else.
    Parked,
    /// Inside `blocking` (its thread is off the workers).
    Blocking,
}

impl fmt::Display for ActorState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ActorState::Running => "running",
            ActorState::Runnable => "runnable",
            ActorState::WaitingMailbox => "parked on its mailbox",
            ActorState::WaitingChannel => "parked on a channel",
            ActorState::WaitingJoin => "parked in a join",
            ActorState::Sleeping => "sleeping (timer)",
            ActorState::Parked => "parked",
            ActorState::Blocking => "in a blocking call",
        })
    }
}

/// One live actor in a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorInfo {
    /// Its id.
    pub id: u64,
    /// Its name, if it was spawned with one.
    pub name: Option<Arc<str>>,
    /// What it is doing.
    pub state: ActorState,
    /// Messages waiting in its mailbox (actors spawned with one).
    pub mailbox_depth: Option<u64>,
    /// The worker running it (for `Running`).
    pub worker: Option<usize>,
    /// Its usable stack size in bytes.
    pub stack_size: usize,
    /// The stack's high-water mark in bytes, page-granular, if the OS can
    /// tell. Stacks are pooled: this is the deepest use since the stack was
    /// mapped, which may include earlier actors that ran on it.
    pub stack_touched: Option<usize>,
}

impl ActorInfo {
    fn of(a: &Actor, touched: fn(usize, usize) -> Option<usize>) -> Option<Self> {
        // Relaxed: a snapshot for humans; it may be stale by the time it is
        // printed.
        let s = a.state.load(Ordering::Relaxed);
        let wait = a.life.wait.load(Ordering::Relaxed);
        let state = match s {
            DONE => return None,
            RUNNING | NOTIFIED if wait == WAIT_BLOCKING => ActorState::Blocking,
            RUNNING | NOTIFIED => ActorState::Running,
            RUNNABLE => ActorState::Runnable,
            PARKED | HELD => match wait {
                WAIT_MAILBOX => ActorState::WaitingMailbox,
                WAIT_CHANNEL => ActorState::WaitingChannel,
                WAIT_JOIN => ActorState::WaitingJoin,
                WAIT_TIMER => ActorState::Sleeping,
                _ => ActorState::Parked,
            },
            _ => ActorState::Parked,
        };
        Some(ActorInfo {
            id: a.id,
            name: a.life.name.clone(),
            state,
            mailbox_depth: a.life.mailbox_depth(),
            worker: None,
            stack_size: a.life.stack.1 - a.life.stack.0,
            stack_touched: touched(a.life.stack.0, a.life.stack.1),
        })
    }
}

/// A runtime dump: live actors by id, and per-worker counters.
#[derive(Debug, Clone)]
pub struct Dump {
    /// The port (platform) name.
    pub platform: &'static str,
    /// Live actors, by id.
    pub actors: Vec<ActorInfo>,
    /// Per-worker counters, by worker index.
    pub workers: Vec<CounterSnapshot>,
}

impl Dump {
    /// `running[i]`: the id of the actor worker `i` runs (0: none).
    pub(crate) fn collect<L: RawLock>(
        platform: &'static str,
        shards: &[Shard<L>],
        workers: Vec<CounterSnapshot>,
        running: &[u64],
        touched: fn(usize, usize) -> Option<usize>,
    ) -> Self {
        let mut actors = Vec::new();
        for s in shards {
            s.collect(&mut actors, touched);
        }
        actors.sort_by_key(|a| a.id);
        for a in &mut actors {
            if a.state == ActorState::Running {
                a.worker = running.iter().position(|&id| id == a.id);
            }
        }
        Dump {
            platform,
            actors,
            workers,
        }
    }
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "smarm dump ({}): {} live actors, {} workers",
            self.platform,
            self.actors.len(),
            self.workers.len()
        )?;
        for a in &self.actors {
            write!(f, "\nactor {}", a.id)?;
            if let Some(n) = &a.name {
                write!(f, " {:?}", &**n)?;
            }
            write!(f, " [{}", a.state)?;
            if let Some(w) = a.worker {
                write!(f, " on worker {w}")?;
            }
            f.write_str("]")?;
            if let Some(d) = a.mailbox_depth {
                write!(f, " mailbox: {d} queued")?;
            }
            match a.stack_touched {
                Some(t) => write!(f, " stack: {} of {} KiB touched", t / 1024, a.stack_size / 1024)?,
                None => write!(f, " stack: {} KiB", a.stack_size / 1024)?,
            }
        }
        writeln!(f)?;
        for (i, w) in self.workers.iter().enumerate() {
            write!(f, "\nworker {i}: {w}")?;
        }
        writeln!(f)
    }
}
