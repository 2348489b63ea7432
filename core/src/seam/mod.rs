//! Layer 1, the seams: what core needs from an instruction set ([`arch`])
//! and from an operating system ([`platform`]), the locks built on the
//! platform's futex ([`lock`]), the IO readiness poller ([`poll`]), the errors the seams and bad input produce
//! ([`error`]), the test-only failpoints, and the `tracing` instrumentation
//! (`trace`, compiled out without the feature). Imports only the sync facade
//! (`scripts/layers.py` checks every layer's imports).

pub mod arch;
pub mod error;
pub mod failpoint;
pub mod lock;
pub mod platform;
pub mod poll;
#[cfg(test)]
pub(crate) mod test_platform;
pub(crate) mod trace;
