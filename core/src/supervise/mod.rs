//! Layer 7, supervision: supervisors that restart their children
//! ([`supervisor`]).

pub mod supervisor;
