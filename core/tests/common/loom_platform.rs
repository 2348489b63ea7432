//! The loom test platform shared by the loom models (`loom_idle`,
//! `loom_mailbox`, `loom_channel`, ...): plain threads only (the
//! current-worker slot is always null, so core takes its thread paths), and
//! a futex built from a loom mutex + one loom condvar per waiter, keyed by
//! the word's address (a wake of one word never ends a wait on another:
//! `loom_futex.rs` checks the mock itself). Included with
//! `#[path = "common/loom_platform.rs"] mod loom_platform;`.
#![allow(dead_code)]

use loom::sync::atomic::Ordering;
use loom::sync::{Condvar, Mutex, MutexGuard};
use loom::thread;

use smarm_core::lock::FutexLock;
use smarm_core::sync::AtomicU32;
use smarm_core::{Arch, EntryFn, Futex, PanicPayload, Platform, RawStack, StackError, ThreadError};

/// One waiter asleep in the loom futex.
struct Sleeper {
    /// The address of the word it waits on (its key).
    addr: usize,
    /// This waiter's own condvar, one per wait call, so also its identity
    /// (the waiter looks for it to learn whether a wake has taken it off
    /// the table). A wake notifies only the waiters it takes off the table,
    /// so nobody else is scheduled (a small state space, and no return that
    /// a wake of the waiter's own word did not cause).
    cv: std::sync::Arc<Condvar>,
    /// Its deadline on the model clock, for [`ClockP`]'s timed waits
    /// ([`advance_clock`] ends them); `None`: only a wake ends the wait.
    deadline: Option<u64>,
}

loom::lazy_static! {
    /// The sleepers of every futex word of a model run, oldest first: a wait checks its word and lists
    /// itself under this lock; a wake takes the lock, takes the word's
    /// sleepers off the list and notifies each one's condvar, so a wake
    /// cannot slip between check and sleep.
    static ref KERNEL: Mutex<Vec<Sleeper>> = Mutex::new(Vec::new());
}

fn kernel() -> MutexGuard<'static, Vec<Sleeper>> {
    KERNEL.lock().unwrap()
}

loom::lazy_static! {
    /// [`ClockP`]'s clock (ns), per model run: 0 until [`advance_clock`]
    /// moves it (written under [`KERNEL`]'s lock).
    static ref CLOCK: loom::sync::atomic::AtomicU64 = loom::sync::atomic::AtomicU64::new(0);
}

/// The futex wait of both platforms: returns at once if `word` differs from
/// `expected` or `deadline` (on [`CLOCK`]; [`ClockP`] only) has passed, else
/// sleeps until a wake of `word`, or [`advance_clock`] past `deadline`,
/// takes it off the table.
fn futex_wait(word: &AtomicU32, expected: u32, deadline: Option<u64>) {
    let mut k = kernel();
    if word.load(Ordering::SeqCst) != expected {
        return;
    }
    if deadline.is_some_and(|d| CLOCK.load(Ordering::SeqCst) >= d) {
        return;
    }
    let cv = std::sync::Arc::new(Condvar::new());
    k.push(Sleeper {
        addr: key(word),
        cv: cv.clone(),
        deadline,
    });
    // Re-checked in a loop in case loom's condvar returns spuriously.
    while k.iter().any(|s| std::sync::Arc::ptr_eq(&s.cv, &cv)) {
        k = cv.wait(k).unwrap();
    }
}

/// Moves [`ClockP`]'s clock to `now` and ends every timed wait whose
/// deadline that reaches (as the kernel's timer would), atomically with
/// the waits' own deadline checks (both under [`KERNEL`]'s lock).
pub fn advance_clock(now: u64) {
    let mut k = kernel();
    CLOCK.store(now, Ordering::SeqCst);
    k.retain(|s| {
        let due = s.deadline.is_some_and(|d| d <= now);
        if due {
            s.cv.notify_one();
        }
        !due
    });
}

/// A futex word's key: its address (a sleeper's word outlives its listing,
/// the wait call borrowing it, so two listed sleepers with one address wait
/// on one word).
fn key(word: &AtomicU32) -> usize {
    word as *const AtomicU32 as usize
}

/// Threads asleep in [`LoomP`]'s futex wait on `word` (for the models that
/// check the mock itself, `loom_futex.rs`).
pub fn sleepers_on(word: &AtomicU32) -> usize {
    let k = key(word);
    kernel().iter().filter(|s| s.addr == k).count()
}

/// No context switch under loom: no actor ever runs.
pub struct NoArch;

// SAFETY: `switch` and `init_stack` are never called (no actors: the loom
// platform's current-worker slot is always null and it maps no stacks).
unsafe impl Arch for NoArch {
    const NAME: &'static str = "loom";
    const INIT_STACK_BYTES: usize = 0;
    unsafe fn switch(_to: *mut u8) -> *mut u8 {
        unreachable!("no actors under loom")
    }
    unsafe fn init_stack(_top: *mut u8, _entry: EntryFn, _arg: *mut u8) -> *mut u8 {
        unreachable!("no actors under loom")
    }
    fn cycles() -> u64 {
        0
    }
    fn cycles_serialising() -> u64 {
        0
    }
    fn cycles_per_second() -> Option<u64> {
        None
    }
    fn spin_hint() {
        thread::yield_now();
    }
}

/// Plain threads only, waiting through [`KERNEL`].
pub struct LoomP;

// SAFETY: the check and the listing are atomic with respect to wakes (both
// hold KERNEL's mutex, as does a wake's unlisting); loom's mutex gives the
// Release (wake) / Acquire (return of wait) edges. A wait returns only if
// its word differed at entry or a wake of its own word unlisted it (no
// spurious returns, so a missing wake is a deadlock loom reports); the
// deadline is ignored (timeouts are not modelled: `now_ns` is always 0).
unsafe impl Futex for LoomP {
    fn wait(word: &AtomicU32, expected: u32, _deadline_ns: Option<u64>) {
        futex_wait(word, expected, None);
    }
    fn wake_one(word: &AtomicU32) {
        let key = key(word);
        let mut k = kernel();
        // The oldest sleeper on this word (FIFO, as Linux's futex for
        // waiters of one priority); none: the wake is a no-op.
        if let Some(pos) = k.iter().position(|s| s.addr == key) {
            k.remove(pos).cv.notify_one();
        }
    }
    fn wake_all(word: &AtomicU32) {
        let key = key(word);
        let mut k = kernel();
        k.retain(|s| {
            if s.addr == key {
                s.cv.notify_one();
            }
            s.addr != key
        });
    }
}

// SAFETY: `current_worker` is always null (never set), so core takes its
// thread paths only; no stacks are mapped; `catch_unwind` is never reached
// (no actors run).
unsafe impl Platform for LoomP {
    type Arch = NoArch;
    type Lock = FutexLock<LoomP>;
    type Thread = ();
    type Poller = smarm_core::poll::NoPoller;
    const NAME: &'static str = "loom";
    fn yield_thread() {
        thread::yield_now();
    }
    fn now_ns() -> u64 {
        0
    }
    fn cpu_count() -> usize {
        1
    }
    fn page_size() -> usize {
        4096
    }
    fn spawn_thread(_name: String, _f: Box<dyn FnOnce() + Send>) -> Result<(), ThreadError> {
        Err(ThreadError {
            message: "no worker threads under loom".into(),
        })
    }
    fn join_thread(_thread: ()) {}
    fn current_worker() -> *mut () {
        std::ptr::null_mut()
    }
    fn set_current_worker(_worker: *mut ()) {}
    fn stack_alloc(_usable: usize) -> Result<RawStack, StackError> {
        Err(StackError::Os { errno: 0 })
    }
    unsafe fn stack_free(_stack: RawStack) {}
    fn catch_unwind(f: &mut dyn FnMut()) -> Result<(), PanicPayload> {
        f();
        Ok(())
    }
    fn resume_unwind(payload: PanicPayload) -> ! {
        std::panic::resume_unwind(payload)
    }

    fn panicking() -> bool {
        std::thread::panicking()
    }
    fn abort(msg: &str) -> ! {
        panic!("{msg}")
    }

    fn install_panic_hook(_describe: smarm_core::DescribePanic) {
        // The models run no actors: loom's own panic report is enough.
    }
}

/// [`LoomP`] with a clock: `now_ns` reads the model clock ([`CLOCK`], 0
/// until a model calls [`advance_clock`]) and a timed futex wait ends when
/// the clock reaches its deadline, so a model can race an expiry against
/// other threads (the models of timed sends). Everything else is
/// [`LoomP`]'s: its futex table, its lock.
pub struct ClockP;

// SAFETY: as `LoomP`'s, plus: a timed wait also returns once the clock has
// reached its deadline, checked under the table's lock at entry and ended
// by `advance_clock` under that lock (no deadline slips between the two).
unsafe impl Futex for ClockP {
    fn wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
        futex_wait(word, expected, deadline_ns);
    }
    fn wake_one(word: &AtomicU32) {
        LoomP::wake_one(word);
    }
    fn wake_all(word: &AtomicU32) {
        LoomP::wake_all(word);
    }
}

// SAFETY: every item but the clock is `LoomP`'s (see there).
unsafe impl Platform for ClockP {
    type Arch = NoArch;
    type Lock = FutexLock<LoomP>;
    type Thread = ();
    type Poller = smarm_core::poll::NoPoller;
    const NAME: &'static str = "loom-clock";
    fn yield_thread() {
        LoomP::yield_thread();
    }
    fn now_ns() -> u64 {
        CLOCK.load(Ordering::SeqCst)
    }
    fn cpu_count() -> usize {
        LoomP::cpu_count()
    }
    fn page_size() -> usize {
        LoomP::page_size()
    }
    fn spawn_thread(name: String, f: Box<dyn FnOnce() + Send>) -> Result<(), ThreadError> {
        LoomP::spawn_thread(name, f)
    }
    fn join_thread(_thread: ()) {}
    fn current_worker() -> *mut () {
        LoomP::current_worker()
    }
    fn set_current_worker(worker: *mut ()) {
        LoomP::set_current_worker(worker)
    }
    fn stack_alloc(usable: usize) -> Result<RawStack, StackError> {
        LoomP::stack_alloc(usable)
    }
    unsafe fn stack_free(stack: RawStack) {
        // SAFETY: forwarded contract.
        unsafe { LoomP::stack_free(stack) }
    }
    fn catch_unwind(f: &mut dyn FnMut()) -> Result<(), PanicPayload> {
        LoomP::catch_unwind(f)
    }
    fn resume_unwind(payload: PanicPayload) -> ! {
        LoomP::resume_unwind(payload)
    }
    fn panicking() -> bool {
        LoomP::panicking()
    }
    fn abort(msg: &str) -> ! {
        LoomP::abort(msg)
    }
    fn install_panic_hook(describe: smarm_core::DescribePanic) {
        LoomP::install_panic_hook(describe)
    }
}
