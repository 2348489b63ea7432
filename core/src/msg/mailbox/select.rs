//! Selective receive: the first message matching a predicate, the others
//! kept in arrival order in the mailbox's save queue (Erlang's `receive`
//! with patterns, and with `after`: [`Mailbox::recv_matching_timeout`]).

use core::time::Duration;

use super::Mailbox;
use crate::sched;
use crate::seam::platform::Platform;

impl<M: Send + 'static, P: Platform> Mailbox<M, P> {
    /// The first message matching `pred` (saved messages first, then new
    /// arrivals), if any is here now; the others keep their order.
    pub fn try_recv_matching(&mut self, mut pred: impl FnMut(&M) -> bool) -> Option<M> {
        if let Some(i) = self.save.iter().position(&mut pred) {
            return self.save.remove(i);
        }
        while let Some(m) = self.pop() {
            if pred(&m) {
                return Some(m);
            }
            self.save.push_back(m);
        }
        None
    }

    /// Selective receive: waits for the first message matching `pred`,
    /// leaving the others in the mailbox in arrival order.
    pub fn recv_matching(&mut self, mut pred: impl FnMut(&M) -> bool) -> M {
        loop {
            if let Some(m) = self.try_recv_matching(&mut pred) {
                return m;
            }
            self.wait(None);
        }
    }

    /// Selective receive with a timeout (Erlang's `receive ... after`):
    /// the first message matching `pred`, waiting at most `timeout`;
    /// `None` if none came. Messages that do not match stay in the mailbox
    /// in arrival order, whether it returns a match or times out; a match
    /// that arrives together with the deadline is returned, not lost (as
    /// for [`recv_timeout`](Self::recv_timeout)).
    ///
    /// ```ignore
    /// enum Msg { Reply(u64, String), Other(u32) }
    /// // Wait 50 ms for the reply to request 7; other messages wait their turn.
    /// match mb.recv_matching_timeout(Duration::from_millis(50), |m| matches!(m, Msg::Reply(7, _))) {
    ///     Some(Msg::Reply(_, body)) => println!("{body}"),
    ///     _ => println!("no reply in time"),
    /// }
    /// ```
    pub fn recv_matching_timeout(
        &mut self,
        timeout: Duration,
        mut pred: impl FnMut(&M) -> bool,
    ) -> Option<M> {
        let deadline_ns = sched::deadline_after::<P>(timeout);
        self.take_until(deadline_ns, |mb| mb.try_recv_matching(&mut pred))
    }

    /// Messages in the save queue (skipped by selective receives).
    pub fn saved(&self) -> usize {
        self.save.len()
    }
}
