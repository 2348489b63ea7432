//! The runtime dump: every live actor (id, name, state, what it waits on,
//! mailbox depth, worker) and per-worker counters, the way Go prints its
//! goroutines. [`Runtime::dump`](crate::Runtime::dump) takes one; its
//! `Display` prints it.
//!
//!
//! The registry it reads is `crate::sched::registry`.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::actor::{
    Actor, DONE, HELD, NOTIFIED, PARKED, PARKED_LENT, RUNNABLE, RUNNING, WAIT_BLOCKING, WAIT_CHANNEL,
    WAIT_IO_READ, WAIT_IO_WRITE, WAIT_JOIN, WAIT_LOCK, WAIT_MAILBOX, WAIT_TIMER,
};
use crate::sched::counters::CounterSnapshot;
use crate::sched::registry::Shard;
use crate::seam::platform::RawLock;
use crate::sync::Ordering;

/// What an actor is doing, as a dump sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Parked on a lock, condition variable, semaphore or barrier
    /// (`sync::Mutex` and its siblings).
    WaitingLock,
    /// Parked in a sleep (a timer wakes it).
    Sleeping,
    /// Parked until a descriptor becomes readable or writable.
    WaitingIo {
        /// The descriptor.
        fd: i32,
        /// Waiting to write (else to read).
        write: bool,
    },
    /// Parked on something else.
    Parked,
    /// Inside `blocking` (its thread is off the workers).
    Blocking,
}

impl fmt::Display for ActorState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ActorState::WaitingIo { fd, write } => {
                let dir = if *write { "write" } else { "read" };
                return write!(f, "parked on fd {fd} ({dir})");
            }
            ActorState::Running => "running",
            ActorState::Runnable => "runnable",
            ActorState::WaitingMailbox => "parked on its mailbox",
            ActorState::WaitingChannel => "parked on a channel",
            ActorState::WaitingJoin => "parked in a join",
            ActorState::WaitingLock => "parked on a lock",
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
    /// Messages waiting in its mailbox: actors spawned with one, on a
    /// runtime built with [`mailbox_depths`](crate::rt::runtime::Builder::mailbox_depths)
    /// (`None` otherwise).
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
            PARKED | PARKED_LENT | HELD => match wait {
                WAIT_MAILBOX => ActorState::WaitingMailbox,
                WAIT_CHANNEL => ActorState::WaitingChannel,
                WAIT_JOIN => ActorState::WaitingJoin,
                WAIT_LOCK => ActorState::WaitingLock,
                WAIT_TIMER => ActorState::Sleeping,
                WAIT_IO_READ | WAIT_IO_WRITE => ActorState::WaitingIo {
                    fd: a.life.wait_fd.load(Ordering::Relaxed),
                    write: wait == WAIT_IO_WRITE,
                },
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
            stack_size: a.life.stack().1 - a.life.stack().0,
            stack_touched: touched(a.life.stack().0, a.life.stack().1),
        })
    }
}

/// Heap bytes of the runtime's own state per actor, besides its stack: the
/// block holding its control block and its `Life` (id, name, kill flag,
/// exit hooks) with their counts, the join slot (which shares its
/// allocation and count with the body) and, with `mailbox`, the mailbox's
/// shared half (its queue's head and tail on cache lines of their own)
/// with its reference counts, and the registry slot. Counted for a result
/// and messages of no size; the closure the actor runs, a name and queued
/// messages come on top (a parked actor's measured total is in
/// `docs/density.md`).
pub const fn runtime_bytes_per_actor(mailbox: bool) -> usize {
    use core::mem::size_of;
    // A `BlockArc`'s block: strong and weak counts, then the value, as the
    // block cache rounds it (whole lines).
    const fn arc<T>() -> usize {
        crate::lockfree::node_cache::NodeCache::block_layout(crate::sync::block_arc::block_layout_of::<T>())
            .size()
    }
    let base = crate::actor::cell::block_bytes()
        + size_of::<crate::spawn::slot::JoinSlot<()>>()
        + size_of::<*const Actor>();
    if mailbox {
        base + arc::<crate::msg::mailbox::SharedLayout>()
    } else {
        base
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
            s.for_each(|a| {
                if let Some(info) = ActorInfo::of(a, touched) {
                    actors.push(info);
                }
            });
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
        write!(
            f,
            "smarm dump ({}): {} live actors, {} workers; per actor {} B of runtime state \
             ({} with a mailbox) besides its stack",
            self.platform,
            self.actors.len(),
            self.workers.len(),
            runtime_bytes_per_actor(false),
            runtime_bytes_per_actor(true),
        )?;
        let touched = self.actors.iter().map(|a| a.stack_touched).sum::<Option<usize>>();
        if let Some(t) = touched.filter(|_| !self.actors.is_empty()) {
            write!(
                f,
                "; stacks: {} KiB touched in all, {} B per actor",
                t / 1024,
                t / self.actors.len()
            )?;
        }
        writeln!(f)?;
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
