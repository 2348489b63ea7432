//! smarm's examples, written once against the host's port crate,
//! re-exported here as `smarm`: smarm-linux on Linux, smarm-darwin on
//! macOS. So each example runs with the same command on both:
//!
//! ```text
//! cargo run --release -p smarm-examples --example msg_pairs
//! ```
//!
//! (An application depends on the port crate for its OS directly, as this
//! crate does; see README.md, "Picking a port crate".)

#[cfg(target_os = "linux")]
pub use smarm_linux as smarm;

#[cfg(target_vendor = "apple")]
pub use smarm_darwin as smarm;
