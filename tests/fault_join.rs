//! What a joiner gets back from an actor that did not return: the panic's
//! payload itself (`JoinError::into_panic`), and the other errors handed
//! back whole by `try_into_panic`.
use std::panic::{self, AssertUnwindSafe};

use smarm_tests::smarm::{self, CaughtPanic, JoinError, Mailbox, Runtime};
use smarm_tests::with_timeout;

#[derive(Debug, PartialEq)]
struct MyErr(u32);

#[test]
fn a_custom_panic_payload_comes_back_to_the_joiner() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let h = rt.spawn_named("disk", || -> u32 { panic::panic_any(MyErr(7)) });
        let e = h.join().unwrap_err();
        assert!(e.is_panic() && !e.is_killed() && !e.is_cancelled(), "{e}");
        assert_eq!(e.name(), Some("disk"));
        // Not a string: the message is a placeholder, the payload is whole.
        assert_eq!(
            e.panic_message(),
            Some("Box<dyn Any> (a non-string panic payload)")
        );
        let payload = e.into_panic();
        assert_eq!(*payload.downcast::<MyErr>().expect("a MyErr payload"), MyErr(7));

        // `panic!` with a literal and with a format: `&str` and `String`.
        let e = rt.spawn(|| panic!("plain")).join().unwrap_err();
        assert_eq!(*e.into_panic().downcast::<&'static str>().unwrap(), "plain");
        let n = 3;
        let e = rt.spawn(move || panic!("formatted {n}")).join().unwrap_err();
        assert_eq!(e.panic_message(), Some("formatted 3"));
        assert_eq!(*e.into_panic().downcast::<String>().unwrap(), "formatted 3");
    });
}

#[test]
fn a_joiner_actor_reraises_the_payload_with_resume_unwind() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // The middle actor joins the failing one and re-raises its payload:
        // the outer joiner sees the original payload, not a message.
        let h = rt.spawn(|| {
            let inner = smarm::spawn(|| -> u32 { panic::panic_any(MyErr(41)) });
            match inner.join() {
                Ok(v) => v,
                Err(e) => panic::resume_unwind(e.into_panic()),
            }
        });
        let e = h.join().unwrap_err();
        assert_eq!(*e.into_panic().downcast::<MyErr>().unwrap(), MyErr(41));
    });
}

#[test]
fn killed_and_cancelled_errors_come_back_from_try_into_panic() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // Killed while parked in a receive.
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<u32>| mb.recv().unwrap());
        addr.actor_ref().kill();
        let e = h.join().unwrap_err();
        assert!(!e.is_panic());
        let e = e.try_into_panic().expect_err("a kill has no payload");
        assert!(e.is_killed(), "{e}");
        // `into_panic` on it panics, naming the error, as tokio's does.
        let p = panic::catch_unwind(AssertUnwindSafe(|| e.into_panic())).unwrap_err();
        let msg = p.downcast::<String>().unwrap();
        assert!(msg.contains("not a panic") && msg.contains("was killed"), "{msg}");

        // Cancelled by the runtime's shutdown while parked.
        let (_addr, h) = rt.spawn_actor(|mut mb: Mailbox<u32>| mb.recv().unwrap());
        let (started_tx, started) = smarm::oneshot::<()>();
        let h2 = rt.spawn(move || {
            started_tx.send(()).unwrap();
            loop {
                smarm::yield_now();
            }
        });
        started.recv().unwrap();
        drop(rt);
        for e in [h.join().unwrap_err(), h2.join().unwrap_err()] {
            let e = e.try_into_panic().expect_err("a cancellation has no payload");
            assert!(e.is_cancelled(), "{e}");
        }
    });
}

#[test]
fn join_errors_are_send_sync_and_compare_without_the_payload() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<JoinError>();
    send_sync::<CaughtPanic>();
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let e = rt.spawn(|| panic!("same")).join().unwrap_err();
        // Equality looks at the kind, id, name and message; Debug shows
        // the payload as opaque.
        assert_eq!(format!("{e:?}").matches("CaughtPanic(..)").count(), 1, "{e:?}");
        let other = rt.spawn(|| panic!("same")).join().unwrap_err();
        assert_ne!(e, other, "another actor: another id");
    });
}
