//! Unit tests of the shared code that needs no port: stacks, stack info,
//! the current-worker slot, the alternate signal stack. The tests through
//! `Platform` (a runtime, the fault handler's view of an actor) are in
//! each port.

use smarm_core::StackError;

use crate::stack;

#[test]
fn page_size_is_a_power_of_two() {
    let page = crate::page_size();
    assert!(page.is_power_of_two() && page >= 4096, "{page}");
    assert_eq!(crate::page_size(), page, "read once, the same every time");
}

#[test]
#[cfg_attr(miri, ignore = "Miri does not support mprotect")]
fn stacks_are_guarded_page_multiples() {
    let page = crate::page_size();
    for want in [1, page - 1, page, 64 * 1024 + 3] {
        let stack = stack::alloc(want).unwrap();
        assert!(stack.usable() >= want);
        assert_eq!(stack.usable() % page, 0);
        assert_eq!(stack.guard, page);
        assert_eq!(stack.base as usize % page, 0);
        // The whole usable range is writable.
        // SAFETY: `[base + guard, top)` is mapped read-write.
        unsafe { core::ptr::write_bytes(stack.base.add(stack.guard), 0x5A, stack.usable()) };
        // SAFETY: from `stack::alloc`; nothing runs on it.
        unsafe { stack::free(stack) };
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri does not support mprotect")]
fn impossible_stack_is_an_error_not_a_panic() {
    assert_eq!(
        stack::alloc(usize::MAX).unwrap_err(),
        StackError::OutOfMaps { errno: libc::ENOMEM }
    );
    assert!(matches!(
        stack::alloc(usize::MAX / 2),
        Err(StackError::OutOfMaps { .. } | StackError::Os { .. })
    ));
}

#[test]
#[cfg_attr(miri, ignore = "Miri does not support mprotect or mincore")]
fn touched_counts_from_the_top_down_to_the_lowest_resident_page() {
    let page = crate::page_size();
    let stack = stack::alloc(8 * page).unwrap();
    let (lo, hi) = stack.usable_range();
    // SAFETY: the top two pages of the usable range are mapped read-write.
    unsafe { core::ptr::write_bytes((hi - 2 * page) as *mut u8, 1, 2 * page) };
    let touched = crate::stackinfo::touched(lo, hi, page).expect("mincore works on a mapped range");
    assert!(
        (2 * page..=8 * page).contains(&touched),
        "{touched} bytes of {}",
        8 * page
    );
    assert_eq!(crate::stackinfo::touched(hi, hi, page), None, "an empty range");
    assert_eq!(crate::stackinfo::touched(lo + 1, hi, page), None, "unaligned");
    // SAFETY: from `stack::alloc`; nothing runs on it.
    unsafe { stack::free(stack) };
}

crate::current_worker_slot!();

#[test]
fn current_worker_is_per_thread() {
    let mut here = 0u8;
    let p = (&raw mut here).cast::<()>();
    assert!(current_worker_slot::get().is_null());
    current_worker_slot::set(p);
    assert_eq!(current_worker_slot::get(), p);
    std::thread::spawn(|| assert!(current_worker_slot::get().is_null()))
        .join()
        .unwrap();
    current_worker_slot::set(core::ptr::null_mut());
}

/// The calling thread's alternate signal stack.
fn alt_stack_now() -> libc::stack_t {
    let mut cur = core::mem::MaybeUninit::<libc::stack_t>::zeroed();
    // SAFETY: a query (null new stack) into a valid out-pointer.
    let rc = unsafe { libc::sigaltstack(core::ptr::null(), cur.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: zero-initialised, then written by the kernel.
    unsafe { cur.assume_init() }
}

#[test]
#[cfg_attr(miri, ignore = "Miri does not support sigaltstack")]
fn alt_stack_is_installed_and_put_back() {
    std::thread::spawn(|| {
        let before = alt_stack_now();
        let alt = crate::fault::AltStack::install().expect("an alternate stack maps");
        let during = alt_stack_now();
        assert_eq!(during.ss_flags & libc::SS_DISABLE, 0);
        assert!(during.ss_size >= crate::fault::ALT_STACK_SIZE);
        assert_eq!(during.ss_sp as usize % crate::page_size(), 0);
        drop(alt);
        let after = alt_stack_now();
        if before.ss_flags & libc::SS_DISABLE != 0 {
            assert_ne!(after.ss_flags & libc::SS_DISABLE, 0, "disabled again");
        } else {
            assert_eq!((after.ss_sp, after.ss_size), (before.ss_sp, before.ss_size));
        }
    })
    .join()
    .unwrap();
}

fn says_nothing(_: &mut dyn core::fmt::Write) -> core::fmt::Result {
    Ok(())
}

fn says_a(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
    write!(out, "smarm: actor 1 \"a\" panicked:")
}

fn says_b(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
    write!(out, "smarm: actor 2 panicked:")
}

fn fails_half_way(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
    write!(out, "partial")?;
    Err(core::fmt::Error)
}

#[test]
fn the_panic_hook_names_the_first_describer_that_writes() {
    use crate::panic::describe_first;
    assert_eq!(describe_first(&[]), "");
    assert_eq!(describe_first(&[says_nothing]), "", "off actors: no line");
    assert_eq!(
        describe_first(&[says_nothing, says_a, says_b]),
        "smarm: actor 1 \"a\" panicked:"
    );
    assert_eq!(describe_first(&[says_b, says_a]), "smarm: actor 2 panicked:");
    assert_eq!(
        describe_first(&[fails_half_way, says_b]),
        "smarm: actor 2 panicked:",
        "a failed write leaves nothing behind"
    );
}

#[test]
fn each_describer_is_installed_once() {
    crate::panic::install_panic_hook(says_a);
    crate::panic::install_panic_hook(says_b);
    crate::panic::install_panic_hook(says_a);
    let got = crate::panic::installed();
    let count = |f: smarm_core::DescribePanic| got.iter().filter(|&&g| g as usize == f as usize).count();
    assert_eq!((count(says_a), count(says_b)), (1, 1), "{} installed", got.len());
}
