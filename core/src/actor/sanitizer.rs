//! Fiber annotations for ThreadSanitizer and AddressSanitizer.
//!
//! Both sanitizers keep per-stack state (TSan: a clock and a shadow call
//! stack per thread; ASan: the bounds of the current stack and its fake
//! stack) and neither can see an asm context switch. Each switch between a
//! worker and an actor therefore tells them about it:
//!
//! - TSan (`--cfg smarm_tsan`): each actor is a fiber, created at its first
//!   run and destroyed when it is retired (or dropped unrun at shutdown).
//!   Before every switch the code switches TSan's fiber too: to the actor's
//!   fiber before a worker resumes it, to the worker's fiber (read with
//!   `__tsan_get_current_fiber` before the resume) before the actor switches
//!   back. The switch synchronises (flags 0): both sides run on one OS
//!   thread, one after the other, so each really happens before the other.
//!   Cross-thread edges (an actor moving to another worker) still come only
//!   from the queues' and the state word's atomics, which TSan checks.
//! - ASan (`--cfg smarm_asan`): `__sanitizer_start_switch_fiber` before and
//!   `__sanitizer_finish_switch_fiber` after every switch, including the
//!   actor's first entry (no fake stack to restore) and its final exit (a
//!   null fake-stack save: the stack is dying). The actor learns the bounds
//!   of the worker's stack from each `finish` (it may resume on another
//!   worker thread). A stack from the pool is unpoisoned before a new actor
//!   is bootstrapped on it: the frame of the actor that used it last
//!   (`actor_entry`, which never returns) left its redzones poisoned.
//!
//! Overflow recovery (`fault::overflow_exit`) reaches its final switch
//! already on the worker's stack (the fault handler moved it there), still
//! in the actor's TSan fiber and, to ASan, on the actor's stack: it ends the
//! actor with the same last `actor_to_worker` as a normal exit. Its test
//! passes under both sanitizers (docs/reliability.md).
//!
//! With neither cfg set every hook is an empty `#[inline(always)]` function
//! and [`ActorSan`] is a zero-sized type: the switch path compiles exactly as
//! without this module. Setting a cfg without the matching
//! `-Zsanitizer=` flag fails at link time (the entry points live in the
//! sanitizer's runtime).

use crate::actor::Actor;

#[cfg(any(smarm_tsan, smarm_asan))]
mod imp {
    use super::Actor;
    use core::cell::Cell;
    use core::ffi::c_void;
    use core::ptr;

    #[cfg(smarm_tsan)]
    extern "C" {
        fn __tsan_get_current_fiber() -> *mut c_void;
        fn __tsan_create_fiber(flags: u32) -> *mut c_void;
        fn __tsan_destroy_fiber(fiber: *mut c_void);
        fn __tsan_switch_to_fiber(fiber: *mut c_void, flags: u32);
    }

    #[cfg(smarm_asan)]
    extern "C" {
        fn __sanitizer_start_switch_fiber(
            fake_stack_save: *mut *mut c_void,
            bottom: *const c_void,
            size: usize,
        );
        fn __sanitizer_finish_switch_fiber(
            fake_stack_save: *mut c_void,
            bottom_old: *mut *const c_void,
            size_old: *mut usize,
        );
        fn __asan_unpoison_memory_region(addr: *const c_void, size: usize);
    }

    /// Per-actor sanitizer state; owned like the actor's `sp` (by whoever
    /// owns the actor per its state word).
    #[derive(Debug)]
    pub(crate) struct ActorSan {
        /// The actor's TSan fiber (null until its first run).
        #[cfg(smarm_tsan)]
        fiber: Cell<*mut c_void>,
        /// The fiber of the worker that last resumed the actor.
        #[cfg(smarm_tsan)]
        sched_fiber: Cell<*mut c_void>,
        /// The actor's saved ASan fake stack while it is switched out.
        #[cfg(smarm_asan)]
        fake: Cell<*mut c_void>,
        /// Bounds of the stack of the worker that last resumed the actor.
        #[cfg(smarm_asan)]
        sched_bottom: Cell<*const c_void>,
        #[cfg(smarm_asan)]
        sched_size: Cell<usize>,
    }

    impl ActorSan {
        pub(crate) const fn new() -> Self {
            ActorSan {
                #[cfg(smarm_tsan)]
                fiber: Cell::new(ptr::null_mut()),
                #[cfg(smarm_tsan)]
                sched_fiber: Cell::new(ptr::null_mut()),
                #[cfg(smarm_asan)]
                fake: Cell::new(ptr::null_mut()),
                #[cfg(smarm_asan)]
                sched_bottom: Cell::new(ptr::null()),
                #[cfg(smarm_asan)]
                sched_size: Cell::new(0),
            }
        }
    }

    /// What the worker keeps across one resume of an actor.
    pub(crate) struct WorkerSwitch {
        #[cfg(smarm_asan)]
        fake: *mut c_void,
    }

    /// A fresh actor's stack `[lo, hi)` is about to be bootstrapped.
    #[inline(always)]
    pub(crate) fn fresh_stack(_range: (usize, usize)) {
        #[cfg(smarm_asan)]
        // SAFETY: the range is a mapped stack no context runs on; unpoisoning
        // only clears ASan's shadow for it.
        unsafe {
            __asan_unpoison_memory_region(_range.0 as *const c_void, _range.1 - _range.0)
        };
    }

    /// The worker is about to switch into `a`.
    #[inline(always)]
    pub(crate) fn worker_to_actor(a: &Actor) -> WorkerSwitch {
        #[allow(unused_mut)]
        let mut w = WorkerSwitch {
            #[cfg(smarm_asan)]
            fake: ptr::null_mut(),
        };
        #[cfg(smarm_tsan)]
        // SAFETY: TSan's fiber API; the actor's fiber is created once and
        // destroyed only by `retired`/`dropped`, after its last run.
        unsafe {
            let s = &a.san;
            s.sched_fiber.set(__tsan_get_current_fiber());
            if s.fiber.get().is_null() {
                s.fiber.set(__tsan_create_fiber(0));
            }
            __tsan_switch_to_fiber(s.fiber.get(), 0);
        }
        #[cfg(smarm_asan)]
        // SAFETY: `life.stack` is the actor's usable stack, mapped while it
        // lives; `w.fake` outlives the switch (it is the caller's).
        unsafe {
            let (lo, hi) = a.life.stack();
            __sanitizer_start_switch_fiber(&mut w.fake, lo as *const c_void, hi - lo);
        }
        #[cfg(not(smarm_asan))]
        let _ = a;
        w
    }

    /// The worker is back from an actor (first thing after the switch).
    #[inline(always)]
    pub(crate) fn worker_resumed(_w: WorkerSwitch) {
        #[cfg(smarm_asan)]
        // SAFETY: `_w.fake` is what the matching start saved.
        unsafe {
            __sanitizer_finish_switch_fiber(_w.fake, ptr::null_mut(), ptr::null_mut())
        };
    }

    /// First thing on the actor's stack (its first entry).
    #[inline(always)]
    pub(crate) fn actor_started(_a: &Actor) {
        #[cfg(smarm_asan)]
        // SAFETY: the first switch onto this stack: no fake stack to restore.
        unsafe {
            let (mut bottom, mut size) = (ptr::null(), 0);
            __sanitizer_finish_switch_fiber(ptr::null_mut(), &mut bottom, &mut size);
            _a.san.sched_bottom.set(bottom);
            _a.san.sched_size.set(size);
        }
    }

    /// The running actor is about to switch to its worker; `last`: for good
    /// (its stack will not run again).
    #[inline(always)]
    pub(crate) fn actor_to_worker(_a: &Actor, _last: bool) {
        #[cfg(smarm_tsan)]
        // SAFETY: `sched_fiber` is the live fiber of the worker that resumed
        // us (it is switched to next).
        unsafe {
            __tsan_switch_to_fiber(_a.san.sched_fiber.get(), 0)
        };
        #[cfg(smarm_asan)]
        // SAFETY: the bounds came from the `finish` of our latest resume;
        // a null save on the last switch tells ASan to drop our fake stack.
        unsafe {
            let s = &_a.san;
            let save = if _last { ptr::null_mut() } else { s.fake.as_ptr() };
            __sanitizer_start_switch_fiber(save, s.sched_bottom.get(), s.sched_size.get());
        }
    }

    /// The actor was resumed (first thing after its switch returns).
    #[inline(always)]
    pub(crate) fn actor_resumed(_a: &Actor) {
        #[cfg(smarm_asan)]
        // SAFETY: `fake` is what our last `actor_to_worker` saved.
        unsafe {
            let s = &_a.san;
            let (mut bottom, mut size) = (ptr::null(), 0);
            __sanitizer_finish_switch_fiber(s.fake.get(), &mut bottom, &mut size);
            s.sched_bottom.set(bottom);
            s.sched_size.set(size);
        }
    }

    /// A direct handoff: the running actor `_a` is about to switch straight
    /// to `_b` (`sched::handoff`), which will return to the same worker.
    #[inline(always)]
    pub(crate) fn actor_to_actor(_a: &Actor, _b: &Actor) {
        #[cfg(smarm_tsan)]
        // SAFETY: TSan's fiber API; `_b`'s fiber is made here if it never
        // ran (a fresh actor handed over to), as `worker_to_actor` makes
        // it; its worker's fiber is `_a`'s, which it will switch back to.
        unsafe {
            let s = &_b.san;
            s.sched_fiber.set(_a.san.sched_fiber.get());
            if s.fiber.get().is_null() {
                s.fiber.set(__tsan_create_fiber(0));
            }
            __tsan_switch_to_fiber(s.fiber.get(), 0);
        }
        #[cfg(smarm_asan)]
        // SAFETY: `_b`'s stack is mapped while it lives; `_a`'s fake stack
        // is kept for its next resume.
        unsafe {
            let (lo, hi) = _b.life.stack();
            __sanitizer_start_switch_fiber(_a.san.fake.as_ptr(), lo as *const c_void, hi - lo);
        }
    }

    /// After a direct handoff resumed `_b` (after [`actor_resumed`]): its
    /// worker's stack is `_a`'s, not the stack it came from.
    #[inline(always)]
    pub(crate) fn handed_over(_a: &Actor, _b: &Actor) {
        #[cfg(smarm_asan)]
        {
            _b.san.sched_bottom.set(_a.san.sched_bottom.get());
            _b.san.sched_size.set(_a.san.sched_size.get());
        }
    }

    /// The actor ended (its worker retires it; it never runs again).
    #[inline(always)]
    pub(crate) fn retired(_a: &Actor) {
        #[cfg(smarm_tsan)]
        {
            let f = _a.san.fiber.replace(ptr::null_mut());
            if !f.is_null() {
                // SAFETY: the fiber is not the current one (its worker's is)
                // and is never switched to again.
                unsafe { __tsan_destroy_fiber(f) };
            }
        }
    }
}

#[cfg(not(any(smarm_tsan, smarm_asan)))]
mod imp {
    use super::Actor;

    /// Zero-sized without the sanitizer cfgs.
    #[derive(Debug)]
    pub(crate) struct ActorSan;

    impl ActorSan {
        #[inline(always)]
        pub(crate) const fn new() -> Self {
            ActorSan
        }
    }

    pub(crate) struct WorkerSwitch;

    #[inline(always)]
    pub(crate) fn fresh_stack(_range: (usize, usize)) {}
    #[inline(always)]
    pub(crate) fn worker_to_actor(_a: &Actor) -> WorkerSwitch {
        WorkerSwitch
    }
    #[inline(always)]
    pub(crate) fn worker_resumed(_w: WorkerSwitch) {}
    #[inline(always)]
    pub(crate) fn actor_started(_a: &Actor) {}
    #[inline(always)]
    pub(crate) fn actor_to_worker(_a: &Actor, _last: bool) {}
    #[inline(always)]
    pub(crate) fn actor_resumed(_a: &Actor) {}
    #[inline(always)]
    pub(crate) fn actor_to_actor(_a: &Actor, _b: &Actor) {}
    #[inline(always)]
    pub(crate) fn handed_over(_a: &Actor, _b: &Actor) {}
    #[inline(always)]
    pub(crate) fn retired(_a: &Actor) {}
}

pub(crate) use imp::*;

#[cfg(all(test, not(any(smarm_tsan, smarm_asan))))]
mod tests {
    #[test]
    fn off_the_sanitizer_cfgs_the_state_is_zero_sized() {
        // The hooks are empty `#[inline(always)]` fns; the per-actor state
        // adds nothing to the control block.
        assert_eq!(core::mem::size_of::<super::ActorSan>(), 0);
        assert_eq!(core::mem::size_of::<super::WorkerSwitch>(), 0);
    }
}
