//! Layer 6, spawning: the entry harness and join handles ([`join`]).

pub(crate) mod join;
