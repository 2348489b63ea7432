//! Layer 5, messages: actor mailboxes ([`mailbox`]), channels
//! ([`channel`]: unbounded, bounded, oneshot) and the waiter both park
//! through ([`wait`]). Built on the scheduler's park and wake.

pub mod channel;
pub mod mailbox;
pub mod select;
pub(crate) mod wait;
