//! The wait list every lock of this layer parks on, and how its waiters
//! sleep: the bounded channel's sender wait list (`msg/channel/bounded.rs`:
//! tickets, a short platform lock around a `VecDeque`, a mirror in the
//! lock's own word, a wake passed on when the waiter it was spent on leaves)
//! made generic over what each waiter wants.
//!
//! # Words
//!
//! | field    | meaning                                                        |
//! |----------|----------------------------------------------------------------|
//! | `queue`  | `(ticket, Waiter, want)` in arrival order (a waiter that lost a race after its wake goes back to the front) |
//! | `next`   | the next ticket (tickets only grow: a ticket names one registration) |
//! | `marked` | tickets a waker took off `queue` *and* settled for their waiter (a lock handed over, a semaphore's grant, a condvar timer's expiry): the waiter learns which by [`unmark`](WaitList::unmark) |
//!
//! The list lives under a `seam::lock::Mutex` on the platform's raw lock,
//! held for a few `VecDeque` operations and never across a wait. Each lock
//! keeps a mirror of "someone is listed" in its own state word (a `QUEUED`
//! bit or a count), written only under the list lock, so its uncontended
//! paths never take the list lock.
//!
//! # Protocol (every lock; its module doc adds its own words)
//!
//! Waiter:
//! 1. `W1` under the list lock: re-checks the lock's condition on its state
//!    word and, if it still has to wait, sets the mirror (a CAS that fails
//!    if the word changed since the check) and appends its entry;
//! 2. `W2` with the list lock released, sleeps ([`Me::sleep`]): an actor
//!    parks (`WAIT_LOCK` in dumps; its worker runs other actors), a thread
//!    futex-waits on its own word;
//! 3. `W3` after every return, under the list lock, looks for its ticket:
//!    still listed means the return was spurious (sleep again, `W2`); gone
//!    means a waker took the entry, and woke or is waking it;
//! 4. `W4` a waiter that leaves otherwise (a kill or a shutdown
//!    cancellation unwinds an actor out of its park; a timed wait ends)
//!    withdraws ([`Withdraw`], run on every way out): it removes its entry
//!    if listed; if a waker took it already, that wake was spent on a
//!    waiter that will not use it, and the lock passes it on (each lock's
//!    doc says how; what was handed over with it is given back), so nobody
//!    behind it is stranded.
//!
//! Waker: under the list lock, pops the entries its policy names (clearing
//! the mirror when the list empties), then wakes each with the list lock
//! released (an actor's wake touches the run queues). A batch (a broadcast,
//! a barrier, a run of readers) is popped one entry per list-lock round, so
//! no waker allocates.
//!
//! Why no wake is lost: a waiter sets the mirror under the list lock with a
//! CAS on the lock's word that also checks the condition it waits on; a
//! holder that then releases sees the mirror in that same word (one word,
//! one modification order) and takes the list lock, which orders its pop
//! after the waiter's append. A waker that pops an entry owns it, so each
//! registration is woken at most once (the park invariant).
//!
//! Memory: the queue's buffer grows to the most waiters ever listed at once
//! and is reused; an actor's wait allocates nothing, a thread's allocates
//! its wake word (`Waiter::current`).

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::actor::WAIT_LOCK;
use crate::msg::wait::{ThreadWaiter, Waiter};
use crate::sched;
use crate::sched::timer::Poke;
use crate::seam::platform::Platform;

/// One listed waiter.
pub(crate) struct Entry<K> {
    pub(crate) ticket: u64,
    pub(crate) waiter: Waiter,
    pub(crate) want: K,
}

/// Waiters oldest first (the module doc's words).
pub(crate) struct WaitList<K> {
    queue: VecDeque<Entry<K>>,
    next: u64,
    marked: Vec<u64>,
}

impl<K> WaitList<K> {
    pub(crate) const fn new() -> Self {
        WaitList {
            queue: VecDeque::new(),
            next: 0,
            marked: Vec::new(),
        }
    }

    /// `W1`: lists `waiter` at the back (or, for a waiter that lost its
    /// race after a wake, at the front); returns its ticket.
    pub(crate) fn push(&mut self, waiter: Waiter, want: K, front: bool) -> u64 {
        let ticket = self.next;
        self.next += 1;
        let e = Entry { ticket, waiter, want };
        if front {
            self.queue.push_front(e);
        } else {
            self.queue.push_back(e);
        }
        ticket
    }

    /// The oldest entry, off the list (a waker's take).
    pub(crate) fn pop(&mut self) -> Option<Entry<K>> {
        self.queue.pop_front()
    }

    /// The oldest entry, left listed.
    pub(crate) fn front(&self) -> Option<&Entry<K>> {
        self.queue.front()
    }

    /// `W4`: takes `ticket`'s entry off the list if it is still there.
    pub(crate) fn remove(&mut self, ticket: u64) -> Option<Entry<K>> {
        let i = self.queue.iter().position(|e| e.ticket == ticket)?;
        self.queue.remove(i)
    }

    /// `W3`: whether `ticket` is still listed.
    pub(crate) fn contains(&self, ticket: u64) -> bool {
        self.queue.iter().any(|e| e.ticket == ticket)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// The ticket the next `push` gets: every listed ticket is below it.
    pub(crate) fn next_ticket(&self) -> u64 {
        self.next
    }

    /// A waker settled `ticket` (which it popped) for its waiter.
    pub(crate) fn mark(&mut self, ticket: u64) {
        self.marked.push(ticket);
    }

    /// Whether a waker settled `ticket`; forgets the mark.
    pub(crate) fn unmark(&mut self, ticket: u64) -> bool {
        match self.marked.iter().position(|t| *t == ticket) {
            Some(i) => {
                self.marked.swap_remove(i);
                true
            }
            None => false,
        }
    }
}

/// The caller, registered: [`me`] makes the [`Waiter`] that goes on a list
/// and this handle, with which the caller sleeps (`W2`).
pub(crate) struct Me {
    /// A thread waiter's own word (the list's entry holds the other
    /// reference); `None` for an actor.
    thread: Option<Arc<ThreadWaiter>>,
}

/// A registration for the caller: the running actor, or this thread (a
/// fresh wake word: one registration, one word).
pub(crate) fn me<P: Platform>() -> (Waiter, Me) {
    let w = Waiter::current::<P>();
    let thread = match &w {
        Waiter::Thread(t) => Some(t.clone()),
        Waiter::Actor(_) => None,
    };
    (w, Me { thread })
}

impl Me {
    /// `W2`: sleeps until woken; may return spuriously (callers check
    /// their ticket, `W3`).
    pub(crate) fn sleep<P: Platform>(&self) {
        match &self.thread {
            Some(t) => Waiter::Thread(t.clone()).wait::<P>(None),
            None => sched::park::<P>(WAIT_LOCK),
        }
    }

    /// `W2` with a deadline (ns, platform clock): a thread's wait ends at
    /// it; an actor's is ended by a timer that pokes `poke`, which must
    /// take the caller's registration as a waker would.
    pub(crate) fn sleep_until<P: Platform>(&self, deadline: u64, poke: impl Poke + 'static) {
        match &self.thread {
            Some(t) => Waiter::Thread(t.clone()).wait::<P>(Some(deadline)),
            None => sched::park_until::<P>(WAIT_LOCK, deadline, poke),
        }
    }
}

/// `W4`: runs its closure when dropped (also when an actor unwinds out of
/// its park), unless [`disarm`](Self::disarm)ed first.
pub(crate) struct Withdraw<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Withdraw<F> {
    pub(crate) fn new(f: F) -> Self {
        Withdraw(Some(f))
    }

    /// The wait ended the normal way: nothing to withdraw.
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for Withdraw<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}
