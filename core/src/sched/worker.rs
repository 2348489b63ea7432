//! The worker loop: scheduling wakes, the run-next slot, finding work (own
//! queue, stealing, timers), idling, an actor's end, and the loop that
//! serves one worker (the module doc's "One worker turn"; the thread's body
//! around it, with its spare duty, is in `blocking`).

#[allow(unused_imports)]
use super::*;

impl<P: Platform, Q: RunQueue<P>> Schedule for Shared<P, Q> {
    fn schedule(&self, a: ActorArc) {
        let c = ctx::<P>();
        // SAFETY: a non-null context is this thread's live worker context.
        // A detached one's worker is served by another thread (its slot is
        // not ours to fill): queue instead.
        if !c.is_null() && ptr::eq(unsafe { (*c).core }, &self.core) && unsafe { !(*c).detached } {
            // The wake-slot handoff: the woken actor runs next here.
            // SAFETY: as above.
            let w = &self.core.workers[unsafe { (*c).index }];
            // SAFETY: as above; the running actor's turn (`enter` clears it).
            unsafe { (*c).woke = ActorArc::as_ptr(&a) };
            self.put_run_next(w, a);
        } else {
            self.push_outside(a);
        }
    }

    fn unpark(&self, word: &AtomicU32) {
        P::wake_all(word);
    }

    #[inline]
    fn pop_queued(&self, index: usize) -> Option<ActorArc> {
        self.pop_queue(&self.core.workers[index])
    }

    #[inline]
    fn requeue(&self, a: ActorArc, index: usize) {
        self.push_yield(a, &self.core.workers[index]);
    }

    #[inline]
    fn nothing_queued_here(&self, index: usize) -> bool {
        // The worker's own part and the overflow (`depth_hint`).
        self.queue.depth_hint(index) == 0
    }

    #[inline]
    fn put_run_next_here(&self, a: ActorArc, index: usize) {
        self.put_run_next(&self.core.workers[index], a);
    }

    #[inline]
    fn queue_here(&self, a: ActorArc, index: usize) {
        self.push(a, &self.core.workers[index]);
    }
}

/// Takes the actor in a run-next slot, if any (the slot holds
/// `ActorArc::into_raw` pointers; its owner's take, or the runtime's teardown
/// after the worker threads are joined).
pub(crate) fn take_slot(slot: &Slot<Actor>) -> Option<ActorArc> {
    let p = slot.take();
    // SAFETY: a non-null slot value is an `ActorArc::into_raw`, now ours.
    (!p.is_null()).then(|| unsafe { ActorArc::from_raw(p) })
}

/// Switches from the worker's stack into actor `a` and returns when it
/// switches back, its sp saved (the sanitizers told of both switches).
///
/// # Safety
///
/// The caller owns `a` (it took it from a queue or slot, or was handed it)
/// and is the worker (or detached host) that runs it on this thread.
#[inline(always)]
pub(crate) unsafe fn resume_actor<P: Platform>(a: &Actor) {
    // SAFETY: contract: we own `a`'s `sp` cell until we publish it again.
    unsafe {
        let to = *a.sp.get();
        let san = crate::actor::sanitizer::worker_to_actor(a);
        // The actor's span is current on this thread exactly while it
        // runs here (crate::seam::trace, "The actor span").
        a.span.enter();
        let back = <P::Arch as Arch>::switch(to);
        a.span.exit();
        crate::actor::sanitizer::worker_resumed(san);
        *a.sp.get() = back;
    }
}

/// What a worker does after running an actor.
pub(crate) enum Next {
    /// Search for work.
    Find,
    /// Run this actor at once (it inherits the timeslice).
    Run(ActorArc),
    /// Leave worker duty: another thread serves this worker now.
    Retire,
}

/// Why [`run_worker`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkerExit {
    /// The runtime finished.
    Finished,
    /// A blocking call handed this worker to another thread.
    Retired,
}

impl<P: Platform, Q: RunQueue<P>> Shared<P, Q> {
    /// Queues a runnable actor and wakes a sleeping worker if needed. The
    /// caller is the thread serving worker `w` (a thread that serves none
    /// calls [`push_outside`](Self::push_outside)).
    #[inline]
    pub(crate) fn push(&self, a: ActorArc, w: &WorkerShared) {
        if self.push_own(a, w) && self.core.idle.notify_one() {
            w.counters.wakeups(1);
        }
    }

    /// [`push`](Self::push) of a yield (the yielder, or the run-next actor
    /// a spent timeslice queues behind it): the idle notify only looks,
    /// without the Dekker fence, whether a worker sleeps. The fence (a
    /// locked instruction, most of a two-worker yield's push) is what
    /// makes a worker that is going to sleep at this moment see the push
    /// or be seen; skipped, such a worker may sleep while `a` waits in
    /// the queue. Nothing is lost: the caller serves `w` and is awake, and
    /// its worker takes `a` (its own part of the queue comes first) before
    /// it could sleep itself; the cost is that `a` waits for it, as an
    /// actor in its run-next slot does, instead of waking a sleeper. A
    /// worker asleep before the push is seen and woken as by `push`.
    #[inline]
    pub(crate) fn push_yield(&self, a: ActorArc, w: &WorkerShared) {
        if self.push_own(a, w) && self.core.idle.may_sleep() && self.core.idle.notify_one() {
            w.counters.wakeups(1);
        }
    }

    /// The queue half of [`push`](Self::push): counts and pushes `a` as
    /// worker `w`'s; returns whether other workers may need a notify (a
    /// one-worker runtime's one worker is the caller).
    #[inline(always)]
    fn push_own(&self, a: ActorArc, w: &WorkerShared) -> bool {
        let counters = &w.counters;
        // Counted before the push: once pushed, another worker may pop and
        // finish the actor before we would count it, and a snapshot taken
        // after its join would see dequeued > enqueued.
        counters.enqueued(1);
        serve::check::<P>(w, "part of the run queue");
        // SAFETY: the caller serves a worker (this function's contract,
        // checked at every call site), and `hand_off` moves a worker's duty
        // with a Release/Acquire edge.
        unsafe { self.queue.push_worker(a, w.index) };
        if self.core.workers.len() == 1 {
            // The one worker is the caller, awake: only workers sleep on
            // the idle list, so the notify's SeqCst fence (a locked
            // instruction per yield) would find nobody to wake.
            debug_assert_eq!(
                self.core.idle.sleepers(),
                0,
                "a one-worker runtime's worker pushes awake"
            );
            return false;
        }
        true
    }

    /// [`push`](Self::push) from a thread that is not (or no longer) a
    /// worker: counted in the outside block.
    pub(crate) fn push_outside(&self, a: ActorArc) {
        self.core.outside.shared_enqueued(1);
        self.queue.push(a);
        if self.core.idle.notify_one() {
            self.core.outside.shared_wakeups(1);
        }
    }

    /// Puts `a` in worker `w`'s run-next slot; a displaced actor is queued.
    #[inline]
    pub(crate) fn put_run_next(&self, w: &WorkerShared, a: ActorArc) {
        serve::check::<P>(w, "run-next slot");
        let old = w.run_next.put(ActorArc::into_raw(a) as *mut Actor);
        if !old.is_null() {
            // SAFETY: the slot holds `ActorArc::into_raw` pointers; `put` handed
            // the displaced one to us.
            self.push(unsafe { ActorArc::from_raw(old) }, w);
        }
    }

    /// Consecutive run-next runs before the queue is served first. With
    /// timeslices on, an actor woken into the slot inherits its waker's
    /// slice, so a ping-pong pair yields when their shared slice is spent
    /// and needs no cap (the cap would hand the queue a full slice for
    /// every three of the pair's turns).
    #[inline]
    pub(crate) fn run_next_cap(&self) -> u32 {
        if self.core.slice_cycles != 0 {
            u32::MAX
        } else {
            RUN_NEXT_CAP
        }
    }

    /// Step 1 of a turn, short of sleeping. The flag says whether the actor
    /// came from this worker's own run-next slot (it inherits the slice).
    ///
    /// # Safety
    ///
    /// `ctx` is the calling worker's context.
    pub(crate) unsafe fn find_work(&self, ctx: *mut WorkerCtx<P>) -> Option<(ActorArc, bool)> {
        // SAFETY: `ctx` is ours (caller contract).
        let (index, streak) = unsafe { ((*ctx).index, &mut (*ctx).streak) };
        let me = &self.core.workers[index];
        serve::check::<P>(me, "run-next slot");
        if P::SEEDED_SCHEDULE {
            self.seeded_pick(me);
        }
        if *streak < self.run_next_cap() {
            if let Some(a) = take_slot(&me.run_next) {
                *streak += 1;
                me.counters.run_next(1);
                return Some((a, true));
            }
        }
        *streak = 0;
        if let Some(a) = self.pop_queue(me) {
            return Some((a, false));
        }
        // The cap skipped the slot and the queue was empty: run the slot.
        if let Some(a) = take_slot(&me.run_next) {
            me.counters.run_next(1);
            return Some((a, false));
        }
        None
    }

    /// Deterministic testing: lets the platform's seeded policy choose the
    /// next actor. The worker's run-next actor joins the queue's tail, then
    /// the queue rotates by `P::pick(len)` (the skipped actors re-queue in
    /// order), so the usual pop below takes the chosen one. O(pick) queue
    /// operations per turn (a port keeps its picks shallow: each operation
    /// may be one of its scheduling points); only a seeded port (one worker
    /// thread running at a time, so the rotation is not raced) compiles it
    /// in.
    #[cold]
    pub(crate) fn seeded_pick(&self, me: &WorkerShared) {
        if let Some(a) = take_slot(&me.run_next) {
            me.counters.enqueued(1);
            // SAFETY: the worker's own turn, on its thread.
            unsafe { self.queue.push_worker(a, me.index) };
        }
        let n = self.queue.len();
        if n < 2 {
            return;
        }
        for _ in 0..P::pick(n) % n {
            // SAFETY: as above.
            let Some(a) = (unsafe { self.queue.pop_worker(me.index) }) else {
                break;
            };
            // SAFETY: as above.
            unsafe { self.queue.push_worker(a, me.index) };
        }
    }

    #[inline]
    pub(crate) fn pop_queue(&self, me: &WorkerShared) -> Option<ActorArc> {
        serve::check::<P>(me, "part of the run queue");
        // A few µs of patience before a steal of another worker's short
        // run of actors (`spin::steal_patience`); this worker's own part
        // is empty when the queue calls it, so the worker waits idle.
        let mut wait = spin::steal_patience::<P>;
        // SAFETY: the caller is the thread serving worker `me` (the loop's
        // turn, or a handoff on one of its actors' stacks).
        if let Some(a) = unsafe { self.queue.pop_worker_patient(me.index, &mut wait) } {
            me.counters.dequeue_at(self.queue.depth_hint(me.index) as u64 + 1);
            // Chain wake: more work than this worker takes, and sleepers.
            if self.core.idle.sleepers() > 0 && !self.queue.is_empty() && self.core.idle.notify_one() {
                me.counters.wakeups(1);
            }
            return Some(a);
        }
        None
    }

    /// Fires the timers due now, if any may be (a Relaxed hint first).
    #[inline]
    pub(crate) fn fire_timers(&self, w: &WorkerShared) {
        let t = &self.core.timers;
        let mut now = 0;
        if t.maybe_due(|| {
            now = P::now_ns();
            now
        }) {
            let n = t.fire(now);
            w.counters.timer_fires(n);
        }
    }

    /// Nothing to run: sleep (until the earliest timer, for the one worker
    /// that claims them), or decide the worker is done. Returns `true` when
    /// the worker should exit.
    pub(crate) fn idle(&self, index: usize) -> bool {
        let core = &self.core;
        if core.finished.load(Ordering::SeqCst) {
            return true;
        }
        if core.shutdown.load(Ordering::SeqCst) && core.timers.next() != timer::NEVER {
            // Shutdown does not wait for timers: fire them all now, so
            // sleepers and timed waits resume and are cancelled (their
            // joiners see `Cancelled`) instead of being abandoned.
            let n = core.timers.fire(u64::MAX);
            core.workers[index].counters.timer_fires(n);
            return false;
        }
        if core.shutdown.load(Ordering::SeqCst) {
            // Every worker idle with nothing queued and nobody inside a
            // blocking call: the remaining actors (if any) are parked with
            // nobody left to wake them. Wake them (from the registry) so
            // they resume, are cancelled and unwind; an actor that swallows
            // the cancellation and parks again is left after a few sweeps.
            let others_idle = core.idle.sleepers() as usize + 1 >= core.workers.len();
            let blocked = core.blocked.load(Ordering::SeqCst);
            // Read after `blocked` (both SeqCst): an unwinder leaving
            // decrements this first, so a stale pair errs towards "a
            // blocking call is in flight" (no sweep yet).
            let unwinders = core.unwinders.load(Ordering::SeqCst);
            if core.live() == 0 {
                self.finish();
                return true;
            }
            // Detached unwinders may wait on parked actors: sweep those
            // while they wait, but finish only once they are back.
            if others_idle && blocked == unwinders {
                // Relaxed: a bound on retries, not a protocol.
                if core.sweeps.fetch_add(1, Ordering::Relaxed) < SHUTDOWN_SWEEPS && self.wake_parked() > 0 {
                    return false;
                }
                // A plain thread's wake (a send from outside) may have
                // queued an actor since `find_work` looked: run it rather
                // than abandon it (loom: `loom_shutdown.rs`,
                // `outside_wake_races_the_sweep`). A push after this look
                // is left over, as `Runtime::stop` documents.
                if self.has_work(index) {
                    return false;
                }
                if blocked == 0 {
                    self.finish();
                    return true;
                }
            }
        }
        let w = &core.workers[index];
        // Due timers first: what they wake lands in our run-next slot, and
        // the sleep below re-checks it.
        self.fire_timers(w);
        let t = &core.timers;
        let claimed = t.claim(index);
        let deadline = if claimed { t.next() } else { timer::NEVER };
        let slept = self.sleep_idle(index, claimed, deadline);
        if claimed {
            t.release(index);
            // Timers remain and other workers sleep without a deadline:
            // hand the role to one of them (we may be about to run a long
            // actor).
            if t.next() != timer::NEVER && core.idle.sleepers() > 0 {
                core.idle.notify_one();
            }
        }
        if slept {
            w.counters.parks(1);
        }
        // Whatever woke us, timers may be due.
        self.fire_timers(w);
        false
    }

    /// The sleep of [`idle`](Self::idle): on the worker's futex word, or in
    /// the IO poller when descriptors are registered and nobody waits
    /// there (module doc of `io`). `deadline`: the earliest timer, for the
    /// worker that `claimed` them. Returns whether it slept.
    fn sleep_idle(&self, index: usize, claimed: bool, deadline: u64) -> bool {
        let core = &self.core;
        let t = &core.timers;
        let w = &core.workers[index];
        let has_work = || {
            self.has_work(index)
                || (claimed && t.changed(deadline))
                // At shutdown, the last worker to go idle must not
                // sleep: it decides that the runtime is finished (two
                // workers checking `others_idle` at once both see the
                // other awake; once on the list, the later sees both).
                || (core.shutdown.load(Ordering::SeqCst)
                    && core.idle.sleepers() as usize >= core.workers.len())
        };
        // No spin while descriptors are registered: readiness is found by
        // the poller, which the sleeper waits in.
        if !P::SEEDED_SCHEDULE && !core.io().is_some_and(|d| d.active()) && self.spin_for_work(deadline) {
            return false;
        }
        let deadline = (deadline != timer::NEVER).then_some(deadline);
        // Descriptors are registered and nobody waits in the poller: this
        // worker sleeps there (module doc of `io`).
        let poller = core.io().filter(|d| d.active() && d.claim());
        match poller {
            Some(d) => {
                let arg: *const io::IoDriver<P> = d;
                let slept = core
                    .idle
                    .sleep_polling(index, has_work, deadline, arg.cast(), &mut |dl| d.wait(dl));
                // Off the idle list now: what the poll wakes lands in our
                // run-next slot (and the queue, waking others to help).
                let (n, woken) = d.dispatch();
                d.release();
                w.counters.io_events(n as u64);
                // Out of the poller for work found elsewhere (a kick, or
                // events that woke nobody: a registration's first
                // writable, say), which may not switch out for a long
                // time: hand the role on to a sleeper, which finds no work
                // and waits in the poller, so IO is served meanwhile. (When
                // the poll woke actors we keep it: the first runs here and
                // the rest went to the queue, whose push woke a sleeper, as
                // tokio does; handing off then too cost a wake per round
                // trip, 2.0x tokio on one connection over two workers.)
                if woken == 0
                    && d.active()
                    && core.idle.sleepers() > 0
                    && self.has_work(index)
                    && core.idle.notify_one()
                {
                    w.counters.wakeups(1);
                }
                slept
            }
            None => core.idle.sleep(index, has_work, deadline),
        }
    }

    /// An actor ended (its stack already dealt with): marks it done, drops
    /// the worker's reference, and wakes its joiner into the run-next slot.
    pub(crate) fn retire(&self, w: &WorkerShared, a: ActorArc, wake: Option<ActorArc>) {
        if let Some(j) = self.end_actor(a, wake, w.index) {
            self.put_run_next(w, j);
        }
    }

    /// The bookkeeping of an actor's end, wherever it ended: marks it done,
    /// drops the caller's reference and counts it gone (in the live count's
    /// shard `shard`: the worker it ended on); returns its joiner if that
    /// must now be scheduled.
    pub(crate) fn end_actor(&self, a: ActorArc, wake: Option<ActorArc>, shard: usize) -> Option<ActorArc> {
        // Release: a joiner never reads it; debugging aid only.
        a.state.store(DONE, Ordering::Release);
        self.unregister(&a);
        drop(a);
        self.core.count_end(shard);
        if self.core.shutdown.load(Ordering::SeqCst) && self.core.live() == 0 {
            self.core.idle.notify_all();
        }
        wake.and_then(ActorArc::wake)
    }

    /// Takes an ended actor out of the registry (dumps).
    pub(crate) fn unregister(&self, a: &Actor) {
        // Relaxed: the shard bits never change after registration, which
        // happened before the actor first ran; `remove` re-reads under the
        // shard's lock.
        let reg = a.reg.load(Ordering::Relaxed);
        if reg != crate::actor::UNREGISTERED {
            self.core.registry[(reg >> 32) as usize].remove(a);
        }
    }
}

/// A fresh context for the thread that serves worker `index` ([`run_worker`]).
fn new_ctx<P: Platform, Q: RunQueue<P>>(shared: &Shared<P, Q>, index: usize) -> WorkerCtx<P> {
    WorkerCtx::<P> {
        core: &shared.core,
        index,
        worker: &shared.core.workers[index],
        current: ptr::null(),
        running: ptr::null(),
        handed: ptr::null(),
        detached: false,
        stacks: Vec::new(),
        nodes: NodeCache::new(),
        streak: 0,
        woke: ptr::null(),
        work_first_run: 0,
        id_next: 0,
        id_end: 0,
        slice_end: if shared.core.slice_cycles != 0 {
            0
        } else {
            u64::MAX
        },
        slice_cycles: shared.core.slice_cycles,
        budget: SAFE_POINT_BUDGET_START,
        budget_len: SAFE_POINT_BUDGET_START,
        last_read: 0,
        timer_turns: TIMER_CHECK_TURNS,
        io_checks: io::IO_POLL_CHECKS,
        resumes: 0,
    }
}

/// Serves worker `index` until the runtime finishes or a blocking call
/// retires this thread from it. `took_over`: the worker's previous thread
/// handed it over for a blocking call (counted here, by the worker's new
/// single writer of its counters).
pub(crate) fn run_worker<P: Platform, Q: RunQueue<P>>(
    shared: &Shared<P, Q>,
    index: usize,
    took_over: bool,
) -> WorkerExit {
    let mut ctx = new_ctx(shared, index);
    let ctxp: *mut WorkerCtx<P> = &mut ctx;
    P::set_current_worker(ctxp.cast());
    let w = &shared.core.workers[index];
    w.server.claim(ctxp.cast());
    if took_over {
        w.counters.blocking_handoffs(1);
    }
    let mut next = Next::Find;
    let exit = loop {
        // Each turn is the worker's: this thread must still serve it.
        serve::check_ctx(w, ctxp, "worker-loop turn");
        // SAFETY: `ctxp` is this worker's context; no reference to it is
        // held across a switch.
        unsafe {
            (*ctxp).timer_turns -= 1;
            if (*ctxp).timer_turns == 0 {
                (*ctxp).timer_turns = TIMER_CHECK_TURNS;
                shared.fire_timers(w);
                // Every few timer checks, a non-blocking poll (counted
                // here, off the per-turn path).
                (*ctxp).io_checks -= 1;
                if (*ctxp).io_checks == 0 {
                    (*ctxp).io_checks = io::IO_POLL_CHECKS;
                    if let Some(d) = shared.core.io() {
                        let n = d.poll_now();
                        w.counters.io_events(n as u64);
                    }
                }
            }
        }
        if P::SEEDED_SCHEDULE {
            P::turn_point();
        }
        let (a, inherit) = match mem::replace(&mut next, Next::Find) {
            Next::Run(a) => (a, true),
            Next::Retire => unreachable!("handled right after the turn that returned it"),
            // SAFETY: `ctxp` is this worker's context.
            Next::Find => match unsafe { shared.find_work(ctxp) } {
                Some(found) => found,
                None => {
                    if shared.idle(index) {
                        break WorkerExit::Finished;
                    }
                    continue;
                }
            },
        };
        // SAFETY: `ctxp` is this worker's context.
        next = unsafe { shared.run(ctxp, a, inherit) };
        if matches!(next, Next::Retire) {
            // This thread gave the worker away (a blocking call or a
            // detached unwind): it must not take the worker's timer or IO
            // turn, whose wakes would go to the slot and queue that its
            // successor owns now.
            break WorkerExit::Retired;
        }
    };
    if exit == WorkerExit::Finished {
        // (A retired thread cleared it in `hand_off`; its successor's
        // claim may stand there now.)
        w.server.clear();
    }
    P::set_current_worker(ptr::null_mut());
    // SAFETY: the worker loop has ended; nothing else uses the context.
    let stacks = unsafe { &mut (*ctxp).stacks };
    shared.core.pool.free_local(stacks);
    // (The node cache frees its blocks when `ctx` drops.)
    exit
}
