//! Exit reasons, kill, monitors and links: how one actor learns of another's
//! end, and how fates are tied (Erlang's model, typed).
//!
//! - Every actor ends with an [`ExitReason`](crate::ExitReason): `Normal` (its closure
//!   returned), `Panicked` (with the message), `Killed` ([`ActorRef::kill`],
//!   or a linked actor's abnormal exit) or `Cancelled` (runtime shutdown).
//! - [`ActorRef::monitor`] gives a [`Monitor`]: one [`Down`] notice with the
//!   reason (at once if the actor already ended);
//!   [`ActorRef::monitor_into`] delivers it as a message of the watcher's
//!   own mailbox type instead.
//! - [`link`] ties the caller and another actor: when either ends
//!   abnormally (`Panicked` or `Killed`), the other is killed — unless it
//!   called [`trap_exits_into`], in which case it receives a [`Down`]
//!   message in its mailbox and carries on. A normal exit breaks the link
//!   quietly. [`spawn_link`] makes the link as it spawns (before the child
//!   runs); [`unlink`] removes one.
//! - [`Monitor::demonitor`] and [`MonitorRef::demonitor`] cancel a monitor.
//!
//! # Links and unlink
//!
//! The first `link` between two actors records an entry in both actors'
//! link sets (`Life::add_link`, both locks held) and installs an exit hook
//! on each side. An exit hook *claims* the link (`Life::claim_link`: the
//! entry leaves both sets) and, if it was linked, propagates the exit;
//! `unlink` clears the entry's `linked` flag under the same locks, leaving
//! the pending hooks in place (a later `link` sets the flag again, without
//! new hooks). So of an `unlink` and the partner's exit racing, exactly
//! one finds the link: `unlink` returns `true` and the exit stays within
//! its actor, or the exit propagates and `unlink` returns `false` (the
//! model: `core/tests/loom_links.rs`).
//!
//! # Demonitor
//!
//! A monitor's hook and its `demonitor` race on one state word: `ACTIVE`,
//! then `SENDING` (the hook won, and delivers) and `DONE`, or `CANCELLED`
//! (demonitor won: the hook will do nothing). A demonitor that loses waits
//! out `SENDING` (a queue push: no wait, no switch), so once it returns
//! the notice is either in the watcher's mailbox or never sent.
//!
//! The data behind them (exit hooks, kill flag, link sets) is
//! `crate::actor::life`'s; this layer adds what needs messages (a monitor is
//! a oneshot, a trap or `monitor_into` sends to a mailbox) and the running
//! actor.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::fmt;
use core::marker::PhantomData;

use crate::actor::exit::Down;
use crate::actor::life::{ActorRef, AddLink, Life};
use crate::actor::LifeRef;
use crate::msg::channel::{oneshot, OneshotReceiver};
use crate::msg::mailbox::{self, Addr, Mailbox};
use crate::seam::error::SpawnError;
use crate::seam::platform::Platform;
use crate::spawn::join::JoinHandle;
use crate::spawn::{spawn_with, Origin};
use crate::sync::{AtomicU8, Backoff, Ordering};

impl<P: Platform> ActorRef<P> {
    /// A monitor: one [`Down`] notice when the actor ends (cancel it with
    /// [`Monitor::demonitor`]).
    pub fn monitor(&self) -> Monitor<P> {
        let (tx, rx) = oneshot::<Down, P>();
        let state = Arc::new(MonitorState::new());
        let st = state.clone();
        self.on_exit(Box::new(move |d: &Down| {
            if st.begin() {
                // The monitor may have been dropped: nobody to tell.
                let _ = tx.send(d.clone());
                st.finish();
            }
        }));
        Monitor { rx, state }
    }

    /// Delivers the [`Down`] notice, mapped by `f`, to the mailbox `to` (an
    /// actor watching several others waits on its one mailbox). A mailbox
    /// closed by then drops it. `f` may carry context (a closure); it runs
    /// once, on the ending actor's exit path (unless the monitor was
    /// cancelled before). The returned [`MonitorRef`] cancels it
    /// ([`MonitorRef::demonitor`]); dropping it leaves the monitor on.
    pub fn monitor_into<M: Send + 'static>(
        &self,
        to: &Addr<M, P>,
        f: impl FnOnce(Down) -> M + Send + 'static,
    ) -> MonitorRef<P> {
        let to = to.clone();
        let state = Arc::new(MonitorState::new());
        let st = state.clone();
        self.on_exit(Box::new(move |d: &Down| {
            if st.is_cancelled() {
                return; // `f` need not run
            }
            // `f` runs outside `SENDING` (it is the caller's code, and may
            // take time); a demonitor racing it drops the message.
            let m = f(d.clone());
            if st.begin() {
                let _ = to.send_notice(m);
                st.finish();
            }
        }));
        MonitorRef {
            state,
            _p: PhantomData,
        }
    }
}

const ACTIVE: u8 = 0;
const SENDING: u8 = 1;
const DONE: u8 = 2;
const CANCELLED: u8 = 3;

/// One monitor's state word (module doc, "Demonitor").
struct MonitorState(AtomicU8);

impl MonitorState {
    fn new() -> Self {
        MonitorState(AtomicU8::new(ACTIVE))
    }

    fn is_cancelled(&self) -> bool {
        // Relaxed: a shortcut only; `begin`'s CAS decides.
        self.0.load(Ordering::Relaxed) == CANCELLED
    }

    /// The hook: `true` if it may deliver (demonitor has not won).
    fn begin(&self) -> bool {
        // Relaxed: the CAS only decides who wins; what the hook delivers
        // is published by `finish`'s Release.
        self.0
            .compare_exchange(ACTIVE, SENDING, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// The hook delivered.
    fn finish(&self) {
        // Release: pairs with `cancel`'s Acquire load of DONE (the notice
        // is in the mailbox before demonitor returns).
        self.0.store(DONE, Ordering::Release);
    }

    /// Demonitor: `true` if the monitor was cancelled before its hook
    /// fired; `false` once the notice is delivered (waiting out a
    /// delivery in progress).
    fn cancel<P: Platform>(&self) -> bool {
        // Acquire on failure: pairs with `finish`'s Release.
        match self
            .0
            .compare_exchange(ACTIVE, CANCELLED, Ordering::Relaxed, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(CANCELLED) => true,
            Err(_) => {
                let mut backoff = Backoff::new();
                // Acquire: pairs with `finish`'s Release.
                while self.0.load(Ordering::Acquire) == SENDING {
                    if backoff.snooze() {
                        P::yield_thread();
                    }
                }
                false
            }
        }
    }
}

/// Cancels a [`monitor_into`](ActorRef::monitor_into): its handle.
pub struct MonitorRef<P: Platform> {
    state: Arc<MonitorState>,
    _p: PhantomData<fn() -> P>,
}

impl<P: Platform> fmt::Debug for MonitorRef<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MonitorRef").finish_non_exhaustive()
    }
}

impl<P: Platform> MonitorRef<P> {
    /// Cancels the monitor (Erlang's `demonitor`): once this returns, no
    /// [`Down`] notice from it will reach the mailbox. `true` if it was
    /// cancelled in time; `false` if the actor's end had already been
    /// delivered. A notice already in the mailbox stays there (Erlang's
    /// `demonitor(Ref, [flush])` removes it; here, receive it with
    /// `recv_matching_timeout(.., Duration::ZERO)` if it matters). The
    /// monitor's hook stays registered, inert, until the actor ends.
    pub fn demonitor(self) -> bool {
        self.state.cancel::<P>()
    }
}

/// Waits for one actor's [`Down`] notice.
pub struct Monitor<P: Platform> {
    rx: OneshotReceiver<Down, P>,
    state: Arc<MonitorState>,
}

impl<P: Platform> fmt::Debug for Monitor<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor").finish_non_exhaustive()
    }
}

impl<P: Platform> Monitor<P> {
    /// Waits for the notice (an actor parks, a thread blocks). `None` if it
    /// can never come (the actor was abandoned at shutdown).
    pub fn recv(self) -> Option<Down> {
        self.rx.recv().ok()
    }

    /// Waits at most `timeout`; `None` if the actor has not ended by then.
    pub fn recv_timeout(&mut self, timeout: core::time::Duration) -> Option<Down> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// The notice, if the actor has ended.
    pub fn try_recv(&mut self) -> Option<Down> {
        self.rx.try_recv().ok()
    }

    /// Cancels the monitor (Erlang's `demonitor`): `true` if its notice
    /// had not been sent, `false` if the actor's end was reported (the
    /// notice is dropped with the monitor either way). The monitor's hook
    /// stays registered, inert, until the actor ends.
    pub fn demonitor(self) -> bool {
        self.state.cancel::<P>()
    }
}

/// A reference to the calling actor; `None` on a plain thread.
pub fn current<P: Platform>() -> Option<ActorRef<P>> {
    let a = crate::sched::current_actor::<P>()?;
    // SAFETY: the running actor is alive while it runs.
    Some(ActorRef::new(unsafe { &(*a).life }))
}

/// Links the calling actor with `other`: when either ends abnormally
/// (`Panicked` or `Killed`) the other is killed, unless it traps exits
/// ([`trap_exits_into`]). Returns `false` on a plain thread (nothing to
/// link). Linking to an actor that already ended abnormally kills the
/// caller at its next resume point, as in Erlang (each such `link` call
/// reports it). Idempotent, as Erlang's: linking again to the same live
/// partner (from either side) adds nothing, and one exit delivers one
/// notice; linking to itself does nothing. [`unlink`] removes it;
/// [`spawn_link`] spawns a child already linked.
pub fn link<P: Platform>(other: &ActorRef<P>) -> bool {
    let Some(me) = current::<P>() else {
        return false;
    };
    if me.life.id != other.life.id {
        link_lives::<P>(&me.life, &other.life);
    }
    true
}

/// Links `me` and `other` (two actors): records the link and, for a new
/// entry, installs the exit hook on each side (`me`'s first: a hook added
/// to an actor that has ended runs at once, and may kill `me`).
fn link_lives<P: Platform>(me: &LifeRef, other: &LifeRef) {
    if me.add_link::<P>(other) != AddLink::New {
        return;
    }
    for (ended, peer) in [(me, other), (other, me)] {
        // Not counted: the hook lives in `ended`'s own `Life`.
        let (ended_p, to_peer) = (OwnLife(&**ended), peer.clone());
        ended
            .hooks
            .add(Box::new(move |d: &Down| exit_of::<P>(&ended_p, &to_peer, d)));
    }
}

/// The `Life` whose exit hook holds this, uncounted (a count would keep
/// the `Life` alive through its own hooks).
struct OwnLife(*const Life);

// SAFETY: a pointer to a `Life` (`Sync`), read only while it is alive
// (`exit_of`'s contract).
unsafe impl Send for OwnLife {}

/// A link's exit hook: `ended` ended with `d`; if the link still holds
/// (no `unlink`, no claim by `peer`'s own exit), kill `peer` or tell it.
fn exit_of<P: Platform>(ended: &OwnLife, peer: &LifeRef, d: &Down) {
    // SAFETY: a hook runs only while its `Life` lives: from its close
    // (`Life::end`, on a reference to it) or from `add` on a list already
    // closed (the adder holds a reference); a hook dropped unrun never
    // reads it.
    let ended = unsafe { &*ended.0 };
    if !ended.claim_link::<P>(peer) || !d.reason.is_abnormal() || peer.hooks.is_closed() {
        return;
    }
    if !peer.trap_exit(d) {
        peer.kill();
    }
}

/// Removes the link between the calling actor and `other`, both ways
/// (Erlang's `unlink`): `true` if there was one, and then no later exit of
/// either reaches the other through it. `false` if there was none: never
/// made, unlinked already, or already claimed by an exit of either (then
/// an abnormal exit of `other` reaches the caller, a kill or a trapped
/// notice, as if it had come before the unlink). As in Erlang, a trapped
/// notice already in the caller's mailbox stays there. `false` on a plain
/// thread. Linking again later makes a new link.
pub fn unlink<P: Platform>(other: &ActorRef<P>) -> bool {
    let Some(me) = current::<P>() else {
        return false;
    };
    me.life.id != other.life.id && me.life.remove_link::<P>(&other.life)
}

/// [`spawn_link`], returning errors instead of panicking
/// ([`SpawnError::NoRuntime`] on a plain thread: nothing to link to).
pub fn try_spawn_link<P, F, T>(f: F) -> Result<JoinHandle<T, P>, SpawnError>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let me = current::<P>().ok_or(SpawnError::NoRuntime)?;
    spawn_with::<P, F, T>(Origin::Here, None, None, |child| {
        link_lives::<P>(&me.life, child);
        f
    })
}

/// Spawns an actor linked to the caller (Erlang's `spawn_link`): the link
/// is made before the child exists for anyone else, so even a child that
/// fails at once (it runs first: spawn is work-first) takes the caller
/// with it, unless the caller traps exits.
///
/// ```ignore
/// // With a port crate (`smarm_linux`, `smarm_darwin`) as `smarm`:
/// let rt = smarm::Runtime::builder().workers(2).build().unwrap();
/// let parent = rt.spawn(|| {
///     let _child = smarm::spawn_link(|| panic!("child fails"));
///     // Killed by the link here (with two workers the parent may resume
///     // before its child runs): the sleep is a resume point that waits.
///     smarm::sleep(std::time::Duration::from_secs(30));
/// });
/// assert!(parent.join().unwrap_err().is_killed());
/// ```
///
/// # Panics
///
/// Outside an actor, or when no stack can be mapped ([`try_spawn_link`]
/// returns these as errors).
pub fn spawn_link<P, F, T>(f: F) -> JoinHandle<T, P>
where
    P: Platform,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match try_spawn_link::<P, F, T>(f) {
        Ok(h) => h,
        Err(e) => panic!("{e}"),
    }
}

/// [`spawn_link`] of an actor with a mailbox: `f` receives the mailbox;
/// the caller gets its address and a join handle. Errors as
/// [`try_spawn_link`].
#[allow(clippy::type_complexity)]
pub fn try_spawn_actor_link<P, M, F, T>(f: F) -> Result<(Addr<M, P>, JoinHandle<T, P>), SpawnError>
where
    P: Platform,
    M: Send + 'static,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    let me = current::<P>().ok_or(SpawnError::NoRuntime)?;
    let mut addr = None;
    let h = spawn_with::<P, _, T>(Origin::Here, None, None, |child| {
        link_lives::<P>(&me.life, child);
        mailbox::bind(child, None, f, &mut addr)
    })?;
    Ok((addr.expect("the body builder ran"), h))
}

/// [`try_spawn_actor_link`], panicking as [`spawn_link`] does.
pub fn spawn_actor_link<P, M, F, T>(f: F) -> (Addr<M, P>, JoinHandle<T, P>)
where
    P: Platform,
    M: Send + 'static,
    F: FnOnce(Mailbox<M, P>) -> T + Send + 'static,
    T: Send + 'static,
{
    match try_spawn_actor_link::<P, M, F, T>(f) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

/// Makes the calling actor trap exits: a linked actor's abnormal exit is
/// delivered to `to` (normally the caller's own mailbox), mapped by `f`,
/// instead of killing the caller. Returns `false` on a plain thread; the
/// first call wins.
///
/// The trap holds `to` weakly: it keeps no mailbox (and so no actor)
/// alive, and a notice for a mailbox that is gone or closed is not
/// delivered, so the link kills the caller instead (it has ended anyway,
/// or it is ending). Context `f` captures lives until the caller's last
/// handle is dropped.
pub fn trap_exits_into<P: Platform, M: Send + 'static>(
    to: &Addr<M, P>,
    f: impl Fn(Down) -> M + Send + Sync + 'static,
) -> bool {
    let Some(a) = crate::sched::current_actor::<P>() else {
        return false;
    };
    let to = to.downgrade();
    // SAFETY: the running actor is alive while it runs.
    unsafe {
        (*a).life.set_trap(Box::new(move |d: &Down| {
            to.upgrade()
                .is_some_and(|to| to.send_notice(f(d.clone())).is_ok())
        }))
    };
    true
}

/// Loom models only: a monitor's state word, the hook's and `demonitor`'s
/// sides (`core/tests/loom_links.rs`).
#[cfg(smarm_loom)]
#[doc(hidden)]
pub mod loom_monitor {
    use crate::seam::platform::Platform;

    /// One monitor's state.
    pub struct MonitorCell(super::MonitorState);

    impl Default for MonitorCell {
        fn default() -> Self {
            MonitorCell(super::MonitorState::new())
        }
    }

    impl MonitorCell {
        /// The exit hook: runs `deliver` unless the monitor was cancelled.
        pub fn fire(&self, deliver: impl FnOnce()) {
            if self.0.is_cancelled() {
                return;
            }
            if self.0.begin() {
                deliver();
                self.0.finish();
            }
        }

        /// `demonitor`: `true` if cancelled before the hook delivered.
        pub fn demonitor<P: Platform>(&self) -> bool {
            self.0.cancel::<P>()
        }
    }
}
