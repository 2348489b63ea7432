//! Loom models of `Select` (`smarm_core::Select`), the real code over the
//! loom platform with thread waiters (no actors): one waiter registered
//! with several channels at once.
//! - two sources made ready at once by two threads while the selector
//!   registers and waits: exactly one value taken, the other left intact
//!   (received afterwards), no lost wake (a deadlock);
//! - the last sender's drop racing a select: the closed arm completes;
//! - a oneshot's send racing a select over it and a channel.
//!
//! Run: `RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
//! LOOM_MAX_PREEMPTIONS=2 cargo test -p smarm-core --release --test loom_select`
#![cfg(smarm_loom)]

use loom::thread;

use smarm_core::channel::{self, RecvError};
use smarm_core::Select;

#[path = "common/loom_platform.rs"]
mod loom_platform;

use loom_platform::LoomP;

fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

#[derive(Debug, PartialEq)]
enum Ev {
    A(Result<u32, RecvError>),
    B(Result<u32, RecvError>),
}

#[test]
fn two_sources_ready_at_once_one_taken_one_intact() {
    model(|| {
        let (ta, mut ra) = channel::channel::<u32, LoomP>();
        let (tb, mut rb) = channel::channel::<u32, LoomP>();
        // Warm-up (see loom_channel's module doc).
        ta.send(0).unwrap();
        tb.send(0).unwrap();
        assert_eq!((ra.try_recv(), rb.try_recv()), (Ok(0), Ok(0)));
        let sa = thread::spawn(move || ta.send(1).unwrap());
        let sb = thread::spawn(move || tb.send(2).unwrap());
        let ev = Select::<Ev, LoomP>::new()
            .recv(&mut ra, Ev::A)
            .recv(&mut rb, Ev::B)
            .wait();
        sa.join().unwrap();
        sb.join().unwrap();
        // The arm not taken still holds its value; the taken one is empty
        // and closed (its sender is gone).
        match ev {
            Ev::A(Ok(1)) => {
                assert_eq!(rb.recv(), Ok(2));
                assert_eq!(ra.recv(), Err(RecvError));
            }
            Ev::B(Ok(2)) => {
                assert_eq!(ra.recv(), Ok(1));
                assert_eq!(rb.recv(), Err(RecvError));
            }
            other => panic!("unexpected {other:?}"),
        }
    });
}

#[test]
fn last_sender_drop_racing_a_select() {
    model(|| {
        let (ta, mut ra) = channel::channel::<u32, LoomP>();
        let (tb, mut rb) = channel::channel::<u32, LoomP>();
        ta.send(0).unwrap();
        tb.send(0).unwrap();
        assert_eq!((ra.try_recv(), rb.try_recv()), (Ok(0), Ok(0)));
        let t = thread::spawn(move || drop(ta));
        let ev = Select::<Ev, LoomP>::new()
            .recv(&mut ra, Ev::A)
            .recv(&mut rb, Ev::B)
            .wait();
        t.join().unwrap();
        assert_eq!(ev, Ev::A(Err(RecvError)));
        drop(tb);
    });
}

#[test]
fn oneshot_send_racing_a_select() {
    model(|| {
        let (otx, mut orx) = channel::oneshot::<u32, LoomP>();
        let (tb, mut rb) = channel::channel::<u32, LoomP>();
        tb.send(0).unwrap();
        assert_eq!(rb.try_recv(), Ok(0));
        let t = thread::spawn(move || otx.send(7).unwrap());
        let ev = Select::<Ev, LoomP>::new()
            .recv(&mut orx, Ev::A)
            .recv(&mut rb, Ev::B)
            .wait();
        t.join().unwrap();
        assert_eq!(ev, Ev::A(Ok(7)));
        drop(tb);
    });
}
