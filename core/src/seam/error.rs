//! Errors the runtime returns for bad input or exhausted resources.

use core::fmt;

use crate::seam::platform::{StackError, ThreadError};

/// The smallest stack [`Builder::stack_size`](crate::Builder::stack_size)
/// accepts: enough for the runtime's own frames, a panic and its message.
/// Deep recursion, large locals or `RUST_BACKTRACE` need more.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// The largest stack the builder accepts (1 GiB).
pub const MAX_STACK_SIZE: usize = 1 << 30;

/// The most worker threads a runtime takes (the default, one per CPU, is
/// capped here too). Each worker is an OS thread with its own stacks and
/// memory maps; far past the CPU count they only cost (std aborts the
/// process when a thread's set-up fails, at about 10,000 threads here).
pub const MAX_WORKERS: usize = 1024;

/// The largest run-queue ring the builder accepts, in slots (a full ring
/// spills to an unbounded overflow, so a bigger one buys nothing).
pub const MAX_QUEUE_CAPACITY: usize = 1 << 24;

/// Why a runtime could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// `workers(0)`: a runtime needs at least one worker thread.
    ZeroWorkers,
    /// The requested stack is below [`MIN_STACK_SIZE`].
    StackTooSmall {
        /// What was asked for.
        requested: usize,
        /// The minimum.
        minimum: usize,
    },
    /// The requested stack is above [`MAX_STACK_SIZE`].
    StackTooLarge {
        /// What was asked for.
        requested: usize,
        /// The maximum.
        maximum: usize,
    },
    /// The run-queue capacity was below 2.
    QueueTooSmall {
        /// What was asked for.
        requested: usize,
    },
    /// The run-queue capacity was above [`MAX_QUEUE_CAPACITY`].
    QueueTooLarge {
        /// What was asked for.
        requested: usize,
        /// The maximum.
        maximum: usize,
    },
    /// More workers than [`MAX_WORKERS`].
    TooManyWorkers {
        /// What was asked for.
        requested: usize,
        /// The maximum.
        maximum: usize,
    },
    /// The thread-name prefix contains a NUL byte (OS thread names cannot).
    ThreadName,
    /// `timeslice(Some(Duration::ZERO))`: use `None` to turn timeslices off.
    ZeroTimeslice,
    /// `long_hold` with a zero bound: every resume would be a long hold.
    ZeroLongHold,
    /// A worker thread could not be started.
    Thread(ThreadError),
    /// The binary aborts on panic (`panic = "abort"`), and the runtime's
    /// kills, links, supervisors and shutdown unwind actors: each would
    /// abort the process. Build with `panic = "unwind"` (the default), or
    /// accept it with
    /// [`Builder::allow_panic_abort`](crate::Builder::allow_panic_abort).
    PanicAbort,
}

/// The build's check of the panic strategy: `unwinds` is
/// [`Platform::PANIC_UNWINDS`](crate::Platform::PANIC_UNWINDS), `allowed`
/// the builder's [`allow_panic_abort`](crate::Builder::allow_panic_abort).
pub(crate) fn check_panic_strategy(unwinds: bool, allowed: bool) -> Result<(), BuildError> {
    if unwinds || allowed {
        Ok(())
    } else {
        Err(BuildError::PanicAbort)
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroWorkers => f.write_str("a runtime needs at least one worker (workers(0) given)"),
            BuildError::StackTooSmall { requested, minimum } => {
                write!(
                    f,
                    "stack size {requested} bytes is below the minimum of {minimum} bytes"
                )
            }
            BuildError::StackTooLarge { requested, maximum } => {
                write!(
                    f,
                    "stack size {requested} bytes is above the maximum of {maximum} bytes"
                )
            }
            BuildError::QueueTooSmall { requested } => {
                write!(f, "run-queue capacity {requested} is below the minimum of 2")
            }
            BuildError::QueueTooLarge { requested, maximum } => {
                write!(
                    f,
                    "run-queue capacity {requested} is above the maximum of {maximum}"
                )
            }
            BuildError::TooManyWorkers { requested, maximum } => {
                write!(
                    f,
                    "{requested} workers requested; a runtime takes at most {maximum}"
                )
            }
            BuildError::ThreadName => f.write_str("the thread-name prefix contains a NUL byte"),
            BuildError::ZeroTimeslice => f.write_str(
                "a zero timeslice would yield at every safe point; use timeslice(None) to turn them off",
            ),
            BuildError::ZeroLongHold => f.write_str("the long-hold bound must be above zero"),
            BuildError::Thread(e) => write!(f, "{e}"),
            BuildError::PanicAbort => f.write_str(
                "this binary is built with panic = \"abort\", but smarm unwinds actors to kill them \
                 (kill, links, supervisors) and to cancel them at shutdown: each would abort the \
                 process; build with panic = \"unwind\" (the default), or accept it with \
                 Builder::allow_panic_abort(true)",
            ),
        }
    }
}

// No `source()`: the Display of a wrapping error already includes its
// cause's, and a reporter that walks the chain would print it twice.
impl core::error::Error for BuildError {}

/// Why an actor could not be spawned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpawnError {
    /// No stack could be mapped (see [`StackError`] for the usual cause,
    /// `vm.max_map_count`, and how to raise it).
    Stack(StackError),
    /// The free function `spawn` was called outside any actor; use
    /// `Runtime::spawn` from plain threads.
    NoRuntime,
    /// An [`ActorBuilder::stack_size`](crate::ActorBuilder::stack_size)
    /// outside [`MIN_STACK_SIZE`]..=[`MAX_STACK_SIZE`].
    StackSize {
        /// What was asked for.
        requested: usize,
        /// The smallest accepted.
        minimum: usize,
        /// The largest accepted.
        maximum: usize,
    },
    /// An [`ActorBuilder::capacity`](crate::ActorBuilder::capacity) of 0
    /// (a bounded mailbox holds at least one message).
    MailboxCapacity,
    /// A [`Reserved`](crate::Reserved) actor spawned on another runtime
    /// than the one it was reserved on.
    ForeignRuntime,
}

impl From<StackError> for SpawnError {
    fn from(e: StackError) -> Self {
        SpawnError::Stack(e)
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Stack(e) => write!(f, "cannot spawn an actor: {e}"),
            SpawnError::NoRuntime => f.write_str(
                "spawn called outside an actor: use Runtime::spawn (or block_on) from plain threads",
            ),
            SpawnError::StackSize {
                requested,
                minimum,
                maximum,
            } => write!(
                f,
                "cannot spawn an actor with a {requested}-byte stack: the stack size must be \
                 {minimum}..={maximum} bytes"
            ),
            SpawnError::ForeignRuntime => f.write_str(
                "cannot spawn a reserved actor on another runtime than the one it was reserved on",
            ),
            SpawnError::MailboxCapacity => {
                f.write_str("cannot spawn an actor with a mailbox capacity of 0: a bounded mailbox holds at least 1 message")
            }
        }
    }
}

impl core::error::Error for SpawnError {}

/// Why a name could not be registered (`register`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegisterError {
    /// Another live actor holds the name.
    Taken {
        /// The name.
        name: alloc::sync::Arc<str>,
    },
    /// The actor has ended: a name is never bound to the dead.
    NotAlive {
        /// Its id.
        id: u64,
    },
    /// The free function `register` was called outside any actor; use
    /// `Runtime::register` from plain threads.
    NoRuntime,
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::Taken { name } => write!(f, "the name {name:?} is registered to another actor"),
            RegisterError::NotAlive { id } => write!(f, "actor {id} has ended: it cannot be registered"),
            RegisterError::NoRuntime => {
                f.write_str("register called outside an actor: use Runtime::register from plain threads")
            }
        }
    }
}

impl core::error::Error for RegisterError {}

/// A send whose receiver is gone — the actor exited (its mailbox closed) or
/// the channel's receiver was dropped. The value comes back, never lost.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

impl<T> SendError<T> {
    /// The value that was not sent.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "send failed: the receiver is gone (the actor exited, or the channel's receiver was \
             dropped); the value is returned in the error",
        )
    }
}

impl<T> core::error::Error for SendError<T> {}

#[cfg(test)]
mod tests {
    use alloc::boxed::Box;
    use alloc::string::{String, ToString};
    use core::error::Error;

    use super::*;

    #[test]
    fn every_error_is_a_std_error_with_its_cause() {
        let stack = StackError::OutOfMaps { errno: 12 };
        let thread = ThreadError {
            message: String::from("Resource temporarily unavailable"),
        };
        let boxed: [Box<dyn Error + Send + Sync>; 2] = [Box::new(stack), Box::new(thread.clone())];
        assert!(boxed[0].to_string().contains("vm.max_map_count"), "{}", boxed[0]);
        assert_eq!(
            boxed[1].to_string(),
            "starting a worker thread failed: Resource temporarily unavailable"
        );
        // The wrapping errors say what their cause says (and give no
        // `source`, which would print it twice in a reporter's chain).
        let spawn = SpawnError::Stack(stack);
        assert!(spawn.to_string().ends_with(&stack.to_string()), "{spawn}");
        assert!(spawn.source().is_none());
        let build = BuildError::Thread(thread.clone());
        assert_eq!(build.to_string(), thread.to_string());
        assert!(build.source().is_none());
    }

    #[test]
    fn a_panic_abort_build_is_refused_unless_allowed() {
        assert_eq!(check_panic_strategy(true, false), Ok(()));
        assert_eq!(check_panic_strategy(true, true), Ok(()));
        assert_eq!(check_panic_strategy(false, true), Ok(()));
        let e = check_panic_strategy(false, false).unwrap_err();
        assert_eq!(e, BuildError::PanicAbort);
        let msg = e.to_string();
        assert!(
            msg.contains("panic = \"abort\"") && msg.contains("allow_panic_abort(true)"),
            "{msg}"
        );
    }
}
