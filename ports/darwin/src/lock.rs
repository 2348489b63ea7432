//! [`DarwinLock`]: core's raw lock on `os_unfair_lock`.
//!
//! 1. `lock`: try the lock; if it is held, spin a bounded number of times
//!    reading the word (a shared read, no cache-line ping-pong) and retry
//!    when it reads unlocked; then park in `os_unfair_lock_lock`, which
//!    lends the owner our priority.
//! 2. `unlock`: `os_unfair_lock_unlock` (wakes a parked waiter, if any).
//!
//! The spin only decides when to *try*: every acquisition goes through
//! libSystem's own calls, so correctness never depends on the word's
//! encoding (0 = unlocked is `OS_UNFAIR_LOCK_INIT`; anything else makes us
//! park sooner, never wrongly succeed).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, Ordering};

use smarm_core::RawLock;

/// Spins before parking: enough for a short critical section held on another
/// CPU, short enough that a preempted owner costs little.
const SPINS: u32 = 100;

/// A non-recursive lock on `os_unfair_lock`.
///
/// Unlike a futex lock, the owner is recorded (for priority inheritance):
/// unlocking from another thread, or locking twice from the owner, aborts
/// the process with an "os_unfair_lock" message. Core never holds a raw lock
/// across a context switch, so an actor that migrates cannot trip this.
pub struct DarwinLock(UnsafeCell<libc::os_unfair_lock>);

// SAFETY: the lock word is only ever accessed through libSystem's atomic
// os_unfair_lock calls and the atomic load in `lock`, from any thread.
unsafe impl Send for DarwinLock {}
// SAFETY: as above: shared access is what the lock is for.
unsafe impl Sync for DarwinLock {}

impl core::fmt::Debug for DarwinLock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DarwinLock").finish_non_exhaustive()
    }
}

impl Default for DarwinLock {
    fn default() -> Self {
        <Self as RawLock>::new()
    }
}

impl DarwinLock {
    fn raw(&self) -> libc::os_unfair_lock_t {
        self.0.get()
    }

    /// The lock word as an atomic, for the spin's read.
    fn word(&self) -> &AtomicU32 {
        // SAFETY: `os_unfair_lock` is `{ uint32_t }` (repr(C), 4 bytes,
        // 4-aligned, the same layout as AtomicU32), it lives as long as
        // `self`, and every other access to it is atomic (libSystem's
        // compare-and-swaps), so an atomic view of it is sound.
        unsafe { AtomicU32::from_ptr(self.raw().cast::<u32>()) }
    }

    #[cold]
    fn lock_contended(&self) {
        for _ in 0..SPINS {
            core::hint::spin_loop();
            // Relaxed: only a hint of when to try; the acquisition below
            // has its own Acquire (os_unfair_lock_trylock).
            if self.word().load(Ordering::Relaxed) == 0 && self.try_lock() {
                return;
            }
        }
        // SAFETY: `raw` points at a live, initialised os_unfair_lock that
        // has not moved since any other thread began using it (it is only
        // reachable through `&self`).
        unsafe { libc::os_unfair_lock_lock(self.raw()) }
    }
}

// SAFETY: os_unfair_lock gives mutual exclusion; its lock/trylock acquire
// and its unlock releases (libSystem documents it as a lock with the usual
// memory-ordering guarantees of one). It never counts recursion: re-locking
// from the owner aborts.
unsafe impl RawLock for DarwinLock {
    fn new() -> Self {
        DarwinLock(UnsafeCell::new(libc::OS_UNFAIR_LOCK_INIT))
    }

    #[inline]
    fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        // SAFETY: as in `lock_contended`.
        unsafe { libc::os_unfair_lock_trylock(self.raw()) }
    }

    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: the caller holds the lock, on this thread (core's contract,
        // which is also os_unfair_lock's: the owner unlocks).
        unsafe { libc::os_unfair_lock_unlock(self.raw()) }
    }
}
