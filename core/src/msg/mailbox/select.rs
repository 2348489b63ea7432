//! Selective receive: the first message matching a predicate, the others
//! kept in arrival order in the mailbox's save queue (Erlang's `receive`
//! with patterns, and with `after`: [`Mailbox::recv_matching_timeout`]).

use alloc::collections::VecDeque;
use core::time::Duration;

use super::{Mailbox, RxFlags, Shared};
use crate::actor::WAIT_MAILBOX;
use crate::msg::channel::chan::Chan;
use crate::msg::channel::{RecvError, RecvTimeoutError, TryRecvError};
use crate::sched;
use crate::sched::timer::PokeWith;
use crate::seam::platform::Platform;

/// The first message matching `pred`: the save queue first, then new
/// arrivals (non-matching ones join the save queue). `Disconnected` when
/// nothing matches, the queue is drained and no address is left.
///
/// # Safety
///
/// Receiver only (the queue's single consumer), with its `Mailbox`'s
/// flags.
unsafe fn take_matching<M, P: Platform>(
    shared: &Shared<M, P>,
    flags: RxFlags,
    save: &mut VecDeque<M>,
    pred: &mut impl FnMut(&M) -> bool,
) -> Result<M, TryRecvError> {
    if let Some(i) = save.iter().position(&mut *pred) {
        return Ok(save.remove(i).expect("found above"));
    }
    loop {
        // SAFETY: forwarded contract.
        let m = unsafe { shared.pop(flags) }?;
        if pred(&m) {
            return Ok(m);
        }
        save.push_back(m);
    }
}

impl<M: Send + 'static, P: Platform> Mailbox<M, P> {
    /// The first message matching `pred` (saved messages first, then new
    /// arrivals), if any is here now; the others keep their order.
    /// `Disconnected` when none can come any more (no match is saved and
    /// no `Addr` is left).
    pub fn try_recv_matching(&mut self, mut pred: impl FnMut(&M) -> bool) -> Result<M, TryRecvError> {
        // SAFETY: `&mut self`: the single consumer.
        unsafe { take_matching(&self.shared, self.flags, &mut self.save, &mut pred) }
    }

    /// Selective receive: waits for the first message matching `pred`,
    /// leaving the others in the mailbox in arrival order. `Err` once no
    /// match can come (none is saved and no `Addr` is left).
    pub fn recv_matching(&mut self, mut pred: impl FnMut(&M) -> bool) -> Result<M, RecvError> {
        let Mailbox { shared, save, flags } = self;
        // SAFETY: `&mut self`: the single consumer.
        let take = |_: &Chan<M>| unsafe { take_matching(shared, *flags, save, &mut pred) };
        // SAFETY: as above.
        unsafe { shared.chan.recv_with::<P, _>(WAIT_MAILBOX, take) }.map(|(m, _)| m)
    }

    /// Selective receive with a timeout (Erlang's `receive ... after`):
    /// the first message matching `pred`, waiting at most `timeout`;
    /// `Timeout` if none came, `Disconnected` if none can come. Messages
    /// that do not match stay in the mailbox in arrival order, whether it
    /// returns a match or times out; a match that arrives together with
    /// the deadline is returned, not lost (as for
    /// [`recv_timeout`](Self::recv_timeout)).
    ///
    /// ```ignore
    /// enum Msg { Reply(u64, String), Other(u32) }
    /// // Wait 50 ms for the reply to request 7; other messages wait their turn.
    /// match mb.recv_matching_timeout(Duration::from_millis(50), |m| matches!(m, Msg::Reply(7, _))) {
    ///     Ok(Msg::Reply(_, body)) => println!("{body}"),
    ///     _ => println!("no reply in time"),
    /// }
    /// ```
    pub fn recv_matching_timeout(
        &mut self,
        timeout: Duration,
        mut pred: impl FnMut(&M) -> bool,
    ) -> Result<M, RecvTimeoutError> {
        let deadline_ns = sched::deadline_after::<P>(timeout);
        let Mailbox { shared, save, flags } = self;
        // SAFETY: `&mut self`: the single consumer.
        let take = |_: &Chan<M>| unsafe { take_matching(shared, *flags, save, &mut pred) };
        let poke = || {
            PokeWith(shared.clone(), |s: &super::SharedRef<M, P>| {
                s.chan.wake_receiver()
            })
        };
        // SAFETY: as above.
        unsafe {
            shared
                .chan
                .recv_deadline_with::<P, _>(WAIT_MAILBOX, deadline_ns, poke, take)
        }
    }

    /// Messages in the save queue (skipped by selective receives).
    pub fn saved(&self) -> usize {
        self.save.len()
    }
}
