//! Tests of the switch, the bootstrap, the unwind info and the counter: the
//! aarch64 suite's (arch/aarch64/src/switch/tests.rs) where they apply, plus
//! the x86_64 control words, a deep stack and two unwinder walks. They run
//! natively (`cargo test -p smarm-arch-x86_64`).
//!
//! A panic inside a context would try to unwind out of an `extern "C"` entry
//! (an abort), so the contexts record what they see and the test thread
//! asserts after switching back.

extern crate std;

use std::vec;
use std::vec::Vec;

use core::arch::asm;
use core::ffi::{c_int, c_void};

use super::*;

/// A 64 KiB heap stack (no guard page: these tests don't overflow).
struct TestStack(Vec<u128>);

impl TestStack {
    fn new() -> Self {
        TestStack(vec![0u128; 4096])
    }
    /// One past the end: 16-aligned because the elements are `u128`.
    fn top(&mut self) -> *mut u8 {
        self.0.as_mut_ptr_range().end.cast()
    }
    /// Whether `sp` is a 16-aligned address within this stack.
    fn holds(&self, sp: *mut u8) -> bool {
        self.contains(sp as usize) && (sp as usize).is_multiple_of(16)
    }
    /// Whether `addr` lies within this stack.
    fn contains(&self, addr: usize) -> bool {
        let range = self.0.as_ptr_range();
        (range.start as usize..range.end as usize).contains(&addr)
    }
}

// ---------------------------------------------------------------------------
// Ping-pong between two contexts

/// Shared by the test thread and two contexts, A and B, on heap stacks.
/// Only one of the three runs at a time, so plain fields are enough.
struct Pair {
    rounds: u64,
    /// Handed across: A turns an even value odd, B turns it even again.
    value: u64,
    /// Where A returns to when done.
    main_sp: *mut u8,
    /// B's latest saved sp, kept by A.
    b_sp: *mut u8,
    /// Set by either context when it sees a value out of turn.
    bad: bool,
}

unsafe extern "C" fn pair_a(from: *mut u8, arg: *mut u8) -> ! {
    let s = arg.cast::<Pair>();
    // SAFETY: `arg` is the Pair the test owns for the whole run, and only
    // the running context touches it.
    unsafe {
        (*s).main_sp = from;
        for i in 0..(*s).rounds {
            (*s).bad |= (*s).value != 2 * i;
            (*s).value += 1;
            // B switches back here; what comes back is B's sp.
            (*s).b_sp = X86_64::switch((*s).b_sp);
        }
        loop {
            (*s).main_sp = X86_64::switch((*s).main_sp);
        }
    }
}

unsafe extern "C" fn pair_b(from: *mut u8, arg: *mut u8) -> ! {
    let s = arg.cast::<Pair>();
    let mut a_sp = from;
    // SAFETY: as in `pair_a`.
    unsafe {
        loop {
            (*s).bad |= (*s).value % 2 != 1;
            (*s).value += 1;
            a_sp = X86_64::switch(a_sp);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn two_contexts_ping_pong_a_value() {
    const ROUNDS: u64 = 100_000;
    let (mut stack_a, mut stack_b) = (TestStack::new(), TestStack::new());
    let mut s = Pair {
        rounds: ROUNDS,
        value: 0,
        main_sp: core::ptr::null_mut(),
        b_sp: core::ptr::null_mut(),
        bad: false,
    };
    let arg = (&raw mut s).cast::<u8>();
    // SAFETY: both stacks are 16-aligned, 64 KiB, and outlive every switch
    // into them; the entries never return.
    let (sp_a, sp_b) = unsafe {
        (
            X86_64::init_stack(stack_a.top(), pair_a, arg),
            X86_64::init_stack(stack_b.top(), pair_b, arg),
        )
    };
    s.b_sp = sp_b;
    // SAFETY: `sp_a` is A's fresh sp; A switches back here when done.
    let a_now = unsafe { X86_64::switch(sp_a) };
    assert!(!s.bad, "a context saw the value out of turn");
    assert_eq!(s.value, 2 * ROUNDS);
    assert!(stack_a.holds(a_now), "the sp A handed back lies on A's stack");
}

/// The test thread and one context trade a counter, resuming the context by
/// the sp each switch returns.
#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn main_and_context_hand_a_counter_across() {
    struct Echo {
        main_sp: *mut u8,
        value: u64,
    }
    unsafe extern "C" fn echo(from: *mut u8, arg: *mut u8) -> ! {
        let s = arg.cast::<Echo>();
        // SAFETY: as in `pair_a`.
        unsafe {
            (*s).main_sp = from;
            loop {
                (*s).value = (*s).value * 3 + 1;
                (*s).main_sp = X86_64::switch((*s).main_sp);
            }
        }
    }
    let mut stack = TestStack::new();
    let mut s = Echo {
        main_sp: core::ptr::null_mut(),
        value: 0,
    };
    // SAFETY: as in `two_contexts_ping_pong_a_value`.
    let mut sp = unsafe { X86_64::init_stack(stack.top(), echo, (&raw mut s).cast()) };
    for i in 0..10_000u64 {
        // Hand `i` in; the context hands back `3i + 1`.
        s.value = i;
        // SAFETY: `sp` is the context's latest saved sp.
        sp = unsafe { X86_64::switch(sp) };
        assert_eq!(s.value, i * 3 + 1);
        assert!(stack.holds(sp));
    }
}

// ---------------------------------------------------------------------------
// The register state a fresh context starts with

/// What the first instruction of an entry saw.
#[repr(C)]
struct Probe {
    main_sp: *mut u8,
    sp: usize,
    rbp: usize,
    /// [rsp]: the entry's return address.
    ret: usize,
    /// [rsp + 8]: the trampoline's own return slot.
    above: usize,
    arg_seen: *mut u8,
    mxcsr: u32,
    fcw: u16,
}

/// An entry that captures rsp, rbp, the two words above rsp and the control
/// words before any prologue runs, then tail-calls
/// `probe_report(from, arg, rsp, rbp, [rsp], [rsp + 8])`.
#[unsafe(naked)]
unsafe extern "C" fn probe_entry(from: *mut u8, arg: *mut u8) -> ! {
    naked_asm!(
        "stmxcsr [rsi + {mxcsr}]", // MXCSR as the trampoline left it, into arg's Probe
        "fnstcw [rsi + {fcw}]",    // the x87 control word likewise
        "mov rdx, rsp",            // third argument: rsp as the trampoline's call left it
        "mov rcx, rbp",            // fourth argument: rbp as the trampoline left it
        "mov r8, [rsp]",           // fifth argument: the entry's return address
        "mov r9, [rsp + 8]",       // sixth argument: the word above it
        "jmp {report}",            // tail-call the Rust half (rdi, rsi untouched; rsp as at entry)
        mxcsr = const core::mem::offset_of!(Probe, mxcsr),
        fcw = const core::mem::offset_of!(Probe, fcw),
        report = sym probe_report,
    )
}

unsafe extern "C" fn probe_report(
    from: *mut u8,
    arg: *mut u8,
    sp: usize,
    rbp: usize,
    ret: usize,
    above: usize,
) -> ! {
    let s = arg.cast::<Probe>();
    // SAFETY: as in `pair_a`.
    unsafe {
        (*s).main_sp = from;
        (*s).sp = sp;
        (*s).rbp = rbp;
        (*s).ret = ret;
        (*s).above = above;
        (*s).arg_seen = arg;
        loop {
            (*s).main_sp = X86_64::switch((*s).main_sp);
        }
    }
}

/// Reads MXCSR and the x87 control word.
fn control_words() -> (u32, u16) {
    let (mut mxcsr, mut fcw) = (0u32, 0u16);
    // SAFETY: each store writes a local of its own size; nothing else changes.
    unsafe {
        asm!(
            "stmxcsr [{m}]", // MXCSR into `mxcsr`
            "fnstcw [{f}]",  // the x87 control word into `fcw`
            m = in(reg) &raw mut mxcsr,
            f = in(reg) &raw mut fcw,
            options(nostack, preserves_flags)
        );
    }
    (mxcsr, fcw)
}

/// Loads MXCSR and the x87 control word.
///
/// # Safety
///
/// The values must leave every floating-point exception masked (bits 7–12 of
/// MXCSR, 0–5 of the CW set), so no instruction traps.
unsafe fn set_control_words(mxcsr: u32, fcw: u16) {
    // SAFETY: the loads read the two arguments; the caller's contract keeps
    // every exception masked.
    unsafe {
        asm!(
            "ldmxcsr [{m}]", // `mxcsr` into MXCSR
            "fldcw [{f}]",   // `fcw` into the x87 control word
            m = in(reg) &raw const mxcsr,
            f = in(reg) &raw const fcw,
            options(nostack, preserves_flags)
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn fresh_context_starts_aligned_with_null_rbp_and_default_control_words() {
    let mut stack = TestStack::new();
    let top = stack.top();
    let mut s = Probe {
        main_sp: core::ptr::null_mut(),
        sp: 1,
        rbp: 1,
        ret: 1,
        above: 1,
        arg_seen: core::ptr::null_mut(),
        mxcsr: 0,
        fcw: 0,
    };
    let arg = (&raw mut s).cast::<u8>();
    // SAFETY: as in `two_contexts_ping_pong_a_value`.
    let sp = unsafe { X86_64::init_stack(top, probe_entry, arg) };
    assert_eq!(sp as usize, top as usize - X86_64::INIT_STACK_BYTES);
    // Non-default modes in the creator (round down + flush-to-zero; 53-bit
    // precision + round up), which the fresh context must not inherit.
    let saved = control_words();
    // SAFETY: both values keep every exception masked; `sp` is the fresh
    // context's sp. The originals are back before anything can panic.
    let (back, mine) = unsafe {
        set_control_words(0xBF80, 0x0A7F);
        let back = X86_64::switch(sp);
        let mine = control_words();
        set_control_words(saved.0, saved.1);
        (back, mine)
    };
    assert_eq!(
        s.sp,
        top as usize - 24,
        "entry runs just below its trampoline's frame"
    );
    assert_eq!((s.sp + 8) % 16, 0, "rsp + 8 is 16-byte aligned at entry");
    assert_eq!(s.rbp, 0, "rbp is null at entry");
    let tramp = smarm_x86_64_trampoline as *const () as usize;
    assert!(
        (tramp..tramp + 16).contains(&s.ret),
        "entry returns into the trampoline"
    );
    // SAFETY: `s.ret` lies within the trampoline's code, which is readable.
    let after_call = unsafe { (s.ret as *const [u8; 2]).read() };
    assert_eq!(
        after_call,
        [0x0F, 0x0B],
        "the return address is the trampoline's ud2"
    );
    assert_eq!(s.above, 0, "the trampoline's return slot is null");
    assert_eq!(s.mxcsr, 0x1F80, "MXCSR starts at its reset value");
    assert_eq!(s.fcw, 0x037F, "the x87 CW starts as fninit sets it");
    assert_eq!(s.arg_seen, arg, "arg reaches the entry");
    assert!(stack.holds(back), "the context's saved sp lies on its stack");
    assert_eq!(
        mine,
        (0xBF80, 0x0A7F),
        "the creator's modes survive the round trip"
    );
}

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn init_stack_lays_out_a_suspended_frame() {
    let mut stack = TestStack::new();
    let top = stack.top();
    extern "C" fn never(_: *mut u8, _: *mut u8) -> ! {
        std::process::abort()
    }
    let arg = 0x1234_5678_usize as *mut u8;
    // SAFETY: as in `two_contexts_ping_pong_a_value`; never switched to.
    let sp = unsafe { X86_64::init_stack(top, never, arg) };
    // SAFETY: the 80 bytes at `sp` are init_stack's, within our buffer.
    let words = unsafe { core::slice::from_raw_parts(sp.cast::<u64>(), 10) };
    let tramp = smarm_x86_64_trampoline as *const () as u64;
    assert_eq!(
        words,
        [
            (0x037F << 32) | 0x1F80,   // x87 CW | MXCSR
            0,                         // r15
            0,                         // r14
            0,                         // r13
            never as *const () as u64, // r12 = entry
            arg as u64,                // rbx = arg
            0,                         // rbp
            tramp + 1,                 // `ret` target
            0,                         // the trampoline's return address
            0,                         // padding
        ]
    );
    // SAFETY: the trampoline's first byte is readable code.
    let first = unsafe { (tramp as *const u8).read() };
    assert_eq!(first, 0x90, "the `ret` target skips a one-byte nop");
}

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn init_stack_writes_only_its_bytes() {
    let mut stack = TestStack::new();
    let bytes = stack.0.len() * 16;
    let base = stack.0.as_mut_ptr().cast::<u8>();
    // SAFETY: `base` is the start of the live allocation of `bytes` bytes.
    unsafe { core::ptr::write_bytes(base, 0xA5, bytes) };
    // A top 256 bytes below the end, so bytes above it are observable.
    let top = base.wrapping_add(bytes - 256);
    extern "C" fn never(_: *mut u8, _: *mut u8) -> ! {
        std::process::abort()
    }
    // SAFETY: `top` is 16-aligned with INIT_STACK_BYTES writable below; the
    // context is never switched to.
    unsafe { X86_64::init_stack(top, never, core::ptr::null_mut()) };
    // SAFETY: reading back our own initialised buffer.
    let all = unsafe { core::slice::from_raw_parts(base, bytes) };
    let lo = bytes - 256 - X86_64::INIT_STACK_BYTES;
    assert!(all[..lo].iter().all(|&b| b == 0xA5), "wrote below the frame");
    assert!(all[bytes - 256..].iter().all(|&b| b == 0xA5), "wrote above top");
}

// ---------------------------------------------------------------------------
// Callee-saved state survives a switch

/// MXCSR / x87 CW of the test thread and of the context in the clobber test:
/// different from each other and from the defaults, every exception masked,
/// a status flag set in each MXCSR (the switch carries all 32 bits).
const MAIN_MXCSR: u32 = 0xBFA0; // round down, flush-to-zero, PE flag
const MAIN_FCW: u16 = 0x067F; // 53-bit precision, round down
const JUNK_MXCSR: u32 = 0x5FC1; // round up, denormals-are-zero, IE flag
const JUNK_FCW: u16 = 0x0B7F; // 64-bit precision, round up

struct Clobber {
    main_sp: *mut u8,
    /// The context's MXCSR and x87 CW while it is switched out.
    mxcsr: u32,
    fcw: u16,
    /// Times the context came back from a switch with its own state intact.
    intact: u32,
    /// Times it came back with anything else.
    bad: u32,
}

/// Trashes rbx, rbp, r12–r15, MXCSR and the x87 CW and switches back while
/// they hold junk: the switch must give the test thread its own values back,
/// and the context its junk when it resumes.
unsafe extern "C" fn clobber_entry(from: *mut u8, arg: *mut u8) -> ! {
    let s = arg.cast::<Clobber>();
    // SAFETY: as in `pair_a`; the words never change while it runs.
    let (junk_mx, junk_cw) = unsafe { ((*s).mxcsr, (*s).fcw) };
    let mut main_sp = from;
    loop {
        let (rbx, rbp, r12, r13, r14, r15, ctl): (u64, u64, u64, u64, u64, u64, u64);
        // Why the block below is sound: rbx (reserved by LLVM) and rbp (the
        // frame pointer) are saved on our stack and restored after the
        // switch, as are our own control words; rsp is 16-aligned at the
        // `call` (two pushes and 16 bytes below an asm block's aligned rsp).
        // SAFETY: as above; every other register written is an output or
        // clobbered, and the call is made as the compiler would
        // (`clobber_abi` clobbers the caller-saved registers).
        unsafe {
            asm!(
                "push rbx",                        // keep LLVM's rbx
                "push rbp",                        // keep the frame pointer
                "sub rsp, 16",                     // scratch: junk at [rsp], our own words at [rsp + 8]
                "stmxcsr [rsp + 8]",               // keep our MXCSR
                "fnstcw [rsp + 12]",               // keep our x87 CW
                "mov dword ptr [rsp], {mx:e}",     // junk MXCSR
                "ldmxcsr [rsp]",                   // MXCSR = junk
                "mov word ptr [rsp + 4], {cw:x}",  // junk x87 CW
                "fldcw [rsp + 4]",                 // x87 CW = junk
                "mov rbx, 0xde01",                 // junk into every callee-saved register: rbx = junk
                "mov rbp, 0xde02",                 // rbp = junk
                "mov r12, 0xde03",                 // r12 = junk
                "mov r13, 0xde04",                 // r13 = junk
                "mov r14, 0xde05",                 // r14 = junk
                "mov r15, 0xde06",                 // r15 = junk
                "call {switch}",                   // switch to the test thread (rdi = its sp) with junk live
                "stmxcsr [rsp]",                   // back here: MXCSR as the switch restored it
                "fnstcw [rsp + 4]",                // the x87 CW likewise
                "mov rcx, qword ptr [rsp]",        // both out (bits 48–63 are stale: masked below)
                "mov rsi, rbx",                    // rbx as the switch restored it
                "mov rdx, rbp",                    // rbp as the switch restored it
                "ldmxcsr [rsp + 8]",               // our own MXCSR back
                "fldcw [rsp + 12]",                // our own x87 CW back
                "add rsp, 16",                     // drop the scratch
                "pop rbp",                         // restore the frame pointer
                "pop rbx",                         // restore LLVM's rbx
                mx = in(reg) junk_mx,
                cw = in(reg) junk_cw,
                switch = sym smarm_x86_64_switch,
                inout("rdi") main_sp => _,
                out("rax") main_sp,
                out("rsi") rbx, out("rdx") rbp, out("rcx") ctl,
                out("r12") r12, out("r13") r13, out("r14") r14, out("r15") r15,
                clobber_abi("C"),
            );
        }
        let ok = [rbx, rbp, r12, r13, r14, r15] == [0xde01, 0xde02, 0xde03, 0xde04, 0xde05, 0xde06]
            && ctl & 0xFFFF_FFFF_FFFF == (u64::from(junk_cw) << 32) | u64::from(junk_mx);
        // SAFETY: as in `pair_a`.
        unsafe {
            (*s).main_sp = main_sp;
            if ok {
                (*s).intact += 1;
            } else {
                (*s).bad += 1;
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn callee_saved_state_survives_a_switch() {
    clobber_rounds(MAIN_MXCSR, MAIN_FCW, JUNK_MXCSR, JUNK_FCW);
}

/// Each control word travels on its own: one word, or one sticky status
/// flag, differing while the rest is equal is still carried, and equal
/// words stay as they are. (A shim that compares the words and skips equal
/// ones, tried three times in docs/benchmarks.md, fails here if the compare
/// misses a word.)
#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn control_words_travel_when_either_one_differs() {
    // Only MXCSR's control bits differ.
    clobber_rounds(MAIN_MXCSR, MAIN_FCW, JUNK_MXCSR, MAIN_FCW);
    // Only the x87 control word differs.
    clobber_rounds(MAIN_MXCSR, MAIN_FCW, MAIN_MXCSR, JUNK_FCW);
    // Only one sticky status flag differs (PE), on the defaults.
    clobber_rounds(0x1F80, 0x037F, 0x1FA0, 0x037F);
    // Nothing differs.
    clobber_rounds(MAIN_MXCSR, MAIN_FCW, MAIN_MXCSR, MAIN_FCW);
}

/// Three rounds of the test thread (with `main_mx`, `main_cw`) switching to
/// a context that trashes every callee-saved register (its control words
/// `junk_mx`, `junk_cw`) and switches back: each side must come back with
/// its own registers and words.
fn clobber_rounds(main_mx: u32, main_cw: u16, junk_mx: u32, junk_cw: u16) {
    let mut stack = TestStack::new();
    let mut s = Clobber {
        main_sp: core::ptr::null_mut(),
        mxcsr: junk_mx,
        fcw: junk_cw,
        intact: 0,
        bad: 0,
    };
    // SAFETY: as in `two_contexts_ping_pong_a_value`.
    let mut sp = unsafe { X86_64::init_stack(stack.top(), clobber_entry, (&raw mut s).cast()) };
    // Three rounds: the first resumes the context through the trampoline, the
    // later ones through a suspended switch frame.
    for round in 0..3 {
        let (rbx, rbp, r12, r13, r14, r15, ctl): (u64, u64, u64, u64, u64, u64, u64);
        // SAFETY: as in `clobber_entry`.
        unsafe {
            asm!(
                "push rbx",                        // keep LLVM's rbx
                "push rbp",                        // keep the frame pointer
                "sub rsp, 16",                     // scratch: known words at [rsp], our own at [rsp + 8]
                "stmxcsr [rsp + 8]",               // keep our MXCSR
                "fnstcw [rsp + 12]",               // keep our x87 CW
                "mov dword ptr [rsp], {mx:e}",     // known MXCSR
                "ldmxcsr [rsp]",                   // MXCSR = known value
                "mov word ptr [rsp + 4], {cw:x}",  // known x87 CW
                "fldcw [rsp + 4]",                 // x87 CW = known value
                "mov rbx, 0x1101",                 // known values into every callee-saved register: rbx
                "mov rbp, 0x1102",                 // rbp = known value
                "mov r12, 0x1103",                 // r12 = known value
                "mov r13, 0x1104",                 // r13 = known value
                "mov r14, 0x1105",                 // r14 = known value
                "mov r15, 0x1106",                 // r15 = known value
                "call {switch}",                   // switch to the context (rdi = its sp); it trashes all
                "stmxcsr [rsp]",                   // MXCSR as the switch restored it
                "fnstcw [rsp + 4]",                // the x87 CW likewise
                "mov rcx, qword ptr [rsp]",        // both out (bits 48–63 are stale: masked below)
                "mov rsi, rbx",                    // rbx as the switch restored it
                "mov rdx, rbp",                    // rbp as the switch restored it
                "ldmxcsr [rsp + 8]",               // our own MXCSR back
                "fldcw [rsp + 12]",                // our own x87 CW back
                "add rsp, 16",                     // drop the scratch
                "pop rbp",                         // restore the frame pointer
                "pop rbx",                         // restore LLVM's rbx
                mx = in(reg) main_mx,
                cw = in(reg) main_cw,
                switch = sym smarm_x86_64_switch,
                inout("rdi") sp => _,
                out("rax") sp,
                out("rsi") rbx, out("rdx") rbp, out("rcx") ctl,
                out("r12") r12, out("r13") r13, out("r14") r14, out("r15") r15,
                clobber_abi("C"),
            );
        }
        assert_eq!(
            [rbx, rbp, r12, r13, r14, r15],
            [0x1101, 0x1102, 0x1103, 0x1104, 0x1105, 0x1106],
            "rbx, rbp, r12–r15 restored"
        );
        assert_eq!(ctl as u32, main_mx, "MXCSR restored, status flags included");
        assert_eq!((ctl >> 32) as u16, main_cw, "x87 control word restored");
        assert!(stack.holds(sp), "the context's saved sp lies on its stack");
        assert_eq!(s.bad, 0, "the context resumed with state that was not its own");
        assert_eq!(s.intact, round, "the context resumed with its own state");
    }
}

// ---------------------------------------------------------------------------
// A deep stack

struct Deep {
    main_sp: *mut u8,
    /// Frames whose locals changed while they were switched out.
    bad: u32,
    done: bool,
}

const DEPTH: u32 = 200;

/// Recurses to DEPTH, switching out at every level on the way down and on
/// the way up, and checks each frame's locals after every switch.
fn recurse(s: *mut Deep, depth: u32) -> u32 {
    let mine = [u64::from(depth).wrapping_mul(0x9E37_79B9_7F4A_7C15); 4];
    let mut local = mine;
    // The address escapes, so `local` lives in this frame on the context's stack.
    core::hint::black_box(&mut local);
    // SAFETY: as in `pair_a`.
    unsafe { (*s).main_sp = X86_64::switch((*s).main_sp) };
    let below = if depth < DEPTH { recurse(s, depth + 1) } else { 0 };
    core::hint::black_box(&mut local);
    // SAFETY: as in `pair_a`.
    unsafe {
        (*s).bad += u32::from(local != mine);
        (*s).main_sp = X86_64::switch((*s).main_sp);
    }
    below + 1
}

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn a_deep_stack_survives_a_switch_at_every_frame() {
    unsafe extern "C" fn deep(from: *mut u8, arg: *mut u8) -> ! {
        let s = arg.cast::<Deep>();
        // SAFETY: as in `pair_a`.
        unsafe { (*s).main_sp = from };
        let frames = recurse(s, 1);
        // SAFETY: as in `pair_a`.
        unsafe {
            (*s).bad += u32::from(frames != DEPTH);
            (*s).done = true;
            loop {
                (*s).main_sp = X86_64::switch((*s).main_sp);
            }
        }
    }
    // 1 MiB: DEPTH frames of an unoptimised build fit with room to spare.
    let mut stack = TestStack(vec![0u128; 1 << 16]);
    let mut s = Deep {
        main_sp: core::ptr::null_mut(),
        bad: 0,
        done: false,
    };
    // SAFETY: as in `two_contexts_ping_pong_a_value`.
    let mut sp = unsafe { X86_64::init_stack(stack.top(), deep, (&raw mut s).cast()) };
    let mut switches = 0;
    let mut lowest = usize::MAX;
    loop {
        // SAFETY: `sp` is the context's latest saved sp.
        sp = unsafe { X86_64::switch(sp) };
        assert!(stack.holds(sp));
        lowest = lowest.min(sp as usize);
        switches += 1;
        if s.done {
            break;
        }
    }
    assert_eq!(
        switches,
        2 * DEPTH + 1,
        "one switch per level each way, then done"
    );
    assert_eq!(s.bad, 0, "a frame's locals changed while it was switched out");
    assert!(
        stack.top() as usize - lowest > DEPTH as usize * 16,
        "the recursion really went deep"
    );
}

// ---------------------------------------------------------------------------
// Unwinding: the CFI of the trampoline and of the switch

/// `_Unwind_Reason_Code` values (the Itanium C++ ABI's unwinder, which Rust
/// panics use: libgcc_s on Linux, libunwind in libSystem on Darwin).
const URC_NO_REASON: c_int = 0;
const URC_NORMAL_STOP: c_int = 4;
const URC_END_OF_STACK: c_int = 5;

type TraceFn = extern "C" fn(ctx: *mut c_void, arg: *mut c_void) -> c_int;

extern "C" {
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
}

/// The instruction pointers of one walk, innermost first.
struct Walk {
    ips: [usize; 64],
    len: usize,
    /// What `_Unwind_Backtrace` returned.
    code: c_int,
}

extern "C" fn record_frame(ctx: *mut c_void, arg: *mut c_void) -> c_int {
    let w = arg.cast::<Walk>();
    // SAFETY: `arg` is the Walk `walk` passed in, alive for the walk; `ctx`
    // is the unwinder's context for this frame.
    unsafe {
        if (*w).len == (*w).ips.len() {
            return URC_NORMAL_STOP; // full: stop the walk (it then fails its END_OF_STACK check)
        }
        (*w).ips[(*w).len] = _Unwind_GetIP(ctx);
        (*w).len += 1;
    }
    URC_NO_REASON
}

/// Walks the current stack with the system unwinder.
fn walk() -> Walk {
    let mut w = Walk {
        ips: [0; 64],
        len: 0,
        code: -1,
    };
    // SAFETY: `record_frame` only writes within `w`, which outlives the walk.
    w.code = unsafe { _Unwind_Backtrace(record_frame, (&raw mut w).cast()) };
    w
}

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn a_backtrace_from_an_entry_ends_at_the_trampoline() {
    struct Bt {
        main_sp: *mut u8,
        walk: Option<Walk>,
    }
    unsafe extern "C" fn entry(from: *mut u8, arg: *mut u8) -> ! {
        let s = arg.cast::<Bt>();
        let w = walk();
        // SAFETY: as in `pair_a`.
        unsafe {
            (*s).walk = Some(w);
            (*s).main_sp = from;
            loop {
                (*s).main_sp = X86_64::switch((*s).main_sp);
            }
        }
    }
    let mut stack = TestStack::new();
    let mut s = Bt {
        main_sp: core::ptr::null_mut(),
        walk: None,
    };
    // SAFETY: as in `two_contexts_ping_pong_a_value`.
    let sp = unsafe { X86_64::init_stack(stack.top(), entry, (&raw mut s).cast()) };
    // SAFETY: `sp` is the fresh context's sp.
    unsafe { X86_64::switch(sp) };
    let w = s.walk.expect("the entry ran");
    let ips = &w.ips[..w.len];
    assert_eq!(w.code, URC_END_OF_STACK, "the walk ends cleanly: {ips:x?}");
    let tramp = smarm_x86_64_trampoline as *const () as usize;
    let at = ips
        .iter()
        .position(|ip| (tramp..tramp + 16).contains(ip))
        .unwrap_or_else(|| panic!("the trampoline is on the walk: {ips:x?}"));
    assert!(at >= 1, "the entry is below the trampoline: {ips:x?}");
    assert!(
        ips[at + 1..].iter().all(|&ip| ip == 0),
        "nothing but a null return address above the trampoline: {ips:x?}"
    );
    // libgcc reports the frame above one whose return address is undefined
    // (or read as 0) as a last, null frame; without an FDE for the
    // trampoline it would stop at the trampoline with no null frame.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    assert_eq!(
        ips[at + 1..],
        [0],
        "libgcc unwound the trampoline by its CFI: {ips:x?}"
    );
}

/// Single-steps the switch (the trap flag) and, at every instruction, walks
/// the stack with the system unwinder from a SIGTRAP handler: the frame above
/// the switch must be its caller's while rsp is on the caller's stack, and
/// the target's resume point once rsp is on the target's, and every walk must
/// end cleanly. This is what a debugger or profiler stopped in the shim sees.
#[cfg(target_os = "linux")]
mod step {
    use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    use super::*;

    // Relaxed throughout: the handler runs on the test's own thread, between
    // two of its instructions, so program order already orders every access.
    static SWITCH: AtomicUsize = AtomicUsize::new(0);
    static TARGET_LO: AtomicUsize = AtomicUsize::new(0);
    static TARGET_HI: AtomicUsize = AtomicUsize::new(0);
    static TARGET_RA: AtomicUsize = AtomicUsize::new(0);
    static MAIN_RA: AtomicUsize = AtomicUsize::new(0);
    /// Instructions of the switch stepped with rsp on the caller's stack,
    /// and on the target's.
    static ON_MAIN: AtomicUsize = AtomicUsize::new(0);
    static ON_TARGET: AtomicUsize = AtomicUsize::new(0);
    /// Walks that missed the expected frame or did not end cleanly, and the
    /// offset into the switch of the first one (+1; 0 = none).
    static BAD: AtomicUsize = AtomicUsize::new(0);
    static FIRST_BAD: AtomicUsize = AtomicUsize::new(0);

    const TF: i64 = 0x100;

    /// The word a suspended or fresh context at `sp` will be resumed at (the
    /// switch's `ret` target: offset +56 in the module doc's layouts).
    ///
    /// # Safety
    ///
    /// `sp` is a live context's saved sp.
    unsafe fn resume_address(sp: *mut u8) -> usize {
        // SAFETY: the caller's contract: the frame's 64 bytes are readable.
        unsafe { sp.cast::<usize>().add(7).read() }
    }

    extern "C" fn on_trap(_: c_int, _: *mut libc::siginfo_t, uc: *mut c_void) {
        let uc = uc.cast::<libc::ucontext_t>();
        // SAFETY: the kernel hands a SA_SIGINFO handler the interrupted
        // context; we read rip/rsp and may clear TF in it.
        let gregs = unsafe { &mut (*uc).uc_mcontext.gregs };
        let pc = gregs[libc::REG_RIP as usize] as usize;
        let rsp = gregs[libc::REG_RSP as usize] as usize;
        if pc == TARGET_RA.load(Relaxed) || ON_MAIN.load(Relaxed) + ON_TARGET.load(Relaxed) > 64 {
            // The switch's `ret` ran (or something went astray): stop.
            gregs[libc::REG_EFL as usize] &= !TF;
            return;
        }
        let on_target = (TARGET_LO.load(Relaxed)..TARGET_HI.load(Relaxed)).contains(&rsp);
        if ON_MAIN.load(Relaxed) + ON_TARGET.load(Relaxed) == 0 {
            // First step: at the switch's entry, [rsp] is what `call` pushed.
            // SAFETY: rsp is the test thread's live stack pointer.
            MAIN_RA.store(unsafe { (rsp as *const usize).read() }, Relaxed);
        }
        let expected = if on_target {
            ON_TARGET.fetch_add(1, Relaxed);
            TARGET_RA.load(Relaxed)
        } else {
            ON_MAIN.fetch_add(1, Relaxed);
            MAIN_RA.load(Relaxed)
        };
        let w = walk();
        let ips = &w.ips[..w.len];
        let ok = w.code == URC_END_OF_STACK
            && ips
                .iter()
                .position(|&ip| ip == pc)
                .is_some_and(|i| ips.get(i + 1) == Some(&expected));
        if !ok && BAD.fetch_add(1, Relaxed) == 0 {
            FIRST_BAD.store(pc - SWITCH.load(Relaxed) + 1, Relaxed);
        }
    }

    /// Switches to `sp` with the trap flag set, so every instruction of the
    /// switch traps; returns what the switch returns.
    ///
    /// # Safety
    ///
    /// As [`Arch::switch`], with `on_trap` installed for SIGTRAP.
    unsafe fn stepped_switch(sp: *mut u8) -> *mut u8 {
        let from: *mut u8;
        // SAFETY: pushfq/popfq leave rsp as it was before the `call` (16-
        // aligned at an asm block's entry); the call is made as the compiler
        // would; the handler clears TF once the switch has returned.
        unsafe {
            asm!(
                "pushfq",                      // rflags onto the stack
                "or qword ptr [rsp], {tf}",    // set TF in the copy
                "popfq",                       // TF on: a trap after each instruction from the next one's end
                "call {switch}",               // the first trap is at the switch's first instruction
                tf = const TF,
                switch = sym smarm_x86_64_switch,
                inout("rdi") sp => _,
                out("rax") from,
                clobber_abi("C"),
            );
        }
        from
    }

    #[test]
    #[cfg_attr(miri, ignore = "inline asm")]
    fn every_instruction_of_the_switch_unwinds_to_the_right_frame() {
        struct Echo {
            main_sp: *mut u8,
        }
        unsafe extern "C" fn echo(from: *mut u8, arg: *mut u8) -> ! {
            let s = arg.cast::<Echo>();
            // SAFETY: as in `pair_a`.
            unsafe {
                (*s).main_sp = from;
                loop {
                    (*s).main_sp = X86_64::switch((*s).main_sp);
                }
            }
        }
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value;
        // the handler only reads and writes atomics and walks the stack.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_trap as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            assert_eq!(libc::sigaction(libc::SIGTRAP, &sa, core::ptr::null_mut()), 0);
        }
        let mut stack = TestStack::new();
        let mut s = Echo {
            main_sp: core::ptr::null_mut(),
        };
        SWITCH.store(smarm_x86_64_switch as *const () as usize, Relaxed);
        TARGET_LO.store(stack.0.as_ptr() as usize, Relaxed);
        TARGET_HI.store(stack.top() as usize, Relaxed);
        // SAFETY: as in `two_contexts_ping_pong_a_value`.
        let mut sp = unsafe { X86_64::init_stack(stack.top(), echo, (&raw mut s).cast()) };
        // Round 0 resumes a fresh context (into the trampoline), round 1 a
        // suspended one (into `echo`, after its own switch).
        for round in 0..2 {
            ON_MAIN.store(0, Relaxed);
            ON_TARGET.store(0, Relaxed);
            // SAFETY: `sp` is the context's latest saved sp.
            TARGET_RA.store(unsafe { resume_address(sp) }, Relaxed);
            // SAFETY: as above; the handler is installed.
            sp = unsafe { stepped_switch(sp) };
            assert!(stack.holds(sp));
            let bad = BAD.load(Relaxed);
            assert_eq!(
                bad,
                0,
                "round {round}: {bad} walks went wrong, the first at switch + {:#x}",
                FIRST_BAD.load(Relaxed).wrapping_sub(1)
            );
            // The switch is 21 instructions: the pushes up to `mov rsp, rdi`
            // run on the caller's stack, the rest on the target's.
            assert_eq!(
                ON_MAIN.load(Relaxed),
                11,
                "round {round}: steps on the caller's stack"
            );
            assert_eq!(
                ON_TARGET.load(Relaxed),
                10,
                "round {round}: steps on the target's stack"
            );
        }
        // SAFETY: restoring the default disposition.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            assert_eq!(libc::sigaction(libc::SIGTRAP, &sa, core::ptr::null_mut()), 0);
        }
    }
}

// ---------------------------------------------------------------------------
// The TSC

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn tsc_advances() {
    assert_eq!(
        X86_64::cycles_per_second(),
        None,
        "the TSC's rate is calibrated, not read"
    );
    let a = X86_64::cycles_serialising();
    let mut b = a;
    for _ in 0..10_000_000 {
        b = X86_64::cycles();
        if b > a {
            break;
        }
        X86_64::spin_hint();
    }
    assert!(b > a, "the TSC did not advance");
}
