//! `Runtime::block_on` with a closure that borrows from the caller: the
//! call returns (or panics) only once the actor is done with what it
//! borrowed, whatever ended it; from inside an actor too.
use std::panic::{self, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use smarm_tests::smarm::{self, Runtime};
use smarm_tests::with_timeout;

/// Sets its flag when dropped, after a pause that leaves a wrong
/// `block_on` (one returning before the actor let go of its closure)
/// time to be caught reading the flag early.
struct SetOnDrop<'a>(&'a mut bool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        smarm::sleep(Duration::from_millis(20));
        *self.0 = true;
    }
}

/// The message of a panic caught by `catch_unwind`.
fn message(p: Box<dyn std::any::Any + Send>) -> String {
    match p.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast::<&str>().map(|s| s.to_string()).unwrap_or_default(),
    }
}

#[test]
fn the_closure_borrows_a_local_vec_and_a_mut_counter() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let words: Vec<String> = ["a", "bb", "ccc"].into_iter().map(String::from).collect();
        let mut calls = 0u32;
        let total = rt.block_on(|| {
            calls += 1;
            // The actor is a real one: it spawns and joins children.
            let h = smarm::spawn(|| 4);
            words.iter().map(|w| w.len()).sum::<usize>() + h.join().unwrap()
        });
        assert_eq!(total, 10);
        assert_eq!(calls, 1);
        // The value may borrow too.
        let longest: &String = rt.block_on(|| words.iter().max_by_key(|w| w.len()).unwrap());
        assert_eq!(longest, "ccc");
        // Many in a row, each borrowing the same counter mutably.
        for _ in 0..100 {
            rt.block_on(|| calls += 1);
        }
        assert_eq!(calls, 101);
    });
}

#[test]
fn a_panicking_closure_is_dropped_before_block_on_panics() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let mut dropped = false;
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(|| {
                let _g = SetOnDrop(&mut dropped);
                panic!("boom");
            })
        }));
        let msg = message(r.unwrap_err());
        assert!(msg.contains("panicked: boom"), "{msg}");
        assert!(dropped, "the guard was dropped before block_on panicked");
    });
}

#[test]
fn a_killed_block_on_actor_has_unwound_when_block_on_panics() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let mut dropped = false;
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(|| {
                let _g = SetOnDrop(&mut dropped);
                smarm::current().unwrap().kill();
                loop {
                    smarm::yield_now(); // the kill unwinds here
                }
            })
        }));
        let msg = message(r.unwrap_err());
        assert!(msg.contains("was killed"), "{msg}");
        assert!(dropped, "the killed actor's guard ran before block_on panicked");
    });
}

#[test]
fn block_on_from_an_actor_on_one_worker_does_not_block_the_worker() {
    with_timeout(60, || {
        // One worker: the outer actor's wait must not hold it, or the
        // inner actor never runs.
        let rt = Runtime::builder().workers(1).build().unwrap();
        let mut log = Vec::new();
        let n = rt.block_on(|| {
            log.push("outer");
            let inner = rt.block_on(|| {
                log.push("inner");
                smarm::yield_now();
                7
            });
            log.push("outer again");
            inner
        });
        assert_eq!(n, 7);
        assert_eq!(log, ["outer", "inner", "outer again"]);
    });
}

#[test]
fn a_kill_of_an_actor_waiting_in_block_on_waits_for_the_inner_actor() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (ref_tx, ref_rx) = mpsc::channel();
        let (started_tx, started) = smarm::oneshot::<()>();
        let (go_tx, go) = smarm::oneshot::<()>();
        let (unwound_tx, unwound) = mpsc::channel::<()>();
        // The killer: kills the outer actor once the inner one runs, gives
        // a wrong block_on time to let the outer unwind, then lets the
        // inner one finish.
        let killer = std::thread::spawn(move || {
            let outer: smarm::ActorRef = ref_rx.recv().unwrap();
            started.recv().unwrap();
            outer.kill();
            let early = unwound.recv_timeout(Duration::from_millis(200)).is_ok();
            go_tx.send(()).unwrap();
            early
        });
        struct Unwound(Arc<Mutex<Vec<&'static str>>>, mpsc::Sender<()>);
        impl Drop for Unwound {
            fn drop(&mut self) {
                self.0.lock().unwrap().push("outer unwound");
                let _ = self.1.send(());
            }
        }
        let mut borrowed = 0u32;
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(|| {
                let _g = Unwound(order.clone(), unwound_tx);
                ref_tx.send(smarm::current().unwrap()).unwrap();
                rt.block_on(|| {
                    started_tx.send(()).unwrap();
                    go.recv().unwrap();
                    borrowed += 1; // the caller's local, through two actors
                    order.lock().unwrap().push("inner done");
                });
                // The kill shows once the inner actor is done.
                loop {
                    smarm::yield_now();
                }
            })
        }));
        assert!(message(r.unwrap_err()).contains("was killed"));
        assert!(
            !killer.join().unwrap(),
            "the outer actor unwound while the inner one still borrowed its frame"
        );
        assert_eq!(borrowed, 1);
        assert_eq!(*order.lock().unwrap(), ["inner done", "outer unwound"]);
    });
}
