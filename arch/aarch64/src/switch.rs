//! The AAPCS64 context switch, stack bootstrap and generic-timer reads.
//!
//! Refs:
//! - AAPCS64, "Procedure Call Standard for the Arm 64-bit Architecture"
//!   (ARM IHI 0055, <https://github.com/ARM-software/abi-aa/blob/main/aapcs64/aapcs64.rst>):
//!   *General-purpose Registers* (x19–x28 callee-saved; x29 = fp and x30 = lr
//!   preserved across a call; x16/x17 = IP0/IP1 intra-procedure scratch;
//!   x18 the platform register), *SIMD and Floating-Point Registers* (only
//!   the low 64 bits of v8–v15, i.e. d8–d15, are callee-saved), *The Stack*
//!   (sp is 16-byte aligned at every public interface), *The Frame Pointer*
//!   (a frame record is {previous fp, lr}; a zero fp ends the chain).
//! - Apple, "Writing ARM64 code for Apple platforms": x18 is reserved and
//!   must never be written; fp must always hold a valid frame record chain.
//! - Arm ARM (DDI 0487), D11 "The Generic Timer" for `cntvct_el0` and
//!   `cntfrq_el0`; C6.2 `ISB`; C6.2 `BR` and D8 (BTI: an indirect `br` through
//!   x16/x17 may land on a `bti c` pad, as any function entry has).
//!
//! # Stack layouts
//!
//! A suspended context (what [`smarm_aarch64_switch`] leaves behind; the sp
//! it hands out points at the lowest word, 16-byte aligned):
//!
//! ```text
//!   higher addresses
//!   | caller's frame ...          |
//!   +-----------------------------+  <- sp of the caller at its `bl`
//!   | d15                         |  +152
//!   | d14                         |  +144
//!   | d13                         |  +136
//!   | d12                         |  +128
//!   | d11                         |  +120
//!   | d10                         |  +112
//!   | d9                          |  +104
//!   | d8                          |  +96
//!   | x28                         |  +88
//!   | x27                         |  +80
//!   | ...                         |
//!   | x20                         |  +24
//!   | x19                         |  +16
//!   | x30 = lr (resume address)   |  +8
//!   | x29 = fp                    |  +0   <- saved sp
//!   lower addresses
//! ```
//!
//! The frame is 160 bytes, so the saved sp keeps the caller's 16-byte
//! alignment. {fp, lr} sit at the bottom like an ordinary frame record.
//!
//! A freshly bootstrapped context ([`Aarch64::init_stack`], `top` 16-aligned):
//!
//! ```text
//!   top - 8   .. top - 64   | d15 .. d8 = 0                  |  +152 .. +96
//!   top - 72  .. top - 128  | x28 .. x21 = 0                 |  +88 .. +32
//!   top - 136               | x20 = arg                      |  +24
//!   top - 144               | x19 = entry                    |  +16
//!   top - 152               | x30 = smarm_aarch64_trampoline |  +8  (`ret` target)
//!   top - 160               | x29 = 0 (end of the fp chain)  |  +0  <- initial sp
//! ```
//!
//! The right-hand column is the offset from the initial sp: exactly the
//! suspended layout above, so the first switch needs no special case.
//!
//! The first switch into it loads those registers, pops the 160 bytes (sp =
//! `top`, 16-aligned) and `ret`s into the trampoline with x0 = the sp of the
//! context that switched in. The trampoline moves `arg` into x1, clears lr
//! and branches (not calls) to `entry(x0, x1)`: the entry starts with
//! fp = 0 and lr = 0, so frame-pointer walkers and DWARF unwinders stop
//! there, and no trampoline frame is left on the stack.
//!
//! # Register state at each entry point
//!
//! - [`smarm_aarch64_switch`], on entry: x0 = target sp, lr = our resume
//!   address, sp = the caller's (16-aligned), x19–x29/d8–d15 = the caller's.
//!   On return (in whichever context is resumed): x0 = the sp of the context
//!   that switched away, x1 = the same, every callee-saved register as the
//!   resumed context left it, other registers undefined (they are
//!   caller-saved: the compiler saved what it needed before the call).
//! - `smarm_aarch64_trampoline`: x0 = from sp, x19 = entry, x20 = arg,
//!   x29 = 0, x30 = the trampoline's own address, sp = `top`.
//!
//! # What is not switched, and why
//!
//! - x18 is never read or written (Darwin's platform register).
//! - FPCR (rounding mode, flush-to-zero, default NaN) is not saved: AAPCS64
//!   treats its mode bits as thread-global state that an ordinary call neither
//!   preserves nor restores, so an actor that changes them must restore them
//!   before it yields, as a function would before returning. FPSR holds
//!   only cumulative exception flags, which the ABI does not preserve.
//! - The upper 64 bits of v8–v15 and all of v0–v7/v16–v31, x0–x17: caller-saved.
//!   The switch is a plain `extern "C"` call to the compiler, which saves the
//!   caller-saved registers it needs around it as for any call. (With SVE,
//!   z8–z15's low 64 bits are d8–d15 and the rest is caller-saved too; SME
//!   streaming mode and ZA must be off at a call, as at any call.)
//!
//! # Reviewing the disassembly
//!
//! `cargo test -p smarm-arch-aarch64 --target aarch64-unknown-linux-gnu --no-run`
//! then `aarch64-linux-gnu-objdump -d --no-show-raw-insn <test binary> |
//! grep -A40 'smarm_aarch64_switch.*>:'` prints the shim exactly as written
//! below (a naked function: no prologue or epilogue is added).

use core::arch::naked_asm;

use smarm_core::arch::{Arch, EntryFn};

/// The aarch64 (AAPCS64) implementation of [`Arch`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Aarch64;

/// Bytes of one saved context: {fp, lr}, x19–x28 and d8–d15, 8 bytes each.
const FRAME_BYTES: usize = 160;

/// Saves the current context and resumes the one at `to` (in x0); returns
/// (in x0) the sp of whichever context later switches back here.
///
/// # Safety
///
/// As [`Arch::switch`].
#[unsafe(naked)]
pub unsafe extern "C" fn smarm_aarch64_switch(to: *mut u8) -> *mut u8 {
    naked_asm!(
        // On entry: x0 = target sp; lr = where to resume this context;
        // sp = this context's sp (16-aligned, as at every call).
        //
        // The CFI below says "CFA = sp + 160, registers saved at fixed offsets
        // from it" once the frame is pushed. Both sides of the switch have
        // the same frame layout, so the rules stay true after `mov sp, x0`:
        // a debugger stopped anywhere in the shim unwinds into whichever
        // context the sp belongs to at that instant.
        ".cfi_startproc",             // CFI: open this function's unwind entry
        ".cfi_remember_state",        // CFI: note the entry rules (CFA = sp, nothing saved)
        "stp x29, x30, [sp, #-160]!", // reserve the 160-byte frame; save fp, lr at +0/+8
        ".cfi_def_cfa_offset 160",    // CFI: the caller's sp is now sp + 160
        ".cfi_offset x29, -160",      // CFI: fp saved at CFA - 160
        ".cfi_offset x30, -152",      // CFI: lr saved at CFA - 152
        "stp x19, x20, [sp, #16]",    // save callee-saved x19, x20
        "stp x21, x22, [sp, #32]",    // save callee-saved x21, x22
        "stp x23, x24, [sp, #48]",    // save callee-saved x23, x24
        "stp x25, x26, [sp, #64]",    // save callee-saved x25, x26
        "stp x27, x28, [sp, #80]",    // save callee-saved x27, x28
        "stp d8, d9, [sp, #96]",      // save callee-saved d8, d9 (low halves of v8, v9)
        "stp d10, d11, [sp, #112]",   // save callee-saved d10, d11
        "stp d12, d13, [sp, #128]",   // save callee-saved d12, d13
        "stp d14, d15, [sp, #144]",   // save callee-saved d14, d15
        ".cfi_offset x19, -144",      // CFI: x19 saved at CFA - 144
        ".cfi_offset x20, -136",      // CFI: x20 saved at CFA - 136
        ".cfi_offset x21, -128",      // CFI: x21 saved at CFA - 128
        ".cfi_offset x22, -120",      // CFI: x22 saved at CFA - 120
        ".cfi_offset x23, -112",      // CFI: x23 saved at CFA - 112
        ".cfi_offset x24, -104",      // CFI: x24 saved at CFA - 104
        ".cfi_offset x25, -96",       // CFI: x25 saved at CFA - 96
        ".cfi_offset x26, -88",       // CFI: x26 saved at CFA - 88
        ".cfi_offset x27, -80",       // CFI: x27 saved at CFA - 80
        ".cfi_offset x28, -72",       // CFI: x28 saved at CFA - 72
        ".cfi_offset d8, -64",        // CFI: d8 saved at CFA - 64
        ".cfi_offset d9, -56",        // CFI: d9 saved at CFA - 56
        ".cfi_offset d10, -48",       // CFI: d10 saved at CFA - 48
        ".cfi_offset d11, -40",       // CFI: d11 saved at CFA - 40
        ".cfi_offset d12, -32",       // CFI: d12 saved at CFA - 32
        ".cfi_offset d13, -24",       // CFI: d13 saved at CFA - 24
        ".cfi_offset d14, -16",       // CFI: d14 saved at CFA - 16
        ".cfi_offset d15, -8",        // CFI: d15 saved at CFA - 8
        "mov x1, sp",                 // our saved sp: the resumed side's return value
        "mov sp, x0",                 // switch stacks: from here on we run on the target
        "ldp x19, x20, [sp, #16]",    // restore the target's x19, x20
        "ldp x21, x22, [sp, #32]",    // restore the target's x21, x22
        "ldp x23, x24, [sp, #48]",    // restore the target's x23, x24
        "ldp x25, x26, [sp, #64]",    // restore the target's x25, x26
        "ldp x27, x28, [sp, #80]",    // restore the target's x27, x28
        "ldp d8, d9, [sp, #96]",      // restore the target's d8, d9
        "ldp d10, d11, [sp, #112]",   // restore the target's d10, d11
        "ldp d12, d13, [sp, #128]",   // restore the target's d12, d13
        "ldp d14, d15, [sp, #144]",   // restore the target's d14, d15
        "ldp x29, x30, [sp], #160",   // restore fp and the resume address; pop the frame
        ".cfi_restore_state",         // CFI: frame popped: back to the entry rules
        "mov x0, x1",                 // return value: the sp of the context we left
        "ret",                        // resume the target where it called us (or its trampoline)
        ".cfi_endproc",               // CFI: close the unwind entry
    )
}

/// First code a bootstrapped context runs: enters `entry(from_sp, arg)`.
///
/// Reached by the `ret` of [`smarm_aarch64_switch`] with x0 = the previous
/// context's sp, x19 = entry, x20 = arg, x29 = 0, sp = `top` (16-aligned).
#[unsafe(naked)]
unsafe extern "C" fn smarm_aarch64_trampoline() -> ! {
    naked_asm!(
        ".cfi_startproc",     // CFI: open this function's unwind entry
        ".cfi_undefined x30", // CFI: no return address: the outermost frame of this stack
        "mov x1, x20",        // second argument: init_stack's arg (x0 is already `from`)
        "mov x16, x19",       // entry into IP0: `br x16` may land on a `bti c` function entry
        "mov x30, xzr",       // lr = 0: the entry's frame record {0, 0} ends every backtrace
        "br x16",             // jump (not call) to entry(from, arg); it never returns
        ".cfi_endproc",       // CFI: close the unwind entry
    )
}

// SAFETY: the switch saves x19–x28, fp, lr and d8–d15 (all the AAPCS64
// callee-saved state; FPCR mode bits are thread-global in the ABI, see the
// module doc) on the current stack and restores the same from the target's;
// the sp it hands out is the only state of the suspended context. It never
// touches x18. `init_stack` writes exactly FRAME_BYTES = INIT_STACK_BYTES
// below `top`, and the trampoline enters `entry` with sp = `top` (16-aligned),
// fp = 0 and lr = 0. The counter reads have no side effects.
unsafe impl Arch for Aarch64 {
    const NAME: &'static str = "aarch64";
    const INIT_STACK_BYTES: usize = FRAME_BYTES;

    #[inline(always)]
    unsafe fn switch(to: *mut u8) -> *mut u8 {
        // SAFETY: forwarded contract (see `Arch::switch`).
        unsafe { smarm_aarch64_switch(to) }
    }

    unsafe fn init_stack(top: *mut u8, entry: EntryFn, arg: *mut u8) -> *mut u8 {
        debug_assert_eq!(top as usize % 16, 0, "stack top must be 16-byte aligned");
        let sp = top.wrapping_sub(FRAME_BYTES).cast::<u64>();
        // SAFETY: the caller guarantees the FRAME_BYTES below `top` are
        // writable and `top` is 16-aligned, so `sp` is 16-aligned and each
        // word `sp.add(k)` for k in 0..20 lies in `[top - 160, top)`.
        unsafe {
            for k in 0..FRAME_BYTES / 8 {
                sp.add(k).write(0); // x21–x28 and d8–d15 start zeroed
            }
            sp.add(0).write(0); // x29: end of the frame-pointer chain
            sp.add(1)
                .write(smarm_aarch64_trampoline as *const () as usize as u64); // x30: `ret` target
            sp.add(2).write(entry as *const () as usize as u64); // x19: entry
            sp.add(3).write(arg as usize as u64); // x20: arg
        }
        sp.cast()
    }

    #[inline(always)]
    fn cycles() -> u64 {
        cfg_if::cfg_if! {
            if #[cfg(miri)] {
                miri_ticks()
            } else {
                let ticks: u64;
                // Flags: `nomem` (no memory touched, so the compiler may move
                // loads and stores across it: this read is deliberately not
                // ordered), `nostack`, `preserves_flags` (NZCV untouched). Not
                // `pure`: two reads must not be merged into one.
                // SAFETY: reading the virtual count register has no side
                // effects; EL0 access is enabled by Linux and Darwin.
                unsafe {
                    core::arch::asm!(
                        "mrs {ticks}, cntvct_el0", // the generic timer's virtual count (not serialising)
                        ticks = out(reg) ticks,
                        options(nomem, nostack, preserves_flags)
                    );
                }
                ticks
            }
        }
    }

    #[inline(always)]
    fn cycles_serialising() -> u64 {
        cfg_if::cfg_if! {
            if #[cfg(miri)] {
                miri_ticks()
            } else {
                let ticks: u64;
                // SAFETY: `isb` and the counter read have no side effects on
                // memory. Flags: no `nomem`, so the asm is also a compiler
                // barrier and earlier memory accesses stay before the read;
                // `nostack` and `preserves_flags` as in `cycles`.
                unsafe {
                    core::arch::asm!(
                        "isb",                     // earlier instructions complete before what follows
                        "mrs {ticks}, cntvct_el0", // then read the virtual count
                        ticks = out(reg) ticks,
                        options(nostack, preserves_flags)
                    );
                }
                ticks
            }
        }
    }

    fn cycles_per_second() -> Option<u64> {
        cfg_if::cfg_if! {
            if #[cfg(miri)] {
                None
            } else {
                let hz: u64;
                // SAFETY: reading the counter-frequency register has no side
                // effects. Flags: `nomem`, `nostack`, `preserves_flags` as in
                // `cycles`; `pure` is sound (the firmware sets it once at
                // boot) but buys nothing on a cold path.
                unsafe {
                    core::arch::asm!(
                        "mrs {hz}, cntfrq_el0", // the counter's frequency in Hz, set by firmware
                        hz = out(reg) hz,
                        options(nomem, nostack, preserves_flags)
                    );
                }
                // Zero would mean the firmware never programmed it: unknown.
                (hz != 0).then_some(hz)
            }
        }
    }

    #[inline(always)]
    fn spin_hint() {
        // `core::hint::spin_loop` is `isb sy` on aarch64: `yield` is a nop
        // on most cores, while `isb` stalls for a short, bounded time and
        // frees the pipeline for the sibling, which is what a spin wants.
        core::hint::spin_loop();
    }
}

/// An asm-free stand-in for the counter under Miri: strictly increasing.
#[cfg(miri)]
fn miri_ticks() -> u64 {
    use core::sync::atomic::{AtomicU64, Ordering};
    static TICKS: AtomicU64 = AtomicU64::new(0);
    // Relaxed: a counter with no data attached; only its own order matters,
    // which the read-modify-write gives.
    TICKS.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests;
