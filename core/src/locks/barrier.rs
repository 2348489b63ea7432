//! [`Barrier`]: `std::sync::Barrier`'s API; the parties that wait before
//! the last one arrives park (actors) or block (threads).
//!
//! # Words (all under the list lock)
//!
//! | field        | meaning                                                |
//! |--------------|--------------------------------------------------------|
//! | `arrived`    | parties of the current generation waiting now          |
//! | `generation` | how many times the barrier has released (it is reusable) |
//! | `list`       | the waiters, each with the generation it arrived in    |
//!
//! # Protocol (numbered as in the code)
//!
//! 1. `B1` under the lock: count the arrival. The `n`-th is the leader:
//!    it resets `arrived`, bumps `generation` and (`B3`) releases the
//!    others; every other party appends `(ticket, waiter, generation)`;
//! 2. `B2` (`W2`–`W3`) sleep until taken off the list;
//! 3. `B3` the leader pops every entry of its generation (the front of the
//!    list: a later generation's entries come behind), one per lock round,
//!    and wakes it.
//!
//! A party unwound out of `B2` (a kill, a shutdown cancellation) that is
//! still listed withdraws its arrival if its generation is still the
//! current one (`arrived -= 1`: the barrier then waits for another
//! party, as if this one had never come); one whose generation was
//! released already was released, and nothing changes. So a killed party
//! never makes a generation release early, and never spoils the count of
//! the next.

use core::fmt;

use super::waitlist::{me, WaitList, Withdraw};
use crate::seam::lock::Mutex as ListLock;
use crate::seam::platform::Platform;

/// The barrier's words (module doc).
pub(super) struct State {
    pub(super) arrived: usize,
    pub(super) generation: u64,
    pub(super) list: WaitList<u64>,
}

/// A reusable barrier for `n` parties, actors and threads alike: each
/// `wait` returns once `n` parties have called it, and exactly one of them
/// per generation is told it is the leader.
pub struct Barrier<P: Platform> {
    n: usize,
    pub(super) state: ListLock<P::Lock, State>,
}

/// What [`Barrier::wait`] returns: whether the caller was the leader.
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// `true` for exactly one party of each generation (the last to
    /// arrive).
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl fmt::Debug for BarrierWaitResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BarrierWaitResult")
            .field("is_leader", &self.0)
            .finish()
    }
}

impl<P: Platform> Barrier<P> {
    /// A barrier that releases every `n` waits (`n` of 0 or 1: every
    /// `wait` returns at once, as the leader).
    pub fn new(n: usize) -> Self {
        Barrier {
            n,
            state: ListLock::new(State {
                arrived: 0,
                generation: 0,
                list: WaitList::new(),
            }),
        }
    }

    /// Waits until `n` parties have called `wait` (counting this one).
    pub fn wait(&self) -> BarrierWaitResult {
        let (w, me) = me::<P>();
        // B1.
        let (ticket, generation) = {
            let mut st = self.state.lock();
            st.arrived += 1;
            if st.arrived >= self.n {
                st.arrived = 0;
                let g = st.generation;
                st.generation += 1;
                drop(st);
                self.release(g);
                return BarrierWaitResult(true);
            }
            let g = st.generation;
            (st.list.push(w, g, false), g)
        };
        let withdraw = Withdraw::new(move || self.withdraw(ticket, generation));
        // B2.
        loop {
            me.sleep::<P>();
            if !self.state.lock().list.contains(ticket) {
                break;
            }
        }
        withdraw.disarm();
        BarrierWaitResult(false)
    }

    /// `B3`: wakes every party of `generation`.
    fn release(&self, generation: u64) {
        loop {
            let e = {
                let mut st = self.state.lock();
                match st.list.front() {
                    Some(f) if f.want == generation => st.list.pop(),
                    _ => None,
                }
            };
            match e {
                Some(e) => e.waiter.wake(),
                None => return,
            }
        }
    }

    /// `W4`: a party that leaves before its generation released takes its
    /// arrival back.
    pub(super) fn withdraw(&self, ticket: u64, generation: u64) {
        let mut st = self.state.lock();
        if st.list.remove(ticket).is_some() && st.generation == generation {
            st.arrived -= 1;
        }
    }
}

impl<P: Platform> fmt::Debug for Barrier<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}
