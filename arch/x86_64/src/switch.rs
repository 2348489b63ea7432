//! The x86_64 System V context switch.
//!
//! Refs: System V AMD64 ABI, 1.0, §3.2.1 (registers: rbx, rbp, r12–r15 are
//! callee-saved; the MXCSR control bits and the x87 control word are
//! callee-saved too), §3.2.2 (the stack is 16-byte aligned at a `call`);
//! Intel SDM vol. 2 for `stmxcsr`/`ldmxcsr`, `fnstcw`/`fldcw`, `rdtsc`,
//! `lfence`.
//!
//! # Stack layouts
//!
//! A suspended context (what [`smarm_x86_64_switch`] leaves behind, the sp
//! it hands out points at the lowest word):
//!
//! ```text
//!   higher addresses
//!   | caller's frame ...         |
//!   | return address into caller |  <- pushed by `call smarm_x86_64_switch`
//!   | rbp                        |
//!   | rbx                        |
//!   | r12                        |
//!   | r13                        |
//!   | r14                        |
//!   | r15                        |
//!   | x87 CW (hi 4) | MXCSR (lo 4)| <- saved sp (16-byte aligned)
//!   lower addresses
//! ```
//!
//! A freshly bootstrapped context ([`X86_64::init_stack`], `top` 16-aligned):
//!
//! ```text
//!   top - 8   | 0 (padding)                     |
//!   top - 16  | 0 (fake return address: stops   |  <- rsp when the trampoline
//!             |    unwinders and backtraces)     |     starts (16-aligned)
//!   top - 24  | smarm_x86_64_trampoline          |  <- `ret` target
//!   top - 32  | rbp = 0 (frame-pointer chain end)|
//!   top - 40  | rbx = arg                        |
//!   top - 48  | r12 = entry                      |
//!   top - 56  | r13 = 0                          |
//!   top - 64  | r14 = 0                          |
//!   top - 72  | r15 = 0                          |
//!   top - 80  | x87 CW 0x037F | MXCSR 0x1F80     |  <- initial sp
//! ```
//!
//! The first switch into it pops the registers above, `ret`s into the
//! trampoline with rax = the sp of the context that switched in, and the
//! trampoline calls `entry(rax, rbx)` with rsp 16-byte aligned before the
//! `call`, as the ABI wants.
//!
//! The callee-saved registers are pushed rather than declared as clobbers:
//! the switch is a plain `extern "C"` call to the compiler, which saves the
//! caller-saved registers it needs around it as for any call. Disassemble
//! with `objdump -d --no-show-raw-insn target/release/deps/<bin> | grep -A40
//! smarm_x86_64_switch`.
//!
//! Both functions carry CFI (assembled into an FDE each; the directives emit
//! no instructions): the switch's rules follow rsp through every push and
//! pop and hold on either stack, as both frames have the same layout; the
//! trampoline's say it has no return address, so unwinders end there.

use core::arch::{asm, naked_asm};

use smarm_core::arch::{Arch, EntryFn};

/// The x86_64 implementation of [`Arch`].
#[derive(Debug, Clone, Copy, Default)]
pub struct X86_64;

/// Saves the current context and resumes the one at `to` (in rdi); returns
/// (in rax) the sp of whichever context later switches back here.
///
/// # Safety
///
/// As [`Arch::switch`].
#[unsafe(naked)]
pub unsafe extern "C" fn smarm_x86_64_switch(to: *mut u8) -> *mut u8 {
    naked_asm!(
        // On entry: rdi = target sp; [rsp] = where to resume this context;
        // rsp + 8 is 16-aligned, as at every call.
        //
        // The CFI tracks the CFA (the caller's rsp before its `call`) through
        // each push and names the slot of each saved register. Both sides of
        // the switch have the same frame layout, so the rules stay true after
        // `mov rsp, rdi`: a debugger stopped anywhere in the shim unwinds into
        // whichever context rsp belongs to at that instant.
        ".cfi_startproc",         // CFI: open the unwind entry (CFA = rsp + 8, rip at CFA - 8)
        "push rbp",               // save callee-saved rbp
        ".cfi_def_cfa_offset 16", // CFI: the CFA is now rsp + 16
        ".cfi_offset rbp, -16",   // CFI: rbp saved at CFA - 16
        "push rbx",               // save callee-saved rbx
        ".cfi_def_cfa_offset 24", // CFI: the CFA is now rsp + 24
        ".cfi_offset rbx, -24",   // CFI: rbx saved at CFA - 24
        "push r12",               // save callee-saved r12
        ".cfi_def_cfa_offset 32", // CFI: the CFA is now rsp + 32
        ".cfi_offset r12, -32",   // CFI: r12 saved at CFA - 32
        "push r13",               // save callee-saved r13
        ".cfi_def_cfa_offset 40", // CFI: the CFA is now rsp + 40
        ".cfi_offset r13, -40",   // CFI: r13 saved at CFA - 40
        "push r14",               // save callee-saved r14
        ".cfi_def_cfa_offset 48", // CFI: the CFA is now rsp + 48
        ".cfi_offset r14, -48",   // CFI: r14 saved at CFA - 48
        "push r15",               // save callee-saved r15
        ".cfi_def_cfa_offset 56", // CFI: the CFA is now rsp + 56
        ".cfi_offset r15, -56",   // CFI: r15 saved at CFA - 56
        "sub rsp, 8",             // room for MXCSR + x87 CW; rsp is now 16-aligned
        ".cfi_def_cfa_offset 64", // CFI: the CFA is now rsp + 64 (the whole frame)
        "stmxcsr [rsp]",          // save MXCSR (control bits callee-saved; status bits ride along)
        "fnstcw [rsp + 4]",       // save the x87 control word
        "mov rax, rsp",           // our saved sp: the resumed side's return value
        "mov rsp, rdi",           // switch stacks: from here on we run on the target
        "ldmxcsr [rsp]",          // restore the target's MXCSR
        "fldcw [rsp + 4]",        // restore the target's x87 control word
        "add rsp, 8",             // drop the control-word slot
        ".cfi_def_cfa_offset 56", // CFI: the CFA is now rsp + 56
        "pop r15",                // restore the target's r15
        ".cfi_def_cfa_offset 48", // CFI: the CFA is now rsp + 48
        ".cfi_restore r15",       // CFI: r15 holds the caller's value again
        "pop r14",                // restore the target's r14
        ".cfi_def_cfa_offset 40", // CFI: the CFA is now rsp + 40
        ".cfi_restore r14",       // CFI: r14 holds the caller's value again
        "pop r13",                // restore the target's r13
        ".cfi_def_cfa_offset 32", // CFI: the CFA is now rsp + 32
        ".cfi_restore r13",       // CFI: r13 holds the caller's value again
        "pop r12",                // restore the target's r12
        ".cfi_def_cfa_offset 24", // CFI: the CFA is now rsp + 24
        ".cfi_restore r12",       // CFI: r12 holds the caller's value again
        "pop rbx",                // restore the target's rbx
        ".cfi_def_cfa_offset 16", // CFI: the CFA is now rsp + 16
        ".cfi_restore rbx",       // CFI: rbx holds the caller's value again
        "pop rbp",                // restore the target's rbp
        ".cfi_def_cfa_offset 8",  // CFI: back to the entry rule, CFA = rsp + 8
        ".cfi_restore rbp",       // CFI: rbp holds the caller's value again
        "ret",                    // resume the target where it called us (or its trampoline)
        ".cfi_endproc",           // CFI: close the unwind entry
    )
}

/// First code a bootstrapped context runs: calls `entry(from_sp, arg)`.
///
/// Entered by the `ret` of [`smarm_x86_64_switch`] with rax = the previous
/// context's sp, rbx = arg, r12 = entry, rbp = 0, rsp 16-byte aligned.
#[unsafe(naked)]
unsafe extern "C" fn smarm_x86_64_trampoline() -> ! {
    naked_asm!(
        ".cfi_startproc",     // CFI: open this function's unwind entry
        ".cfi_undefined rip", // CFI: no return address: the outermost frame of this stack
        "mov rdi, rax",       // first argument: the sp of the context that switched in
        "mov rsi, rbx",       // second argument: init_stack's arg
        "call r12",           // entry(from, arg); rsp is 16-aligned before the call
        "ud2",                // entry never returns: trap if it does
        ".cfi_endproc",       // CFI: close the unwind entry
    )
}

// SAFETY: the switch saves rbx, rbp, r12-r15, MXCSR and the x87 CW (all the
// SysV callee-saved state) on the current stack and restores the same from
// the target's; the sp it hands out is the only state of the suspended
// context. `init_stack` writes 80 bytes below `top` and the frame it builds
// ends in a null rbp and a null return address. The cycle reads have no side
// effects.
unsafe impl Arch for X86_64 {
    const NAME: &'static str = "x86_64";
    const INIT_STACK_BYTES: usize = 80;

    #[inline(always)]
    unsafe fn switch(to: *mut u8) -> *mut u8 {
        // SAFETY: forwarded contract (see `Arch::switch`).
        unsafe { smarm_x86_64_switch(to) }
    }

    unsafe fn init_stack(top: *mut u8, entry: EntryFn, arg: *mut u8) -> *mut u8 {
        debug_assert_eq!(top as usize % 16, 0, "stack top must be 16-byte aligned");
        let words = top.cast::<u64>();
        // SAFETY: the caller guarantees the 80 bytes below `top` are writable
        // and `top` is 16-aligned, so each `sub(k)` for k in 1..=10 is in
        // bounds and 8-aligned.
        unsafe {
            words.sub(1).write(0); // padding
            words.sub(2).write(0); // fake return address for unwinders
            words.sub(3).write(smarm_x86_64_trampoline as *const () as u64); // ret target
            words.sub(4).write(0); // rbp: end of the frame-pointer chain
            words.sub(5).write(arg as u64); // rbx
            words.sub(6).write(entry as *const () as u64); // r12
            words.sub(7).write(0); // r13
            words.sub(8).write(0); // r14
            words.sub(9).write(0); // r15
                                   // MXCSR default (all exceptions masked, round to nearest) in the
                                   // low half; x87 CW default (extended precision, all masked) high.
            words.sub(10).write((0x037F_u64 << 32) | 0x1F80);
            words.sub(10).cast()
        }
    }

    #[inline(always)]
    fn cycles() -> u64 {
        let lo: u32;
        let hi: u32;
        // SAFETY: rdtsc only reads the time-stamp counter into edx:eax.
        unsafe {
            asm!(
                "rdtsc", // edx:eax = TSC (not serialising: may run early)
                out("eax") lo,
                out("edx") hi,
                options(nomem, nostack, preserves_flags)
            );
        }
        ((hi as u64) << 32) | lo as u64
    }

    #[inline(always)]
    fn cycles_serialising() -> u64 {
        let lo: u32;
        let hi: u32;
        // SAFETY: lfence orders the following rdtsc after earlier
        // instructions complete; neither touches memory we own.
        unsafe {
            asm!(
                "lfence", // wait for earlier instructions to complete locally
                "rdtsc",  // then read the TSC into edx:eax
                out("eax") lo,
                out("edx") hi,
                options(nostack, preserves_flags)
            );
        }
        ((hi as u64) << 32) | lo as u64
    }

    fn cycles_per_second() -> Option<u64> {
        None
    }

    #[inline(always)]
    fn spin_hint() {
        core::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests;
