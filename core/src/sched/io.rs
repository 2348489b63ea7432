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
//!   [`Idle`](crate::sched::idle::Idle)'s wake kicks the poller when the
//!   worker it wakes is the one inside it;
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
//! in the poller. Under the record's lock: a `ready` latch (the directions
//! that became ready while nobody waited for them) and the actors waiting
//! (each with the directions it waits for).
//!
//! - **The poller** (an event for directions `d`): takes every waiter
//!   whose interest meets `d` and wakes it; latches the directions of `d`
//!   that no waiter took.
//! - **A waiter** (an actor whose read or write returned `EAGAIN`): if the
//!   latch holds its direction, clears it and retries the call at once;
//!   else joins the waiters and parks (with a timer if it has a deadline).
//!   Once resumed, for any reason, it takes itself out of the waiters if
//!   it is still there, and retries the call (or reports its deadline).
//! - **A deadline**: the timer pokes the record: takes that waiter out if
//!   it is still there, and wakes it.
//! - **A kill, a cancellation** (shutdown): they wake the actor directly;
//!   it unwinds from its park, and the unwind takes it out of the waiters.
//!
//! Why no readiness is lost: the poller reports only edges (changes to
//! ready after the last report), and a waiter waits only after its call
//! returned `EAGAIN`, so any readiness it could miss is an edge after that
//! `EAGAIN`; the poller's delivery and the waiter's check-and-join are
//! under one lock, so the edge either is latched before the check (the
//! waiter retries) or finds the waiter joined (and wakes it). Why a wake is
//! delivered once: a waiter entry is removed, under the lock, by exactly
//! one of the poller, the timer and the waiter itself, and only the one
//! that removed it wakes it. A stale latch (an edge whose data an earlier
//! call already took) costs one retry that returns `EAGAIN` again.
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

/// An actor waiting on a record.
struct IoWaiter {
    actor: Arc<Actor>,
    interest: u32,
}

struct RecordState {
    /// Directions that became ready while nobody waited for them.
    ready: u32,
    waiters: Vec<IoWaiter>,
}

/// One registered descriptor's readiness.
pub struct Record<L: RawLock> {
    state: Mutex<L, RecordState>,
    fd: AtomicI32,
}

impl<L: RawLock> Record<L> {
    fn new() -> Self {
        Record {
            state: Mutex::new(RecordState {
                ready: 0,
                waiters: Vec::new(),
            }),
            fd: AtomicI32::new(-1),
        }
    }

    /// The poller's delivery: wakes the waiters `ready` meets, latches the
    /// rest. Returns the actors woken.
    fn deliver(&self, ready: u32) -> usize {
        let mut st = self.state.lock();
        let mut taken = 0;
        let mut woken = 0;
        let mut k = 0;
        while k < st.waiters.len() {
            if st.waiters[k].interest & ready != 0 {
                let w = st.waiters.swap_remove(k);
                taken |= w.interest & ready;
                woken += 1;
                if let Some(a) = w.actor.wake() {
                    schedule(a);
                }
            } else {
                k += 1;
            }
        }
        st.ready |= ready & !taken;
        woken
    }

    /// Takes the waiter `actor` out if it is still there; `wake`: wake it
    /// (the timer's poke). Returns whether it was there.
    fn withdraw(&self, actor: *const Actor, wake: bool) -> bool {
        let mut st = self.state.lock();
        let Some(k) = st.waiters.iter().position(|w| Arc::as_ptr(&w.actor) == actor) else {
            return false;
        };
        let w = st.waiters.swap_remove(k);
        drop(st);
        if wake {
            if let Some(a) = w.actor.wake() {
                schedule(a);
            }
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
        {
            let mut st = r.state.lock();
            st.ready = 0;
            debug_assert!(st.waiters.is_empty());
        }
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
        // SAFETY: records live as long as the driver.
        unsafe { rec.as_ref() }.fd.store(-1, Ordering::Relaxed);
        self.registered.fetch_sub(1, Ordering::SeqCst);
        self.records.lock().1.push(rec);
    }

    /// Takes the poll role if nobody holds it.
    #[inline]
    pub(crate) fn claim(&self) -> bool {
        // Acquire: pairs with `release`'s Release (the event buffer).
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
    /// only). Returns the number of events.
    pub(crate) fn dispatch(&self) -> usize {
        // SAFETY: only the role holder touches `events`.
        let (buf, n) = unsafe { &mut *self.events.get() };
        let count = mem::replace(n, 0);
        for ev in &buf[..count] {
            // SAFETY: a token is a record's address (the poller reports
            // only tokens it was given), and records outlive the driver's
            // users (module doc).
            let rec = unsafe { &*(ev.token as *const Record<P::Lock>) };
            rec.deliver(ev.ready);
        }
        count
    }

    /// A busy worker's poll: takes the role if free, polls without
    /// blocking, wakes what it found.
    pub(crate) fn poll_now(&self) -> usize {
        if !self.active() || !self.claim() {
            return 0;
        }
        self.wait(Some(0));
        let n = self.dispatch();
        self.release();
        n
    }
}

/// The calling actor waits until `rec` reports one of `interest`'s
/// directions, or until `deadline_ns`. The caller is an actor of the
/// runtime `rec` belongs to, and its last call on `fd` returned `EAGAIN`.
///
/// # Safety
///
/// `rec` is a live registration's record (the caller holds the
/// registration, and so the driver, for the whole call).
pub(crate) unsafe fn wait_ready<P: Platform>(
    rec: NonNull<Record<P::Lock>>,
    interest: u32,
    deadline_ns: Option<u64>,
) -> WaitOutcome {
    let Some(me) = current_actor::<P>() else {
        return WaitOutcome::Retry;
    };
    // SAFETY: caller contract.
    let r = unsafe { rec.as_ref() };
    let passed = |d: Option<u64>| d.is_some_and(|d| P::now_ns() >= d);
    {
        let mut st = r.state.lock();
        if st.ready & interest != 0 {
            st.ready &= !interest;
            return WaitOutcome::Retry;
        }
        if passed(deadline_ns) {
            return WaitOutcome::TimedOut;
        }
        // SAFETY: `me` is the running actor, alive while it runs; the
        // entry takes one more reference.
        let actor = unsafe {
            Arc::increment_strong_count(me);
            Arc::from_raw(me)
        };
        st.waiters.push(IoWaiter { actor, interest });
    }
    /// Takes the caller out of the waiters if the park unwinds (a kill,
    /// a cancellation).
    struct Leave<'a, L: RawLock>(&'a Record<L>, *const Actor);
    impl<L: RawLock> Drop for Leave<'_, L> {
        fn drop(&mut self) {
            self.0.withdraw(self.1, false);
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
                    r.withdraw(me as *const Actor, true);
                }),
            );
        }
    }
    // Resumed (by the poller, the timer, or spuriously): leave if still
    // there. A deadline that passed wins over a readiness that came with
    // it: nothing is lost (the next call tries the descriptor first).
    mem::forget(leave);
    r.withdraw(me, false);
    if passed(deadline_ns) {
        WaitOutcome::TimedOut
    } else {
        WaitOutcome::Retry
    }
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
