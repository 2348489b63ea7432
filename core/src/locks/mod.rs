//! Layer 6, locks: actor-aware [`Mutex`], [`RwLock`], [`Condvar`],
//! [`Semaphore`] and [`Barrier`] (each port exports them as `sync::*`
//! with the platform filled in). Built on the messages layer's waiter and
//! the scheduler's park; imports only the layers below.
//!
//! # Why
//!
//! A `std::sync::Mutex` blocks the OS thread. Held by an actor across a
//! safe point (a send, a receive, a yield, `checkpoint()`), it lets another
//! actor on the same worker try to lock it and block that worker's thread,
//! so the holder, queued on the blocked worker, can never run to unlock:
//! a one-worker runtime deadlocks, a larger one loses a worker per waiter.
//! These locks *park* an actor that must wait (its worker runs the others,
//! the holder included) and *block* a plain OS thread, so both kinds of
//! caller can share one lock.
//!
//! # Which to use
//!
//! - `std::sync` locks for short sections that never reach a safe point
//!   (no send, receive, yield, spawn or `checkpoint()` while the guard
//!   lives): cheapest, and no worker can be caught blocked;
//! - these when a guard is held across a safe point, or contention (and so
//!   waiting) is expected: waiting costs a park, not a worker;
//! - channels and mailboxes to hand data over rather than share it.
//!
//! # Semantics
//!
//! std's names and behaviour ([`LockResult`], [`PoisonError`],
//! [`TryLockError`], [`WaitTimeoutResult`]), with these differences: the
//! constructors are not `const`, `T` must be `Sized`, and a guard may be
//! held across a park (an actor holding one may resume on another worker).
//! Poisoning ([`poison`]'s doc): a guard dropped by an unwind poisons its
//! lock, and an actor killed (or cancelled at shutdown) unwinds, so an
//! actor killed while holding a guard poisons the lock, just as a panic
//! would. [`Semaphore`] follows tokio's (`acquire`, `acquire_many`,
//! `add_permits`, `close`), blocking instead of async.
//!
//! A waiter killed (or cancelled at shutdown) while it waits leaves the
//! wait list, and a wake already spent on it goes on to the next waiter,
//! so nobody behind it is stranded (`waitlist.rs`'s doc, `W4`). An actor
//! that has to wait while it unwinds (a guard taken in a destructor) waits
//! on its own thread, as every wait while unwinding does (see
//! `sched`'s "Unwinding"), and waits for as long as it takes: a lock has
//! no way to say "gave up".
//!
//! # Fairness
//!
//! [`Mutex`] and [`RwLock`] wake their waiters in arrival order but let a
//! running caller take a released lock first (barging, as std's): an actor
//! that unlocks and locks again keeps going without a switch, so no lock
//! convoy forms. The overtaking is bounded: a woken waiter that loses the
//! race goes back to the front, and the next unlock hands the lock to it
//! directly (without this an actor re-locking across a yield on one worker
//! would starve its waiters for good). [`RwLock`] prefers writers, as
//! std's. [`Semaphore`] hands permits over strictly first come, first
//! served (tokio's choice, so `acquire_many` is not starved). The
//! measurements are in README's "Locks" section.
//!
//! # Protocols
//!
//! Every lock keeps its waiters on one `WaitList` (`waitlist.rs`: the bounded
//! channel's sender list made generic) under a short platform lock, and a
//! mirror bit in its own state word so uncontended calls never touch it;
//! each module documents its state word and steps. The loom models are in
//! `core/tests/loom_locks.rs`, the Miri tests in `locks/tests.rs`.

mod barrier;
mod condvar;
mod mutex;
pub mod poison;
mod rwlock;
mod semaphore;
pub(crate) mod waitlist;

pub use barrier::{Barrier, BarrierWaitResult};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use mutex::{Mutex, MutexGuard};
pub use poison::{LockResult, PoisonError, TryLockError, TryLockResult};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{AcquireError, Semaphore, SemaphorePermit, TryAcquireError};

#[cfg(all(test, not(smarm_loom)))]
mod tests;
