//! Supervisors: an actor that starts children from specs, watches them
//! (monitors delivered into its own mailbox) and restarts them per
//! strategy, within a restart intensity, escalating when it is exceeded
//! (OTP's supervisor, typed).
//!
//! - **Start order**: children start in spec order; they are stopped in
//!   reverse order (a kill, then the supervisor waits for that child's
//!   `Down` with a selective receive, so other notices stay queued).
//! - **Strategies**: [`Strategy::OneForOne`] restarts the child that ended;
//!   [`Strategy::OneForAll`] stops the others and restarts all;
//!   [`Strategy::RestForOne`] stops and restarts the children started after
//!   it, and it.
//! - **Restart types**: a [`Restart::Permanent`] child is always restarted,
//!   a [`Restart::Transient`] one only after an abnormal exit, a
//!   [`Restart::Temporary`] one never.
//! - **Intensity**: at most `max_restarts` restarts within `period` (on the
//!   spec's clock, the platform's by default, a test's own when given). One
//!   more stops every child in reverse start order and ends the supervisor
//!   by panicking with the reason, so *its* supervisor sees an abnormal exit
//!   (escalation up the tree).
//! - **The whole subtree stops with it**: a supervisor that ends any other
//!   way — killed (by its own supervisor's stop, a link, a user), a start
//!   closure that panics on restart, a shutdown — stops its running
//!   children first, last started first, each to its end (a child
//!   supervisor stops its own children before it ends: depth first, as
//!   OTP's `shutdown`). It waits for each while it unwinds (sched's
//!   "Unwinding": the wait holds no worker); at runtime shutdown it kills
//!   them without waiting. A kill that reaches the supervisor while a
//!   start closure runs takes effect once that child is recorded, so it is
//!   stopped with the others.
//! - **Exactly once**: each child's end arrives as one `Down` message (the
//!   monitor's exit hook runs once); a notice for a child already replaced
//!   is recognised by its id and ignored.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::time::Duration;

use crate::actor::exit::Down;
use crate::actor::life::ActorRef;
use crate::msg::channel::Sender;
use crate::msg::mailbox::{Addr, Mailbox};
use crate::seam::platform::Platform;

/// Which children a restart takes along.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Strategy {
    /// Only the child that ended.
    OneForOne,
    /// Every child (the others are stopped first, in reverse start order).
    OneForAll,
    /// The child that ended and every child started after it.
    RestForOne,
}

/// When a child is restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Restart {
    /// After any exit.
    Permanent,
    /// After an abnormal exit (panic or kill) only.
    Transient,
    /// Never.
    Temporary,
}

/// Starts one child: spawns it (from inside the supervisor, an actor) and
/// returns a reference to it.
pub type StartFn<P> = Arc<dyn Fn() -> ActorRef<P> + Send + Sync>;

/// How to start and restart one child.
pub struct ChildSpec<P: Platform> {
    /// For events and reports.
    pub name: String,
    /// Spawns the child.
    pub start: StartFn<P>,
    /// When to restart it.
    pub restart: Restart,
}

impl<P: Platform> Clone for ChildSpec<P> {
    fn clone(&self) -> Self {
        ChildSpec {
            name: self.name.clone(),
            start: self.start.clone(),
            restart: self.restart,
        }
    }
}

impl<P: Platform> ChildSpec<P> {
    /// A permanent child named `name`, started by `start`.
    pub fn new(name: &str, start: impl Fn() -> ActorRef<P> + Send + Sync + 'static) -> Self {
        ChildSpec {
            name: String::from(name),
            start: Arc::new(start),
            restart: Restart::Permanent,
        }
    }

    /// Sets the restart type.
    pub fn restart(mut self, r: Restart) -> Self {
        self.restart = r;
        self
    }
}

/// What a supervisor reports on its event channel (if given), in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SupervisorEvent {
    /// A child was started (first start or restart).
    Started {
        /// The spec's name.
        child: String,
        /// The new actor's id.
        id: u64,
    },
    /// A child ended (reported once per end).
    Exited {
        /// The spec's name.
        child: String,
        /// The notice.
        down: Down,
    },
    /// The restart intensity was exceeded: the supervisor stops its
    /// children and ends abnormally.
    GaveUp,
    /// The supervisor was asked to stop and did (children stopped).
    Stopped,
}

/// A supervisor's configuration.
pub struct SupervisorSpec<P: Platform> {
    /// The supervisor's name (in its panic message when it gives up).
    pub name: String,
    /// Which children a restart takes along.
    pub strategy: Strategy,
    /// At most this many restarts ...
    pub max_restarts: u32,
    /// ... within this period.
    pub period: Duration,
    /// The children, in start order.
    pub children: Vec<ChildSpec<P>>,
    /// The clock intensity is measured on: the time since any fixed
    /// start (default: the platform's monotonic clock). Tests pass a clock
    /// they advance by hand.
    pub clock: Option<Arc<dyn Fn() -> Duration + Send + Sync>>,
    /// Where to report events (optional).
    pub events: Option<Sender<SupervisorEvent, P>>,
}

impl<P: Platform> SupervisorSpec<P> {
    /// A supervisor with `strategy` and intensity `max_restarts` in
    /// `period`, no children yet.
    pub fn new(name: &str, strategy: Strategy, max_restarts: u32, period: Duration) -> Self {
        SupervisorSpec {
            name: String::from(name),
            strategy,
            max_restarts,
            period,
            children: Vec::new(),
            clock: None,
            events: None,
        }
    }

    /// Adds a child (started after the ones added before).
    pub fn child(mut self, c: ChildSpec<P>) -> Self {
        self.children.push(c);
        self
    }

    /// Measures intensity on `clock` (the time since any fixed start)
    /// instead of the platform's monotonic clock.
    pub fn clock(mut self, clock: impl Fn() -> Duration + Send + Sync + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Reports events to `tx`.
    pub fn events(mut self, tx: Sender<SupervisorEvent, P>) -> Self {
        self.events = Some(tx);
        self
    }
}

/// A supervisor's mailbox message.
pub enum SupervisorMsg {
    /// A child's end (from its monitor).
    Down(Down),
    /// Stop: the children in reverse start order, then the supervisor
    /// (normally).
    Stop,
}

/// The supervisor's state.
struct Sup<P: Platform> {
    spec: SupervisorSpec<P>,
    me: Addr<SupervisorMsg, P>,
    /// The running child per spec (None: not running).
    running: Vec<Option<ActorRef<P>>>,
    /// Restart times within the window.
    restarts: VecDeque<u64>,
}

/// The body of a supervisor actor: spawn it with a mailbox, e.g.
/// `rt.spawn_actor(move |mb| supervise(mb, spec))`; send
/// [`SupervisorMsg::Stop`] to its address to stop it. Returns normally when
/// stopped; panics (an abnormal exit) when the restart intensity is
/// exceeded, after stopping its children.
pub fn supervise<P: Platform>(mut mb: Mailbox<SupervisorMsg, P>, spec: SupervisorSpec<P>) {
    let n = spec.children.len();
    let mut s = Sup {
        me: mb.addr(),
        running: (0..n).map(|_| None).collect(),
        restarts: VecDeque::new(),
        spec,
    };
    for i in 0..n {
        s.start(i);
    }
    loop {
        // `Err` only for a supervisor that runtime shutdown cancels (it
        // holds its own address): its children are being cancelled too.
        let Ok(msg) = mb.recv() else {
            return;
        };
        match msg {
            SupervisorMsg::Stop => {
                s.stop_range(&mut mb, 0..n);
                s.event(SupervisorEvent::Stopped);
                return;
            }
            SupervisorMsg::Down(d) => {
                let Some(i) = s.index_of(d.id) else {
                    continue; // a child already stopped and replaced
                };
                s.running[i] = None;
                let cause = d.id;
                let abnormal = d.reason.is_abnormal();
                s.event(SupervisorEvent::Exited {
                    child: s.spec.children[i].name.clone(),
                    down: d,
                });
                let restart = match s.spec.children[i].restart {
                    Restart::Permanent => true,
                    Restart::Transient => abnormal,
                    Restart::Temporary => false,
                };
                if !restart {
                    continue;
                }
                if !s.may_restart() {
                    crate::seam::trace::gave_up(&s.spec.name, s.spec.max_restarts, s.spec.period);
                    s.stop_range(&mut mb, 0..n);
                    s.event(SupervisorEvent::GaveUp);
                    panic!(
                        "supervisor {}: restart intensity exceeded ({} restarts in {:?})",
                        s.spec.name, s.spec.max_restarts, s.spec.period
                    );
                }
                let range = match s.spec.strategy {
                    Strategy::OneForOne => i..i + 1,
                    Strategy::OneForAll => 0..n,
                    Strategy::RestForOne => i..n,
                };
                s.stop_range(&mut mb, range.clone());
                for j in range {
                    s.start(j);
                    if let Some(r) = &s.running[j] {
                        crate::seam::trace::restarted(&s.spec.name, &s.spec.children[j].name, r.id(), cause);
                    }
                }
            }
        }
    }
}

impl<P: Platform> Drop for Sup<P> {
    /// The supervisor ends with children still running (it was killed, or
    /// a start panicked): stop them, last started first, each to its end.
    fn drop(&mut self) {
        for i in (0..self.running.len()).rev() {
            let Some(r) = self.running[i].take() else {
                continue;
            };
            let down = r.monitor();
            r.kill();
            // `None`: the runtime is shutting down (the wait gives up; the
            // child is being cancelled anyway).
            if let Some(d) = down.recv() {
                self.event(SupervisorEvent::Exited {
                    child: self.spec.children[i].name.clone(),
                    down: d,
                });
            }
        }
    }
}

impl<P: Platform> Sup<P> {
    fn now(&self) -> u64 {
        match &self.spec.clock {
            Some(c) => c().as_nanos().min(u128::from(u64::MAX)) as u64,
            None => P::now_ns(),
        }
    }

    fn event(&self, e: SupervisorEvent) {
        if let Some(tx) = &self.spec.events {
            // A dropped receiver means nobody listens: fine.
            let _ = tx.send(e);
        }
    }

    fn index_of(&self, id: u64) -> Option<usize> {
        self.running
            .iter()
            .position(|r| r.as_ref().is_some_and(|r| r.id() == id))
    }

    /// Records a restart if the intensity allows it.
    fn may_restart(&mut self) -> bool {
        let now = self.now();
        let window = self.spec.period.as_nanos().min(u64::MAX as u128) as u64;
        while self
            .restarts
            .front()
            .is_some_and(|&t| now.saturating_sub(t) >= window)
        {
            self.restarts.pop_front();
        }
        if self.restarts.len() as u32 >= self.spec.max_restarts {
            return false;
        }
        self.restarts.push_back(now);
        true
    }

    /// Starts child `i`. A kill (or shutdown) that reaches the supervisor
    /// while the start closure runs takes effect once the child is
    /// recorded, so stopping the supervisor stops it too.
    fn start(&mut self, i: usize) {
        let c = &self.spec.children[i];
        let r = crate::sched::defer_kills::<P, _>(|| {
            let r = (c.start)();
            r.monitor_into(&self.me, SupervisorMsg::Down);
            r
        });
        let id = r.id();
        self.running[i] = Some(r);
        self.event(SupervisorEvent::Started {
            child: self.spec.children[i].name.clone(),
            id,
        });
    }

    /// Stops the running children in `range`, last first: kill, then wait
    /// for that child's own `Down` (other messages stay queued).
    fn stop_range(&mut self, mb: &mut Mailbox<SupervisorMsg, P>, range: core::ops::Range<usize>) {
        for i in range.rev() {
            let Some(r) = self.running[i].take() else {
                continue;
            };
            r.kill();
            let id = r.id();
            // `Err`: the runtime is shutting down (the wait gives up; the
            // child is being cancelled anyway).
            let m = mb.recv_matching(|m| matches!(m, SupervisorMsg::Down(d) if d.id == id));
            if let Ok(SupervisorMsg::Down(d)) = m {
                self.event(SupervisorEvent::Exited {
                    child: self.spec.children[i].name.clone(),
                    down: d,
                });
            }
        }
    }
}
