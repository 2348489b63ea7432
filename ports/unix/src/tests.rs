//! Unit tests of the shared code that needs no port (the port-level tests,
//! through `Platform`, are in each port).

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
