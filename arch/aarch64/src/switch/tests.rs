//! Tests of the switch, the bootstrap and the counter. They run natively on
//! an aarch64 host or under qemu-user (`cargo test -p smarm-arch-aarch64
//! --target aarch64-unknown-linux-gnu`, see docs/platforms.md).
//!
//! A panic inside a context would try to unwind out of an `extern "C"` entry
//! (an abort), so the contexts record what they see and the test thread
//! asserts after switching back.

extern crate std;

use std::vec;
use std::vec::Vec;

use core::arch::asm;

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
        let range = self.0.as_ptr_range();
        (range.start as usize..range.end as usize).contains(&(sp as usize))
            && (sp as usize).is_multiple_of(16)
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
            (*s).b_sp = Aarch64::switch((*s).b_sp);
        }
        loop {
            (*s).main_sp = Aarch64::switch((*s).main_sp);
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
            a_sp = Aarch64::switch(a_sp);
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
            Aarch64::init_stack(stack_a.top(), pair_a, arg),
            Aarch64::init_stack(stack_b.top(), pair_b, arg),
        )
    };
    s.b_sp = sp_b;
    // SAFETY: `sp_a` is A's fresh sp; A switches back here when done.
    let a_now = unsafe { Aarch64::switch(sp_a) };
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
                (*s).main_sp = Aarch64::switch((*s).main_sp);
            }
        }
    }
    let mut stack = TestStack::new();
    let mut s = Echo {
        main_sp: core::ptr::null_mut(),
        value: 0,
    };
    // SAFETY: as in `two_contexts_ping_pong_a_value`.
    let mut sp = unsafe { Aarch64::init_stack(stack.top(), echo, (&raw mut s).cast()) };
    for i in 0..10_000u64 {
        // Hand `i` in; the context hands back `3i + 1`.
        s.value = i;
        // SAFETY: `sp` is the context's latest saved sp.
        sp = unsafe { Aarch64::switch(sp) };
        assert_eq!(s.value, i * 3 + 1);
        assert!(stack.holds(sp));
    }
}

// ---------------------------------------------------------------------------
// The register state a fresh context starts with

/// What the first instruction of an entry saw.
struct Probe {
    main_sp: *mut u8,
    sp: usize,
    fp: usize,
    lr: usize,
    arg_seen: *mut u8,
}

/// An entry that captures sp, fp and lr before any prologue runs, then
/// tail-calls `probe_report(from, arg, sp, fp, lr)`.
#[unsafe(naked)]
unsafe extern "C" fn probe_entry(from: *mut u8, arg: *mut u8) -> ! {
    naked_asm!(
        "mov x2, sp",      // third argument: sp as the trampoline left it
        "mov x3, x29",     // fourth argument: fp as the trampoline left it
        "mov x4, x30",     // fifth argument: lr as the trampoline left it
        "b {report}",      // tail-call the Rust half (x0, x1 untouched)
        report = sym probe_report,
    )
}

unsafe extern "C" fn probe_report(from: *mut u8, arg: *mut u8, sp: usize, fp: usize, lr: usize) -> ! {
    let s = arg.cast::<Probe>();
    // SAFETY: as in `pair_a`.
    unsafe {
        (*s).main_sp = from;
        (*s).sp = sp;
        (*s).fp = fp;
        (*s).lr = lr;
        (*s).arg_seen = arg;
        loop {
            (*s).main_sp = Aarch64::switch((*s).main_sp);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn fresh_context_starts_aligned_with_null_fp_and_lr() {
    let mut stack = TestStack::new();
    let top = stack.top();
    let mut s = Probe {
        main_sp: core::ptr::null_mut(),
        sp: 1,
        fp: 1,
        lr: 1,
        arg_seen: core::ptr::null_mut(),
    };
    let arg = (&raw mut s).cast::<u8>();
    // SAFETY: as in `two_contexts_ping_pong_a_value`.
    let sp = unsafe { Aarch64::init_stack(top, probe_entry, arg) };
    assert_eq!(sp as usize, top as usize - Aarch64::INIT_STACK_BYTES);
    // SAFETY: `sp` is the fresh context's sp.
    let back = unsafe { Aarch64::switch(sp) };
    assert_eq!(s.sp, top as usize, "entry runs at the top of its stack");
    assert_eq!(s.sp % 16, 0, "sp is 16-byte aligned at entry");
    assert_eq!(s.fp, 0, "fp is null at entry");
    assert_eq!(s.lr, 0, "lr is null at entry");
    assert_eq!(s.arg_seen, arg, "arg reaches the entry");
    assert!(stack.holds(back), "the context's saved sp lies on its stack");
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
    unsafe { Aarch64::init_stack(top, never, core::ptr::null_mut()) };
    // SAFETY: reading back our own initialised buffer.
    let all = unsafe { core::slice::from_raw_parts(base, bytes) };
    let lo = bytes - 256 - Aarch64::INIT_STACK_BYTES;
    assert!(all[..lo].iter().all(|&b| b == 0xA5), "wrote below the frame");
    assert!(all[bytes - 256..].iter().all(|&b| b == 0xA5), "wrote above top");
}

// ---------------------------------------------------------------------------
// Callee-saved registers survive a switch

struct Clobber {
    main_sp: *mut u8,
}

/// Trashes x19–x29 and d8–d15 with junk and switches back while they hold
/// it: the switch must give the test thread its own values back.
unsafe extern "C" fn clobber_entry(from: *mut u8, arg: *mut u8) -> ! {
    let s = arg.cast::<Clobber>();
    let mut main_sp = from;
    loop {
        // SAFETY: x19 (reserved by LLVM) and fp are saved on our stack and
        // restored after the switch; every other register written is declared
        // an output or clobbered, and the call is made as the compiler would
        // (caller-saved registers clobbered by `clobber_abi`).
        unsafe {
            asm!(
                "stp x19, x29, [sp, #-16]!", // keep the registers LLVM reserves
                "mov x19, #0xde19",          // junk into every callee-saved register: x19 = junk
                "mov x20, #0xde20",          // x20 = junk
                "mov x21, #0xde21",          // x21 = junk
                "mov x22, #0xde22",          // x22 = junk
                "mov x23, #0xde23",          // x23 = junk
                "mov x24, #0xde24",          // x24 = junk
                "mov x25, #0xde25",          // x25 = junk
                "mov x26, #0xde26",          // x26 = junk
                "mov x27, #0xde27",          // x27 = junk
                "mov x28, #0xde28",          // x28 = junk
                "mov x29, #0xde29",          // fp too: x29 = junk
                "mov x9, #0xd008",           // junk bit pattern for d8
                "fmov d8, x9",               // d8 = junk
                "fmov d9, x9",               // d9 = junk
                "fmov d10, x9",              // d10 = junk
                "fmov d11, x9",              // d11 = junk
                "fmov d12, x9",              // d12 = junk
                "fmov d13, x9",              // d13 = junk
                "fmov d14, x9",              // d14 = junk
                "fmov d15, x9",              // d15 = junk
                "bl {switch}",               // switch to the test thread (x0 = its sp) with junk live
                "ldp x19, x29, [sp], #16",   // back here: restore LLVM's x19 and fp
                switch = sym smarm_aarch64_switch,
                inout("x0") main_sp,
                out("x20") _, out("x21") _, out("x22") _, out("x23") _, out("x24") _,
                out("x25") _, out("x26") _, out("x27") _, out("x28") _,
                out("v8") _, out("v9") _, out("v10") _, out("v11") _,
                out("v12") _, out("v13") _, out("v14") _, out("v15") _,
                clobber_abi("C"),
            );
        }
        // SAFETY: as in `pair_a`.
        unsafe { (*s).main_sp = main_sp };
    }
}

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn callee_saved_registers_survive_a_switch() {
    let mut stack = TestStack::new();
    let mut s = Clobber {
        main_sp: core::ptr::null_mut(),
    };
    // SAFETY: as in `two_contexts_ping_pong_a_value`.
    let mut sp = unsafe { Aarch64::init_stack(stack.top(), clobber_entry, (&raw mut s).cast()) };
    // Three rounds: the first resumes through the trampoline, the later ones
    // through a suspended switch frame.
    for _ in 0..3 {
        let (x19, x29, x20, x21, x22, x23, x24, x25, x26, x27, x28): (
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
        );
        let (d8, d9, d10, d11, d12, d13, d14, d15): (f64, f64, f64, f64, f64, f64, f64, f64);
        // SAFETY: as in `clobber_entry`; x9 and x10 carry x19 and fp out
        // before they are restored.
        unsafe {
            asm!(
                "stp x19, x29, [sp, #-16]!", // keep the registers LLVM reserves
                "mov x19, #0x1119",          // known values into every callee-saved register: x19 = known value
                "mov x20, #0x1120",          // x20 = known value
                "mov x21, #0x1121",          // x21 = known value
                "mov x22, #0x1122",          // x22 = known value
                "mov x23, #0x1123",          // x23 = known value
                "mov x24, #0x1124",          // x24 = known value
                "mov x25, #0x1125",          // x25 = known value
                "mov x26, #0x1126",          // x26 = known value
                "mov x27, #0x1127",          // x27 = known value
                "mov x28, #0x1128",          // x28 = known value
                "mov x29, #0x1129",          // fp too: x29 = known value
                "mov x9, #0x1108",           // bit pattern for d8
                "fmov d8, x9",               // d8 = 0x1108
                "mov x9, #0x1109",           // bit pattern for d9
                "fmov d9, x9",               // d9 = 0x1109
                "mov x9, #0x1110",           // bit pattern for d10
                "fmov d10, x9",              // d10 = 0x1110
                "mov x9, #0x1111",           // bit pattern for d11
                "fmov d11, x9",              // d11 = 0x1111
                "mov x9, #0x1112",           // bit pattern for d12
                "fmov d12, x9",              // d12 = 0x1112
                "mov x9, #0x1113",           // bit pattern for d13
                "fmov d13, x9",              // d13 = 0x1113
                "mov x9, #0x1114",           // bit pattern for d14
                "fmov d14, x9",              // d14 = 0x1114
                "mov x9, #0x1115",           // bit pattern for d15
                "fmov d15, x9",              // d15 = 0x1115
                "bl {switch}",               // switch to the context (x0 = its sp); it trashes them all
                "mov x9, x19",               // x19 as the switch restored it
                "mov x10, x29",              // fp as the switch restored it
                "ldp x19, x29, [sp], #16",   // restore LLVM's x19 and fp
                switch = sym smarm_aarch64_switch,
                inout("x0") sp,
                out("x9") x19, out("x10") x29,
                out("x20") x20, out("x21") x21, out("x22") x22, out("x23") x23, out("x24") x24,
                out("x25") x25, out("x26") x26, out("x27") x27, out("x28") x28,
                out("v8") d8, out("v9") d9, out("v10") d10, out("v11") d11,
                out("v12") d12, out("v13") d13, out("v14") d14, out("v15") d15,
                clobber_abi("C"),
            );
        }
        assert_eq!(
            [x19, x20, x21, x22, x23, x24, x25, x26, x27, x28, x29],
            [0x1119, 0x1120, 0x1121, 0x1122, 0x1123, 0x1124, 0x1125, 0x1126, 0x1127, 0x1128, 0x1129],
            "x19–x29 restored"
        );
        assert_eq!(
            [d8, d9, d10, d11, d12, d13, d14, d15].map(f64::to_bits),
            [0x1108, 0x1109, 0x1110, 0x1111, 0x1112, 0x1113, 0x1114, 0x1115],
            "d8–d15 restored"
        );
        assert!(stack.holds(sp), "the context's saved sp lies on its stack");
    }
}

// ---------------------------------------------------------------------------
// The generic timer

#[test]
#[cfg_attr(miri, ignore = "inline asm")]
fn counter_advances_and_reports_its_frequency() {
    let hz = Aarch64::cycles_per_second().expect("cntfrq_el0 is programmed");
    assert!(hz > 0);
    let a = Aarch64::cycles_serialising();
    let mut b = a;
    for _ in 0..10_000_000 {
        b = Aarch64::cycles();
        if b > a {
            break;
        }
        Aarch64::spin_hint();
    }
    assert!(b > a, "cntvct_el0 did not advance");
}
