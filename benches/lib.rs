//! Shared helpers for the benches: the host's port crate as `smarm`, and
//! the tokio runtimes each workload is compared against in the same binary.

#[cfg(target_os = "linux")]
pub use smarm_linux as smarm;

#[cfg(target_vendor = "apple")]
pub use smarm_darwin as smarm;

/// The port's name, printed in every bench group so results from different
/// hosts are not mixed up.
pub fn port_name() -> &'static str {
    if cfg!(target_os = "linux") {
        "linux"
    } else {
        "darwin"
    }
}

/// A smarm runtime with `workers` workers.
pub fn smarm_rt(workers: usize) -> smarm::Runtime {
    smarm::Runtime::builder()
        .workers(workers)
        .build()
        .expect("smarm runtime")
}
