//! Layer 8, the runtime: the handle and builder users start ([`runtime`])
//! and the dump report ([`dump`]).

mod block_on;
pub mod dump;
pub(crate) mod runtime;
