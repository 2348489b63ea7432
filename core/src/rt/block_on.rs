//! [`Runtime::block_on`]: runs a closure as an actor and waits for it. The
//! closure may borrow from the caller's frame (it need not be `'static`),
//! as `std::thread::scope`'s threads may: the call returns only once the
//! actor is done with everything the closure borrowed.
//!
//! # Soundness
//!
//! `block_on` erases the closure's lifetime `'a` to spawn it (the spawn
//! path needs `'static`, as `std::thread::Builder::spawn_unchecked` erases
//! it under `thread::scope`). That is sound because nothing that borrows
//! `'a` (the closure, its captures, its value) is touched after
//! `block_on` returns or unwinds, and it does neither before the actor has
//! finished with all of it:
//!
//! 1. **The actor lets go of the closure before it reports.** The entry
//!    harness (`spawn::join::make_entry`) completes the join slot (stores
//!    `DONE`, Release) only after the body is gone, on every path: it
//!    returned (it wrote its value into the caller's `Option<T>` first),
//!    it unwound (a panic, a kill, a shutdown's cancellation: the unwind
//!    drops its captures on the way to the entry's `catch_unwind`), or it
//!    never started (a kill or cancellation before the first resume: the
//!    harness drops it first). The join slot itself carries `()`: no `T`
//!    is left in the slot or the entry for anyone to drop later.
//! 2. **The caller's wait cannot end early.** It blocks its OS thread on
//!    the slot's word until it reads `DONE` (Acquire, pairing with the
//!    store above, so the value written through the pointer is visible):
//!    no deadline, and not the actor-side join, which an unwinding actor
//!    gives up at shutdown. Between the spawn and `DONE` the caller runs
//!    nothing that unwinds; should the port's wait ever unwind, a guard
//!    aborts the process rather than free the borrowed frame.
//! 3. **From an actor, the wait is a `blocking` call**, and the spawn
//!    happens inside it: `blocking`'s resume point (where a pending kill
//!    of the caller unwinds it) comes before anything is spawned, and a
//!    kill or cancellation that arrives during the wait shows only when
//!    `blocking` returns, after `DONE` (the caller's frame, on its own
//!    stack, stays put meanwhile; shutdown waits for blocking calls). An
//!    unwinding caller (`block_on` in a destructor) detaches and waits in
//!    place the same way. The worker's duty moves to another thread, so
//!    the actor runs even on a one-worker runtime.
//! 4. **The runtime outlives the call.** `block_on` borrows it, and only
//!    its owner can shut it down (`shutdown(self)`, `Drop`), so no
//!    shutdown can abandon the actor (drop it unrun, or unmap its stack
//!    without unwinding) while the caller waits, from this thread or any
//!    other.
//! 5. An actor that recovers from a stack overflow (`recover_overflow`)
//!    abandons its frames without unwinding: what the closure captured is
//!    leaked, never touched again (what `mem::forget` may do).
//!
//! There is no guard to forget (the leak that sank the first scoped
//! threads' `JoinGuard`): the waiting is inside the call.

use alloc::boxed::Box;
use core::marker::PhantomData;
use core::mem;

use crate::actor::exit::JoinError;
use crate::rt::runtime::Runtime;
use crate::sched::queue::RunQueue;
use crate::seam::platform::Platform;

/// Where the actor puts the closure's value: the caller's `Option<T>`.
struct OutSlot<T>(*mut Option<T>);

// SAFETY: the pointer is written once, by the actor (on any thread), and
// read by the caller only after the join's Release/Acquire handshake; the
// value crosses threads, hence `T: Send`.
unsafe impl<T: Send> Send for OutSlot<T> {}

impl<T> OutSlot<T> {
    /// Stores the value (by value: the closure captures the whole slot).
    ///
    /// # Safety
    ///
    /// The caller's `Option<T>` is alive and nobody else touches it until
    /// the actor's join slot says `DONE`.
    unsafe fn put(self, v: T) {
        // SAFETY: forwarded contract.
        unsafe { *self.0 = Some(v) };
    }
}

/// Aborts the process if dropped: armed while an actor may still use what
/// the caller's frame lends it (module doc, point 2).
struct AbortIfUnwound<P: Platform>(PhantomData<fn() -> P>);

impl<P: Platform> Drop for AbortIfUnwound<P> {
    fn drop(&mut self) {
        P::abort("smarm: Runtime::block_on's wait unwound while its actor may still use what it borrows");
    }
}

impl<P: Platform, Q: RunQueue<P>> Runtime<P, Q> {
    /// Runs `f` as an actor of this runtime and waits for its value. `f`
    /// may borrow from the caller (it need not be `'static`): the call
    /// returns only once the actor is done with it, whatever ends it.
    ///
    /// From a plain thread the thread blocks. From an actor (of this
    /// runtime or another) the wait is a [`blocking`](crate::blocking)
    /// call: the worker's duty moves to another thread while this one
    /// waits, and a kill (or a shutdown's cancellation) of the caller
    /// that arrives meanwhile takes effect once `f`'s actor has finished,
    /// never before (the caller's frame is what `f` borrows).
    ///
    /// ```ignore
    /// // With a port crate (`smarm_linux`, `smarm_darwin`) as `smarm`:
    /// let rt = smarm::Runtime::builder().workers(2).build().unwrap();
    /// let words = vec!["a", "bb", "ccc"];
    /// let mut calls = 0;
    /// let total = rt.block_on(|| {
    ///     calls += 1; // a `&mut` to the caller's local
    ///     words.iter().map(|w| w.len()).sum::<usize>()
    /// });
    /// assert_eq!((total, calls), (6, 1));
    /// ```
    ///
    /// # Panics
    ///
    /// If the actor did not return a value: with the [`JoinError`]'s
    /// message (`actor 7 panicked: boom`, `actor 7 was killed`, ...),
    /// after `f`'s captures are dropped. If no stack can be mapped.
    pub fn block_on<'a, F, T>(&self, f: F) -> T
    where
        F: FnOnce() -> T + Send + 'a,
        T: Send + 'a,
    {
        // Off actors `blocking` just runs the closure (module doc, point 3).
        match crate::sched::blocking::<P, _>(|| self.run_and_wait(f)) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }

    /// Spawns `f` with its lifetime erased and blocks this OS thread until
    /// its actor is done (module doc).
    fn run_and_wait<'a, F, T>(&self, f: F) -> Result<T, JoinError>
    where
        F: FnOnce() -> T + Send + 'a,
        T: Send + 'a,
    {
        let mut out: Option<T> = None;
        let slot = OutSlot(&mut out);
        let body: Box<dyn FnOnce() + Send + 'a> = Box::new(move || {
            let v = f();
            // SAFETY: `out` lives in the caller's frame, which waits below
            // until this actor's slot is DONE (stored after this returns)
            // and touches `out` only then.
            unsafe { slot.put(v) };
        });
        // SAFETY: only the lifetime changes (same fat pointer). The body
        // and everything it borrows for `'a` are gone before the join
        // slot reads DONE, and this frame does not return or unwind before
        // that (module doc, points 1-5).
        let body = unsafe {
            mem::transmute::<Box<dyn FnOnce() + Send + 'a>, Box<dyn FnOnce() + Send + 'static>>(body)
        };
        // A spawn that fails drops `body` unrun; nothing was started.
        let h = self.spawn(body);
        let armed = AbortIfUnwound::<P>(PhantomData);
        let r = h.join_blocking();
        mem::forget(armed);
        r.map(|()| out.take().expect("the body writes its value before it returns"))
    }
}
