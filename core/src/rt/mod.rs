//! Layer 8, the runtime: the handle and builder users start ([`runtime`])
//! and the dump report ([`dump`]).

pub mod dump;
mod on;
pub(crate) mod runtime;
