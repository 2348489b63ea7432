//! smarm-arch-aarch64: the AAPCS64 context switch and `cntvct_el0` reads.
//!
//! The one type, `Aarch64` (on aarch64 only), implements core's
//! [`Arch`](smarm_core::arch::Arch) seam. It is the same on Linux and Darwin:
//! the switch never touches x18, the platform register Darwin reserves.
//!
//! Empty on every other ISA, so the whole workspace builds on every host.
#![no_std]

cfg_if::cfg_if! {
    if #[cfg(target_arch = "aarch64")] {
        mod switch;
        pub use switch::{smarm_aarch64_switch, Aarch64};
    }
}
