extern crate std;

use std::vec;
use std::vec::Vec;

use super::*;

/// A 64 KiB heap stack (no guard page: these tests don't overflow).
struct TestStack(Vec<u128>);

impl TestStack {
    fn new() -> Self {
        TestStack(vec![0u128; 4096])
    }
    fn top(&mut self) -> *mut u8 {
        self.0.as_mut_ptr_range().end.cast()
    }
}

struct PingPong {
    main_sp: *mut u8,
    counter: u64,
}

unsafe extern "C" fn pingpong_entry(from: *mut u8, arg: *mut u8) -> ! {
    let state = arg.cast::<PingPong>();
    // SAFETY: `arg` is the PingPong the test owns for the whole run; the
    // test thread is suspended while we touch it.
    unsafe {
        (*state).main_sp = from;
        loop {
            (*state).counter += 1;
            (*state).main_sp = X86_64::switch((*state).main_sp);
        }
    }
}

#[test]
fn ping_pong_hands_values_across() {
    let mut stack = TestStack::new();
    let mut state = PingPong {
        main_sp: core::ptr::null_mut(),
        counter: 0,
    };
    // SAFETY: the stack is 16-aligned (u128 elements), 64 KiB, and outlives
    // every switch into it; the entry never returns.
    let mut sp = unsafe { X86_64::init_stack(stack.top(), pingpong_entry, (&raw mut state).cast()) };
    for i in 1..=10_000u64 {
        // SAFETY: `sp` is the context's latest saved sp.
        sp = unsafe { X86_64::switch(sp) };
        assert_eq!(state.counter, i);
    }
}

struct Clobber {
    main_sp: *mut u8,
}

unsafe extern "C" fn clobber_entry(from: *mut u8, arg: *mut u8) -> ! {
    let state = arg.cast::<Clobber>();
    // SAFETY: as in `pingpong_entry`.
    unsafe {
        (*state).main_sp = from;
        loop {
            // Trash every callee-saved register and the FP control state,
            // then switch back: the switch must restore the test's values.
            // (rbx is reserved by LLVM: it is trashed and restored in place; the
            // other four stay trashed across the switch.)
            asm!(
                "mov r12, -1", "mov r13, -1", "mov r14, -1", "mov r15, -1",
                "push rbx", "mov rbx, -1", "pop rbx",
                out("r12") _, out("r13") _, out("r14") _, out("r15") _,
            );
            let mxcsr: u32 = 0x7F80; // flush-to-zero on
            asm!("ldmxcsr [{0}]", in(reg) &mxcsr);
            (*state).main_sp = X86_64::switch((*state).main_sp);
        }
    }
}

#[test]
fn callee_saved_state_survives_a_switch() {
    let mut stack = TestStack::new();
    let mut state = Clobber {
        main_sp: core::ptr::null_mut(),
    };
    // SAFETY: as in `ping_pong_hands_values_across`.
    let sp = unsafe { X86_64::init_stack(stack.top(), clobber_entry, (&raw mut state).cast()) };
    let mut mxcsr_before = 0u32;
    let mut mxcsr_after = 0u32;
    let (r12, r13, r14, r15, rbx): (u64, u64, u64, u64, u64);
    // SAFETY: stmxcsr stores 4 bytes into a local we own.
    unsafe { asm!("stmxcsr [{0}]", in(reg) &mut mxcsr_before) };
    // SAFETY: we load known values into callee-saved registers, call the
    // switch exactly as the compiler would (it is an extern "C" fn, so we
    // declare the caller-saved registers clobbered), and read them back.
    // rbx is reserved by LLVM, so it is saved and restored around the test.
    unsafe {
        asm!(
            "push rbx",
            "mov rbx, 0x1111", "mov r12, 0x2222", "mov r13, 0x3333",
            "mov r14, 0x4444", "mov r15, 0x5555",
            "call {switch}",
            "mov rsi, rbx",
            "pop rbx",
            switch = sym smarm_x86_64_switch,
            in("rdi") sp,
            out("rsi") rbx,
            out("r12") r12, out("r13") r13, out("r14") r14, out("r15") r15,
            clobber_abi("C"),
        );
    }
    // SAFETY: as above.
    unsafe { asm!("stmxcsr [{0}]", in(reg) &mut mxcsr_after) };
    assert_eq!(
        (rbx, r12, r13, r14, r15),
        (0x1111, 0x2222, 0x3333, 0x4444, 0x5555)
    );
    assert_eq!(
        mxcsr_before & 0xFFC0,
        mxcsr_after & 0xFFC0,
        "MXCSR control bits restored"
    );
}

#[test]
fn cycles_advance() {
    let a = X86_64::cycles_serialising();
    let mut b = a;
    for _ in 0..1_000_000 {
        b = X86_64::cycles();
        if b > a {
            break;
        }
    }
    assert!(b > a, "the TSC did not advance");
}
