//! Backpressure: the slot accounting and the blocked-sender wait list that
//! make a channel or a mailbox bounded. [`Bound`] sits beside a [`Chan`]
//! (the bounded channel's, or a bounded mailbox's); messages still travel
//! through the `Chan` exactly as on an unbounded one.
//!
//! # Words
//!
//! | word      | meaning                                                            |
//! |-----------|--------------------------------------------------------------------|
//! | `len`     | slots taken, `0..=cap` (more only by [`Bound::force_reserve`]): messages queued plus sends that reserved a slot and have not pushed yet |
//! | `blocked` | senders on the wait list (a mirror of its length, written under its lock) |
//! | `waiters` | the wait list: `(ticket, Waiter)` in arrival order, under a short [`Mutex`] |
//!
//! # Protocol (numbered as in the code)
//!
//! Sender:
//! 1. `B1` reserve: CAS `len` from `n < cap` to `n + 1` (SeqCst); on
//!    success push the message (`S2`–`S3` of [`Chan`]), done;
//! 2. `B2` otherwise, under the lock: if the receiver is gone, fail; else
//!    append `(ticket, waiter)` and store the list's length into `blocked`
//!    (SeqCst);
//! 3. `B3` re-check: reserve again (`B1`'s CAS). On success deregister and
//!    push; if the ticket was already gone from the list, a waker spent a
//!    wake on us that we did not need: pass it to the next waiter (else
//!    that waiter could sleep beside a free slot until the receiver takes
//!    our message: late, though not lost);
//! 4. `B4` wait (park, or futex-wait; with a deadline, a timer takes the
//!    ticket off the list and wakes it, as a receiver would); then
//!    deregister (a spurious wake leaves the ticket listed) and start over
//!    at `B1`, or give up once the deadline has passed.
//!
//! Receiver, after each message it takes:
//! 1. `F1` frees the slot: `len -= 1` (SeqCst);
//! 2. `F2` loads `blocked` (SeqCst); if non-zero, under the lock pops the
//!    oldest waiter, then (unlocked) wakes it.
//!
//! `B2`–`B3` and `F1`–`F2` are a Dekker pair (the receiver park protocol's,
//! on other words): either the sender's re-check sees the freed slot, or
//! the receiver sees the sender listed. So a sender sleeps only on a full
//! channel, and every slot freed while senders are listed wakes the oldest
//! of them, who retries (or, having got a slot without the wake, hands the
//! wake on): no lost wake-ups. Waking is FIFO; a sender arriving meanwhile
//! may still take the freed slot first (it then queues a message, whose
//! receipt frees the next slot and wakes the next waiter).
//!
//! Receiver drop ([`Bound::close`], after the `Chan`'s close): under the
//! lock takes the whole list and wakes every sender, who then fails with
//! the value. A sender checks "receiver gone" under the same lock before it
//! lists itself, so it either sees the flag or is on the list the receiver
//! takes.
//!
//! The lock guards a few `VecDeque` operations only; it is taken by senders
//! on a full channel and by the receiver when `blocked` says someone waits,
//! never on the fast paths. The list's buffer grows to the most senders
//! ever blocked at once and is reused: blocking allocates nothing in steady
//! state (a thread waiter allocates its wake word).

use alloc::collections::VecDeque;

use super::chan::{cancelled, Chan};
use crate::msg::wait::Waiter;
use crate::sched;
use crate::sched::timer::Poke;
use crate::seam::lock::Mutex;
use crate::seam::platform::Platform;
use crate::sync::{AtomicUsize, Ordering, LOOM};

/// Senders blocked on a full channel, oldest first.
struct WaitList {
    queue: VecDeque<(u64, Waiter)>,
    next_ticket: u64,
}

/// A channel's or mailbox's capacity and its blocked senders.
pub(crate) struct Bound<P: Platform> {
    cap: usize,
    len: AtomicUsize,
    blocked: AtomicUsize,
    waiters: Mutex<P::Lock, WaitList>,
}

/// How a send that may wait ended.
pub(crate) enum Sent<T> {
    /// Pushed.
    Ok,
    /// The receiver is gone (or the caller is a cancelled actor): the value.
    Closed(T),
    /// The deadline passed with every slot taken: the value.
    TimedOut(T),
}

/// What a blocked sender's wait ended with.
enum Slot {
    /// `B3` reserved a slot: push now.
    Reserved,
    /// The receiver is gone (or the caller is a cancelled actor).
    Closed,
    /// Woken (or spuriously, or by its deadline): try again from `B1`.
    Retry,
}

impl<P: Platform> Bound<P> {
    /// Room for `cap` messages (at least 1).
    pub(crate) fn new(cap: usize) -> Self {
        debug_assert!(cap > 0);
        let b = Bound {
            cap,
            len: AtomicUsize::new(0),
            blocked: AtomicUsize::new(0),
            waiters: Mutex::new(WaitList {
                queue: VecDeque::new(),
                next_ticket: 0,
            }),
        };
        if LOOM {
            // loom treats initial values as non-SeqCst stores (see `chan`).
            b.len.store(0, Ordering::SeqCst);
            b.blocked.store(0, Ordering::SeqCst);
        }
        b
    }

    /// The capacity.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// `B1` / `B3`: takes a slot if one is free.
    #[inline]
    pub(crate) fn try_reserve(&self) -> bool {
        // SeqCst (load and CAS): the sender's second half of the Dekker
        // pair (`B3` after `B2`'s store).
        let mut n = self.len.load(Ordering::SeqCst);
        while n < self.cap {
            match self
                .len
                .compare_exchange_weak(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
        false
    }

    /// Takes a slot whether or not one is free: for the runtime's own
    /// notices (a `Down` from an exit hook, which must not wait), which
    /// count like any message once queued.
    pub(crate) fn force_reserve(&self) {
        // SeqCst: as every `len` write.
        self.len.fetch_add(1, Ordering::SeqCst);
    }

    /// `F1`–`F2`: the receiver took a message.
    #[inline]
    pub(crate) fn release_slot(&self) {
        // F1. SeqCst: the receiver's first half of the Dekker pair.
        self.len.fetch_sub(1, Ordering::SeqCst);
        // F2. SeqCst: its second half.
        if self.blocked.load(Ordering::SeqCst) != 0 {
            self.wake_one_sender();
        }
    }

    #[cold]
    fn wake_one_sender(&self) {
        let w = Self::pop_waiter(&self.blocked, &mut self.waiters.lock());
        // Woken outside the lock: an actor wake touches the run queues.
        if let Some(w) = w {
            w.wake();
        }
    }

    /// The oldest waiter, off the list (caller holds the lock).
    fn pop_waiter(blocked: &AtomicUsize, list: &mut WaitList) -> Option<Waiter> {
        let (_, w) = list.queue.pop_front()?;
        // SeqCst: as every `blocked` store (`B2`); lowering it early only
        // costs a receiver a lock round that finds nobody.
        blocked.store(list.queue.len(), Ordering::SeqCst);
        Some(w)
    }

    /// A timed send's timer: takes `ticket` off the list, if it is still
    /// there, and wakes it (it then sees its deadline has passed).
    pub(crate) fn wake_ticket(&self, ticket: u64) {
        let w = {
            let mut list = self.waiters.lock();
            let i = list.queue.iter().position(|(t, _)| *t == ticket);
            let w = i.and_then(|i| list.queue.remove(i)).map(|(_, w)| w);
            self.blocked.store(list.queue.len(), Ordering::SeqCst);
            w
        };
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Sends `v` on `chan`, waiting while every slot is taken, until
    /// `deadline` (platform ns) at most; an actor's timed wait is ended by
    /// a timer poking `poke(ticket)` (which must call
    /// [`wake_ticket`](Self::wake_ticket)). `what` says what a parked actor
    /// waits on (for dumps).
    pub(crate) fn send<T, K: Poke + 'static>(
        &self,
        chan: &Chan<T>,
        v: T,
        what: u8,
        deadline: Option<u64>,
        poke: impl Fn(u64) -> K,
    ) -> Sent<T> {
        loop {
            if chan.rx_gone() {
                return Sent::Closed(v);
            }
            // B1.
            if self.try_reserve() {
                chan.push::<P>(v);
                return Sent::Ok;
            }
            if deadline.is_some_and(|d| P::now_ns() >= d) {
                return Sent::TimedOut(v);
            }
            match self.wait_for_slot(chan, what, deadline, &poke) {
                Slot::Reserved => {
                    chan.push::<P>(v);
                    return Sent::Ok;
                }
                Slot::Closed => return Sent::Closed(v),
                Slot::Retry => {}
            }
        }
    }

    /// `B2`–`B4` for a sender that found every slot taken.
    #[cold]
    fn wait_for_slot<T, K: Poke + 'static>(
        &self,
        chan: &Chan<T>,
        what: u8,
        deadline: Option<u64>,
        poke: &impl Fn(u64) -> K,
    ) -> Slot {
        if cancelled::<P>() {
            return Slot::Closed;
        }
        let w = Waiter::current::<P>();
        let thread = match &w {
            Waiter::Thread(t) => Some(t.clone()),
            Waiter::Actor(_) => None,
        };
        // B2.
        let ticket = {
            let mut list = self.waiters.lock();
            // Under the lock: the receiver's drop marks itself gone before
            // it takes the lock to empty the list, so a drop we do not see
            // here comes after our unlock and finds us listed.
            if chan.rx_gone() {
                return Slot::Closed;
            }
            let t = list.next_ticket;
            list.next_ticket += 1;
            list.queue.push_back((t, w));
            // SeqCst: the sender's first half of the Dekker pair.
            self.blocked.store(list.queue.len(), Ordering::SeqCst);
            t
        };
        // Deregisters on every way out of the wait, unwinding included (an
        // actor cancelled at shutdown unwinds from its park): a dead entry
        // left listed would swallow a wake meant for a live sender.
        let listed = Listed { b: self, ticket };
        // B3.
        if self.try_reserve() {
            core::mem::forget(listed);
            self.deregister(ticket, true);
            return Slot::Reserved;
        }
        // B4.
        match (thread, deadline) {
            (Some(t), _) => Waiter::Thread(t).wait::<P>(deadline),
            (None, None) => sched::park::<P>(what),
            (None, Some(d)) => sched::park_until::<P>(what, d, poke(ticket)),
        }
        drop(listed);
        Slot::Retry
    }

    /// Takes `ticket` off the list if it is still there. If it is not, a
    /// waker took it: when we `reserved` a slot without that wake, the wake
    /// goes on to the next waiter.
    fn deregister(&self, ticket: u64, reserved: bool) {
        let pass_on = {
            let mut list = self.waiters.lock();
            if let Some(i) = list.queue.iter().position(|(t, _)| *t == ticket) {
                let stale = list.queue.remove(i);
                self.blocked.store(list.queue.len(), Ordering::SeqCst);
                drop(stale);
                None
            } else if reserved {
                Self::pop_waiter(&self.blocked, &mut list)
            } else {
                None
            }
        };
        if let Some(w) = pass_on {
            w.wake();
        }
    }

    /// The receiver's drop (after its `Chan::close_rx`, which marks it
    /// gone): wakes every blocked sender, who then fails with its value.
    pub(crate) fn close(&self) {
        let waiting = {
            let mut list = self.waiters.lock();
            self.blocked.store(0, Ordering::SeqCst);
            core::mem::take(&mut list.queue)
        };
        for (_, w) in waiting {
            w.wake();
        }
    }
}

/// A sender's ticket on the wait list; dropping it deregisters (`B4`).
struct Listed<'a, P: Platform> {
    b: &'a Bound<P>,
    ticket: u64,
}

impl<P: Platform> Drop for Listed<'_, P> {
    fn drop(&mut self) {
        self.b.deregister(self.ticket, false);
    }
}
