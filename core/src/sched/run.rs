//! One actor's turn on a worker: resume it, then act on the request it left
//! (yield, park, spawn, exit, block, detach, rejoin, overflow).

#[allow(unused_imports)]
use super::*;

impl<P: Platform, Q: RunQueue<P>> Shared<P, Q> {
    /// Steps 2–4: runs `a` until it switches back, then carries out its
    /// request. `inherit`: keep the current timeslice (the actor was handed
    /// over by the last turn or woken into our run-next slot).
    ///
    /// # Safety
    ///
    /// `ctx` is the calling worker's context.
    // long fn: one match arm per request, each a few lines of state-word
    // protocol that reads best next to the others (the loom replica in
    // core/tests/loom_shutdown.rs mirrors it as one step); split, the arms
    // would pass the worker's state through a dozen helpers.
    pub(crate) unsafe fn run(&self, ctx: *mut WorkerCtx<P>, a: ActorArc, inherit: bool) -> Next {
        // SAFETY: (whole body) `ctx` is ours; we own `a` (we took it from a
        // queue/slot or were handed it), so its cells are ours until we
        // publish it again; the actor that comes back (`a`, or one a direct
        // handoff passed the turn to) is ours again once it switched out.
        unsafe {
            let index = (*ctx).index;
            let w = &self.core.workers[index];
            self.core.enter(ctx, &a, inherit);
            (*ctx).running = ActorArc::into_raw(a);
            resume_running::<P>(ctx);
            // Whoever switched back to this worker: `a`, or the last of a
            // chain of direct handoffs that started from it.
            let a = ActorArc::from_raw(mem::replace(&mut (*ctx).running, ptr::null()));
            self.core.leave(ctx, &a);
            match mem::replace(&mut *a.request.get(), Request::None) {
                Request::Yield => {
                    a.state.store(RUNNABLE, Ordering::Relaxed);
                    self.push_yield(a, w);
                    Next::Find
                }
                Request::YieldBehind => {
                    a.state.store(RUNNABLE, Ordering::Relaxed);
                    serve::check::<P>(w, "run-next slot");
                    match take_slot(&w.run_next) {
                        // The slot's actor runs now (`expire` gave it a
                        // fresh slice) and the yielder waits in the slot.
                        Some(next) => {
                            self.put_run_next(w, a);
                            Next::Run(next)
                        }
                        // Not expected (`expire` saw the actor there and
                        // only this thread takes from the slot): a plain
                        // yield then.
                        None => {
                            self.push(a, w);
                            Next::Find
                        }
                    }
                }
                r @ (Request::Park | Request::ParkLent) => {
                    match park_switched(a, matches!(r, Request::ParkLent)) {
                        // The waker's registration holds it now (or, lent, the
                        // parked actor its own reference).
                        None => Next::Find,
                        Some(a) => {
                            a.state.store(RUNNING, Ordering::Relaxed);
                            Next::Run(a)
                        }
                    }
                }
                Request::Spawn(child) => {
                    self.put_run_next(w, a);
                    Next::Run(child)
                }
                Request::Exit(wake) => {
                    crate::actor::sanitizer::retired(&a);
                    if let Some(stack) = (*a.stack.get()).take() {
                        self.core.pool.put(&mut (*ctx).stacks, stack);
                    }
                    self.retire(w, a, wake);
                    Next::Find
                }
                Request::Block => {
                    self.core.blocked.fetch_add(1, Ordering::SeqCst);
                    if !self.hand_off(index) {
                        // No thread to take over (the OS refused one): the
                        // call runs here and blocks this worker, as it
                        // would without `blocking`; nothing is lost.
                        self.core.blocked.fetch_sub(1, Ordering::SeqCst);
                        return Next::Run(a);
                    }
                    // From here on this thread is no longer worker `index`:
                    // it touches none of the worker's shared state again.
                    P::set_current_worker(ptr::null_mut());
                    resume_actor::<P>(&a);
                    match mem::replace(&mut *a.request.get(), Request::None) {
                        Request::Rejoin => {}
                        _ => P::abort("smarm: an actor left a blocking call without rejoining"),
                    }
                    a.state.store(RUNNABLE, Ordering::Relaxed);
                    self.push_outside(a);
                    self.core.blocked.fetch_sub(1, Ordering::SeqCst);
                    Next::Retire
                }
                Request::Detach => self.detached(ctx, index, a),
                Request::Overflowed(wake) => {
                    // The frames on the stack were abandoned without
                    // unwinding and may have lent its memory out (scoped
                    // threads, pinned wait nodes): never reuse or unmap it.
                    // (Taking the descriptor out is the leak: `RawStack` has
                    // no destructor, and the actor's drop no longer sees it.)
                    let _leaked: Option<RawStack> = (*a.stack.get()).take();
                    crate::actor::sanitizer::retired(&a);
                    self.retire(w, a, wake);
                    self.after_overflow(index)
                }
                // Back from a blocking call that ran on the worker (no
                // thread could take over): a yield.
                Request::Rejoin => {
                    a.state.store(RUNNABLE, Ordering::Relaxed);
                    self.push(a, w);
                    Next::Find
                }
                Request::None => P::abort("smarm: an actor switched out without a request"),
                Request::Spawned => {
                    P::abort("smarm: a spawn carried out by a direct handoff reached the worker loop")
                }
            }
        }
    }

    /// After an overflow ended an actor on this thread, which still serves
    /// worker `index`: what next. An overflow in the middle of an unwind
    /// abandons that unwind, and std's per-thread panic count stays raised
    /// for good (nothing lowers it but the `catch_unwind` the unwind never
    /// reaches): `panicking()` would be true for every actor this thread
    /// runs later, whose mutex guards would then poison, whose parks would
    /// detach and whose kills would be absorbed as if raised in an unwind.
    /// So the thread hands the worker to another and retires
    /// (`worker_thread` ends a retired thread that is still panicking). If
    /// no thread can take over (the OS refused one), it serves on, as it
    /// did before the overflow; nothing is lost, but later actors here
    /// see `panicking()` (docs/overflow.md).
    #[cold]
    fn after_overflow(&self, index: usize) -> Next {
        if P::panicking() && self.hand_off(index) {
            Next::Retire
        } else {
            Next::Find
        }
    }

    /// `Request::Detach` (module doc, "Unwinding", step 3): hands worker
    /// `index` to another thread and resumes the unwinding actor here,
    /// with this context marked detached, until it sends `Rejoin`. If no
    /// thread can take over (the OS refused one), this thread keeps the
    /// duty and serves it again once the actor rejoins (meanwhile the
    /// worker waits with the actor, as `blocking` without a thread does).
    ///
    /// # Safety
    ///
    /// As [`run`](Self::run); `a` has just switched out with `Detach`.
    #[cold]
    pub(crate) unsafe fn detached(&self, ctx: *mut WorkerCtx<P>, index: usize, a: ActorArc) -> Next {
        let core = &self.core;
        core.blocked.fetch_add(1, Ordering::SeqCst);
        core.unwinders.fetch_add(1, Ordering::SeqCst);
        let handed = self.hand_off(index);
        // SAFETY: (whole body) `ctx` is ours; we own `a` until it is queued.
        unsafe {
            // From here on, if `handed`, this thread is no longer worker
            // `index`: neither it nor the actor touches that worker's
            // shared state (the context's own caches stay ours).
            (*ctx).detached = true;
            (*ctx).current = ActorArc::as_ptr(&a);
            resume_actor::<P>(&a);
            (*ctx).current = ptr::null();
            // Handed off, this thread stays detached until it retires: the
            // wakes of what follows (the Overflowed branch's `end_actor`)
            // must not use the slot or queue of the worker it gave away.
            (*ctx).detached = handed;
            let req = mem::replace(&mut *a.request.get(), Request::None);
            core.unwinders.fetch_sub(1, Ordering::SeqCst);
            match req {
                Request::Rejoin => {}
                Request::Overflowed(wake) => {
                    // Overflow recovery while detached: as in `run`, the
                    // stack is abandoned; the joiner is woken through the
                    // queue (this thread may own no worker).
                    let _leaked: Option<RawStack> = (*a.stack.get()).take();
                    crate::actor::sanitizer::retired(&a);
                    if let Some(j) = self.end_actor(a, wake, index) {
                        self.push_outside(j);
                    }
                    core.blocked.fetch_sub(1, Ordering::SeqCst);
                    return if handed {
                        Next::Retire
                    } else {
                        self.after_overflow(index)
                    };
                }
                _ => P::abort("smarm: a detached actor switched out without rejoining"),
            }
            if !handed {
                core.blocked.fetch_sub(1, Ordering::SeqCst);
                return Next::Run(a);
            }
            a.state.store(RUNNABLE, Ordering::Relaxed);
            self.push_outside(a);
            core.blocked.fetch_sub(1, Ordering::SeqCst);
            Next::Retire
        }
    }
}
