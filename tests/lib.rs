//! Integration tests for smarm, written once against the host's port crate,
//! re-exported here as `smarm` (test files: `use smarm_tests::smarm;`).
//! Test files are named by subsystem (`rt_*.rs`, `mailbox_*.rs`, ...).

#[cfg(target_os = "linux")]
pub use smarm_linux as smarm;

#[cfg(target_vendor = "apple")]
pub use smarm_darwin as smarm;
