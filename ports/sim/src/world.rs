//! The simulated machine: a baton that exactly one of the world's threads
//! holds at a time, a seeded policy that decides who gets it next, and a
//! virtual clock.
//!
//! # Model
//!
//! A *world* is entered by [`crate::run`] on the calling thread (the root,
//! participant 0). Every thread the runtime starts through
//! `Platform::spawn_thread` while its caller is a participant joins the
//! world (workers, blocking-call spares, the long-hold monitor). Only the
//! thread holding the baton (`State::running`) runs; the others wait on
//! their own condition variable. The baton moves only at the port's
//! scheduling points:
//!
//! - a futex wait (the thread blocks; a waker or a deadline makes it
//!   runnable again),
//! - a futex wake, `yield_thread`, `turn_point` (every scheduler turn), a
//!   thread start, a failpoint (feature `failpoints`): the policy picks any
//!   runnable thread, possibly the same one,
//! - a thread join and a thread's end.
//!
//! Each decision draws from one splitmix64 stream seeded by the world's
//! seed and is folded into a trace hash, so the same seed replays the same
//! interleaving and the same trace (given a program that does not consult
//! real time, addresses or its own OS threads).
//!
//! # Time
//!
//! In a world entered with [`crate::run`] the clock is virtual (an implicit
//! world, below, keeps the host's real clock). It starts at [`EPOCH`], advances by [`QUANTUM`] at
//! every scheduling decision and by 1 ns per read, and jumps to the
//! earliest deadline when every thread is blocked and some wait has one. So
//! a one-hour `sleep` takes no real time, and timeouts fire exactly when the
//! program has nothing else to do.
//!
//! # Deadlock
//!
//! Every thread blocked, none with a deadline, and no wake from outside the
//! world within [`DEADLOCK_GRACE`] of real time: that is a lost wake-up or a
//! deadlock. The port prints every thread's state and the seed, and aborts
//! (a hang would only time out later, with less to say).
//!
//! # Implicit worlds
//!
//! With `SMARM_SIM_SEED=S` in the environment, a thread in no world that
//! builds a runtime becomes the root of a world seeded with `S`, left when
//! it has joined all of the world's threads (the runtime's drop). So an
//! unchanged test suite, built against this port, runs simulated.
//!
//! # Outside threads
//!
//! A thread that is not a participant (one the program started itself, or
//! a thread of another test) still works: its waits are real futex waits
//! (deadlines converted from the virtual clock), its wakes reach the
//! world's blocked threads. It makes the run nondeterministic, not wrong.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use smarm_core::{Futex, Platform};

use crate::Host;

/// Virtual time at a world's start (ns). Not zero, so "no deadline yet"
/// sentinels and saturating subtractions in the runtime behave as on a
/// machine that has been up for a while.
pub const EPOCH: u64 = 1_000_000_000;
/// Virtual nanoseconds per scheduling decision.
pub const QUANTUM: u64 = 1_000;
/// Real time every thread may stay blocked (with no deadline) before the
/// world is declared deadlocked.
pub const DEADLOCK_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Runnable,
    /// In a futex wait on the word at this address.
    Blocked {
        word: usize,
        deadline: Option<u64>,
    },
    /// Joining participant `.0`.
    Joining(usize),
    Done,
}

struct Part {
    status: Status,
    cv: Arc<Condvar>,
    name: String,
}

/// What a world did: returned by [`crate::run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    /// The seed the world ran with.
    pub seed: u64,
    /// Scheduling decisions (thread picks).
    pub decisions: u64,
    /// Decisions that moved the baton to another thread.
    pub handoffs: u64,
    /// Next-actor picks made for the scheduler (`Platform::pick`).
    pub picks: u64,
    /// Times the clock jumped to a deadline because every thread was blocked.
    pub jumps: u64,
    /// Threads that took part (the root included).
    pub threads: u64,
    /// Virtual nanoseconds that passed.
    pub virtual_ns: u64,
    /// Failpoints reached by the world's threads (feature `failpoints`):
    /// each is a scheduling decision too.
    pub failpoints: u64,
    /// A hash of every decision in order: equal seeds give equal traces.
    pub trace: u64,
}

struct State {
    /// The world's generation; 0 before the first world.
    gen: u64,
    /// A world is running (between `enter` and `leave`).
    active: bool,
    /// The world has a root participant (an explicit `run`); an implicit
    /// world's creator stays an outside thread.
    rooted: bool,
    rng: u64,
    clock: u64,
    running: Option<usize>,
    parts: Vec<Part>,
    report: Report,
}

static STATE: Mutex<State> = Mutex::new(State {
    gen: 0,
    active: false,
    rooted: false,
    rng: 0,
    clock: 0,
    running: None,
    parts: Vec::new(),
    report: Report {
        seed: 0,
        decisions: 0,
        handoffs: 0,
        picks: 0,
        jumps: 0,
        threads: 0,
        virtual_ns: 0,
        failpoints: 0,
        trace: 0,
    },
});

/// One world at a time per process: tests that run worlds in parallel
/// threads take turns here. Holds the running world's generation and when
/// it began.
static GATE: Mutex<Option<(u64, std::time::Instant)>> = Mutex::new(None);
static GATE_CV: Condvar = Condvar::new();

/// Real time a world may keep others waiting to enter before it is
/// abandoned (a test that overran its own timeout and left its runtime
/// behind): its threads carry on as plain threads, unsimulated.
pub const ABANDON_AFTER: Duration = Duration::from_secs(30);

thread_local! {
    /// (world generation, participant id) of the calling thread.
    static ME: Cell<(u64, usize)> = const { Cell::new((0, usize::MAX)) };
}

type Guard = MutexGuard<'static, State>;

fn lock() -> Guard {
    // A panic never happens with the lock held (no code under it can
    // panic but the deadlock report, which aborts), so poison carries no
    // broken invariant: take the guard.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// The caller's participant id, if it takes part in the running world.
    fn me(&self) -> Option<usize> {
        let (gen, pid) = ME.with(|c| c.get());
        (self.active && gen == self.gen).then_some(pid)
    }

    /// splitmix64.
    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A draw in `[0, n)` (`n >= 1`), folded into the trace.
    fn below(&mut self, n: usize) -> usize {
        let v = (self.next_u64() % n as u64) as usize;
        self.report.trace = (self.report.trace ^ (v as u64 + 1)).wrapping_mul(0x0000_0100_0000_01B3);
        v
    }

    /// Picks the next thread to run among the runnable ones; when none is,
    /// jumps the clock to the earliest deadline and wakes those whose
    /// deadline it reached. `None`: every thread is blocked for good.
    fn pick_next(&mut self) -> Option<usize> {
        if !self.rooted {
            // Real time: waits whose deadline has passed end now.
            let now = self.now();
            for p in self.parts.iter_mut() {
                if matches!(p.status, Status::Blocked { deadline: Some(d), .. } if d <= now) {
                    p.status = Status::Runnable;
                }
            }
        }
        let mut runnable: Vec<usize> = (0..self.parts.len())
            .filter(|&p| self.parts[p].status == Status::Runnable)
            .collect();
        if runnable.is_empty() {
            if !self.rooted {
                // Real time does not jump: the blocked threads' own timed
                // waits take the baton when their deadlines pass.
                return None;
            }
            let earliest = self
                .parts
                .iter()
                .filter_map(|p| match p.status {
                    Status::Blocked { deadline, .. } => deadline,
                    _ => None,
                })
                .min()?;
            self.clock = self.clock.max(earliest);
            self.report.jumps += 1;
            let now = self.clock;
            for (i, p) in self.parts.iter_mut().enumerate() {
                if let Status::Blocked {
                    deadline: Some(d), ..
                } = p.status
                {
                    if d <= now {
                        p.status = Status::Runnable;
                        runnable.push(i);
                    }
                }
            }
        }
        self.clock += QUANTUM;
        self.report.decisions += 1;
        let i = self.below(runnable.len());
        Some(runnable[i])
    }

    /// The world's time: virtual in a rooted world, the host's real clock
    /// in an implicit one (its creator is an outside thread whose timing no
    /// virtual clock could follow: a jump would fire a timeout before the
    /// creator's message arrives).
    fn now(&self) -> u64 {
        if self.rooted {
            self.clock
        } else {
            <Host as Platform>::now_ns()
        }
    }

    /// Gives the baton to `next` (waking its thread) if that is not `me`.
    fn hand(&mut self, me: Option<usize>, next: Option<usize>) {
        self.running = next;
        if let Some(n) = next {
            if Some(n) != me {
                self.report.handoffs += 1;
                self.parts[n].cv.notify_one();
            }
        }
    }

    fn describe(&self) -> String {
        let mut s = String::new();
        for (i, p) in self.parts.iter().enumerate() {
            s.push_str(&format!("  thread {i} {:?}: {:?}\n", p.name, p.status));
        }
        s
    }
}

/// Waits until the baton comes back to `me` (or the world ends). Declares a
/// deadlock when nobody holds it for [`DEADLOCK_GRACE`].
fn wait_turn(mut g: Guard, me: usize) -> Guard {
    let cv = g.parts[me].cv.clone();
    let mut idle = Duration::ZERO;
    let step = Duration::from_millis(250);
    while g.active && g.running != Some(me) {
        let mut wait = step;
        if !g.rooted {
            // Real time: our own deadline ends our wait, and a runnable
            // thread takes the baton if nobody holds it.
            let now = g.now();
            if let Status::Blocked {
                deadline: Some(d), ..
            } = g.parts[me].status
            {
                if d <= now {
                    g.parts[me].status = Status::Runnable;
                } else {
                    wait = wait.min(Duration::from_nanos(d - now));
                }
            }
            if g.running.is_none() && g.parts[me].status == Status::Runnable {
                g.report.decisions += 1;
                g.running = Some(me);
                break;
            }
        }
        let (g2, t) = cv.wait_timeout(g, wait).unwrap_or_else(|e| e.into_inner());
        g = g2;
        if t.timed_out() && g.active && g.rooted && g.running.is_none() {
            idle += step;
            if idle >= DEADLOCK_GRACE {
                deadlock(&g);
            }
        } else {
            idle = Duration::ZERO;
        }
    }
    g
}

#[cold]
fn deadlock(g: &State) -> ! {
    let msg = format!(
        "smarm-sim: deadlock: every thread is blocked, none has a deadline, and nothing woke \
         one for {:?} (a lost wake-up, or a program waiting on itself).\n  seed {} \
         (replay: SMARM_SIM_SEED={}), decision {}, virtual time {} ns\n{}",
        DEADLOCK_GRACE,
        g.report.seed,
        g.report.seed,
        g.report.decisions,
        g.clock - EPOCH,
        g.describe()
    );
    <Host as Platform>::abort(&msg)
}

/// A scheduling point of a running participant: the policy may run
/// another thread first.
fn yield_point(mut g: Guard, me: usize) {
    let next = g.pick_next();
    g.hand(Some(me), next);
    if next != Some(me) {
        drop(wait_turn(g, me));
    }
}

// ---------------------------------------------------------------------------
// Entering and leaving
// ---------------------------------------------------------------------------

/// Makes the calling thread the root of a new world seeded with `seed`
/// (waiting for another thread's world to end first). Without `root` the
/// caller stays outside (an implicit world): the world's first thread is
/// the first one it starts.
pub(crate) fn enter(seed: u64, root: bool) -> u64 {
    let mut gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
    while let Some((gen, since)) = *gate {
        if since.elapsed() >= ABANDON_AFTER {
            abandon(gen);
            *gate = None;
            break;
        }
        gate = GATE_CV
            .wait_timeout(gate, Duration::from_millis(500))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    let mut g = lock();
    g.gen += 1;
    *gate = Some((g.gen, std::time::Instant::now()));
    drop(gate);
    g.active = true;
    g.rooted = root;
    g.rng = seed ^ 0x5EED_5EED_5EED_5EED;
    g.clock = EPOCH;
    g.parts.clear();
    g.report = Report {
        seed,
        ..Report::default()
    };
    if root {
        g.running = Some(0);
        g.parts.push(Part {
            status: Status::Runnable,
            cv: Arc::new(Condvar::new()),
            name: "root".into(),
        });
        let gen = g.gen;
        ME.with(|c| c.set((gen, 0)));
    } else {
        g.running = None;
    }
    g.gen
}

/// Ends world `gen` without its creator (see [`ABANDON_AFTER`]).
#[cold]
fn abandon(gen: u64) {
    let mut g = lock();
    if g.active && g.gen == gen {
        eprintln!(
            "smarm-sim: abandoning the world of seed {} after {:?}: a test overran its time and \
             left it running; its threads go on unsimulated",
            g.report.seed, ABANDON_AFTER
        );
        g.active = false;
        g.running = None;
        for p in &g.parts {
            p.cv.notify_all();
        }
    }
}

/// Ends the world entered on this thread and returns its report. Threads
/// of the world still running (a runtime leaked past the end) carry on as
/// plain threads.
pub(crate) fn leave(gen: u64) -> Report {
    let report = {
        let mut g = lock();
        if !(g.active && g.gen == gen) {
            // Abandoned meanwhile: another world may run now.
            return Report::default();
        }
        let mut r = g.report;
        r.threads = g.parts.len() as u64;
        r.virtual_ns = g.clock - EPOCH;
        g.active = false;
        g.running = None;
        for p in &g.parts {
            p.cv.notify_all();
        }
        r
    };
    ME.with(|c| c.set((0, usize::MAX)));
    let mut gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
    if gate.is_some_and(|(g, _)| g == gen) {
        *gate = None;
    }
    drop(gate);
    GATE_CV.notify_all();
    report
}

/// The seed of implicit worlds: `SMARM_SIM_SEED` from the environment.
fn implicit_seed() -> Option<u64> {
    static SEED: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        std::env::var("SMARM_SIM_SEED")
            .ok()
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Leaves the implicit world this thread is the root of, if it still runs,
/// when the thread ends.
struct ImplicitRoot(Cell<u64>);

impl Drop for ImplicitRoot {
    fn drop(&mut self) {
        let gen = self.0.get();
        let live = {
            let g = lock();
            gen != 0 && g.active && g.gen == gen
        };
        if live {
            leave(gen);
        }
    }
}

thread_local! {
    /// The generation of the implicit world this thread is the root of (0:
    /// none).
    static IMPLICIT: ImplicitRoot = const { ImplicitRoot(Cell::new(0)) };
}

/// Whether the caller created the running implicit world.
fn is_creator(g: &State) -> bool {
    g.active && IMPLICIT.with(|r| r.0.get()) == g.gen
}

/// With `SMARM_SIM_SEED` set, a thread that is in no world and starts a
/// runtime thread creates a new world (an *implicit* world: so unchanged
/// programs and tests run simulated). The creator itself stays an outside
/// thread (its own waits and spins are the OS's), so a test body that
/// busy-waits on the runtime cannot hold the baton; everything the
/// runtime's threads do is seeded. The world ends when its creator has
/// joined every thread of it (the runtime's drop does).
fn maybe_enter_implicit() {
    let Some(seed) = implicit_seed() else { return };
    {
        let g = lock();
        if g.me().is_some() || is_creator(&g) {
            return;
        }
    }
    let gen = enter(seed, false);
    IMPLICIT.with(|r| r.0.set(gen));
}

/// After a join: an implicit root whose threads have all ended leaves.
fn maybe_leave_implicit() {
    let gen = IMPLICIT.with(|r| r.0.get());
    if gen == 0 {
        return;
    }
    {
        let g = lock();
        if g.active && g.gen == gen && g.parts.iter().any(|p| p.status != Status::Done) {
            return;
        }
    }
    IMPLICIT.with(|r| r.0.set(0));
    let live = {
        let g = lock();
        g.active && g.gen == gen
    };
    if live {
        leave(gen);
    }
}

/// Whether the calling thread runs inside a world.
pub(crate) fn in_world() -> bool {
    lock().me().is_some()
}

// ---------------------------------------------------------------------------
// The platform's operations
// ---------------------------------------------------------------------------

pub(crate) fn now_ns() -> u64 {
    let mut g = lock();
    if g.active && g.rooted {
        g.clock += 1;
        g.clock
    } else {
        drop(g);
        <Host as Platform>::now_ns()
    }
}

pub(crate) fn wait(word: &AtomicU32, expected: u32, deadline: Option<u64>) {
    let mut g = lock();
    let Some(me) = g.me() else {
        // An outside thread: a real wait, its deadline moved onto the real
        // clock.
        let real = match (g.active && g.rooted, deadline) {
            (true, Some(d)) => Some(<Host as Platform>::now_ns().saturating_add(d.saturating_sub(g.clock))),
            (_, d) => d,
        };
        drop(g);
        return <Host as Futex>::wait(word, expected, real);
    };
    // SeqCst: the baton's mutex already orders every participant's
    // accesses; an outside waker's store is ordered by its own wake, which
    // takes the same mutex after storing.
    if word.load(Ordering::SeqCst) != expected || deadline.is_some_and(|d| d <= g.now()) {
        return;
    }
    g.parts[me].status = Status::Blocked {
        word: word.as_ptr() as usize,
        deadline,
    };
    let next = g.pick_next();
    g.hand(Some(me), next);
    if next != Some(me) {
        drop(wait_turn(g, me));
    }
}

pub(crate) fn wake(word: &AtomicU32, all: bool) {
    // Outside threads may wait on the word too: a real wake for them.
    if all {
        <Host as Futex>::wake_all(word);
    } else {
        <Host as Futex>::wake_one(word);
    }
    let mut g = lock();
    if !g.active {
        return;
    }
    let addr = word.as_ptr() as usize;
    let waiters: Vec<usize> = (0..g.parts.len())
        .filter(|&p| matches!(g.parts[p].status, Status::Blocked { word, .. } if word == addr))
        .collect();
    if !waiters.is_empty() {
        if all {
            for p in waiters {
                g.parts[p].status = Status::Runnable;
            }
        } else {
            let i = g.below(waiters.len());
            g.parts[waiters[i]].status = Status::Runnable;
        }
    }
    match g.me() {
        Some(me) => yield_point(g, me),
        None => {
            // An outside waker: if the world was stuck, it runs again.
            if g.running.is_none() {
                let next = g.pick_next();
                g.hand(None, next);
            }
        }
    }
}

/// `yield_thread`, `turn_point`, a failpoint: a scheduling point for a
/// participant; an outside thread just yields its CPU (if asked to).
pub(crate) fn switch_point(os_yield: bool) {
    let g = lock();
    match g.me() {
        Some(me) => yield_point(g, me),
        None => {
            drop(g);
            if os_yield {
                std::thread::yield_now();
            }
        }
    }
}

/// A failpoint reached: a scheduling point for a participant, counted.
#[cfg(feature = "failpoints")]
pub(crate) fn failpoint() {
    let mut g = lock();
    if let Some(me) = g.me() {
        g.report.failpoints += 1;
        yield_point(g, me);
    }
}

/// The running world's generation (0 when none runs): what the simulated
/// network keys its state by, so each world starts with an empty network.
pub(crate) fn generation() -> u64 {
    let g = lock();
    if g.active {
        g.gen
    } else {
        0
    }
}

/// A seeded draw in `[0, n)` for the simulated network (`n >= 1`), folded
/// into the trace; `None` for a thread that is not a participant of the
/// running world (or when none runs): such a caller gets no injected
/// delays or faults.
pub(crate) fn draw(n: u64) -> Option<u64> {
    let mut g = lock();
    g.me()?;
    let n = usize::try_from(n.max(1)).unwrap_or(usize::MAX);
    Some(g.below(n) as u64)
}

/// A next-actor choice for the scheduler: a draw in `[0, n)`; 0 outside a
/// world.
pub(crate) fn pick(n: usize) -> usize {
    let mut g = lock();
    if g.me().is_none() || n == 0 {
        return 0;
    }
    g.report.picks += 1;
    // Half the picks take the queue's head, half any actor of the first
    // PICK_WINDOW: uniform picks alone would starve a spawner among
    // thousands of yielding actors (a turn every n), making big scenarios
    // quadratic.
    let head = g.below(2) == 0;
    if head {
        0
    } else {
        g.below(n.min(PICK_WINDOW))
    }
}

/// How deep into the run queue a pick reaches. Core carries a pick out by
/// rotating the queue (each skipped actor popped and pushed again), and
/// every push and pop passes the ring's failpoint, a scheduling point: a
/// pick anywhere in a queue of `n` cost O(n) thread handoffs per turn, so
/// 1,000 queued actors yielding 10 times each took ~47 s instead of ~2 s.
/// An actor deep in the queue is still reordered against its neighbours
/// once it comes within the window.
const PICK_WINDOW: usize = 16;

/// A thread started for the runtime.
pub struct SimThread {
    /// Participant id in the world it joined (`None`: a plain thread).
    pid: Option<(u64, usize)>,
    handle: std::thread::JoinHandle<()>,
}

/// Runs `f` in its drop: a participant's end, even if `f` panics.
struct ExitGuard(u64, usize);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let mut g = lock();
        if !g.active || g.gen != self.0 {
            return;
        }
        let me = self.1;
        g.parts[me].status = Status::Done;
        for p in 0..g.parts.len() {
            if g.parts[p].status == Status::Joining(me) {
                g.parts[p].status = Status::Runnable;
            }
        }
        if g.running == Some(me) {
            let next = g.pick_next();
            g.hand(Some(me), next);
        }
    }
}

pub(crate) fn spawn(name: String, stack: usize, f: Box<dyn FnOnce() + Send>) -> std::io::Result<SimThread> {
    maybe_enter_implicit();
    let mut g = lock();
    let me = g.me();
    if me.is_none() && !is_creator(&g) {
        drop(g);
        let handle = std::thread::Builder::new()
            .name(name)
            .stack_size(stack)
            .spawn(f)?;
        return Ok(SimThread { pid: None, handle });
    }
    let pid = g.parts.len();
    let gen = g.gen;
    g.parts.push(Part {
        status: Status::Runnable,
        cv: Arc::new(Condvar::new()),
        name: name.clone(),
    });
    drop(g);
    let spawned = std::thread::Builder::new()
        .name(name)
        .stack_size(stack)
        .spawn(move || {
            ME.with(|c| c.set((gen, pid)));
            let _exit = ExitGuard(gen, pid);
            drop(wait_turn(lock(), pid));
            f();
        });
    match spawned {
        Ok(handle) => {
            let mut g = lock();
            match me {
                // Starting a thread is a scheduling point: it may run first.
                Some(me) => yield_point(g, me),
                // The outside creator of an implicit world: if no thread of
                // it runs, one starts now.
                None => {
                    if g.active && g.gen == gen && g.running.is_none() {
                        let next = g.pick_next();
                        g.hand(None, next);
                    }
                }
            }
            Ok(SimThread {
                pid: Some((gen, pid)),
                handle,
            })
        }
        Err(e) => {
            let mut g = lock();
            if g.gen == gen {
                g.parts[pid].status = Status::Done;
            }
            Err(e)
        }
    }
}

pub(crate) fn join(t: SimThread) {
    if let Some((gen, pid)) = t.pid {
        let mut g = lock();
        if let Some(me) = g.me() {
            if g.gen == gen && g.parts[pid].status != Status::Done {
                g.parts[me].status = Status::Joining(pid);
                let next = g.pick_next();
                g.hand(Some(me), next);
                if next != Some(me) {
                    drop(wait_turn(g, me));
                }
            }
        }
    }
    // The thread has marked itself done (or is a plain thread): its OS
    // thread ends promptly.
    let _ = t.handle.join();
    maybe_leave_implicit();
}
