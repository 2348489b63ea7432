//! IO readiness: the runtime's poller, the per-descriptor readiness record,
//! and how an actor parks on a descriptor and is woken exactly once.
//!
//! # The driver
//!
//! A runtime makes its [`IoDriver`] (the port's [`Poller`]) at the first
//! registration, so a runtime without IO never makes a syscall for it.
//! While at least one descriptor is registered, workers poll:
//!
//! - a worker with nothing to run that wins the *poll role* (one worker at
//!   a time) waits in the poller instead of on its futex word, until an
//!   event, the earliest timer (if it also holds the timers) or a kick;
//!   [`Idle`]'s wake kicks the poller when the
//!   worker it wakes is the one inside it;
//! - a worker kicked out of the poller for work found elsewhere while
//!   another sleeps wakes that one, which takes the poll role (so the
//!   actor it was kicked for, if it holds its worker, does not hold up
//!   IO);
//! - a busy worker polls without blocking every [`IO_POLL_CHECKS`] timer
//!   checks (64 turns), so a saturated runtime still serves IO; the count
//!   rides on the timer check, so a turn pays nothing more for it.
//!
//! What a poll delivers wakes the parked actors into the polling worker's
//! run-next slot (and the run queue), as a message would.
//!
//! # The readiness record and its protocol
//!
//! Each registered descriptor has a [`Record`], whose address is its token
//! in the poller: a *tick* word (two 16-bit counts of the edges delivered
//! so far, reads in the low half, writes in the high half; written under
//! the record's lock, read without it) and, under the lock, the actors
//! waiting (each with the directions it waits for).
//!
//! - **A caller** reads the tick ([`ticket`]) *before* its call (`read`,
//!   `accept`, ...). If the call returns `EAGAIN`, it waits with that
//!   ticket: under the lock, if the tick of its direction moved since, an
//!   edge came after the call began, so it retries at once; else it joins
//!   the waiters and parks (with a timer if it has a deadline). Once
//!   resumed, for any reason, it takes itself out of the waiters if still
//!   there, and calls again (or reports its deadline).
//! - **The poller** (an event for directions `d`): under the lock, counts
//!   the edge in the tick and takes every waiter whose interest meets `d`,
//!   and wakes it.
//! - **A deadline**: the timer pokes the record: takes that waiter out if
//!   it is still there, and wakes it.
//! - **A kill, a cancellation** (shutdown): they wake the actor directly;
//!   it unwinds from its park, and the unwind takes it out of the waiters.
//!
//! Why no readiness is lost: the poller reports only edges (changes to
//! ready after the last report), so the only readiness a caller can miss
//! is an edge after its call began (data there before the call, the call
//! would have returned). That edge's delivery either counted in the tick
//! before the caller's check (it retries) or found it among the waiters
//! (it wakes it): both under the lock. Any number of callers may wait on
//! one direction (several actors accepting on one listener): each compares
//! its own ticket, so an edge that woke one does not strand another that
//! joined just after. Why a wake is delivered once: a waiter entry is
//! removed, under the lock, by exactly one of the poller, the timer and the
//! waiter itself, and only the one that removed it wakes it. A spurious
//! edge (data an earlier call already took) costs one retry that returns
//! `EAGAIN` again. (A first cut latched the directions nobody waited for
//! instead of counting them; loom's `two_readers_are_both_woken_by_one_edge`
//! found a second reader stranded by an edge that woke the first.)
//!
//! # Records are never freed while the driver lives
//!
//! A poll may return an event for a descriptor deregistered meanwhile (it
//! was fetched from the kernel first). Records therefore go back to the
//! driver's free list, not to the allocator, and are freed with the
//! driver (which every registration keeps alive). A stale event on a
//! reused record is a spurious readiness: one retry, as above.

#[allow(unused_imports)]
use super::*;

use crate::seam::platform::RawLock;
use crate::seam::poll::{PollError, PollEvent, Poller};
use crate::sync::AtomicI32;

/// Timer checks (every `TIMER_CHECK_TURNS` = 16 turns) between two
/// non-blocking polls of a busy worker: 64 turns (tokio polls its driver
/// every 61), while descriptors are registered.
pub(crate) const IO_POLL_CHECKS: u32 = 4;

/// Events taken per poll.
const EVENTS: usize = 256;

/// Who waits on a record.
enum Who {
    /// A parked actor (every waiter of the runtime).
    Actor(ActorArc),
    /// Loom models only: a thread's wake word (`1` once woken) and the
    /// futex wake for it (`loom_record`).
    #[cfg(smarm_loom)]
    Thread(Arc<crate::sync::AtomicU32>, fn(&crate::sync::AtomicU32)),
}

impl Who {
    /// The waiter's identity (for its own or the timer's withdrawal).
    fn id(&self) -> usize {
        match self {
            Who::Actor(a) => ActorArc::as_ptr(a) as usize,
            #[cfg(smarm_loom)]
            Who::Thread(w, _) => Arc::as_ptr(w) as usize,
        }
    }

    /// Wakes the waiter (its entry was just taken out: once).
    fn wake(self) {
        match self {
            Who::Actor(a) => {
                if let Some(a) = a.wake() {
                    schedule(a);
                }
            }
            #[cfg(smarm_loom)]
            Who::Thread(w, wake) => {
                // Release: pairs with the waiter's Acquire load of its word.
                w.store(1, Ordering::Release);
                wake(&w);
            }
        }
    }
}

/// A waiter on a record and the directions it waits for.
struct IoWaiter {
    who: Who,
    interest: u32,
}

struct RecordState {
    waiters: Vec<IoWaiter>,
}

/// One registered descriptor's readiness.
pub struct Record<L: RawLock> {
    /// Edges delivered: reads in the low 16 bits, writes in the high 16
    /// (each wraps). Written under `state`'s lock, read without it.
    tick: AtomicU32,
    state: Mutex<L, RecordState>,
    fd: AtomicI32,
}

/// The tick bits of `interest`'s directions.
fn tick_mask(interest: u32) -> u32 {
    let mut m = 0;
    if interest & crate::seam::poll::READABLE != 0 {
        m |= 0xffff;
    }
    if interest & crate::seam::poll::WRITABLE != 0 {
        m |= 0xffff_0000;
    }
    m
}

/// Whether `tick` counts an edge of one of `interest`'s directions that
/// `ticket` (an earlier tick) does not.
fn moved(tick: u32, interest: u32, ticket: u32) -> bool {
    (tick ^ ticket) & tick_mask(interest) != 0
}

/// `tick` with one more edge counted in each direction of `ready`.
fn tick_add(tick: u32, ready: u32) -> u32 {
    let mut lo = tick & 0xffff;
    let mut hi = tick >> 16;
    if ready & crate::seam::poll::READABLE != 0 {
        lo = (lo + 1) & 0xffff;
    }
    if ready & crate::seam::poll::WRITABLE != 0 {
        hi = (hi + 1) & 0xffff;
    }
    lo | (hi << 16)
}

impl<L: RawLock> Record<L> {
    fn new() -> Self {
        Record {
            tick: AtomicU32::new(0),
            state: Mutex::new(RecordState { waiters: Vec::new() }),
            fd: AtomicI32::new(-1),
        }
    }

    /// The tick, for a caller about to make its call.
    #[inline]
    fn ticket(&self) -> u32 {
        // Acquire: pairs with the Release store in `deliver` (what the
        // poller saw is visible to the call that follows).
        self.tick.load(Ordering::Acquire)
    }

    /// The poller's delivery: counts the edge, wakes the waiters `ready`
    /// meets. Returns the waiters woken.
    fn deliver(&self, ready: u32) -> usize {
        let mut st = self.state.lock();
        // Relaxed load: written only under the lock we hold. Release
        // store: pairs with `ticket`'s Acquire.
        let t = self.tick.load(Ordering::Relaxed);
        self.tick.store(tick_add(t, ready), Ordering::Release);
        let mut woken = 0;
        let mut k = 0;
        while k < st.waiters.len() {
            if st.waiters[k].interest & ready != 0 {
                let w = st.waiters.swap_remove(k);
                woken += 1;
                w.who.wake();
            } else {
                k += 1;
            }
        }
        woken
    }

    /// A waiter's check-and-join with the `ticket` it read before its
    /// call: if an edge of `interest` came since, returns `false` (retry
    /// the call now); else adds `who` to the waiters and returns `true`.
    fn join(&self, who: Who, interest: u32, ticket: u32) -> bool {
        let mut st = self.state.lock();
        // Relaxed: written only under the lock we hold.
        if moved(self.tick.load(Ordering::Relaxed), interest, ticket) {
            return false;
        }
        st.waiters.push(IoWaiter { who, interest });
        true
    }

    /// Takes the waiter `id` out if it is still there; `wake`: wake it
    /// (the timer's poke). Returns whether it was there.
    fn withdraw(&self, id: usize, wake: bool) -> bool {
        let mut st = self.state.lock();
        let Some(k) = st.waiters.iter().position(|w| w.who.id() == id) else {
            return false;
        };
        let w = st.waiters.swap_remove(k);
        drop(st);
        if wake {
            w.who.wake();
        }
        true
    }
}

/// How an IO wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// Retry the call: the direction may be ready (or the wake was
    /// spurious: a retry that returns `EAGAIN` waits again).
    Retry,
    /// The deadline passed first.
    TimedOut,
    /// The caller is no actor of the runtime `rec` belongs to: it did not
    /// wait.
    NotHere,
}

/// Every record a driver made, and the free ones among them.
type Records<L> = (Vec<NonNull<Record<L>>>, Vec<NonNull<Record<L>>>);

/// The runtime's poller and its records.
pub struct IoDriver<P: Platform> {
    poller: P::Poller,
    /// Live registrations; 0: workers do not poll.
    registered: AtomicUsize,
    /// The poll role (one worker at a time waits in or polls the poller).
    polling: AtomicBool,
    /// The role holder's event buffer and the count its last poll filled.
    events: RawCell<(Vec<PollEvent>, usize)>,
    /// Every record made (freed with the driver) and the free ones.
    records: Mutex<P::Lock, Records<P::Lock>>,
}

// SAFETY: records are shared through their locks; `events` is touched only
// by the holder of the poll role (`polling`, taken with Acquire and given
// back with Release); the poller is `Send + Sync`.
unsafe impl<P: Platform> Send for IoDriver<P> {}
// SAFETY: as above.
unsafe impl<P: Platform> Sync for IoDriver<P> {}

impl<P: Platform> Drop for IoDriver<P> {
    fn drop(&mut self) {
        let (all, _) = &mut *self.records.lock();
        for r in all.drain(..) {
            // SAFETY: every record was `Box::into_raw`'d by `register`, and
            // the driver's last owner is dropping it: no registration (and
            // so no waiter, timer poke or poll) refers to it any more.
            drop(unsafe { Box::from_raw(r.as_ptr()) });
        }
    }
}

impl<P: Platform> IoDriver<P> {
    pub(crate) fn new() -> Result<Self, PollError> {
        Ok(IoDriver {
            poller: P::Poller::new()?,
            registered: AtomicUsize::new(0),
            polling: AtomicBool::new(false),
            events: RawCell::new((alloc::vec![PollEvent::default(); EVENTS], 0)),
            records: Mutex::new((Vec::new(), Vec::new())),
        })
    }

    /// Whether any descriptor is registered (workers poll only then).
    #[inline]
    pub(crate) fn active(&self) -> bool {
        // Relaxed: a hint; a registration made after a worker looked is
        // served by the next idle worker or busy poll (the registering
        // actor has not waited yet: it waits only after its own call).
        self.registered.load(Ordering::Relaxed) != 0
    }

    /// Kicks a worker waiting in the poller.
    pub(crate) fn kick(&self) {
        self.poller.kick();
    }

    /// Registers `fd`: a record, then the poller.
    pub(crate) fn register(&self, fd: i32) -> Result<NonNull<Record<P::Lock>>, PollError> {
        let rec = {
            let (all, free) = &mut *self.records.lock();
            match free.pop() {
                Some(r) => r,
                None => {
                    let r = NonNull::from(Box::leak(Box::new(Record::new())));
                    all.push(r);
                    r
                }
            }
        };
        // SAFETY: records live as long as the driver (module doc).
        let r = unsafe { rec.as_ref() };
        // Every wait takes its entry out before the registration can drop
        // (a plain wait's guard, a select arm's drop): a stale entry here
        // would be woken by the next descriptor's edges.
        assert!(
            r.state.lock().waiters.is_empty(),
            "a recycled readiness record still has a waiter"
        );
        // Relaxed: a dump hint.
        r.fd.store(fd, Ordering::Relaxed);
        if let Err(e) = self.poller.register(fd, rec.as_ptr() as usize) {
            self.records.lock().1.push(rec);
            return Err(e);
        }
        self.registered.fetch_add(1, Ordering::SeqCst);
        Ok(rec)
    }

    /// Deregisters `fd` and recycles its record.
    ///
    /// # Safety
    ///
    /// `rec` came from [`register`](Self::register) for `fd`, nobody waits
    /// on it, and it is not used after this call.
    pub(crate) unsafe fn deregister(&self, fd: i32, rec: NonNull<Record<P::Lock>>) {
        let _ = self.poller.deregister(fd);
        // SAFETY: records live as long as the driver. Relaxed: a dump hint.
        unsafe { rec.as_ref() }.fd.store(-1, Ordering::Relaxed);
        self.registered.fetch_sub(1, Ordering::SeqCst);
        self.records.lock().1.push(rec);
    }

    /// Takes the poll role if nobody holds it.
    #[inline]
    pub(crate) fn claim(&self) -> bool {
        // Relaxed probe first (a held role costs no RMW); the CAS's
        // Acquire pairs with `release`'s Release (the event buffer).
        !self.polling.load(Ordering::Relaxed)
            && self
                .polling
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Gives the poll role back.
    pub(crate) fn release(&self) {
        // Release: pairs with `claim`'s Acquire.
        self.polling.store(false, Ordering::Release);
    }

    /// Waits in the poller (the role holder only), keeping the events for
    /// [`dispatch`](Self::dispatch).
    pub(crate) fn wait(&self, deadline_ns: Option<u64>) {
        // SAFETY: only the role holder touches `events`.
        let (buf, n) = unsafe { &mut *self.events.get() };
        *n = self.poller.wait(buf, deadline_ns);
    }

    /// Wakes what the last [`wait`](Self::wait) reported (the role holder
    /// only). Returns the number of events and of waiters woken.
    pub(crate) fn dispatch(&self) -> (usize, usize) {
        // SAFETY: only the role holder touches `events`.
        let (buf, n) = unsafe { &mut *self.events.get() };
        let count = mem::replace(n, 0);
        let mut woken = 0;
        for ev in &buf[..count] {
            // SAFETY: a token is a record's address (the poller reports
            // only tokens it was given), and records outlive the driver's
            // users (module doc).
            let rec = unsafe { &*(ev.token as *const Record<P::Lock>) };
            woken += rec.deliver(ev.ready);
        }
        (count, woken)
    }

    /// A busy worker's poll: takes the role if free, polls without
    /// blocking, wakes what it found.
    pub(crate) fn poll_now(&self) -> usize {
        if !self.active() || !self.claim() {
            return 0;
        }
        self.wait(Some(0));
        let (n, _) = self.dispatch();
        self.release();
        n
    }
}

/// The tick of `rec`, for a caller about to make its call (see the
/// module doc).
///
/// # Safety
///
/// `rec` is a live registration's record.
pub(crate) unsafe fn ticket<L: RawLock>(rec: NonNull<Record<L>>) -> u32 {
    // SAFETY: caller contract.
    unsafe { rec.as_ref() }.ticket()
}

/// The calling actor waits until `rec` (of `driver`) reports one of
/// `interest`'s directions after `ticket` (read before the call that
/// returned `EAGAIN`), or until `deadline_ns`; a caller that is no actor
/// of `driver`'s runtime gets `NotHere` at once.
///
/// # Safety
///
/// `rec` is a live registration's record (the caller holds the
/// registration, and so the driver, for the whole call).
pub(crate) unsafe fn wait_ready<P: Platform>(
    driver: &IoDriver<P>,
    rec: NonNull<Record<P::Lock>>,
    interest: u32,
    ticket: u32,
    deadline_ns: Option<u64>,
) -> WaitOutcome {
    let Some(me) = current_actor::<P>() else {
        return WaitOutcome::NotHere;
    };
    // SAFETY: `current_actor` found a live context on this thread; its
    // runtime outlives its actors.
    let core = unsafe { &*(*ctx::<P>()).core };
    if !core.io().is_some_and(|d| ptr::eq(d, driver)) {
        return WaitOutcome::NotHere;
    }
    // SAFETY: caller contract.
    let r = unsafe { rec.as_ref() };
    let passed = |d: Option<u64>| d.is_some_and(|d| P::now_ns() >= d);
    if passed(deadline_ns) {
        return WaitOutcome::TimedOut;
    }
    // SAFETY: `me` is the running actor, alive while it runs; the entry
    // takes one more reference.
    let actor = unsafe { ActorArc::clone_from_ptr(me) };
    if !r.join(Who::Actor(actor), interest, ticket) {
        return WaitOutcome::Retry;
    }
    /// Takes the caller out of the waiters if the park unwinds (a kill,
    /// a cancellation).
    struct Leave<'a, L: RawLock>(&'a Record<L>, *const Actor);
    impl<L: RawLock> Drop for Leave<'_, L> {
        fn drop(&mut self) {
            self.0.withdraw(self.1 as usize, false);
        }
    }
    let leave = Leave(r, me);
    // SAFETY: `me` is the running actor; the fd is a dump hint (Relaxed).
    let me_ref: &Actor = unsafe { &*me };
    me_ref
        .life
        .wait_fd
        .store(r.fd.load(Ordering::Relaxed), Ordering::Relaxed);
    let what = if interest & crate::seam::poll::WRITABLE != 0 {
        crate::actor::WAIT_IO_WRITE
    } else {
        crate::actor::WAIT_IO_READ
    };
    match deadline_ns {
        None => park::<P>(what),
        Some(d) => {
            let target = (rec.as_ptr() as usize, me as usize);
            park_until::<P>(
                what,
                d,
                PokeWith(target, |&(rec, me): &(usize, usize)| {
                    // SAFETY: the poke runs before the waiter's timer is
                    // cancelled (its Drop waits for a poke in flight), so
                    // the waiter, and the registration it holds, is live.
                    let r = unsafe { &*(rec as *const Record<P::Lock>) };
                    r.withdraw(me, true);
                }),
            );
        }
    }
    // Resumed (by the poller, the timer, or spuriously): leave if still
    // there. A deadline that passed wins over a readiness that came with
    // it: nothing is lost (the next call tries the descriptor first).
    mem::forget(leave);
    r.withdraw(me as usize, false);
    if passed(deadline_ns) {
        WaitOutcome::TimedOut
    } else {
        WaitOutcome::Retry
    }
}

/// Whether an edge of one of `interest`'s directions came since `ticket`
/// (a select's poll of a readiness arm).
///
/// # Safety
///
/// `rec` is a live registration's record.
pub(crate) unsafe fn edge_since<L: RawLock>(rec: NonNull<Record<L>>, interest: u32, ticket: u32) -> bool {
    // SAFETY: caller contract.
    moved(unsafe { rec.as_ref() }.ticket(), interest, ticket)
}

/// A select's registration on `rec`: the record's check-and-join for
/// `actor` (see the module doc). `false`: an edge of `interest` came since
/// `ticket`, nothing joined (ready now).
///
/// # Safety
///
/// `rec` is a live registration's record, and stays live until the entry
/// is withdrawn ([`leave`]) or taken by a delivery.
pub(crate) unsafe fn join_actor<L: RawLock>(
    rec: NonNull<Record<L>>,
    actor: ActorArc,
    interest: u32,
    ticket: u32,
) -> bool {
    // SAFETY: caller contract.
    unsafe { rec.as_ref() }.join(Who::Actor(actor), interest, ticket)
}

/// Takes the actor at `id` (its `Arc`'s address) out of `rec`'s waiters if
/// an entry of it is still there (a select's withdrawal: no wake).
///
/// # Safety
///
/// `rec` is a live registration's record.
pub(crate) unsafe fn leave<L: RawLock>(rec: NonNull<Record<L>>, id: usize) {
    // SAFETY: caller contract.
    unsafe { rec.as_ref() }.withdraw(id, false);
}

/// The calling actor's runtime's IO driver (made now if needed); `None`
/// off the runtime's actors (a plain thread, inside `blocking`).
pub(crate) fn current_driver<P: Platform>() -> Option<Result<Arc<IoDriver<P>>, PollError>> {
    current_actor::<P>()?;
    let c = ctx::<P>();
    // SAFETY: `current_actor` found a live context on this thread; its
    // runtime outlives its actors.
    let core = unsafe { &*(*c).core };
    Some(core.io_driver())
}

/// Whether the caller is an actor of the runtime `driver` belongs to.
pub(crate) fn is_current<P: Platform>(driver: &IoDriver<P>) -> bool {
    if current_actor::<P>().is_none() {
        return false;
    }
    let c = ctx::<P>();
    // SAFETY: as in `current_driver`.
    let core = unsafe { &*(*c).core };
    core.io().is_some_and(|d| ptr::eq(d, driver))
}

/// Loom models only: the readiness record's real protocol (`deliver`,
/// `join`, `withdraw`) with threads as its waiters
/// (`core/tests/loom_io.rs`).
#[cfg(smarm_loom)]
#[doc(hidden)]
pub mod loom_record;
