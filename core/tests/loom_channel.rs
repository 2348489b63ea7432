//! Loom models of the channels (`smarm_core::channel`), the real code over a
//! loom platform: no actors (the current-worker slot is always null), so
//! every waiter is a thread waiter sleeping on a futex built from a loom
//! condvar. A lost wake-up is a deadlock, which loom reports; a value lost
//! or duplicated fails an assertion.
//!
//! ```text
//! RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom \
//!     LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_channel
//! ```
//!
//! loom's SeqCst is partial (it treats an atomic's initial value as a
//! non-SeqCst store): the channels make a SeqCst store of each protocol word
//! when built under loom, and each model sends and receives one message
//! before the race so the queue's tail was last written by a SeqCst swap,
//! as in a running system.
#![cfg(smarm_loom)]

use loom::sync::atomic::Ordering;
use loom::sync::{Condvar, Mutex};
use loom::thread;

use smarm_core::channel::{self, RecvError, SendError, TryRecvError};
use smarm_core::lock::FutexLock;
use smarm_core::sync::AtomicU32;
use smarm_core::{Arch, EntryFn, Futex, PanicPayload, Platform, RawStack, StackError, ThreadError};

loom::lazy_static! {
    /// One "kernel" for every futex word of a model run: a wait checks its
    /// word under the lock and sleeps on the condvar; a wake takes the lock
    /// and notifies, so a wake cannot slip between check and sleep.
    static ref KERNEL: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
}

/// No context switch under loom: no actor ever runs.
struct NoArch;

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
struct LoomP;

// SAFETY: the check and the sleep are atomic with respect to wakes (both
// hold KERNEL's mutex); loom's mutex gives the Acquire/Release edges.
unsafe impl Futex for LoomP {
    fn wait(word: &AtomicU32, expected: u32, _deadline_ns: Option<u64>) {
        let g = KERNEL.0.lock().unwrap();
        if word.load(Ordering::SeqCst) == expected {
            drop(KERNEL.1.wait(g).unwrap());
        }
    }
    fn wake_one(_word: &AtomicU32) {
        let _g = KERNEL.0.lock().unwrap();
        // Waking all is allowed (waiters re-check their own word).
        KERNEL.1.notify_all();
    }
    fn wake_all(word: &AtomicU32) {
        Self::wake_one(word)
    }
}

// SAFETY: `current_worker` is always null (never set), so core takes its
// thread paths only; no stacks are mapped; `catch_unwind` is never reached
// (no actors run).
unsafe impl Platform for LoomP {
    type Arch = NoArch;
    type Lock = FutexLock<LoomP>;
    type Thread = ();
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
    fn abort(msg: &str) -> ! {
        panic!("{msg}")
    }
}

/// Runs `f` under loom with a preemption bound of 2 unless
/// `LOOM_MAX_PREEMPTIONS` asks for another.
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

// ---------------------------------------------------------------------------
// Unbounded
// ---------------------------------------------------------------------------

/// A receiver waiting while a sender sends two values and disconnects: the
/// push-vs-park and disconnect-vs-park races, values in order.
#[test]
fn unbounded_send_and_disconnect_vs_recv() {
    model(|| {
        let (tx, mut rx) = channel::channel::<u32, LoomP>();
        tx.send(0).unwrap();
        assert_eq!(rx.recv(), Ok(0));
        let t = thread::spawn(move || {
            tx.send(1).unwrap();
            tx.send(2).unwrap();
        });
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        assert_eq!(rx.recv(), Err(RecvError));
        t.join().unwrap();
    });
}

/// Two senders on two threads each send one value and drop: the receiver
/// gets both (each once), then the disconnection, whichever drop is last.
#[test]
fn unbounded_two_senders_disconnect() {
    model(|| {
        let (tx, mut rx) = channel::channel::<u32, LoomP>();
        tx.send(0).unwrap();
        assert_eq!(rx.recv(), Ok(0));
        let tx2 = tx.clone();
        let a = thread::spawn(move || tx.send(1).unwrap());
        let b = thread::spawn(move || tx2.send(2).unwrap());
        let mut got = [rx.recv().unwrap(), rx.recv().unwrap()];
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        assert_eq!(rx.recv(), Err(RecvError));
        a.join().unwrap();
        b.join().unwrap();
    });
}

/// The receiver dropped while a sender sends: the send either succeeds
/// (its value dropped with the channel) or fails with the value back.
#[test]
fn unbounded_receiver_drop_vs_send() {
    model(|| {
        let (tx, rx) = channel::channel::<u32, LoomP>();
        let t = thread::spawn(move || match tx.send(1) {
            Ok(()) | Err(SendError(1)) => {}
            Err(SendError(v)) => panic!("got {v} back"),
        });
        drop(rx);
        t.join().unwrap();
    });
}

// ---------------------------------------------------------------------------
// Bounded
// ---------------------------------------------------------------------------

/// Capacity 1: the second send waits for the receiver to free the slot
/// (full-vs-recv); then the disconnection.
#[test]
fn bounded_full_vs_recv() {
    model(|| {
        let (tx, mut rx) = channel::bounded::<u32, LoomP>(1);
        tx.send(0).unwrap();
        assert_eq!(rx.recv(), Ok(0));
        let t = thread::spawn(move || {
            tx.send(1).unwrap();
            tx.send(2).unwrap();
        });
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        assert_eq!(rx.recv(), Err(RecvError));
        t.join().unwrap();
    });
}

/// Capacity 1, full, two senders blocked on two threads: each slot the
/// receiver frees must reach a waiting sender (FIFO wake, passed on when
/// a woken sender got a slot by itself).
#[test]
fn bounded_two_blocked_senders() {
    model(|| {
        let (tx, mut rx) = channel::bounded::<u32, LoomP>(1);
        tx.send(0).unwrap();
        let tx2 = tx.clone();
        let a = thread::spawn(move || tx.send(1).unwrap());
        let b = thread::spawn(move || tx2.send(2).unwrap());
        assert_eq!(rx.recv(), Ok(0));
        let mut got = [rx.recv().unwrap(), rx.recv().unwrap()];
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        assert_eq!(rx.recv(), Err(RecvError));
        a.join().unwrap();
        b.join().unwrap();
    });
}

/// Capacity 1, full: the receiver is dropped while a sender waits for a
/// slot; the sender must be woken and fail with its value.
#[test]
fn bounded_receiver_drop_vs_blocked_send() {
    model(|| {
        let (tx, rx) = channel::bounded::<u32, LoomP>(1);
        tx.send(0).unwrap();
        let t = thread::spawn(move || tx.send(1));
        drop(rx);
        assert_eq!(t.join().unwrap(), Err(SendError(1)));
    });
}

// ---------------------------------------------------------------------------
// Oneshot
// ---------------------------------------------------------------------------

/// Send vs a waiting receive.
#[test]
fn oneshot_send_vs_recv() {
    model(|| {
        let (tx, rx) = channel::oneshot::<u32, LoomP>();
        let t = thread::spawn(move || tx.send(7).unwrap());
        assert_eq!(rx.recv(), Ok(7));
        t.join().unwrap();
    });
}

/// The sender dropped unsent vs a waiting receive.
#[test]
fn oneshot_drop_vs_recv() {
    model(|| {
        let (tx, rx) = channel::oneshot::<u32, LoomP>();
        let t = thread::spawn(move || drop(tx));
        assert_eq!(rx.recv(), Err(RecvError));
        t.join().unwrap();
    });
}

/// The receiver dropped (after a `try_recv`) vs a send: the value is
/// either handed back or dropped with the channel, never lost in between.
#[test]
fn oneshot_receiver_drop_vs_send() {
    model(|| {
        let (tx, mut rx) = channel::oneshot::<loom::sync::Arc<()>, LoomP>();
        let token = loom::sync::Arc::new(());
        let t2 = token.clone();
        let t = thread::spawn(move || {
            if let Err(v) = tx.send(t2) {
                drop(v);
            }
        });
        match rx.try_recv() {
            Ok(v) => drop(v),
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => panic!("the sender sends"),
        }
        drop(rx);
        t.join().unwrap();
        assert_eq!(
            loom::sync::Arc::strong_count(&token),
            1,
            "the value was dropped once"
        );
    });
}
