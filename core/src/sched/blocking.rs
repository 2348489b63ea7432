//! Blocking calls: `blocking` hands the worker's duty to a spare thread while
//! the actor's call blocks this one (the module doc's "Blocking calls"), and
//! a worker thread's body, which waits as such a spare once it handed its
//! worker away.

#[allow(unused_imports)]
use super::*;

/// Runs `f`, which may block its OS thread (file I/O, a C call, a lock),
/// without stalling other actors: the worker hands its duty to another
/// thread (a spare one, or a new one) and `f` runs on this thread, on the
/// actor's own stack; the actor then rejoins the run queue. Inside `f` the
/// caller is a plain thread as far as the runtime is concerned: receives
/// block the thread, `spawn` needs a `Runtime` handle. Off actors, `f` just
/// runs. A panic in `f` propagates after the actor has rejoined.
pub fn blocking<P: Platform, R>(f: impl FnOnce() -> R) -> R {
    let Some(me) = current_actor::<P>() else {
        return f();
    };
    // SAFETY: `me` is the running actor, which owns `detached`.
    unsafe {
        if P::panicking() {
            // Unwinding: no switch (module doc): `f` runs in place, after
            // the worker's duty has moved to another thread.
            detach::<P>(me);
            return f();
        }
        if *(*me).detached.get() {
            rejoin::<P>(me);
        }
        // A resume point: a pending kill unwinds here, before the handoff.
        resume_point::<P>(me);
    }
    crate::actor::waiting_on(me, crate::actor::WAIT_BLOCKING);
    // SAFETY: `me` is the running actor; the worker hands its duty away and
    // resumes us on this thread, detached (no current worker). No resume
    // point here: an unwind must not start off the runtime (it would reach
    // the entry without rejoining); a kill shows after the rejoin.
    unsafe { switch_out::<P>(ctx::<P>(), me, Request::Block) };
    let mut f = Some(f);
    let mut out = None;
    let r = P::catch_unwind(&mut || {
        if let Some(f) = f.take() {
            out = Some(f());
        }
    });
    crate::actor::waiting_on(me, crate::actor::WAIT_NONE);
    // SAFETY: as above; the thread's old worker frame requeues us and
    // retires (the actor resumes on whichever worker takes it).
    unsafe { switch_out::<P>(ctx::<P>(), me, Request::Rejoin) };
    match (r, out) {
        (Ok(()), Some(v)) => {
            // SAFETY: `me` is the running actor (on a worker again).
            unsafe { resume_point::<P>(me) };
            v
        }
        (Err(payload), _) => P::resume_unwind(payload),
        (Ok(()), None) => P::abort("smarm: a blocking call returned without a value"),
    }
}

impl<P: Platform, Q: RunQueue<P>> Shared<P, Q> {
    /// Hands worker `index` to a spare thread, or to a new one. Returns
    /// `false` if no thread could be started (the caller keeps the duty).
    pub(crate) fn hand_off(&self, index: usize) -> bool {
        let server = &self.core.workers[index].server;
        let me = ctx::<P>();
        // Before the successor can claim the worker (`serve`, "Ordering").
        server.clear();
        let spare = self.core.spares.lock().pop();
        if let Some(s) = spare {
            // Release: pairs with the spare's Acquire load; everything this
            // worker did is visible to its successor.
            s.word.store(index as u32 + 1, Ordering::Release);
            P::wake_one(&s.word);
            return true;
        }
        // SAFETY: `self` lives in the `Arc` the builder made (every
        // `Shared` does) and is alive (we run on one of its workers): take
        // one more reference for the new thread.
        let rt = unsafe {
            Arc::increment_strong_count(self as *const Self);
            Arc::from_raw(self as *const Self)
        };
        let name = alloc::format!("smarm-worker-{index}+");
        match P::spawn_thread(name, Box::new(move || worker_thread(&rt, index, true))) {
            Ok(t) => {
                self.core.extra_threads.lock().push(t);
                true
            }
            // (The closure, and its reference, were dropped.) No successor:
            // this thread keeps serving.
            Err(_) => {
                server.claim(me.cast());
                false
            }
        }
    }
}

/// The body of a worker thread: serves worker `index` (taking it over from
/// a thread inside a blocking call if `took_over`), then, if a blocking
/// call took it off duty, waits as a spare to take over another worker.
pub(crate) fn worker_thread<P: Platform, Q: RunQueue<P>>(
    shared: &Shared<P, Q>,
    index: usize,
    took_over: bool,
) {
    let mut index = index;
    let mut took_over = took_over;
    while run_worker(shared, index, took_over) == WorkerExit::Retired {
        if P::panicking() {
            // An unwind on this thread never ended (an actor overflowed its
            // stack while detached and unwinding): its panic count stays
            // raised, so it must not run actors again.
            return;
        }
        took_over = true;
        let spare = Arc::new(Spare {
            word: AtomicU32::new(0),
        });
        {
            let mut list = shared.core.spares.lock();
            // Under the lock: `finish` sets `finished` before draining the
            // list under it, so either it drains us or we see the flag.
            if shared.core.finished.load(Ordering::SeqCst) {
                return;
            }
            list.push(spare.clone());
        }
        loop {
            // Acquire: pairs with the Release store in `hand_off`/`finish`.
            match spare.word.load(Ordering::Acquire) {
                0 => P::wait(&spare.word, 0, None),
                SPARE_EXIT => return,
                i => {
                    index = i as usize - 1;
                    break;
                }
            }
        }
    }
}
