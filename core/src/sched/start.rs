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
    ) -> Result<(Arc<Life>, RawStack), SpawnError> {
        // SAFETY: forwarded contract.
        let stack = unsafe { self.take_stack(c, stack) }?;
        // SAFETY: forwarded contract.
        let id = unsafe { self.new_id(c) };
        Ok((
            Life::new(id, name, stack.usable_range(), self.mailbox_depths),
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
        life: Arc<Life>,
        stack: RawStack,
        entry: Entry,
        shared: bool,
    ) -> Arc<Actor> {
        let top = crate::sched::stack::colored_top(&stack, life.id);
        crate::actor::sanitizer::fresh_stack(stack.usable_range());
        // SAFETY: written once by the builder before the runtime is shared.
        let rt = unsafe { *self.sched.0.get() }.expect("runtime published before use");
        // The caller's `life` reference moves into the control block (no
        // count to bump here and drop again below).
        let actor = crate::sync::arc_in_place(|| Actor::new(life.id, entry, stack, P::stack_free, rt, life));
        let life = &actor.life;
        life.bind_actor(&actor, shared);
        // SAFETY: `top` is 64-aligned, at most 1/64 of the stack below the
        // end of a fresh mapping of at least the runtime's minimum stack
        // size (`colored_top`); `actor_entry::<P>` takes
        // the actor pointer, which stays valid while the actor runs (its
        // worker holds an Arc).
        let sp =
            unsafe { <P::Arch as Arch>::init_stack(top, actor_entry::<P>, Arc::as_ptr(&actor) as *mut u8) };
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

/// Starts `child` work-first: the running actor `me` switches to it at
/// once and waits in the run-next slot. No resume point after the switch:
/// the caller gets the child's handle even if it was killed meanwhile
/// (the kill unwinds it at its next resume point).
///
/// # Safety
///
/// `me` is the calling (running) actor.
pub(crate) unsafe fn start_here<P: Platform>(me: *const Actor, child: Arc<Actor>) {
    // SAFETY: contract.
    unsafe { suspend_no_resume_point::<P>(me, Request::Spawn(child)) };
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
