//! Loom models of the shutdown protocol: the shutdown flag, the `finished`
//! flag, the live-actor count, the registry sweep of parked actors and the
//! last-idle-worker decision, over the real idle protocol
//! (`smarm_core::idle`), the real run queue ring (with the one worker's own
//! FIFO in front on one worker: `smarm_core::queue::WorkerRing`) and the
//! real run-next slots.
//!
//! Loom cannot run the scheduler itself (actors need the asm context
//! switch), so the worker loop here is a replica of the atomics layer of
//! `core/src/sched/mod.rs`: `run_worker`'s find/run/idle loop, `find_work`,
//! `has_work`, `idle` (timers and blocking calls left out), `retire`, `wake_parked`, `finish`,
//! `put_run_next`, `Actor::wake`, and `Runtime::stop` (runtime.rs). Each
//! step names the function it mirrors and carries a `// mirror:` marker
//! with a hash of that function's code as last checked against the
//! replica: `scripts/mirror-check.py` (in CI) fails when an original
//! changes, until someone reviews the replica and records the new hash. An
//! "actor" is an index; running it is its exit (cancelled at shutdown or
//! not, it retires).
//!
//! Every model asserts conservation (each actor retired exactly once, or
//! left over and reported abandoned) and that every worker exits: a worker
//! asleep with nobody left to wake it is a loom deadlock.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_shutdown`
#![cfg(smarm_loom)]

use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::collections::VecDeque;

use smarm_core::idle::Idle;
use smarm_core::lock::FutexLock;
use smarm_core::queue::WorkerRing;
use smarm_core::ring::Ring;
use smarm_core::slot::Slot;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

/// Actor states, as in actor.rs.
const RUNNABLE: u32 = 0;
const RUNNING: u32 = 1;
const PARKED: u32 = 2;
const NOTIFIED: u32 = 3;
const DONE: u32 = 4;

/// sched.rs `SHUTDOWN_SWEEPS`.
const SHUTDOWN_SWEEPS: usize = 4;

/// The run queue: the one-worker runtime's (the ring with the worker's own
/// FIFO in front), the real ring, or, in the models with two workers, a
/// locked deque. A ring push between its claim and its publish makes the
/// ring non-empty but not yet poppable, and two idle workers yield-spinning
/// on it can starve the pusher forever under loom's unfair scheduler (a
/// "max branches" failure, not a runtime bug); a locked push has no such
/// window. `push` is a plain thread's; `push_worker` and `pop_worker` the
/// worker's own (`RunQueue::push_worker`, `pop_worker`).
trait Queue: Send + Sync + 'static {
    fn new() -> Self;
    fn push(&self, v: usize) -> Result<(), usize>;
    fn pop(&self) -> Option<usize>;
    fn is_empty(&self) -> bool;
    fn push_worker(&self, v: usize) -> Result<(), usize> {
        self.push(v)
    }
    fn pop_worker(&self) -> Option<usize> {
        self.pop()
    }
}

/// The one-worker queue (`RingQueue` on a one-worker runtime). Only the
/// models with one worker use it: the worker calls are that worker's.
type Owned = WorkerRing<usize, FutexLock<LoomP>>;

impl Queue for Owned {
    fn new() -> Self {
        WorkerRing::new(2, true)
    }
    fn push(&self, v: usize) -> Result<(), usize> {
        WorkerRing::push(self, v, &mut relax);
        Ok(())
    }
    fn pop(&self) -> Option<usize> {
        WorkerRing::pop(self, &mut relax)
    }
    fn is_empty(&self) -> bool {
        WorkerRing::is_empty(self)
    }
    fn push_worker(&self, v: usize) -> Result<(), usize> {
        // SAFETY: only the one-worker models use this queue, and their one
        // worker thread (or, after it is joined, the stop thread) makes
        // every worker call.
        unsafe { self.push_owner(v, &mut relax) };
        Ok(())
    }
    fn pop_worker(&self) -> Option<usize> {
        // SAFETY: as in `push_worker`.
        unsafe { self.pop_owner(&mut relax) }
    }
}

impl Queue for Ring<usize> {
    fn new() -> Self {
        Ring::with_capacity(2)
    }
    fn push(&self, v: usize) -> Result<(), usize> {
        Ring::push(self, v, &mut relax)
    }
    fn pop(&self) -> Option<usize> {
        Ring::pop(self, &mut relax)
    }
    fn is_empty(&self) -> bool {
        Ring::is_empty(self)
    }
}

struct Locked(Mutex<VecDeque<usize>>, AtomicUsize);

impl Queue for Locked {
    fn new() -> Self {
        Locked(Mutex::new(VecDeque::new()), AtomicUsize::new(0))
    }
    fn push(&self, v: usize) -> Result<(), usize> {
        let mut q = self.0.lock().unwrap();
        q.push_back(v);
        self.1.store(q.len(), Ordering::SeqCst);
        Ok(())
    }
    fn pop(&self) -> Option<usize> {
        let mut q = self.0.lock().unwrap();
        let v = q.pop_front();
        self.1.store(q.len(), Ordering::SeqCst);
        v
    }
    fn is_empty(&self) -> bool {
        self.1.load(Ordering::SeqCst) == 0
    }
}

/// The runtime's shared state, as far as shutdown touches it.
struct Rt<Q> {
    workers: usize,
    queue: Q,
    /// Worker `i`'s slot: only its thread puts and takes (and the stop
    /// thread after the joins), as in sched.
    run_next: Vec<Slot<usize>>,
    idle: Idle<LoomP, FutexLock<LoomP>>,
    shutdown: AtomicBool,
    finished: AtomicBool,
    /// The live count's shards: one per worker, then plain threads' (the
    /// actors of a model start as if spawned from outside): what each
    /// spawned, and what ended on each.
    spawned: Vec<AtomicUsize>,
    ended: Vec<AtomicUsize>,
    sweeps: AtomicUsize,
    /// Every live actor (dump.rs's registry); `wake_parked` takes the
    /// `PARKED` ones.
    registry: Mutex<Vec<usize>>,
    state: Vec<AtomicU32>,
    /// Model only: how many times each actor retired.
    retired: Vec<AtomicUsize>,
    /// Model only: set by an outside waker once its push has returned.
    pushed: AtomicBool,
    /// Model only: a worker's sweep decided to finish after `pushed` was set.
    finished_after_push: AtomicBool,
    /// Model only: actor 0, when it runs, wakes actor 1 into its worker's
    /// run-next slot (a send to a parked partner).
    partner: bool,
    /// Model only: actor 0 yields once (`Request::Yield`) before it exits.
    yields: bool,
    /// Model only: actor 0 has yielded.
    yielded: AtomicBool,
}

fn relax() {
    thread::yield_now();
}

impl<Q: Queue> Rt<Q> {
    /// `workers` workers; actors `0..queued` runnable in the queue, the
    /// next `parked` parked (registered, nobody holds a wake for them).
    fn new(workers: usize, queued: usize, parked: usize) -> Self {
        let n = queued + parked;
        let rt = Rt {
            workers,
            queue: Q::new(),
            // SAFETY: worker `i`'s slot is put and taken only on its
            // thread, then by the stop thread after joining it.
            run_next: (0..workers).map(|_| unsafe { Slot::owner_only() }).collect(),
            idle: Idle::new(workers),
            shutdown: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            spawned: (0..=workers)
                .map(|s| AtomicUsize::new(if s == workers { n } else { 0 }))
                .collect(),
            ended: (0..=workers).map(|_| AtomicUsize::new(0)).collect(),
            sweeps: AtomicUsize::new(0),
            registry: Mutex::new((0..n).collect()),
            state: (0..n)
                .map(|a| AtomicU32::new(if a < queued { RUNNABLE } else { PARKED }))
                .collect(),
            retired: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            pushed: AtomicBool::new(false),
            finished_after_push: AtomicBool::new(false),
            partner: false,
            yields: false,
            yielded: AtomicBool::new(false),
        };
        for a in 0..queued {
            assert!(rt.queue.push(a).is_ok());
        }
        rt
    }

    /// `Actor::wake`: PARKED → RUNNABLE (the caller schedules it), RUNNING
    /// → NOTIFIED (it runs again when it parks). The model's actors park
    /// counted only (`PARKED_LENT`, a lent receive's park, is not in it:
    /// its transition is `loom_lent.rs`'s).
    // mirror: core/src/actor/mod.rs wake 3db770c18715
    fn wake(&self, a: usize) -> bool {
        // Acquire / AcqRel: as `Actor::wake` (pairs with the state stores in
        // `run`).
        let mut s = self.state[a].load(Ordering::Acquire);
        loop {
            let to = match s {
                PARKED => RUNNABLE,
                RUNNING => NOTIFIED,
                _ => return false,
            };
            match self.state[a].compare_exchange(s, to, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return to == RUNNABLE,
                Err(now) => s = now,
            }
        }
    }

    /// `Shared::schedule` from a plain thread (`push_outside`).
    // mirror: core/src/sched/worker.rs schedule 473d96a62abf
    // mirror: core/src/sched/worker.rs push_outside 4b09c20acf53
    fn schedule_outside(&self, a: usize) {
        let mut a = a;
        while let Err(back) = self.queue.push(a) {
            a = back;
            thread::yield_now();
        }
        self.idle.notify_one();
    }

    /// `Shared::put_run_next` (`schedule` from a worker).
    // mirror: core/src/sched/worker.rs put_run_next 92ea4601ea69
    fn put_run_next(&self, i: usize, a: usize) {
        let old = self.run_next[i].put(Box::into_raw(Box::new(a)));
        if let Some(old) = own(old) {
            self.push(old);
        }
    }

    /// `Shared::push`, a worker's own push: the queue, then the notify.
    // mirror: core/src/sched/worker.rs push 36657da54cbd
    fn push(&self, a: usize) {
        if self.push_own(a) {
            self.idle.notify_one();
        }
    }

    /// `Shared::push_yield`, a yield's push: as `push`, but the notify only
    /// where a worker is seen asleep without the Dekker fence.
    // mirror: core/src/sched/worker.rs push_yield 44604af174f0
    fn push_yield(&self, a: usize) {
        if self.push_own(a) && self.idle.may_sleep() {
            self.idle.notify_one();
        }
    }

    /// `Shared::push_own`, the queue half of both: pushes `a` (retrying a
    /// full queue); whether other workers may need a notify (a one-worker
    /// runtime's one worker is the caller).
    // mirror: core/src/sched/worker.rs push_own 304e71e6aeae
    fn push_own(&self, a: usize) -> bool {
        let mut a = a;
        while let Err(back) = self.queue.push_worker(a) {
            a = back;
            thread::yield_now();
        }
        self.workers != 1
    }

    /// `Shared::find_work`: own slot, then the queue. (The real pop may
    /// also leave a short run of another worker's actors to their working
    /// owner, the striped queue's patience: a `None` with items queued,
    /// which the idle path's `has_work` sees, as here, so this replica's
    /// exact pop covers it.)
    // mirror: core/src/sched/worker.rs find_work 6fc4c73165d1
    // mirror: core/src/sched/worker.rs pop_queue 74302a54302f
    fn find_work(&self, i: usize) -> Option<usize> {
        own(self.run_next[i].take()).or_else(|| self.queue.pop_worker())
    }

    /// `Shared::has_work`: the queue, worker `i`'s own slot, the end.
    // mirror: core/src/sched/spin.rs has_work cbc5ee64a18a
    fn has_work(&self, i: usize) -> bool {
        !self.queue.is_empty()
            // Relaxed (both): a probe, as in sched (the idle fences order it).
            || !self.run_next[i].peek().is_null()
            || self.finished.load(Ordering::Relaxed)
    }

    /// `Shared::run` then `Shared::retire`: the actor runs (cancelled or
    /// not, it exits) and retires.
    // mirror: core/src/sched/run.rs run 002884796b4a
    // mirror: core/src/sched/worker.rs retire 7063f4c9a3dd
    // mirror: core/src/sched/worker.rs end_actor 17febc241b3d
    fn run(&self, i: usize, a: usize) {
        // Relaxed, Release: as `Shared::run` and `Shared::retire` (the worker
        // owns the actor; wakers only CAS from PARKED/RUNNING).
        self.state[a].store(RUNNING, Ordering::Relaxed);
        if self.yields && a == 0 && !self.yielded.swap(true, Ordering::SeqCst) {
            // `Request::Yield`: runnable again, to the back of the queue.
            self.state[a].store(RUNNABLE, Ordering::Relaxed);
            self.push_yield(a);
            return;
        }
        if self.partner && a == 0 && self.wake(1) {
            // The actor's send wakes its partner into our slot (`schedule`
            // from a worker).
            self.put_run_next(i, 1);
        }
        self.state[a].store(DONE, Ordering::Release);
        self.registry.lock().unwrap().retain(|&b| b != a);
        self.retired[a].fetch_add(1, Ordering::SeqCst);
        self.count_end(i);
        if self.shutdown.load(Ordering::SeqCst) && self.live() == 0 {
            self.idle.notify_all();
        }
    }

    /// `RtCore::count_spawn`.
    // mirror: core/src/sched/live.rs count_spawn 54e4e6bb4554
    fn count_spawn(&self, shard: usize) {
        self.spawned[shard].fetch_add(1, Ordering::SeqCst);
    }

    /// `RtCore::count_end`.
    // mirror: core/src/sched/live.rs count_end 3b356256f2d6
    fn count_end(&self, shard: usize) {
        self.ended[shard].fetch_add(1, Ordering::SeqCst);
    }

    /// `RtCore::live`: every shard's ends, then every shard's spawns.
    // mirror: core/src/sched/live.rs live 02cf8013ffbd
    fn live(&self) -> usize {
        let sum = |count: &[AtomicUsize]| {
            count
                .iter()
                .fold(0usize, |sum, s| sum.wrapping_add(s.load(Ordering::SeqCst)))
        };
        // In this order (see `RtCore::live`).
        let ended = sum(&self.ended);
        sum(&self.spawned).wrapping_sub(ended)
    }

    /// `Shared::wake_parked`: wakes every parked actor into our slot.
    // mirror: core/src/sched/shutdown.rs wake_parked 3e0c9e4462e4
    fn wake_parked(&self, i: usize) -> usize {
        let parked: Vec<usize> = self
            .registry
            .lock()
            .unwrap()
            .iter()
            .copied()
            // Relaxed: a candidate, as dump.rs's `parked`; the wake's CAS
            // decides.
            .filter(|&a| self.state[a].load(Ordering::Relaxed) == PARKED)
            .collect();
        let mut woken = 0;
        for a in parked {
            if self.wake(a) {
                woken += 1;
                self.put_run_next(i, a);
            }
        }
        woken
    }

    /// `Shared::finish`.
    // mirror: core/src/sched/shutdown.rs finish a57e1845c85a
    fn finish(&self) {
        self.finished.store(true, Ordering::SeqCst);
        self.idle.notify_all();
    }

    /// `Shared::idle` without timers or IO (its `sleep_idle` is the futex
    /// sleep when no descriptor is registered). `true`: the worker exits.
    // mirror: core/src/sched/worker.rs idle 6eb28bf7f1ef
    fn idle(&self, i: usize) -> bool {
        if self.finished.load(Ordering::SeqCst) {
            return true;
        }
        if self.shutdown.load(Ordering::SeqCst) {
            let others_idle = self.idle.sleepers() as usize + 1 >= self.workers;
            if self.live() == 0 {
                self.finish();
                return true;
            }
            if others_idle {
                // Model only: whether an outside waker's push had returned
                // before this decision (read before the re-check below).
                let pushed = self.pushed.load(Ordering::SeqCst);
                // Relaxed: a bound on retries, as in sched.rs.
                if self.sweeps.fetch_add(1, Ordering::Relaxed) < SHUTDOWN_SWEEPS && self.wake_parked(i) > 0 {
                    return false;
                }
                if self.has_work(i) {
                    return false;
                }
                self.finished_after_push.store(pushed, Ordering::SeqCst);
                self.finish();
                return true;
            }
        }
        self.idle.sleep(
            i,
            || {
                self.has_work(i)
                    || (self.shutdown.load(Ordering::SeqCst) && self.idle.sleepers() as usize >= self.workers)
            },
            None,
        );
        false
    }

    /// `run_worker`'s loop.
    // mirror: core/src/sched/worker.rs run_worker 7e8c8704d5d1
    fn work(&self, i: usize) {
        loop {
            match self.find_work(i) {
                Some(a) => self.run(i, a),
                None => {
                    if self.idle(i) {
                        return;
                    }
                    // Under loom a worker that did not sleep must yield.
                    thread::yield_now();
                }
            }
        }
    }
}

/// Takes ownership of a slot value (null → None).
fn own(p: *mut usize) -> Option<usize> {
    // SAFETY: non-null slot values are `Box::into_raw` pointers whose
    // ownership `put`/`take` just handed to us.
    (!p.is_null()).then(|| *unsafe { Box::from_raw(p) })
}

fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    // Idle workers loop (find nothing, go idle, withdraw, retry) as long as
    // the schedule keeps them from sleeping: long paths, not spins.
    b.max_branches = 10_000;
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

/// Starts the workers, runs `outside` on its own thread (if any), then does
/// `Runtime::stop`: sets the flag, wakes every worker, joins them, and takes
/// what is left in the queue and the slots. Asserts conservation.
/// `flag_first`: the flag is set before the workers start (a smaller state
/// space: the stop thread races nothing but the joins).
// mirror: core/src/rt/runtime.rs stop 72b8e6cb7707
fn run_and_stop<Q: Queue>(rt: Arc<Rt<Q>>, outside: Option<fn(&Rt<Q>)>, flag_first: bool) {
    if flag_first {
        rt.shutdown.store(true, Ordering::SeqCst);
    }
    let workers: Vec<_> = (0..rt.workers)
        .map(|i| {
            let rt = rt.clone();
            thread::spawn(move || rt.work(i))
        })
        .collect();
    let outside = outside.map(|f| {
        let rt = rt.clone();
        thread::spawn(move || f(&rt))
    });
    // `Runtime::stop`.
    rt.shutdown.store(true, Ordering::SeqCst);
    rt.idle.notify_all();
    for w in workers {
        w.join().unwrap();
    }
    if let Some(o) = outside {
        o.join().unwrap();
    }
    let abandoned = rt.live();
    let mut leftovers: Vec<usize> = Vec::new();
    // After the joins: the worker's own calls are the stop thread's now.
    while let Some(a) = rt.queue.pop_worker() {
        leftovers.push(a);
    }
    leftovers.extend(rt.run_next.iter().filter_map(|s| own(s.take())));
    assert!(
        rt.finished.load(Ordering::SeqCst),
        "the workers exited unfinished"
    );
    // An actor whose wake (push) completed before the runtime decided to
    // finish must run; only a push after the decision may be left over.
    assert!(
        leftovers.is_empty() || !rt.finished_after_push.load(Ordering::SeqCst),
        "the runtime finished with a runnable actor queued: {leftovers:?} abandoned"
    );
    for (a, r) in rt.retired.iter().enumerate() {
        let r = r.load(Ordering::SeqCst);
        let left = leftovers.iter().filter(|&&b| b == a).count();
        let parked = rt.state[a].load(Ordering::SeqCst) == PARKED;
        assert_eq!(
            r + left + parked as usize,
            1,
            "actor {a}: retired {r}, left over {left}, parked {parked}"
        );
    }
    assert_eq!(
        abandoned,
        rt.retired.len() - rt.retired.iter().map(|r| r.load(Ordering::SeqCst)).sum::<usize>(),
        "the abandoned count is off"
    );
}

/// `queued` actors queued on two workers, run to their end as the runtime
/// stops: every worker exits, each actor retired once, none left live.
fn queued_vs_shutdown(queued: usize) {
    model(move || {
        let rt = Arc::new(Rt::<Ring<usize>>::new(2, queued, 0));
        run_and_stop(rt.clone(), None, false);
        assert_eq!(rt.live(), 0);
    });
}

/// One actor queued, two workers: the last retire races the other worker
/// going idle and the shutdown flag; both workers must exit, the actor
/// retired once.
#[test]
fn queued_actor_vs_shutdown() {
    queued_vs_shutdown(1);
}

/// Two actors queued, two workers: each may retire one, counting its end
/// in its own shard of the live count (both spawns were counted in the
/// outside shard), racing the other's retire and the shutdown flag. The
/// count one of them (or an idle worker) reads after its own end must be
/// zero: both workers exit, each actor retired once.
#[test]
fn two_retires_on_two_shards_vs_shutdown() {
    queued_vs_shutdown(2);
}

/// The live count read while an actor spawns another on worker 0 and
/// ends there, and the child ends on worker 1 (handed over): each end a
/// read counts has its spawn counted (ends are read first), so the count
/// never wraps below zero, whatever the interleaving. Read the other way
/// round (spawns first), a read between the child's spawn and its end
/// could count the end alone: one actor less than none.
#[test]
fn the_live_count_never_reads_below_zero() {
    model(|| {
        // Actor 0 (spawned from outside) runs on worker 0.
        let rt = Arc::new(Rt::<Ring<usize>>::new(2, 1, 0));
        let handed = Arc::new(AtomicBool::new(false));
        let parent = {
            let (rt, handed) = (rt.clone(), handed.clone());
            thread::spawn(move || {
                // It spawns a child, which worker 1 takes, then ends.
                rt.count_spawn(0);
                handed.store(true, Ordering::Release);
                rt.count_end(0);
            })
        };
        let child = {
            let (rt, handed) = (rt.clone(), handed.clone());
            thread::spawn(move || {
                // Acquire: the child runs after its spawn (the queue's
                // edge in sched).
                while !handed.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                rt.count_end(1);
            })
        };
        let seen = rt.live();
        assert!(seen <= 2, "the live count read {seen} (below zero, wrapped)");
        parent.join().unwrap();
        child.join().unwrap();
        assert_eq!(rt.live(), 0);
    });
}

/// One worker sweeps two parked actors at shutdown: the second wake
/// displaces the first from the run-next slot into the queue, a worker's
/// own push (into its own FIFO), which on one worker wakes nobody
/// (`Shared::push`: its one worker is the pusher); that worker still runs
/// both, and exits.
#[test]
fn one_worker_sweep_displaces_into_the_queue_without_a_notify() {
    model(|| {
        let rt = Arc::new(Rt::<Owned>::new(1, 0, 2));
        run_and_stop(rt.clone(), None, false);
        assert_eq!(rt.live(), 0, "both woken actors ran");
    });
}

/// No actors: both workers may be asleep before the flag is set, or going
/// to sleep as it is set (shutdown flag vs the idle protocol); each must
/// exit.
#[test]
fn idle_workers_vs_shutdown() {
    model(|| {
        let rt = Arc::new(Rt::<Ring<usize>>::new(2, 0, 0));
        run_and_stop(rt, None, false);
    });
}

/// One actor parked with nobody to wake it, two workers: the last worker to
/// go idle (and only it) sweeps the registry, the actor runs (cancelled) and
/// retires, then both exit.
#[test]
fn parked_actor_is_swept_at_shutdown() {
    model(|| {
        let rt = Arc::new(Rt::<Ring<usize>>::new(2, 0, 1));
        run_and_stop(rt.clone(), None, false);
        assert_eq!(
            rt.retired[0].load(Ordering::SeqCst),
            1,
            "the parked actor was abandoned"
        );
    });
}

/// A plain thread wakes the parked actor (a send from outside) while the
/// workers sweep: the actor is woken once (by the sweep or the sender), and
/// is either run or, only when the push comes after a worker decided to
/// finish, left over and reported abandoned. Without the `has_work`
/// re-check before `finish` in `Shared::idle`, the one worker finishes with
/// the actor queued (found by `outside_wake_races_the_sweep`).
fn outside_wake<Q: Queue>(workers: usize, flag_first: bool) {
    model(move || {
        let rt = Arc::new(Rt::<Q>::new(workers, 0, 1));
        run_and_stop(
            rt,
            Some(|rt: &Rt<Q>| {
                if rt.wake(0) {
                    rt.schedule_outside(0);
                    rt.pushed.store(true, Ordering::SeqCst);
                }
            }),
            flag_first,
        );
    });
}

/// Two workers; the actor run first wakes its parked partner into its
/// worker's run-next slot (a send), racing the other worker going idle and
/// the shutdown flag. The other worker neither takes the slot nor counts
/// it as work to stay awake for, and nothing may be stranded: the owner
/// runs the partner, both retire once, and both workers exit.
#[test]
fn a_workers_slot_is_left_to_it_and_run() {
    model(|| {
        let mut rt = Rt::<Ring<usize>>::new(2, 1, 1);
        rt.partner = true;
        let rt = Arc::new(rt);
        run_and_stop(rt.clone(), None, false);
        assert_eq!(
            rt.retired[1].load(Ordering::SeqCst),
            1,
            "the partner was stranded"
        );
    });
}

/// Two workers; the queued actor yields once through `push_yield` (no
/// fenced notify) while the other worker goes idle, the stop racing both.
/// The other worker may sleep without seeing the push, but nothing is
/// stranded: the yielder's worker takes it again (or the other, if it saw
/// it), it retires once, and both workers exit.
#[test]
fn a_yield_without_the_fenced_notify_strands_nothing() {
    model(|| {
        let mut rt = Rt::<Ring<usize>>::new(2, 1, 0);
        rt.yields = true;
        let rt = Arc::new(rt);
        run_and_stop(rt.clone(), None, false);
        assert!(rt.yielded.load(Ordering::SeqCst), "the actor never yielded");
        assert_eq!(
            rt.retired[0].load(Ordering::SeqCst),
            1,
            "the yielder was stranded"
        );
    });
}

/// One worker, the stop thread racing both.
#[test]
fn outside_wake_races_the_sweep() {
    outside_wake::<Owned>(1, false);
}

/// Two workers (over the locked queue: see `Queue`), the flag already set.
#[test]
fn outside_wake_races_the_sweep_two_workers() {
    outside_wake::<Locked>(2, true);
}

/// As above with the stop thread racing too: ~100 s at 2 preemptions on a
/// loaded 2-core machine, so outside CI (`scripts/loom.sh --deep`).
#[test]
#[ignore = "slow: scripts/loom.sh --deep"]
fn outside_wake_races_the_sweep_two_workers_and_the_flag() {
    outside_wake::<Locked>(2, false);
}
