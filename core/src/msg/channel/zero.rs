//! The rendezvous channel: what [`bounded(0)`](fn@super::bounded) makes (as
//! std's `sync_channel(0)` and crossbeam's `bounded(0)`). There is no slot:
//! a send completes only when the receiver takes its value.
//!
//! A rendezvous is a synchronisation point by nature (every message is a
//! meeting of two parties, and usually a park and a wake), so the state is
//! small and sits under one short platform lock ([`Mutex`] on
//! `P::Lock`), held for a few field updates and never while waking,
//! parking or dropping a user's value.
//!
//! # State (under the lock)
//!
//! | field     | meaning                                                       |
//! |-----------|---------------------------------------------------------------|
//! | `offers`  | senders waiting for the receiver, oldest first: `(ticket, waiter, value)`. The value stays in its entry until the receiver takes the entry (the send succeeded) or its own sender takes the entry back (the send failed) |
//! | `rx`      | the receiver: `Idle`; `Recv(waiter)`, blocked in a receive (a sender may hand it a value); `Select(waiter)`, registered by a select (a sender wakes it, and lists its value as usual); `Handed(value)`, a value a sender handed to the blocked receive, not yet returned by it |
//! | `senders` | live sender handles; 0: disconnected                          |
//! | `rx_gone` | the receiver was dropped                                      |
//!
//! Invariants: `rx` is `Recv` or `Select` only while `offers` is empty (the
//! receiver registers only then, and a sender that finds it registered
//! hands it its value or takes the registration); a ticket is listed at
//! most once, and tickets only grow, so `offers` is sorted by ticket.
//!
//! # Protocol (numbered as in the code)
//!
//! Sender (`send`, `send_timeout`; `try_send` is `Z1` alone):
//! 1. `Z1` under the lock: the receiver gone: fail with the value. `rx` is
//!    `Recv(w)`: replace it with `Handed(v)`, unlock, wake `w`: sent (the
//!    receiver, already waiting, is committed to return `v`).
//! 2. `Z2` otherwise, still under the lock: a deadline already passed:
//!    time out with the value; an actor that shutdown is cancelling: fail
//!    with the value (it must not park). Else append `(ticket, waiter, v)`;
//!    if `rx` is `Select(w)`, take it (`rx` becomes `Idle`); unlock; wake it.
//! 3. `Z3` wait: an actor parks (with a deadline, a timer pokes the
//!    ticket: takes the entry's waiter, if still there, and wakes it); a
//!    thread futex-waits on its own word (until the deadline at most).
//! 4. `Z4` under the lock, look for the ticket. Gone: the receiver took the
//!    value: sent. Listed, and the receiver is gone, the deadline passed or
//!    the actor is being cancelled: remove the entry, fail with its value.
//!    Listed otherwise: a spurious wake; back to `Z3` (registering afresh
//!    if the timer took the waiter).
//!
//! Receiver (`recv`, `recv_timeout`; `try_recv`, which a select's poll
//! is, is `V1` alone):
//! 1. `V1` under the lock: `Handed(v)`: take it. Else pop the oldest offer,
//!    take its value; unlock, wake its sender (who finds its ticket gone at
//!    `Z4`). A `Recv` registration of its own left by a spurious wake is
//!    dropped here.
//! 2. `V2` nothing offered: no sender left: disconnected; the deadline
//!    passed: timed out; a cancelled actor: disconnected. Else set
//!    `Recv(waiter)`; unlock.
//! 3. `V3` wait (a receive timer's poke takes the `Recv` registration, if
//!    still there, and wakes it); back to `V1`.
//!
//! A select registers `Select(w)` under the lock unless something is
//! offered, handed or no sender is left (then it is ready); it withdraws
//! by resetting `Select` to `Idle`. The last sender's drop takes a `Recv`
//! or `Select` registration and wakes it (`V2` then sees 0 senders).
//!
//! Receiver's drop: under the lock sets `rx_gone`, takes a `Handed` value
//! (dropped, once unlocked, as a queued message is on the other kinds: its
//! send already succeeded) and every offer's waiter; wakes them: each
//! sender finds its entry still listed at `Z4` with the receiver gone and
//! takes its value back. A sender arriving later fails at `Z1`.
//!
//! Why nothing is lost, duplicated or slept through: every decision is a
//! read-and-write of the state under the one lock, so a value has exactly
//! one owner at a time (the sender's entry, the receiver's `Handed` cell,
//! or whoever removed the entry), and each registration is taken by one
//! party, who wakes it. A party that waits registered first under the lock,
//! and whoever changes what it waits for (a receiver taking an offer, a
//! sender handing a value or offering one to a select, the last sender's
//! drop, the receiver's drop, a timer) takes that registration under the
//! same lock. Waits loop: a wake is a hint to look again.
//!
//! # Kills, timeouts and cancellation
//!
//! - An actor killed (or cancelled) while parked in a send unwinds from its
//!   park; a drop guard removes its entry, so the receiver never takes a
//!   value from a dead sender: the value is dropped with the entry (once
//!   unlocked), as the unwinding sender's other locals are. If the
//!   receiver took it first, the send had completed.
//! - A timed-out send removes its own entry and hands the value back
//!   (`Timeout(v)`); a receiver's take and the expiry are decided under the
//!   lock: exactly one of them gets the value.
//! - An actor killed while parked in a receive leaves: a guard resets its
//!   `Recv` registration. A value handed to it meanwhile (its sender has
//!   returned `Ok`) stays in `Handed` for the next receive, or is dropped
//!   with the receiver.
//!
//! # Memory
//!
//! `offers`' buffer grows to the most senders ever blocked at once and is
//! reused. An actor's wait allocates nothing; a thread's allocates its wake
//! word (`Waiter::current`). The receiver's drop collects the blocked
//! senders' waiters into a vector (once).

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::mem;

use super::bound::Sent;
use super::chan::cancelled;
use super::{Arc, RecvTimeoutError, TryRecvError, TrySendError};
use crate::actor::WAIT_CHANNEL;
use crate::msg::wait::Waiter;
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::seam::lock::Mutex;
use crate::seam::platform::Platform;

/// A blocked sender's entry.
struct Offer<T> {
    ticket: u64,
    /// Its registration; `None` once taken by its timer or the receiver's
    /// drop (who woke it).
    waiter: Option<Waiter>,
    value: T,
}

/// The receiver, as senders see it.
enum Rx<T> {
    Idle,
    /// Blocked in a receive: a sender may hand it a value (`Z1`).
    Recv(Waiter),
    /// Registered by a select: a sender wakes it (`Z2`), no more.
    Select(Waiter),
    /// A value a sender handed to the blocked receive (`Z1`).
    Handed(T),
}

/// The lock-protected state (module doc).
struct State<T> {
    offers: VecDeque<Offer<T>>,
    next_ticket: u64,
    rx: Rx<T>,
    senders: usize,
    rx_gone: bool,
}

impl<T> State<T> {
    /// Where `ticket` is listed, if it is (`offers` is sorted by ticket).
    fn find(&self, ticket: u64) -> Option<usize> {
        self.offers.binary_search_by_key(&ticket, |o| o.ticket).ok()
    }

    /// `Z1`: hands `v` to a receiver blocked in a receive, returning its
    /// waiter to wake; `Err(v)` if none is.
    fn hand(&mut self, v: T) -> Result<Waiter, T> {
        match mem::replace(&mut self.rx, Rx::Idle) {
            Rx::Recv(w) => {
                self.rx = Rx::Handed(v);
                Ok(w)
            }
            other => {
                self.rx = other;
                Err(v)
            }
        }
    }

    /// Takes the receiver's registration (`Recv` or `Select`), if any.
    fn take_rx_waiter(&mut self) -> Option<Waiter> {
        match mem::replace(&mut self.rx, Rx::Idle) {
            Rx::Recv(w) | Rx::Select(w) => Some(w),
            other => {
                self.rx = other;
                None
            }
        }
    }

    /// `V1`: the handed value, else the oldest offer's (with its sender's
    /// waiter to wake). Drops a stale registration of the receiver's own.
    fn take(&mut self) -> Option<(T, Option<Waiter>)> {
        if let Rx::Handed(v) = mem::replace(&mut self.rx, Rx::Idle) {
            return Some((v, None));
        }
        let o = self.offers.pop_front()?;
        Some((o.value, o.waiter))
    }
}

/// The shared state of a rendezvous channel.
pub(super) struct Zero<T, P: Platform> {
    state: Mutex<P::Lock, State<T>>,
}

impl<T, P: Platform> Zero<T, P> {
    /// A connected channel with one sender.
    pub(super) fn new() -> Self {
        Zero {
            state: Mutex::new(State {
                offers: VecDeque::new(),
                next_ticket: 0,
                rx: Rx::Idle,
                senders: 1,
                rx_gone: false,
            }),
        }
    }

    /// A sender handle was cloned.
    pub(super) fn add_sender(&self) {
        self.state.lock().senders += 1;
    }

    /// A sender handle was dropped: the last one wakes a waiting receiver.
    pub(super) fn drop_sender(&self) {
        let w = {
            let mut st = self.state.lock();
            st.senders -= 1;
            if st.senders == 0 {
                st.take_rx_waiter()
            } else {
                None
            }
        };
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Whether the receiver was dropped.
    pub(super) fn is_closed(&self) -> bool {
        self.state.lock().rx_gone
    }

    /// `Z1` alone: sends only to a receiver blocked in a receive now.
    pub(super) fn try_send(&self, v: T) -> Result<(), TrySendError<T>> {
        let w = {
            let mut st = self.state.lock();
            if st.rx_gone {
                return Err(TrySendError::Disconnected(v));
            }
            st.hand(v).map_err(TrySendError::Full)?
        };
        w.wake();
        Ok(())
    }

    /// `V1` alone: a value from a sender waiting now.
    pub(super) fn try_recv(&self) -> Result<T, TryRecvError> {
        let (v, w) = {
            let mut st = self.state.lock();
            match st.take() {
                Some(t) => t,
                None if st.senders == 0 => return Err(TryRecvError::Disconnected),
                None => return Err(TryRecvError::Empty),
            }
        };
        if let Some(w) = w {
            w.wake();
        }
        Ok(v)
    }

    /// A select's registration: `false` if a value is offered or handed,
    /// or no sender is left (nothing stays registered then).
    pub(super) fn register(&self, w: Waiter) -> bool {
        let mut st = self.state.lock();
        if matches!(st.rx, Rx::Handed(_)) || !st.offers.is_empty() || st.senders == 0 {
            return false;
        }
        st.rx = Rx::Select(w);
        true
    }

    /// Takes a select's registration back (a sender or the last sender's
    /// drop that took it first wakes the select once more, harmlessly).
    pub(super) fn withdraw(&self) {
        let mut st = self.state.lock();
        if matches!(st.rx, Rx::Select(_)) {
            st.rx = Rx::Idle;
        }
    }

    /// The receiver's drop (module doc): blocked senders are woken and take
    /// their values back; a handed value is dropped.
    pub(super) fn close_rx(&self) {
        let (handed, waiters) = {
            let mut st = self.state.lock();
            st.rx_gone = true;
            let handed = mem::replace(&mut st.rx, Rx::Idle);
            let waiters: Vec<Waiter> = st.offers.iter_mut().filter_map(|o| o.waiter.take()).collect();
            (handed, waiters)
        };
        drop(handed);
        for w in waiters {
            w.wake();
        }
    }

    /// How many senders are listed (for tests: "the sender is blocked").
    #[cfg(test)]
    pub(super) fn offers(&self) -> usize {
        self.state.lock().offers.len()
    }

    /// A timed send's timer (`Z3`): takes the entry's waiter, if the entry
    /// and its waiter are still there, and wakes it (the sender then sees
    /// its deadline has passed at `Z4`).
    fn poke_sender(&self, ticket: u64) {
        let w = {
            let mut st = self.state.lock();
            match st.find(ticket) {
                Some(i) => st.offers[i].waiter.take(),
                None => None,
            }
        };
        if let Some(w) = w {
            w.wake();
        }
    }

    /// A timed receive's timer (`V3`): takes a `Recv` registration and
    /// wakes it (a `Handed` value is left for the receiver to return).
    fn poke_rx(&self) {
        let w = {
            let mut st = self.state.lock();
            match mem::replace(&mut st.rx, Rx::Idle) {
                Rx::Recv(w) => Some(w),
                other => {
                    st.rx = other;
                    None
                }
            }
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// How `Z4` ended a wait.
enum Found<T> {
    /// The ticket is gone: the receiver took the value.
    Taken,
    /// Still listed, and a spurious wake: wait again.
    Listed,
    /// Removed by the sender itself: the value back, and why.
    Back(Sent<T>),
}

impl<T: Send + 'static, P: Platform> Zero<T, P> {
    /// Sends `v`, waiting until the receiver takes it or `deadline`
    /// (platform ns; `None`: no limit) passes: `Z1`–`Z4`.
    pub(super) fn send(this: &Arc<Self>, v: T, deadline: Option<u64>) -> Sent<T> {
        let (ticket, mut thread, select) = {
            let mut st = this.state.lock();
            if st.rx_gone {
                return Sent::Closed(v);
            }
            // Z1.
            let v = match st.hand(v) {
                Ok(w) => {
                    drop(st);
                    w.wake();
                    sched::safe_point::<P>();
                    return Sent::Ok;
                }
                Err(v) => v,
            };
            // Z2.
            if deadline.is_some_and(|d| P::now_ns() >= d) {
                return Sent::TimedOut(v);
            }
            if cancelled::<P>() {
                return Sent::Closed(v);
            }
            let w = Waiter::current::<P>();
            let thread = thread_of(&w);
            let ticket = st.next_ticket;
            st.next_ticket += 1;
            st.offers.push_back(Offer {
                ticket,
                waiter: Some(w),
                value: v,
            });
            (ticket, thread, st.take_rx_waiter())
        };
        if let Some(w) = select {
            w.wake();
        }
        // Removes the entry on every way out that does not (an actor killed
        // or cancelled while parked unwinds from its park).
        let offered = Offered { z: &**this, ticket };
        loop {
            // Z3.
            match (&thread, deadline) {
                (Some(t), d) => t.wait::<P>(d),
                (None, None) => sched::park::<P>(WAIT_CHANNEL),
                (None, Some(d)) => sched::park_until::<P>(
                    WAIT_CHANNEL,
                    d,
                    PokeWith((this.clone(), ticket), |(z, t): &(Arc<Self>, u64)| {
                        z.poke_sender(*t)
                    }),
                ),
            }
            // Z4.
            match this.look(ticket, deadline, &mut thread) {
                Found::Listed => continue,
                Found::Taken => {
                    mem::forget(offered);
                    sched::safe_point::<P>();
                    return Sent::Ok;
                }
                Found::Back(sent) => {
                    mem::forget(offered);
                    return sent;
                }
            }
        }
    }

    /// `Z4` for `ticket`; re-registers the caller if its timer took its
    /// waiter early (`thread`: the caller's thread waiter, if a thread).
    fn look(&self, ticket: u64, deadline: Option<u64>, thread: &mut Option<Waiter>) -> Found<T> {
        let mut st = self.state.lock();
        let Some(i) = st.find(ticket) else {
            return Found::Taken;
        };
        let timed_out = deadline.is_some_and(|d| P::now_ns() >= d);
        if st.rx_gone || timed_out || cancelled::<P>() {
            // The receiver's drop (and a cancellation) say disconnected,
            // even past the deadline.
            let closed = st.rx_gone || !timed_out;
            if let Some(o) = st.offers.remove(i) {
                let back = if closed {
                    Sent::Closed(o.value)
                } else {
                    Sent::TimedOut(o.value)
                };
                return Found::Back(back);
            }
        }
        if st.offers[i].waiter.is_none() {
            let w = Waiter::current::<P>();
            *thread = thread_of(&w);
            st.offers[i].waiter = Some(w);
        }
        Found::Listed
    }

    /// Receives, waiting until `deadline` (platform ns; `None`: no limit):
    /// `V1`–`V3`.
    pub(super) fn recv(this: &Arc<Self>, deadline: Option<u64>) -> Result<T, RecvTimeoutError> {
        // A safe point: an actor whose timeslice is spent yields here.
        sched::safe_point::<P>();
        loop {
            let thread = {
                let mut st = this.state.lock();
                // V1.
                if let Some((v, w)) = st.take() {
                    drop(st);
                    if let Some(w) = w {
                        w.wake();
                    }
                    return Ok(v);
                }
                // V2.
                if st.senders == 0 {
                    return Err(RecvTimeoutError::Disconnected);
                }
                if deadline.is_some_and(|d| P::now_ns() >= d) {
                    return Err(RecvTimeoutError::Timeout);
                }
                if cancelled::<P>() {
                    return Err(RecvTimeoutError::Disconnected);
                }
                let w = Waiter::current::<P>();
                let thread = thread_of(&w);
                st.rx = Rx::Recv(w);
                thread
            };
            // Resets the registration if a kill unwinds us from the park.
            let waiting = Waiting { z: &**this };
            // V3.
            match (thread, deadline) {
                (Some(t), d) => t.wait::<P>(d),
                (None, None) => sched::park::<P>(WAIT_CHANNEL),
                (None, Some(d)) => sched::park_until::<P>(
                    WAIT_CHANNEL,
                    d,
                    PokeWith(this.clone(), |z: &Arc<Self>| z.poke_rx()),
                ),
            }
            // Back to V1, which drops the registration if still there.
            mem::forget(waiting);
        }
    }
}

/// The caller's thread waiter, to wait on (`None` for an actor, which
/// parks instead).
fn thread_of(w: &Waiter) -> Option<Waiter> {
    match w {
        Waiter::Thread(t) => Some(Waiter::Thread(t.clone())),
        Waiter::Actor(_) => None,
    }
}

/// A sender's listed ticket: dropped while unwinding, removes the entry
/// (and drops its value, once unlocked).
struct Offered<'a, T, P: Platform> {
    z: &'a Zero<T, P>,
    ticket: u64,
}

impl<T, P: Platform> Drop for Offered<'_, T, P> {
    fn drop(&mut self) {
        let gone = {
            let mut st = self.z.state.lock();
            let i = st.find(self.ticket);
            i.and_then(|i| st.offers.remove(i))
        };
        drop(gone);
    }
}

/// A receiver's `Recv` registration: dropped while unwinding, resets it
/// (a value handed meanwhile stays for the next receive).
struct Waiting<'a, T, P: Platform> {
    z: &'a Zero<T, P>,
}

impl<T, P: Platform> Drop for Waiting<'_, T, P> {
    fn drop(&mut self) {
        let stale = {
            let mut st = self.z.state.lock();
            match mem::replace(&mut st.rx, Rx::Idle) {
                Rx::Recv(w) => Some(w),
                other => {
                    st.rx = other;
                    None
                }
            }
        };
        drop(stale);
    }
}
