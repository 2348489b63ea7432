//! The runtime's [`tracing`](https://docs.rs/tracing) instrumentation, all
//! of it (the `tracing` feature).
//!
//! Without the feature the same names compile to nothing — [`ActorSpan`]
//! is zero-sized and every function an empty `#[inline(always)]` one, whose
//! arguments are plain values or closures never called — so call sites
//! carry no `cfg` and the default build holds no tracing code (the no-op
//! twin pattern of `sched::counters`).
//!
//! With it, everything is emitted under the target `smarm`:
//!
//! | what | kind, level | fields |
//! |------|-------------|--------|
//! | an actor | span `actor`, INFO, a root span | `id`, `name` (when it has one) |
//! | a spawn | event, DEBUG | `id`, `name`, `parent` (the spawning actor's id; 0 off actors) |
//! | an exit | event, DEBUG (normal, cancelled) or WARN (abnormal) | `id`, `name`, `reason` (its `Display`), `abnormal` |
//! | a panic | event, ERROR | `id`, `name`, `panic` (its message) |
//! | a supervisor's restart | event, WARN, one per child it starts again | `supervisor`, `child` (the spec's name), `id` (the new actor), `cause` (the child whose exit caused it) |
//! | a supervisor giving up | event, ERROR | `supervisor`, `max_restarts`, `period_ms` |
//! | a long hold | event, WARN | `id`, `worker`, `held_ms`, `finished` |
//!
//! # The actor span and the context switch
//!
//! An actor's span is entered on the OS thread that runs it for exactly as
//! long as it runs: the worker enters it just before it switches onto the
//! actor's stack and exits it as soon as the actor switches back
//! (`sched::worker::resume_actor`, every resume goes through it). Enter and
//! exit thus always pair on one thread, in one frame of the worker's own
//! stack, even though the actor itself migrates: its next resume, possibly
//! on another worker, enters the span there. The last exit comes after the
//! actor's final switch, so a joiner (on another worker or a plain thread)
//! may get the result before it is recorded. Events the actor's code emits
//! (its own `tracing::info!`, a log record bridged to tracing) have it as
//! their contextual parent. The span is entered through the subscriber it
//! was created with (`Span::with_subscriber`), not the resuming thread's
//! default: a worker thread need not have the spawner's default set. The
//! span is a root (`parent: None`): a long-lived tree of actors does not
//! keep every ancestor's span open; the spawn event names the parent.

#[cfg(feature = "tracing")]
mod imp {
    use core::fmt;
    use core::time::Duration;

    use tracing::{event, span, Level, Span};

    /// An actor's span (see the module doc), created with the actor and
    /// closed when its control block goes.
    pub struct ActorSpan(Span);

    impl ActorSpan {
        /// The span of actor `id`, named `name` if it has one.
        #[inline]
        pub fn new(id: u64, name: Option<&str>) -> Self {
            ActorSpan(span!(target: "smarm", parent: None, Level::INFO, "actor", id, name))
        }

        /// Enters the span on the calling thread, through the subscriber
        /// that created it (a disabled span: nothing).
        #[inline]
        pub fn enter(&self) {
            self.0.with_subscriber(|(id, d)| d.enter(id));
        }

        /// Exits the span on the calling thread (pairs with [`enter`](Self::enter)).
        #[inline]
        pub fn exit(&self) {
            self.0.with_subscriber(|(id, d)| d.exit(id));
        }
    }

    /// Actor `id` was spawned by the actor `parent()` returns (0: not by an
    /// actor).
    #[inline]
    pub fn spawned(id: u64, name: Option<&str>, parent: impl FnOnce() -> u64) {
        event!(target: "smarm", Level::DEBUG, id, name, parent = parent(), "actor spawned");
    }

    /// Actor `id` ended with `reason`.
    #[inline]
    pub fn exited(id: u64, name: Option<&str>, reason: &dyn fmt::Display, abnormal: bool) {
        if abnormal {
            event!(target: "smarm", Level::WARN, id, name, %reason, abnormal, "actor exited");
        } else {
            event!(target: "smarm", Level::DEBUG, id, name, %reason, abnormal, "actor exited");
        }
    }

    /// Actor `id` panicked with `message` (the field `panic`: `message`
    /// is the event's own).
    #[inline]
    pub fn panicked(id: u64, name: Option<&str>, message: &str) {
        event!(target: "smarm", Level::ERROR, id, name, panic = message, "actor panicked");
    }

    /// Supervisor `supervisor` started its child `child` again as actor
    /// `id`, after actor `cause` ended.
    #[inline]
    pub fn restarted(supervisor: &str, child: &str, id: u64, cause: u64) {
        event!(target: "smarm", Level::WARN, supervisor, child, id, cause, "supervisor restarted a child");
    }

    /// Supervisor `supervisor` exceeded its restart intensity.
    #[inline]
    pub fn gave_up(supervisor: &str, max_restarts: u32, period: Duration) {
        event!(
            target: "smarm",
            Level::ERROR,
            supervisor,
            max_restarts,
            period_ms = period.as_millis() as u64,
            "supervisor gave up: restart intensity exceeded"
        );
    }

    /// Actor `id` held worker `worker` for `held()` without a safe point.
    #[inline]
    pub fn long_hold(id: u64, worker: usize, held: impl FnOnce() -> Duration, finished: bool) {
        event!(
            target: "smarm",
            Level::WARN,
            id,
            worker,
            held_ms = held().as_millis() as u64,
            finished,
            "actor held its worker"
        );
    }
}

#[cfg(not(feature = "tracing"))]
mod imp {
    use core::fmt;
    use core::time::Duration;

    /// The no-op twin: zero-sized.
    pub struct ActorSpan;

    impl ActorSpan {
        /// No-op (the `tracing` feature is off).
        #[inline(always)]
        pub fn new(_id: u64, _name: Option<&str>) -> Self {
            ActorSpan
        }
        /// No-op.
        #[inline(always)]
        pub fn enter(&self) {}
        /// No-op.
        #[inline(always)]
        pub fn exit(&self) {}
    }

    /// No-op (`parent` is never called).
    #[inline(always)]
    pub fn spawned(_id: u64, _name: Option<&str>, _parent: impl FnOnce() -> u64) {}
    /// No-op.
    #[inline(always)]
    pub fn exited(_id: u64, _name: Option<&str>, _reason: &dyn fmt::Display, _abnormal: bool) {}
    /// No-op.
    #[inline(always)]
    pub fn panicked(_id: u64, _name: Option<&str>, _message: &str) {}
    /// No-op.
    #[inline(always)]
    pub fn restarted(_supervisor: &str, _child: &str, _id: u64, _cause: u64) {}
    /// No-op.
    #[inline(always)]
    pub fn gave_up(_supervisor: &str, _max_restarts: u32, _period: Duration) {}
    /// No-op (`held` is never called).
    #[inline(always)]
    pub fn long_hold(_id: u64, _worker: usize, _held: impl FnOnce() -> Duration, _finished: bool) {}
}

pub(crate) use imp::*;
