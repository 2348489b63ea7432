//! Layer 7, supervision: monitors, links and trapped exits ([`link`]) and
//! the supervisors built on them ([`supervisor`]).

pub mod link;
pub mod names;
pub mod supervisor;
