//! smarm-arch-x86_64: the x86_64 (System V) context switch and TSC reads.
//!
//! Empty on every other ISA, so the whole workspace builds on every host.
#![no_std]

cfg_if::cfg_if! {
    if #[cfg(target_arch = "x86_64")] {
        mod switch;
        pub use switch::X86_64;
    }
}
