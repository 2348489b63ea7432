//! Starting an actor: its control block around an entry, its first stack
//! frame, and the entry trampoline every actor's stack begins in.

#[allow(unused_imports)]
use super::*;

impl<P: Platform> RtCore<P> {
    /// Reserves what a new actor needs (a stack, an id) and makes its
    /// [`Life`]: from worker context `c`'s caches (its stack cache, its
    /// block of ids), or, with `c` null (any other thread), from the shared
    /// pool and counter. A `stack` size (usable bytes, already checked
    /// against the bounds) other than the runtime's is mapped for this
    /// actor alone, bypassing the pool.
    ///
    /// # Safety
    ///
    /// `c` is null or the calling thread's live worker context of this
    /// runtime, with no other reference to it live.
    pub(crate) unsafe fn reserve(
        &self,
        c: *mut WorkerCtx<P>,
        name: Option<Arc<str>>,
        stack: Option<usize>,
    ) -> Result<(LifeRef, RawStack), SpawnError> {
        // SAFETY: forwarded contract.
        let stack = unsafe { self.take_stack(c, stack) }?;
        // SAFETY: forwarded contract.
        let id = unsafe { self.new_id(c) };
        Ok((
            Life::new_block(
                id,
                name,
                stack.usable_range(),
                self.mailbox_depths,
                block_alloc::<P>,
                block_free::<P>,
            ),
            stack,
        ))
    }

    /// A stack for a new actor: from `c`'s cache, or (null `c`) the shared
    /// pool; a `stack` size other than the runtime's is mapped for it alone.
    ///
    /// # Safety
    ///
    /// As [`reserve`](Self::reserve).
    pub(crate) unsafe fn take_stack(
        &self,
        c: *mut WorkerCtx<P>,
        stack: Option<usize>,
    ) -> Result<RawStack, SpawnError> {
        let own = stack
            .map(|bytes| bytes.div_ceil(P::page_size()) * P::page_size())
            .filter(|&bytes| bytes != self.pool.usable());
        Ok(match (own, c.is_null()) {
            (Some(bytes), _) => P::stack_alloc(bytes)?,
            (None, true) => self.pool.get_one()?,
            // SAFETY: contract: `c` is this thread's context, unaliased.
            (None, false) => self.pool.get(unsafe { &mut (*c).stacks })?,
        })
    }

    /// A new actor id: from `c`'s block of ids, or (null `c`) the shared
    /// counter.
    ///
    /// # Safety
    ///
    /// As [`reserve`](Self::reserve).
    pub(crate) unsafe fn new_id(&self, c: *mut WorkerCtx<P>) -> u64 {
        if c.is_null() {
            // Relaxed: ids only need uniqueness.
            return self.next_id.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: contract: `c` is this thread's context, unaliased.
        let c = unsafe { &mut *c };
        if c.id_next == c.id_end {
            // Relaxed: ids only need uniqueness.
            c.id_next = self.next_id.fetch_add(ID_BLOCK, Ordering::Relaxed);
            c.id_end = c.id_next + ID_BLOCK;
        }
        c.id_next += 1;
        c.id_next - 1
    }

    /// The control block of a new actor around `entry` on `stack` (from
    /// [`reserve`](Self::reserve) with the same `c`), bootstrapped to start
    /// in [`actor_entry`], counted and registered (in `c`'s registry shard,
    /// or the outside one when `c` is null). The caller starts it. `shared`:
    /// `life` is a reserved actor's, which others may hold already.
    ///
    /// # Safety
    ///
    /// As [`reserve`](Self::reserve).
    pub(crate) unsafe fn new_actor(
        &self,
        c: *mut WorkerCtx<P>,
        life: LifeRef,
        stack: RawStack,
        entry: Entry,
        shared: bool,
    ) -> ActorArc {
        let top = crate::sched::stack::colored_top(&stack, life.id);
        crate::actor::sanitizer::fresh_stack(stack.usable_range());
        // SAFETY: written once by the builder before the runtime is shared.
        let rt = unsafe { *self.sched.0.get() }.expect("runtime published before use");
        let id = life.id;
        // The caller's `life` reference moves into the control block, in
        // the same block (no count to bump here and drop again below).
        // SAFETY: `life` came from `reserve` (or a reservation) and is
        // spawned once: its control block was never made.
        let actor = unsafe {
            life.make_actor(shared, |life| {
                Actor::new(id, entry, stack, P::stack_free, rt, life)
            })
        };
        let life = &actor.life;
        // SAFETY: `top` is 64-aligned, at most 1/64 of the stack below the
        // end of a fresh mapping of at least the runtime's minimum stack
        // size (`colored_top`); `actor_entry::<P>` takes
        // the actor pointer, which stays valid while the actor runs (its
        // worker holds an `ActorArc`).
        let sp = unsafe {
            <P::Arch as Arch>::init_stack(top, actor_entry::<P>, ActorArc::as_ptr(&actor) as *mut u8)
        };
        // SAFETY: the actor is not yet shared.
        actor.sp.with_mut(|p| unsafe { *p = sp });
        crate::seam::trace::spawned(life.id, life.name.as_deref(), || {
            // SAFETY: `current_actor` returns the running actor, alive
            // while it runs (it is the caller).
            current_actor::<P>().map_or(0, |p| unsafe { (*p).id })
        });
        // The spawner's shard of the live count and of the registry: its
        // worker's, or the plain threads' (the last).
        let shard = if c.is_null() {
            self.outside.shared_spawned(1);
            self.workers.len()
        } else {
            // SAFETY: contract, as in `reserve`.
            let c = unsafe { &*c };
            if !c.detached {
                self.workers[c.index].counters.spawned(1);
            }
            c.index
        };
        self.count_spawn(shard);
        self.registry[shard].add(shard as u32, &actor);
        actor
    }
}

/// Work-first spawns in a row on one worker, none of whose spawners has
/// resumed there since, after which the next spawn there goes help-first
/// into the run queue (`start_here`): a chain of spawns on a busy worker
/// holds at most this many stacks waiting, a spawn tree shallower than
/// this is not affected.
pub(crate) const WORK_FIRST_RUN: u32 = 16;

/// Starts `child`, spawned by the running actor `me`:
///
/// - **Help-first when the worker has nothing else to run** (its run-next
///   slot empty, nothing queued on its part of the run queue): `child`
///   takes the slot and `me` goes on. A spawner that spawns and ends (a
///   chain, a server's accept loop) leaves no stack waiting behind it;
///   a spawner that joins at once switches into the child at the join
///   ([`run_joined_here`]), as a work-first spawn would have.
/// - **Work-first otherwise**: `me` switches to `child` at once and waits
///   in the run-next slot. A spawn tree (skynet) then runs depth-first:
///   every spawn under work already waiting starts its child, instead of
///   holding every unstarted child's stack at once (help-first
///   everywhere made skynet 1M 3.5x slower, docs/benchmarks.md).
/// - **Help-first into the queue after [`WORK_FIRST_RUN`] work-first
///   spawns in a row** (no spawner resumed here meanwhile): `child` goes
///   to the back of the worker's part of the run queue and `me` goes on.
///   A chain (each actor spawns the next and ends) started on a worker
///   with other work would otherwise hold a stack per link: each
///   work-first spawner waits in the slot, the next spawn displaces it to
///   the queue, and the displaced spawners keep the queue non-empty, so
///   every later link is work-first too. A tree never reaches the bound
///   unless it is that deep: a leaf's end resumes its spawner, which
///   starts the run again.
///
/// No resume point after the switch: the caller gets the child's handle
/// even if it was killed meanwhile (the kill unwinds it at its next resume
/// point).
///
/// # Safety
///
/// `me` is the calling (running) actor and `c` its worker context.
pub(crate) unsafe fn start_here<P: Platform>(c: *mut WorkerCtx<P>, me: *const Actor, child: ActorArc) {
    // SAFETY: `c` is the running actor's worker context, live, and this
    // thread serves its worker, the slot's one user (a detached context's
    // worker is served by another thread: work-first then, as before).
    unsafe {
        let rt = (*me).rt.as_ref();
        if !(*c).detached {
            let index = (*c).index;
            if (*(*c).worker).run_next.peek().is_null() && rt.nothing_queued_here(index) {
                // As a wake puts a woken actor (`Shared::schedule`): the
                // slot is empty, so nothing is displaced and nobody is
                // notified.
                (*c).woke = ActorArc::as_ptr(&child);
                rt.put_run_next_here(child, index);
                return;
            }
            if (*c).work_first_run >= WORK_FIRST_RUN {
                (*c).work_first_run = 0;
                rt.queue_here(child, index);
                return;
            }
            (*c).work_first_run += 1;
        }
    }
    // SAFETY: contract.
    unsafe { suspend_no_resume_point::<P>(c, me, Request::Spawn(child)) };
    // Back, on this worker or another: a spawner resumed there, so the
    // run of work-first spawns waiting on it is over.
    let c = ctx::<P>();
    if !c.is_null() {
        // SAFETY: a non-null context is this thread's live worker context
        // (the counter is the context's own, detached or not).
        unsafe { (*c).work_first_run = 0 };
    }
}

/// A join from the running actor `me` of the actor whose control block is
/// `child`: when `child` waits in this worker's run-next slot (a
/// help-first spawn's child, or one woken there), `me` switches into it
/// now, as a work-first spawn does, and waits in the slot; the join then
/// mostly finds the result in, with no park and no wake. Otherwise
/// nothing happens.
///
/// # Safety
///
/// `me` is the calling (running) actor and `c` its worker context.
pub(crate) unsafe fn run_joined_here<P: Platform>(
    c: *mut WorkerCtx<P>,
    me: *const Actor,
    child: *const Actor,
) {
    // SAFETY: as in `start_here`: the slot is this thread's own while it
    // serves the (not detached) context's worker.
    unsafe {
        if child.is_null() || (*c).detached {
            return;
        }
        let w = &*(*c).worker;
        serve::check::<P>(w, "run-next slot");
        let slot = &w.run_next;
        if slot.peek().cast_const() != child {
            return;
        }
        let Some(a) = take_slot(slot) else { return };
        suspend_no_resume_point::<P>(c, me, Request::Spawn(a));
    }
}

/// Entry of every actor's stack: runs its body, then exits to the worker.
unsafe extern "C" fn actor_entry<P: Platform>(from: *mut u8, arg: *mut u8) -> ! {
    let me = arg as *const Actor;
    // SAFETY: `arg` is the actor, kept alive by the worker running it; the
    // running actor owns `sched_sp` and `entry`.
    unsafe {
        crate::actor::sanitizer::actor_started(&*me);
        crate::sched::handoff::after_start::<P>(me, from);
        let entry = (*(*me).entry.get()).take();
        let wake = match entry {
            Some(entry) => entry.run(&*me),
            None => None,
        };
        *(*me).request.get() = Request::Exit(wake);
        let to = *(*me).sched_sp.get();
        crate::actor::sanitizer::actor_to_worker(&*me, true);
        <P::Arch as Arch>::switch(to);
    }
    P::abort("smarm: an exited actor was resumed")
}

// ---------------------------------------------------------------------------
// Worker side
// ---------------------------------------------------------------------------
