//! How an actor ended, as the runtime reports it: the [`ExitReason`] every
//! actor ends with, the [`Down`] notice monitors and trapping links
//! receive, the [`Killed`] unwind payload, and the [`JoinError`] a joiner
//! gets instead of a value (with a panic's payload, [`CaughtPanic`]). Plain
//! data, shared by every layer above.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use core::any::Any;
use core::fmt;

use crate::actor::Cancelled;
use crate::seam::platform::PanicPayload;

/// How an actor ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExitReason {
    /// Its closure returned.
    Normal,
    /// It panicked, with this message.
    Panicked(String),
    /// It was killed ([`ActorRef::kill`](crate::ActorRef::kill), or a linked actor ended abnormally).
    Killed,
    /// The runtime shut down before it ended.
    Cancelled,
    /// It overflowed its stack and had opted in to
    /// [`recover_overflow`](crate::sched::overflow::recover_overflow): its frames were
    /// abandoned without unwinding (what they owned leaked).
    StackOverflow {
        /// The stack's usable bytes.
        stack_size: usize,
    },
}

impl ExitReason {
    /// Whether linked actors are killed by it (`Panicked` or `Killed`).
    pub fn is_abnormal(&self) -> bool {
        matches!(
            self,
            ExitReason::Panicked(_) | ExitReason::Killed | ExitReason::StackOverflow { .. }
        )
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitReason::Normal => f.write_str("normal exit"),
            ExitReason::Panicked(m) => write!(f, "panicked: {m}"),
            ExitReason::Killed => f.write_str("killed"),
            ExitReason::Cancelled => f.write_str("cancelled by runtime shutdown"),
            ExitReason::StackOverflow { stack_size } => {
                write!(f, "overflowed its stack ({} KiB usable)", stack_size / 1024)
            }
        }
    }
}

/// The notice a monitor (or a trapping linked actor) receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Down {
    /// The actor that ended.
    pub id: u64,
    /// Its name, if it was spawned with one.
    pub name: Option<Arc<str>>,
    /// Why it ended.
    pub reason: ExitReason,
}

/// The payload of the unwind that kills an actor.
#[derive(Debug)]
pub struct Killed;

/// A panic's payload, caught at an actor's edge and kept in
/// [`JoinError::Panicked`] so the joiner can take it back
/// ([`JoinError::into_panic`]) and re-raise it with
/// `std::panic::resume_unwind`.
///
/// Opaque: it is handed over by value only ([`into_inner`](Self::into_inner)),
/// never by shared reference, which is what makes it `Sync` (the boxed
/// payload is not), so a `JoinError` goes wherever `Send + Sync` errors
/// go. It compares equal to any other: a `JoinError`'s equality is its
/// kind, id, name and message.
pub struct CaughtPanic(PanicPayload);

// SAFETY: the payload is reachable only through `into_inner(self)` (by
// value, on the thread that owns the `CaughtPanic`); no method reads it
// through `&self` (`Debug` and `PartialEq` do not look at it), so sharing
// a `&CaughtPanic` between threads shares nothing of the payload. The
// argument of tokio's `SyncWrapper`.
unsafe impl Sync for CaughtPanic {}

impl CaughtPanic {
    /// The payload, as `catch_unwind` gave it (`downcast` it to the type
    /// the actor panicked with: `&'static str` or `String` for `panic!`,
    /// anything for `std::panic::panic_any`).
    pub fn into_inner(self) -> Box<dyn Any + Send + 'static> {
        self.0
    }
}

impl fmt::Debug for CaughtPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CaughtPanic(..)")
    }
}

impl PartialEq for CaughtPanic {
    /// Always `true`: payloads are not comparable (see the type's doc).
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for CaughtPanic {}

/// Why [`JoinHandle::join`](crate::JoinHandle::join) has no value to give.
///
/// Not `Clone`: a panic's payload ([`CaughtPanic`]) cannot be cloned.
/// Equality compares the kind, id, name and message (payloads are not
/// compared).
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinError {
    /// The actor panicked; the panic's message (or a placeholder when the
    /// payload was not a string) and the payload itself
    /// ([`into_panic`](JoinError::into_panic)).
    #[non_exhaustive]
    Panicked {
        /// The actor's id.
        id: u64,
        /// The actor's name, if it was spawned with one.
        name: Option<Arc<str>>,
        /// The panic message.
        message: String,
        /// The panic's payload.
        payload: CaughtPanic,
    },
    /// The runtime shut down before the actor finished (or, when returned to
    /// a joiner that is itself being cancelled, before the join completed).
    Cancelled {
        /// The actor's id.
        id: u64,
        /// The actor's name, if it was spawned with one.
        name: Option<Arc<str>>,
    },
    /// The actor was killed (`ActorRef::kill`, or a linked actor's
    /// abnormal exit).
    Killed {
        /// The actor's id.
        id: u64,
        /// The actor's name, if it was spawned with one.
        name: Option<Arc<str>>,
    },
    /// The actor overflowed its stack and had opted in to recovery
    /// ([`recover_overflow`](crate::sched::overflow::recover_overflow)).
    StackOverflow {
        /// The actor's id.
        id: u64,
        /// The actor's name, if it was spawned with one.
        name: Option<Arc<str>>,
        /// The stack's usable bytes.
        stack_size: usize,
    },
}

impl JoinError {
    /// The joined actor's id.
    pub fn id(&self) -> u64 {
        match self {
            JoinError::Panicked { id, .. }
            | JoinError::Cancelled { id, .. }
            | JoinError::Killed { id, .. }
            | JoinError::StackOverflow { id, .. } => *id,
        }
    }

    /// The joined actor's name, if it was spawned with one.
    pub fn name(&self) -> Option<&str> {
        match self {
            JoinError::Panicked { name, .. }
            | JoinError::Cancelled { name, .. }
            | JoinError::Killed { name, .. }
            | JoinError::StackOverflow { name, .. } => name.as_deref(),
        }
    }

    /// The panic message, if the actor panicked.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked { message, .. } => Some(message),
            _ => None,
        }
    }

    /// Whether the actor panicked (its payload is in the error:
    /// [`into_panic`](Self::into_panic)).
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked { .. })
    }

    /// The panic's payload, to re-raise the actor's panic in the joiner
    /// with `std::panic::resume_unwind` or to `downcast` it (tokio's name).
    ///
    /// ```ignore
    /// // With a port crate (`smarm_linux`, `smarm_darwin`) as `smarm`:
    /// use smarm::Runtime;
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct DiskFull(u32);
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| std::panic::panic_any(DiskFull(7)));
    /// let e = h.join().unwrap_err();
    /// assert!(e.is_panic());
    /// let payload = e.into_panic();
    /// assert_eq!(*payload.downcast::<DiskFull>().unwrap(), DiskFull(7));
    /// // Or re-raise it here: std::panic::resume_unwind(payload).
    /// ```
    ///
    /// # Panics
    ///
    /// If the actor did not panic (it was killed, cancelled or overflowed
    /// its stack): see [`try_into_panic`](Self::try_into_panic).
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        match self.try_into_panic() {
            Ok(p) => p,
            Err(e) => panic!("`JoinError::into_panic` on an error that is not a panic: {e}"),
        }
    }

    /// The panic's payload if the actor panicked, else the error itself.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self {
            JoinError::Panicked { payload, .. } => Ok(payload.into_inner()),
            e => Err(e),
        }
    }

    /// Whether the actor was cancelled by a shutdown.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled { .. })
    }

    /// Whether the actor was killed.
    pub fn is_killed(&self) -> bool {
        matches!(self, JoinError::Killed { .. })
    }

    /// The exit reason this error reports.
    pub fn reason(&self) -> ExitReason {
        match self {
            JoinError::Panicked { message, .. } => ExitReason::Panicked(message.clone()),
            JoinError::Cancelled { .. } => ExitReason::Cancelled,
            JoinError::Killed { .. } => ExitReason::Killed,
            JoinError::StackOverflow { stack_size, .. } => ExitReason::StackOverflow {
                stack_size: *stack_size,
            },
        }
    }

    pub(crate) fn cancelled(id: u64, name: &Option<Arc<str>>) -> Self {
        JoinError::Cancelled {
            id,
            name: name.clone(),
        }
    }

    pub(crate) fn from_payload(id: u64, name: &Option<Arc<str>>, payload: PanicPayload) -> Self {
        let name = name.clone();
        if payload.is::<Cancelled>() {
            return JoinError::Cancelled { id, name };
        }
        if payload.is::<Killed>() {
            return JoinError::Killed { id, name };
        }
        let message = if let Some(s) = payload.downcast_ref::<&'static str>() {
            String::from(*s)
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            String::from("Box<dyn Any> (a non-string panic payload)")
        };
        JoinError::Panicked {
            id,
            name,
            message,
            payload: CaughtPanic(payload),
        }
    }
}

/// `actor 7` or `actor 7 "name"`.
struct Who<'a>(u64, Option<&'a str>);

impl fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(n) => write!(f, "actor {} {:?}", self.0, n),
            None => write!(f, "actor {}", self.0),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = Who(self.id(), self.name());
        match self {
            JoinError::Panicked { message, .. } => write!(f, "{who} panicked: {message}"),
            JoinError::Cancelled { .. } => write!(f, "{who} was cancelled by runtime shutdown"),
            JoinError::Killed { .. } => write!(f, "{who} was killed"),
            JoinError::StackOverflow { stack_size, .. } => {
                write!(f, "{who} overflowed its stack ({} KiB usable)", stack_size / 1024)
            }
        }
    }
}

impl core::error::Error for JoinError {}
