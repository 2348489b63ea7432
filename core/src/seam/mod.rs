//! Layer 0, the seams: what core needs from an instruction set ([`arch`])
//! and from an operating system ([`platform`]), the errors those and bad
//! input produce ([`error`]), and the test-only failpoints. Imports nothing
//! from the layers above (`scripts/layers.py` checks every layer's imports).

pub mod arch;
pub mod error;
pub mod failpoint;
pub mod platform;
#[cfg(test)]
pub(crate) mod test_platform;
