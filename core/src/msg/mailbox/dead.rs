//! An actor's mailbox as its `Life` holds it ([`DeadMailbox`]): a weak
//! reference to the shared half with its message type erased, so that an
//! overflow recovery, which abandons the frame holding the `Mailbox`, can
//! still close it (sends then fail instead of vanishing).

use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use super::Shared;
use crate::actor::life::DeadMailbox;
use crate::sched::WorkerBlocks;
use crate::seam::platform::Platform;
use crate::sync::block_arc::BlockWeak;

type Weak<M, P> = BlockWeak<Shared<M, P>, WorkerBlocks<P>>;

/// `weak`, erased.
pub(super) fn erase<M: Send, P: Platform>(weak: Weak<M, P>) -> DeadMailbox {
    // SAFETY: `weak` is a `BlockWeak` of a `Shared<M, P>` (`Send + Sync`
    // for `M: Send`), which `close_dead::<M, P>` and `release::<M, P>` are
    // made for.
    unsafe { DeadMailbox::new(BlockWeak::into_raw(weak), close_dead::<M, P>, release::<M, P>) }
}

/// [`DeadMailbox`]'s close: the mailbox behind `weak`, if alive, closed.
///
/// # Safety
///
/// `weak` is a `BlockWeak<Shared<M, P>, _>`'s `into_raw`, still counted;
/// [`DeadMailbox::close`]'s contract.
unsafe fn close_dead<M: Send, P: Platform>(weak: NonNull<()>) {
    // SAFETY: contract; the reference stays with the `DeadMailbox`.
    let weak = ManuallyDrop::new(unsafe { Weak::<M, P>::from_raw(weak) });
    if let Some(s) = weak.upgrade() {
        // SAFETY: contract.
        unsafe { s.close_dead() };
    }
}

/// [`DeadMailbox`]'s release: the weak reference given back.
///
/// # Safety
///
/// `weak` is a `BlockWeak<Shared<M, P>, _>`'s `into_raw`, given back once.
unsafe fn release<M: Send, P: Platform>(weak: NonNull<()>) {
    // SAFETY: contract.
    drop(unsafe { Weak::<M, P>::from_raw(weak) });
}
