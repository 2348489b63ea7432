//! The x86_64 System V context switch, stack bootstrap and TSC reads.
//!
//! Refs:
//! - System V AMD64 ABI (x86-64 psABI, version 1.0,
//!   <https://gitlab.com/x86-psABIs/x86-64-ABI>): §3.2.1 *Registers* (rbx,
//!   rbp, r12–r15 and rsp callee-saved; the control bits of MXCSR and the x87
//!   control word callee-saved, their status bits and the x87 status word
//!   caller-saved; DF clear at every entry and return; the CPU in x87 mode,
//!   not MMX, at every entry), the *Register Usage* table (every vector,
//!   mask and x87 register caller-saved; fs reserved as the thread pointer),
//!   §3.2.2 *The Stack Frame* (rsp + 8 is 16-byte aligned at a function's
//!   entry; the 128-byte red zone below rsp), the *DWARF Register Number
//!   Mapping* table (16 is the return address column, `rip` in CFI).
//! - Intel SDM vol. 2 for `stmxcsr`/`ldmxcsr`, `fnstcw`/`fldcw`, `rdtsc`,
//!   `lfence`; vol. 1 §8.1.5 (x87 control word) and §10.2.3 (MXCSR).
//!
//! # Stack layouts
//!
//! A suspended context (what [`smarm_x86_64_switch`] leaves behind; the sp
//! it hands out points at the lowest word, 16-byte aligned):
//!
//! ```text
//!   higher addresses
//!   | caller's frame ...                    |
//!   +---------------------------------------+  <- rsp of the caller at its `call` (the CFA)
//!   | return address (resume point)         |  +56  pushed by `call smarm_x86_64_switch`
//!   | rbp                                   |  +48
//!   | rbx                                   |  +40
//!   | r12                                   |  +32
//!   | r13                                   |  +24
//!   | r14                                   |  +16
//!   | r15                                   |  +8
//!   | 2 unused | x87 CW (2) | MXCSR (4)     |  +0   <- saved sp
//!   lower addresses
//! ```
//!
//! The frame is 64 bytes with the return address, so the saved sp keeps the
//! caller's 16-byte alignment (its rsp is 16-aligned at the `call`).
//!
//! A freshly bootstrapped context ([`X86_64::init_stack`], `top` 16-aligned):
//!
//! ```text
//!   top - 8   | 0 (padding)                                  |
//!   top - 16  | 0 (the trampoline's return address)          |  <- rsp as the trampoline starts
//!   top - 24  | smarm_x86_64_trampoline + 1 (`ret` target)   |  +56
//!   top - 32  | rbp = 0 (end of the frame-pointer chain)     |  +48
//!   top - 40  | rbx = arg                                    |  +40
//!   top - 48  | r12 = entry                                  |  +32
//!   top - 56  | r13 = 0                                      |  +24
//!   top - 64  | r14 = 0                                      |  +16
//!   top - 72  | r15 = 0                                      |  +8
//!   top - 80  | x87 CW 0x037F | MXCSR 0x1F80                 |  +0   <- initial sp
//! ```
//!
//! The right-hand column is the offset from the initial sp: exactly the
//! suspended layout above, so the first switch needs no special case (and the
//! switch's CFI describes a fresh frame too). The control words are the
//! reset values (MXCSR 0x1F80: every exception masked, round to nearest, no
//! flush-to-zero or denormals-are-zero; x87 0x037F, as `fninit` sets it:
//! every exception masked, 64-bit precision, round to nearest), so a fresh
//! context never inherits its creator's modes.
//!
//! The first switch into it loads those registers, pops the 64 bytes and
//! `ret`s into the trampoline (rsp = `top - 16`, 16-aligned) with rax = the
//! sp of the context that switched in. The trampoline calls (not jumps to)
//! `entry(rax, rbx)`: the `call` keeps the ABI's alignment (rsp + 8 is
//! 16-aligned at the entry) and leaves the entry's return address inside the
//! trampoline, whose CFI says it has no return address, and whose own return
//! slot holds 0. So DWARF unwinders (a panic's search phase, gdb, perf) end
//! the walk at the trampoline, and frame-pointer walkers stop at the entry's
//! saved rbp = 0.
//!
//! The `ret` target is the trampoline's second byte: its first instruction is
//! a one-byte `nop` that never runs. An unwinder looks a return address up as
//! `address - 1` (the `call` it came from); were the target the trampoline's
//! first byte, that lookup would land in whatever precedes it, and a debugger
//! stopped in the switch just after the stack swap into a fresh context would
//! name the wrong function.
//!
//! # Register state at each entry point
//!
//! - [`smarm_x86_64_switch`], on entry: rdi = target sp, `[rsp]` = our resume
//!   address, rsp + 8 16-aligned, rbx/rbp/r12–r15, MXCSR and the x87 CW = the
//!   caller's, DF = 0. On return (in whichever context is resumed): rax =
//!   the sp of the context that switched away, every callee-saved register,
//!   MXCSR and the x87 CW as the resumed context left them, the arithmetic
//!   flags and the caller-saved registers undefined (the compiler saved what
//!   it needed before the call).
//! - `smarm_x86_64_trampoline + 1`: rax = from sp, rbx = arg, r12 = entry,
//!   rbp = 0, rsp = `top - 16`, MXCSR = 0x1F80, x87 CW = 0x037F.
//! - The entry: rdi = from sp, rsi = arg, rsp = `top - 24` (rsp + 8
//!   16-aligned), `[rsp]` = a return address inside the trampoline, rbp = 0.
//!
//! # What is not switched, and why
//!
//! The switch is a plain `extern "C"` call to the compiler, so it owes the
//! caller exactly what any callee does (§3.2.1) and nothing more:
//!
//! - rax, rcx, rdx, rsi, rdi, r8–r11, all of xmm0–xmm15 (the SysV ABI has no
//!   callee-saved vector register), the upper halves of ymm/zmm, zmm16–zmm31,
//!   the AVX-512 masks k0–k7, and the x87/MMX registers st0–st7: caller-saved.
//!   The compiler saves the ones it needs around the call. The switch itself
//!   executes no instruction that writes a vector register and does not
//!   `vzeroupper`; compilers emit `vzeroupper` before a call from code that
//!   dirtied the upper halves (a performance convention, not an ABI rule).
//! - The x87 status and tag words: caller-saved, not saved. MXCSR's status
//!   bits (the six sticky exception flags) are caller-saved too, but
//!   `stmxcsr`/`ldmxcsr` move all 32 bits, so they travel with the context.
//! - rflags: the ABI requires DF = 0 at every call and return and preserves
//!   no other flag. The switch never touches DF (every caller has it clear, so
//!   every resumed context does) and clobbers the arithmetic flags (`sub`,
//!   `add`). System flags (TF, AC, IF...) are the thread's, not a context's.
//! - x87 versus MMX mode: the CPU is in x87 mode at every call, so the switch
//!   needs no `emms`.
//! - The red zone, the 128 bytes below rsp (§3.2.2): a function may keep data
//!   there only between calls, and the switch is a call, so the caller has
//!   nothing live in it. The switch's pushes go below the caller's rsp, as
//!   any callee's frame does.
//! - The thread pointer (fs base on Linux: "reserved for system (as thread
//!   specific data register)"; gs base on Darwin): every context on a worker
//!   thread sees that thread's thread-locals, and a context that resumes on
//!   another worker sees the new one's (docs/platforms.md, "Thread-locals and
//!   migration"; core/src/sched/mod.rs).
//! - The signal mask and the alternate signal stack: per thread, and the
//!   switch makes no system call (unlike `swapcontext`, which switches the
//!   mask with `rt_sigprocmask`).
//! - The CET shadow-stack pointer: not switched, so a process running with
//!   user shadow stacks would fault at the `ret` into another stack. glibc
//!   turns them on only for a program marked shadow-stack compatible, which
//!   rustc output is not unless built with the unstable `-Z cf-protection`.
//!
//! # Darwin
//!
//! The same code serves `x86_64-apple-darwin`: rustc emits each naked
//! function's symbol (with Mach-O's leading underscore), section and
//! alignment, and the asm bodies name no symbol or section of their own.
//! LLVM assembles the CFI into a DWARF FDE in `__eh_frame` on Mach-O as on
//! ELF: neither function's rules fit a compact-unwind encoding (`.cfi_restore`,
//! `.cfi_undefined`), so their `__compact_unwind` entries say "use DWARF"
//! (0x04000000) and the linked `__unwind_info` points at the FDEs.
//!
//! # Reviewing the disassembly
//!
//! `cargo build --release -p smarm-examples --example msg_pairs` then
//! `objdump -d --no-show-raw-insn -M intel target/release/examples/msg_pairs |
//! grep -A24 'smarm_x86_64_switch.*>:'` prints the shim exactly as written
//! below (a naked function: no prologue or epilogue is added; CFI directives
//! emit no instructions). `readelf --debug-dump=frames` on the same binary
//! shows its FDE.

use core::arch::{asm, naked_asm};

use smarm_core::arch::{Arch, EntryFn};

/// The x86_64 (System V) implementation of [`Arch`].
#[derive(Debug, Clone, Copy, Default)]
pub struct X86_64;

/// Bytes of one saved context: MXCSR and the x87 CW (8 bytes), r15–r12, rbx,
/// rbp and the return address, 8 bytes each.
const FRAME_BYTES: usize = 64;

/// Bytes `init_stack` uses: a saved context, the trampoline's null return
/// address and 8 bytes of padding that keep the trampoline's rsp 16-aligned.
const INIT_BYTES: usize = FRAME_BYTES + 16;

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
/// Entered at its second byte by the `ret` of [`smarm_x86_64_switch`] with
/// rax = the previous context's sp, rbx = arg, r12 = entry, rbp = 0,
/// rsp = `top - 16` (16-aligned).
#[unsafe(naked)]
unsafe extern "C" fn smarm_x86_64_trampoline() -> ! {
    naked_asm!(
        ".cfi_startproc",     // CFI: open this function's unwind entry
        ".cfi_undefined rip", // CFI: no return address: the outermost frame of this stack
        "nop",                // never runs: the `ret` lands after it, so `target - 1` is in here
        "mov rdi, rax",       // first argument: the sp of the context that switched in
        "mov rsi, rbx",       // second argument: init_stack's arg
        "call r12",           // entry(from, arg); rsp is 16-aligned before the call
        "ud2",                // entry never returns: trap if it does
        ".cfi_endproc",       // CFI: close the unwind entry
    )
}

/// Where the first switch into a fresh context `ret`s to: the trampoline's
/// second byte, past its one-byte `nop` (see the module doc).
fn trampoline_resume() -> u64 {
    smarm_x86_64_trampoline as *const () as u64 + 1
}

// SAFETY: the switch saves rbx, rbp, r12–r15, MXCSR and the x87 CW (all the
// SysV callee-saved state; see the module doc for what is deliberately not
// switched) on the current stack and restores the same from the target's;
// the sp it hands out is the only state of the suspended context.
// `init_stack` writes exactly INIT_BYTES = INIT_STACK_BYTES below `top`, and
// the trampoline calls `entry` with rsp + 8 16-aligned and rbp = 0, from a
// frame whose CFI has no return address and whose return slot holds 0. The
// cycle reads have no side effects.
unsafe impl Arch for X86_64 {
    const NAME: &'static str = "x86_64";
    const INIT_STACK_BYTES: usize = INIT_BYTES;

    #[inline(always)]
    unsafe fn switch(to: *mut u8) -> *mut u8 {
        // SAFETY: forwarded contract (see `Arch::switch`).
        unsafe { smarm_x86_64_switch(to) }
    }

    unsafe fn init_stack(top: *mut u8, entry: EntryFn, arg: *mut u8) -> *mut u8 {
        debug_assert_eq!(top as usize % 16, 0, "stack top must be 16-byte aligned");
        let sp = top.wrapping_sub(INIT_BYTES).cast::<u64>();
        // SAFETY: the caller guarantees the INIT_BYTES below `top` are
        // writable and `top` is 16-aligned, so `sp` is 16-aligned and each
        // word `sp.add(k)` for k in 0..10 lies in `[top - 80, top)`.
        unsafe {
            // MXCSR reset value (every exception masked, round to nearest) in
            // the low half; the x87 CW as `fninit` leaves it (64-bit
            // precision, every exception masked) above it.
            sp.add(0).write((0x037F_u64 << 32) | 0x1F80);
            sp.add(1).write(0); // r15
            sp.add(2).write(0); // r14
            sp.add(3).write(0); // r13
            sp.add(4).write(entry as *const () as u64); // r12: entry
            sp.add(5).write(arg as u64); // rbx: arg
            sp.add(6).write(0); // rbp: end of the frame-pointer chain
            sp.add(7).write(trampoline_resume()); // the switch's `ret` target
            sp.add(8).write(0); // the trampoline's return address: none
            sp.add(9).write(0); // padding: the trampoline's rsp is 16-aligned
        }
        sp.cast()
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
        // No register reports the TSC's rate on every x86_64 CPU: callers
        // calibrate it (see `Arch::cycles_per_second`).
        None
    }

    #[inline(always)]
    fn spin_hint() {
        // `core::hint::spin_loop` is `pause` on x86_64.
        core::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests;
