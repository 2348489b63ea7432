//! The idle protocol: how a worker with nothing to run goes to sleep, and
//! how whoever publishes work wakes one, with no lost wake-up and no syscall
//! when nobody sleeps.
//!
//! State: an idle list (worker indices, under a short lock), its length
//! mirrored in the atomic `nsleep` for the notifier's lock-free fast path,
//! and one futex word per worker (`0` = sleeping, `1` = woken).
//!
//! Sleeper `i` (a worker that found no work), [`Idle::sleep`]:
//! 1. store `word[i] = 0`;
//! 2. under the lock, push `i` on the list and store `nsleep` (SeqCst);
//!    then a SeqCst fence;
//! 3. re-check every source of work; if any has work: under the lock take
//!    `i` off the list if it is still there, and return (if a notifier
//!    already took it, first wait for that notifier's `word[i] = 1`, so the
//!    store cannot land on a later sleep and leave `i` listed while awake);
//! 4. futex-wait while `word[i] == 0` (or until the deadline, after which
//!    `i` takes itself off the list as in 3).
//!
//! Before step 1 the scheduler may spin (`sched::spin`'s
//! `spin_for_work`: one worker of a runtime at a time, for at most
//! `IDLE_SPIN_NS`, not while descriptors are registered): it only reads
//! the sources of work, so to this protocol it is an earlier step 3 that
//! found work, or nothing at all.
//!
//! Notifier (after publishing work with at least Release), [`Idle::notify_one`]:
//! 1. SeqCst fence; if `nsleep == 0`: return — no lock, no syscall;
//! 2. under the lock, pop a sleeper `j` (the most recent: warmest caches);
//! 3. store `word[j] = 1` (Release) and futex-wake `word[j]`.
//!
//! The poller: at most one sleeper waits in the IO poller instead of on
//! its word ([`Idle::sleep_polling`]). It says so under the list lock, as
//! it lists itself (`in_poll = i + 1`); a notifier that pops it (under the
//! same lock) takes that mark too, and after storing and futex-waking its
//! word also kicks the poller. The kick is sticky (a kick before the
//! poller's wait ends that wait at once), so it does not matter whether
//! the sleeper is in the poller yet; the lock orders the mark, and no
//! Dekker pair is needed.
//!
//! Why no wake is lost: sleeper steps 2–3 and the notifier's publish–step 1
//! are a Dekker pair (each side writes, fences SeqCst, then reads the
//! other's location), so either the re-check sees the work or the notifier
//! sees `nsleep > 0`. A popped sleeper is woken through its own word, which
//! it re-checks atomically with its futex-wait, so a wake that arrives
//! before the wait is not lost either. Each wake consumes one list entry, so
//! no throttle flag can get stuck (an earlier design with a shared
//! "notified" flag could be left set by a notifier racing a sleeper's exit,
//! muting every later wake).

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::marker::PhantomData;

use crate::seam::lock::Mutex;
use crate::seam::platform::{Futex, RawLock};
use crate::sync::{fence, AtomicPtr, AtomicU32, Ordering};

/// Idle-worker bookkeeping for one runtime of `n` workers.
pub struct Idle<F: Futex, L: RawLock> {
    nsleep: AtomicU32,
    list: Mutex<L, Vec<usize>>,
    words: Box<[AtomicU32]>,
    /// `i + 1` while listed sleeper `i` waits in the poller; 0 otherwise.
    /// Read and written under the list lock only (Relaxed).
    in_poll: AtomicU32,
    /// The poller's kick (set once a poller exists) and its argument.
    kick_arg: AtomicPtr<()>,
    kick_fn: Option<fn(*const ())>,
    _futex: PhantomData<fn() -> F>,
}

impl<F: Futex, L: RawLock> Idle<F, L> {
    /// Nobody asleep, room for `workers` sleepers.
    #[allow(dead_code)] // Tests and loom models (runtimes use `with_kick`).
    pub fn new(workers: usize) -> Self {
        Self::with_kick(workers, None)
    }

    /// As [`new`](Self::new), with the function that kicks a poller a
    /// sleeper waits in ([`sleep_polling`](Self::sleep_polling)), called
    /// with the argument that sleeper gave.
    pub fn with_kick(workers: usize, kick: Option<fn(*const ())>) -> Self {
        Idle {
            nsleep: AtomicU32::new(0),
            list: Mutex::new(Vec::with_capacity(workers)),
            words: (0..workers).map(|_| AtomicU32::new(1)).collect(),
            in_poll: AtomicU32::new(0),
            kick_arg: AtomicPtr::new(core::ptr::null_mut()),
            kick_fn: kick,
            _futex: PhantomData,
        }
    }

    /// Workers currently on the idle list.
    pub fn sleepers(&self) -> u32 {
        self.nsleep.load(Ordering::SeqCst)
    }

    /// Whether a worker may sleep, without the notify's fence: a hint that
    /// can miss a worker going to sleep right now (it may not see the
    /// caller's last stores either), for a caller that accepts leaving
    /// such a worker asleep (`Shared::push_yield`).
    #[inline]
    pub fn may_sleep(&self) -> bool {
        // Relaxed: a hint; nothing is published or acquired through it.
        self.nsleep.load(Ordering::Relaxed) != 0
    }

    /// Takes `i` off the list if it is still there. Returns `false` if a
    /// notifier took it first: that notifier's wake is in flight.
    fn withdraw(&self, i: usize) -> bool {
        self.withdraw_polling(i).0
    }

    /// [`withdraw`](Self::withdraw), and whether `i` was marked as the
    /// sleeper in the poller (the mark goes with the entry).
    fn withdraw_polling(&self, i: usize) -> (bool, bool) {
        let mut list = self.list.lock();
        match list.iter().position(|&j| j == i) {
            Some(pos) => {
                list.swap_remove(pos);
                self.nsleep.store(list.len() as u32, Ordering::SeqCst);
                (true, self.take_poll_mark(i))
            }
            None => (false, false),
        }
    }

    /// Clears the poller mark if it names `i` (the list lock is held).
    fn take_poll_mark(&self, i: usize) -> bool {
        // Relaxed: under the list lock.
        let marked = self.in_poll.load(Ordering::Relaxed) == i as u32 + 1;
        if marked {
            self.in_poll.store(0, Ordering::Relaxed);
        }
        marked
    }

    /// A notifier popped `i` and will store `word[i] = 1`: wait for that
    /// store (it comes right after the notifier's unlock). Returning before
    /// it would let it land after the next sleep's step 1, so that sleep
    /// would return at once and leave `i` on the list while awake (a stale
    /// entry: a later wake spent on an awake worker, and `sleepers()`
    /// counting it twice; loom: `loom_idle::notify_worker_races_notify_one`).
    fn await_wake(&self, i: usize) {
        // Acquire: pairs with the Release store in `wake`.
        while self.words[i].load(Ordering::Acquire) == 0 {
            F::wait(&self.words[i], 0, None);
        }
    }

    /// Worker `i` sleeps until woken (or until `deadline_ns`), unless
    /// `has_work` finds work once the sleep is announced. Returns whether it
    /// slept.
    pub fn sleep(&self, i: usize, has_work: impl Fn() -> bool, deadline_ns: Option<u64>) -> bool {
        self.sleep_in(i, &has_work, deadline_ns, None)
    }

    /// As [`sleep`](Self::sleep), but the sleep is `poll(deadline_ns)` (a
    /// wait in the IO poller that `kick_fn(kick_arg)` ends; see the module
    /// doc), once: the sleeper comes back after it whatever ended it, to
    /// deliver what the poller found.
    pub fn sleep_polling(
        &self,
        i: usize,
        has_work: impl Fn() -> bool,
        deadline_ns: Option<u64>,
        kick_arg: *const (),
        poll: &mut dyn FnMut(Option<u64>),
    ) -> bool {
        // Release: read (Acquire) by a notifier that saw `in_poll` name us,
        // which we store after this.
        self.kick_arg.store(kick_arg.cast_mut(), Ordering::Release);
        self.sleep_in(i, &has_work, deadline_ns, Some(poll))
    }

    fn sleep_in(
        &self,
        i: usize,
        has_work: &dyn Fn() -> bool,
        deadline_ns: Option<u64>,
        mut poll: Option<&mut dyn FnMut(Option<u64>)>,
    ) -> bool {
        // 1. Relaxed: only this worker and a notifier holding our list entry
        // write the word; the list lock orders this store before any pop.
        self.words[i].store(0, Ordering::Relaxed);
        // 2.
        {
            let mut list = self.list.lock();
            list.push(i);
            if poll.is_some() {
                // Relaxed: under the list lock.
                self.in_poll.store(i as u32 + 1, Ordering::Relaxed);
            }
            self.nsleep.store(list.len() as u32, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
        // 3.
        if has_work() {
            if !self.withdraw(i) {
                self.await_wake(i);
            }
            return false;
        }
        // 4. Acquire: pairs with the Release store in `wake`, so work
        // published before the wake is visible once we see it.
        while self.words[i].load(Ordering::Acquire) == 0 {
            let once = match poll.as_mut() {
                Some(poll) => {
                    // A notifier that pops us kicks the poller (sticky).
                    poll(deadline_ns);
                    true
                }
                None => {
                    F::wait(&self.words[i], 0, deadline_ns);
                    deadline_ns.is_some()
                }
            };
            if once && self.words[i].load(Ordering::Acquire) == 0 {
                // A deadline, a poll's return (or a spurious return):
                // re-check by withdrawing.
                if !self.withdraw(i) {
                    self.await_wake(i);
                }
                break;
            }
        }
        true
    }

    /// Wakes `j`, which a notifier took off the list (with its poller
    /// mark: `kick`).
    fn wake(&self, j: usize, kick: bool) {
        // Release: pairs with the Acquire load in `sleep` step 4.
        self.words[j].store(1, Ordering::Release);
        F::wake_one(&self.words[j]);
        if kick {
            // Acquire: pairs with `sleep_polling`'s Release, made before
            // it took the list lock we took after it.
            let arg = self.kick_arg.load(Ordering::Acquire);
            if let (Some(kick), false) = (self.kick_fn, arg.is_null()) {
                kick(arg);
            }
        }
    }

    /// Wakes one sleeping worker if any sleeps. Returns whether a wake was
    /// issued (a syscall was made).
    #[inline]
    pub fn notify_one(&self) -> bool {
        // 1: orders the caller's publish before the load of `nsleep`.
        fence(Ordering::SeqCst);
        if self.nsleep.load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.notify_slow()
    }

    #[cold]
    fn notify_slow(&self) -> bool {
        let j = {
            let mut list = self.list.lock();
            let j = list.pop();
            self.nsleep.store(list.len() as u32, Ordering::SeqCst);
            j.map(|j| (j, self.take_poll_mark(j)))
        };
        match j {
            Some((j, kick)) => {
                self.wake(j, kick);
                true
            }
            None => false,
        }
    }

    /// Wakes worker `i` if it is on the idle list (a timer armed earlier
    /// than the deadline it sleeps until). Returns whether it was woken. If
    /// `i` is not on the list yet, it re-checks its sources of work after
    /// getting there (sleep step 3), which the caller published first.
    pub fn notify_worker(&self, i: usize) -> bool {
        fence(Ordering::SeqCst);
        // The same removal a sleeper's own withdraw makes.
        let (found, kick) = self.withdraw_polling(i);
        if found {
            self.wake(i, kick);
        }
        found
    }

    /// Wakes every sleeper (shutdown).
    pub fn notify_all(&self) {
        fence(Ordering::SeqCst);
        let (all, poller): (Vec<usize>, u32) = {
            let mut list = self.list.lock();
            let all = list.drain(..).collect();
            self.nsleep.store(0, Ordering::SeqCst);
            // Relaxed: under the list lock.
            (all, self.in_poll.swap(0, Ordering::Relaxed))
        };
        for j in all {
            self.wake(j, poller == j as u32 + 1);
        }
    }
}

#[cfg(all(test, not(smarm_loom)))]
mod tests;
