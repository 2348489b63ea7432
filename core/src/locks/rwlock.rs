//! [`RwLock`]: `std::sync::RwLock`'s API and poisoning, waiting by parking
//! (an actor) or futex-waiting (a thread) on the layer's wait list.
//!
//! # The state word
//!
//! | bits             | meaning                                               |
//! |------------------|-------------------------------------------------------|
//! | `WRITER` (1)     | write-locked                                          |
//! | `QUEUED` (2)     | the wait list is not empty (written under its lock)   |
//! | `READER` (4) × n | n read guards are held                                |
//!
//! The list (under its lock) also counts the writers on it (`writers`).
//!
//! # Protocol (numbered as in the code)
//!
//! Read:
//! 1. `R1` fast path: add `READER` if neither `WRITER` nor `QUEUED` is set
//!    (a CAS loop; Acquire);
//! 2. `R2` (`W1`) under the list lock, in one CAS loop: add `READER` if
//!    `WRITER` is clear and no writer is listed (or this reader was woken:
//!    it takes its turn even with writers listed behind it); else set
//!    `QUEUED`, then append (a waiter woken before goes to the front,
//!    marked starving);
//! 3. `R3` sleep until taken off the list: a marked ticket means `U3`
//!    handed the lock over (done); else start over at `R2`, woken.
//!
//! Write:
//! 1. `X1` fast path: CAS in `WRITER` while no guard is held, `QUEUED` or
//!    not (barging, as the mutex);
//! 2. `X2` (`W1`) under the list lock: the same, or set `QUEUED` and
//!    append (starving at the front, as `R2`);
//! 3. `X3` as `R3`, starting over at `X2`.
//!
//! Unlock:
//! 1. `U1` read: subtract `READER` (Release); the last reader out with
//!    `QUEUED` set goes on to `U3`;
//! 2. `U2` write: CAS `WRITER → 0` (Release); failing (`QUEUED`), go on to
//!    `U3` with the write lock still held;
//! 3. `U3` under the list lock: if the front waiter is starving, hand it
//!    the lock (the state as if it had locked: a writer's `WRITER` kept or
//!    turned into one reader; after a read unlock, a CAS from a free state,
//!    which fails if the lock was taken meanwhile: that holder's unlock
//!    comes back here), pop it and mark its ticket; otherwise clear
//!    `WRITER` (a writer's unlock, Release) and pop the front. Then wake
//!    it and, if it is a reader, the readers right behind it, one per
//!    list-lock round (`QUEUED` cleared when the list empties).
//!
//! A withdrawing waiter (`W4`) whose entry `U3` took passes the wake on by
//! running `U3` itself, or, if the lock was handed to it, unlocks.
//!
//! # Fairness
//!
//! Writer-preferring, as std's futex lock: a new reader waits while a
//! writer waits, so a stream of readers cannot starve writers (and a
//! thread or actor that read-locks twice may deadlock against a waiting
//! writer, as with std). Waiters are woken in arrival order; a released
//! lock can be taken by an arriving writer first (barging, as the mutex),
//! but at most once per waiter: one overtaken after its wake is handed the
//! lock at the next release (the mutex's "Fairness").

use core::fmt;

mod guards;

pub use guards::{RwLockReadGuard, RwLockWriteGuard};

use super::poison::{self, LockResult, TryLockError, TryLockResult};
use super::waitlist::{me, WaitList, Withdraw};
use crate::seam::lock::Mutex as ListLock;
use crate::seam::platform::Platform;
use crate::sync::{AtomicUsize, Ordering, UnsafeCell, LOOM};

/// `state` bit: write-locked.
const WRITER: usize = 1;
/// `state` bit: someone is on the wait list.
const QUEUED: usize = 2;
/// `state` unit: one read guard.
const READER: usize = 4;

/// What a listed waiter wants.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    Read,
    Write,
}

/// A listed waiter's request.
#[derive(Clone, Copy)]
pub(super) struct Ask {
    pub(super) kind: Want,
    /// Woken once and lost the lock to a barger: the next release hands
    /// the lock to it (`U3`).
    pub(super) starving: bool,
}

/// The wait list and how many writers are on it.
pub(super) struct Waiters {
    pub(super) list: WaitList<Ask>,
    pub(super) writers: usize,
}

impl Waiters {
    fn pop(&mut self) -> Option<super::waitlist::Entry<Ask>> {
        let e = self.list.pop()?;
        if e.want.kind == Want::Write {
            self.writers -= 1;
        }
        Some(e)
    }
}

/// A reader-writer lock whose waiters park (actors) or block (threads),
/// with `std::sync::RwLock`'s API and poisoning (a write guard dropped
/// during an unwind poisons it; read guards never do).
pub struct RwLock<T, P: Platform> {
    state: AtomicUsize,
    poison: poison::Flag,
    pub(super) waiters: ListLock<P::Lock, Waiters>,
    data: UnsafeCell<T>,
}

// SAFETY: the value moves with the lock.
unsafe impl<T: Send, P: Platform> Send for RwLock<T, P> {}
// SAFETY: readers share `&T` across threads (`T: Sync`), a writer gets
// `&mut T` alone (`T: Send`), as for std's.
unsafe impl<T: Send + Sync, P: Platform> Sync for RwLock<T, P> {}

impl<T, P: Platform> RwLock<T, P> {
    /// A new, unlocked lock holding `value`.
    pub fn new(value: T) -> Self {
        let l = RwLock {
            state: AtomicUsize::new(0),
            poison: poison::Flag::new(),
            waiters: ListLock::new(Waiters {
                list: WaitList::new(),
                writers: 0,
            }),
            data: UnsafeCell::new(value),
        };
        if LOOM {
            // loom treats initial values as non-SeqCst stores (see `chan`).
            l.state.store(0, Ordering::SeqCst);
        }
        l
    }

    /// Shared access, waiting while a writer holds the lock or waits for it.
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T, P>> {
        if !self.read_fast() {
            self.read_contended();
        }
        // SAFETY: we hold a read lock.
        unsafe { RwLockReadGuard::new(self) }
    }

    /// Shared access if available now (not while a writer holds or waits).
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T, P>> {
        if self.read_fast() {
            // SAFETY: we hold a read lock.
            Ok(unsafe { RwLockReadGuard::new(self) }?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Exclusive access, waiting while any guard is held.
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T, P>> {
        if !self.write_fast() {
            self.write_contended();
        }
        // SAFETY: we hold the write lock.
        unsafe { RwLockWriteGuard::new(self) }
    }

    /// Exclusive access if no guard is held now.
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T, P>> {
        if self.write_fast() {
            // SAFETY: we hold the write lock.
            Ok(unsafe { RwLockWriteGuard::new(self) }?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Whether a writer unwound while holding the lock (a snapshot).
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poison flag.
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// Unwraps the value (`Err` still holds it if poisoned).
    pub fn into_inner(self) -> LockResult<T> {
        let RwLock { poison, data, .. } = self;
        poison::map_result(poison.borrow(), |()| data.into_inner())
    }

    /// The value, through `&mut` (no locking needed).
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        // SAFETY: `&mut self`: no guard exists.
        let v = self.data.with_mut(|p| unsafe { &mut *p });
        poison::map_result(self.poison.borrow(), |()| v)
    }

    /// `R1`.
    #[inline]
    fn read_fast(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & (WRITER | QUEUED) == 0 {
            // Acquire: pairs with the writer's Release in `U2`.
            match self
                .state
                .compare_exchange_weak(s, add_reader(s), Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// `X1`.
    #[inline]
    fn write_fast(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & !QUEUED == 0 {
            // Acquire: pairs with the Release of `U1`/`U2`.
            match self
                .state
                .compare_exchange_weak(s, s | WRITER, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// `R2`–`R3`.
    #[cold]
    fn read_contended(&self) {
        self.contended(Want::Read);
    }

    /// `X2`–`X3`.
    #[cold]
    fn write_contended(&self) {
        self.contended(Want::Write);
    }

    /// `R2`–`R3` / `X2`–`X3`: returns holding what `want` says.
    fn contended(&self, want: Want) {
        // Woken once (then, back on the list, starving).
        let mut woken = false;
        loop {
            let (w, me) = me::<P>();
            let ticket = {
                let mut q = self.waiters.lock();
                if self.take_or_mark(want, woken || q.writers == 0) {
                    return;
                }
                if want == Want::Write {
                    q.writers += 1;
                }
                let ask = Ask {
                    kind: want,
                    starving: woken,
                };
                q.list.push(w, ask, woken)
            };
            let withdraw = Withdraw::new(move || self.withdraw(ticket, want));
            let handed = loop {
                me.sleep::<P>();
                let mut q = self.waiters.lock();
                if !q.list.contains(ticket) {
                    break q.list.unmark(ticket);
                }
            };
            withdraw.disarm();
            if handed {
                return;
            }
            woken = true;
        }
    }

    /// `R2`/`X2`'s CAS loop (caller holds the list lock): `true` if it
    /// took the lock, `false` once `QUEUED` is set (then the caller lists
    /// itself). A reader may go ahead of listed writers if `may_pass`.
    fn take_or_mark(&self, want: Want, may_pass: bool) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let free = match want {
                Want::Read => s & WRITER == 0 && may_pass,
                Want::Write => s & !QUEUED == 0,
            };
            let to = if free {
                match want {
                    Want::Read => add_reader(s),
                    Want::Write => s | WRITER,
                }
            } else if s & QUEUED == 0 {
                s | QUEUED
            } else {
                return false;
            };
            // Acquire: taking the lock pairs with the unlock's Release;
            // setting QUEUED needs none (the mutex's `take_or_mark`).
            match self
                .state
                .compare_exchange(s, to, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return free,
                Err(now) => s = now,
            }
        }
    }

    /// `U1`.
    ///
    /// # Safety
    ///
    /// The caller holds a read lock and gives it up.
    unsafe fn read_unlock(&self) {
        // Release: our reads happen before a later writer's writes.
        let prev = self.state.fetch_sub(READER, Ordering::Release);
        if prev == READER | QUEUED {
            self.release_to_front(false);
        }
    }

    /// `U2`.
    ///
    /// # Safety
    ///
    /// The caller holds the write lock and gives it up.
    unsafe fn write_unlock(&self) {
        // Release: publishes the section to the next acquirer.
        if self
            .state
            .compare_exchange(WRITER, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.release_to_front(true);
        }
    }

    /// `U3` (with `writer`, also `U2`'s slow path), under the list lock:
    /// hands the lock to a starving front waiter; otherwise frees it (a
    /// writer's unlock) and wakes the front. Then, behind a reader, wakes
    /// the readers that follow it.
    fn release_to_front(&self, writer: bool) {
        let e = {
            let mut q = self.waiters.lock();
            let front = q.list.front().map(|f| f.want);
            let handed = front.is_some_and(|a| a.starving && self.hand_over(a.kind, writer));
            if !handed && writer {
                // Release: as in U2's fast path.
                self.state.fetch_and(!WRITER, Ordering::Release);
            }
            let e = match front {
                // A starving front we could not hand to: the lock was taken
                // meanwhile, and its holder's unlock comes back here.
                Some(a) if a.starving && !handed => None,
                Some(_) => q.pop(),
                None => None,
            };
            if let (true, Some(e)) = (handed, &e) {
                q.list.mark(e.ticket);
            }
            self.clear_if_empty(&q.list);
            e
        };
        let Some(e) = e else { return };
        let read = e.want.kind == Want::Read;
        e.waiter.wake();
        if read {
            while self.wake_front_reader() {}
        }
    }

    /// `U3`'s hand-over to the front waiter (caller holds the list lock):
    /// the state as if it had taken the lock `kind` names. Always succeeds
    /// for a writer's unlock (the state is ours); after a read unlock,
    /// fails if the lock was taken meanwhile.
    fn hand_over(&self, kind: Want, writer: bool) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let to = match (kind, writer) {
                // WRITER stays set, for it.
                (Want::Write, true) => return true,
                // Our write lock becomes its read lock.
                (Want::Read, true) => (s & !WRITER) + READER,
                (Want::Write, false) if s & !QUEUED == 0 => s | WRITER,
                (Want::Read, false) if s & WRITER == 0 => add_reader(s),
                _ => return false,
            };
            // AcqRel: Acquire follows the readers' Release unlocks (U1)
            // before a writer we hand to; Release lets readers that join
            // later (an Acquire CAS) see the section we hand over from. The
            // handed waiter is ordered by the list lock (it reads its mark
            // under it).
            match self
                .state
                .compare_exchange(s, to, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// `U3`'s run of readers: wakes the front waiter if it is a reader.
    fn wake_front_reader(&self) -> bool {
        let e = {
            let mut q = self.waiters.lock();
            let e = match q.list.front() {
                Some(f) if f.want.kind == Want::Read => q.pop(),
                _ => None,
            };
            self.clear_if_empty(&q.list);
            e
        };
        match e {
            Some(e) => {
                e.waiter.wake();
                true
            }
            None => false,
        }
    }

    /// Clears `QUEUED` if the list is empty (caller holds the list lock).
    fn clear_if_empty(&self, list: &WaitList<Ask>) {
        if list.is_empty() {
            // Relaxed: QUEUED is only written under the list lock.
            self.state.fetch_and(!QUEUED, Ordering::Relaxed);
        }
    }

    /// `W4`: leaves the list. A wake spent on us goes on (`U3`); a lock
    /// handed to us is released. A listed writer leaving may let the
    /// readers behind it in: they are woken if no writer holds the lock.
    pub(super) fn withdraw(&self, ticket: u64, want: Want) {
        let (woken, handed, writer_left) = {
            let mut q = self.waiters.lock();
            let gone = q.list.remove(ticket);
            let writer_left = matches!(&gone, Some(e) if e.want.kind == Want::Write);
            if writer_left {
                q.writers -= 1;
            }
            let handed = gone.is_none() && q.list.unmark(ticket);
            self.clear_if_empty(&q.list);
            // Relaxed: a hint; a writer that holds the lock wakes the
            // list itself when it unlocks.
            let free = self.state.load(Ordering::Relaxed) & WRITER == 0;
            (gone.is_none(), handed, writer_left && free)
        };
        if handed {
            // SAFETY: `U3` handed this registration the lock `want` names.
            unsafe {
                match want {
                    Want::Read => self.read_unlock(),
                    Want::Write => self.write_unlock(),
                }
            }
        } else if woken || writer_left {
            self.release_to_front(false);
        }
    }
}

/// `s` with one more reader (std's limit: panics rather than overflow).
fn add_reader(s: usize) -> usize {
    match s.checked_add(READER) {
        Some(t) => t,
        None => panic!("too many read guards on one RwLock"),
    }
}

impl<T: fmt::Debug, P: Platform> fmt::Debug for RwLock<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(g) => d.field("data", &&*g),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get()).finish_non_exhaustive()
    }
}

impl<T: Default, P: Platform> Default for RwLock<T, P> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T, P: Platform> From<T> for RwLock<T, P> {
    fn from(value: T) -> Self {
        RwLock::new(value)
    }
}
