//! The poller seam: readiness of file descriptors, as the OS reports it.
//!
//! A port gives one [`Poller`] per runtime (Linux: epoll, edge-triggered;
//! Darwin: kqueue with `EV_CLEAR`); core builds the rest on it (the
//! per-descriptor readiness record, the idle worker that waits in the
//! poller, the busy workers' non-blocking polls). A port with no poller
//! (no OS, or a simulated one) names [`NoPoller`].
//!
//! The contract is Go's netpoller's: every descriptor is registered once,
//! for both directions, edge-triggered. An event says "this direction
//! became ready since the last event" (or the descriptor hung up or
//! failed, which is reported as both directions ready: the next read or
//! write returns what happened). Nothing is re-armed: the reader drains
//! until the OS says `EAGAIN`, and only then waits.

/// The descriptor became readable (or hung up, or failed).
pub const READABLE: u32 = 1;
/// The descriptor became writable (or hung up, or failed).
pub const WRITABLE: u32 = 2;

/// One readiness event: the token the descriptor was registered with and
/// the directions ([`READABLE`], [`WRITABLE`]) that became ready.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollEvent {
    /// The registration's token.
    pub token: usize,
    /// `READABLE | WRITABLE` bits.
    pub ready: u32,
}

/// Why a poller could not be made or a descriptor registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollError {
    /// This platform has no poller ([`NoPoller`]).
    Unsupported,
    /// The OS refused (`errno`): descriptor limits, a bad descriptor.
    Os(i32),
}

impl core::fmt::Display for PollError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PollError::Unsupported => f.write_str("this platform has no IO poller"),
            PollError::Os(e) => write!(f, "the IO poller failed (errno {e})"),
        }
    }
}

/// An OS readiness poller.
///
/// # Safety
///
/// An implementation guarantees:
/// - after [`register`](Poller::register) returns `Ok`, every later change
///   of the descriptor to readable or writable (and a hang-up or error) is
///   reported by a later [`wait`](Poller::wait) with the registration's
///   token, including a readiness that already holds at registration;
/// - [`kick`](Poller::kick), from any thread, makes the `wait` in progress
///   return, or, if none is, the next one (kicks may coalesce);
/// - a `wait` returns only the tokens of registered descriptors (or of
///   descriptors deregistered while it ran), never a token it made up, and
///   never reports the kick itself as an event;
/// - any thread may call any method; core calls `wait` from one thread at
///   a time.
pub unsafe trait Poller: Send + Sync + Sized + 'static {
    /// A new poller with its kick armed.
    fn new() -> Result<Self, PollError>;

    /// Registers `fd` for both directions, edge-triggered, reporting
    /// `token`.
    fn register(&self, fd: i32, token: usize) -> Result<(), PollError>;

    /// Stops reporting `fd` (before the descriptor is closed).
    fn deregister(&self, fd: i32) -> Result<(), PollError>;

    /// Waits until an event, a kick, or the monotonic clock
    /// ([`Platform::now_ns`](crate::seam::platform::Platform::now_ns))
    /// reaching `deadline_ns` (`Some(0)`: do not block; `None`: no
    /// deadline), and fills `events` with what happened. Returns how many
    /// it filled (0 after a kick, a timeout, or an interrupted wait).
    fn wait(&self, events: &mut [PollEvent], deadline_ns: Option<u64>) -> usize;

    /// Makes a `wait` in progress (or the next one) return.
    fn kick(&self);
}

/// The poller of a platform without one: every registration is refused
/// with [`PollError::Unsupported`], so IO types fall back to whatever the
/// layer above does without a poller.
#[derive(Debug)]
pub struct NoPoller;

// SAFETY: it registers nothing, so it reports nothing; `wait` returns at
// once (it is never called: nothing is registered).
unsafe impl Poller for NoPoller {
    fn new() -> Result<Self, PollError> {
        Err(PollError::Unsupported)
    }

    fn register(&self, _fd: i32, _token: usize) -> Result<(), PollError> {
        Err(PollError::Unsupported)
    }

    fn deregister(&self, _fd: i32) -> Result<(), PollError> {
        Ok(())
    }

    fn wait(&self, _events: &mut [PollEvent], _deadline_ns: Option<u64>) -> usize {
        0
    }

    fn kick(&self) {}
}
