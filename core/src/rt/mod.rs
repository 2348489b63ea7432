//! Layer 8, the runtime: the handle and builder users start ([`runtime`])
//! and the dump report ([`dump`]).

mod block_on;
pub mod dump;
mod on;
pub(crate) mod runtime;
