//! Registered names (Erlang's `register` / `whereis`): bound to a live
//! actor, forgotten at its exit, re-bound by a restarted child, typed.

use std::time::Duration;

use smarm_tests::smarm::{
    self, Addr, ChildSpec, Mailbox, RegisterError, Restart, Runtime, Strategy, SupervisorEvent,
    SupervisorSpec,
};
use smarm_tests::with_timeout;

#[test]
fn a_name_finds_its_actor_until_the_actor_exits() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        rt.block_on(|| {
            let (addr, h) = smarm::spawn_actor(|mut mb: Mailbox<u32>| mb.recv().unwrap() * 2);
            smarm::register("doubler", &addr).unwrap();
            assert_eq!(
                smarm::registered().iter().map(|n| &**n).collect::<Vec<_>>(),
                ["doubler"]
            );
            // Taken, whatever the actor.
            let (other, oh) = smarm::spawn_actor(|mut mb: Mailbox<u32>| mb.recv().unwrap());
            assert_eq!(
                smarm::register("doubler", &other),
                Err(RegisterError::Taken {
                    name: "doubler".into()
                })
            );
            // Typed: another message type finds nothing.
            assert!(smarm::whereis::<String>("doubler").is_none());
            assert!(smarm::whereis::<u32>("nobody").is_none());
            let found: Addr<u32> = smarm::whereis("doubler").expect("registered");
            assert_eq!(found.id(), addr.id());
            found.send(21).unwrap();
            assert_eq!(h.join().unwrap(), 42);
            // The exit unbound it (hooks run before the joiner hears).
            assert!(smarm::whereis::<u32>("doubler").is_none());
            assert!(smarm::registered().is_empty());
            // A dead actor cannot take a name; the name is free for another.
            assert_eq!(
                smarm::register("doubler", &addr),
                Err(RegisterError::NotAlive { id: addr.id() })
            );
            smarm::register("doubler", &other).unwrap();
            assert!(smarm::unregister("doubler"));
            assert!(!smarm::unregister("doubler"));
            other.send(0).unwrap();
            oh.join().unwrap();
        });
    });
}

#[test]
fn a_rebound_name_survives_the_old_holders_exit() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let (a, ha) = smarm::spawn_actor(|mut mb: Mailbox<()>| mb.recv().unwrap());
            let (b, hb) = smarm::spawn_actor(|mut mb: Mailbox<()>| mb.recv().unwrap());
            smarm::register("svc", &a).unwrap();
            assert!(smarm::unregister("svc"));
            smarm::register("svc", &b).unwrap();
            // a's exit hook must not unbind b's name.
            a.send(()).unwrap();
            ha.join().unwrap();
            assert_eq!(smarm::whereis::<()>("svc").map(|x| x.id()), Some(b.id()));
            b.send(()).unwrap();
            hb.join().unwrap();
            assert!(smarm::whereis::<()>("svc").is_none());
        });
    });
}

#[test]
fn from_plain_threads_through_the_runtime() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<u32>| mb.recv().unwrap());
        // The free functions need an actor; the runtime's methods do not.
        assert_eq!(smarm::register("t", &addr), Err(RegisterError::NoRuntime));
        assert!(smarm::whereis::<u32>("t").is_none());
        rt.register("t", &addr).unwrap();
        assert_eq!(rt.registered().len(), 1);
        // Actors see what threads registered, and the reverse.
        let seen = rt.block_on(|| smarm::whereis::<u32>("t").map(|a| a.id()));
        assert_eq!(seen, Some(addr.id()));
        rt.whereis::<u32>("t").unwrap().send(5).unwrap();
        assert_eq!(h.join().unwrap(), 5);
        assert!(rt.whereis::<u32>("t").is_none());
        assert!(!rt.unregister("t"));
    });
}

#[test]
fn a_supervised_child_registers_again_after_each_restart() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, mut ev) = smarm::channel::<SupervisorEvent>();
        let spec = SupervisorSpec::new("sup", Strategy::OneForOne, 10, Duration::from_secs(10))
            .events(tx)
            .child(
                ChildSpec::new("worker", || {
                    let (addr, h) = smarm::spawn_actor_named("worker", |mut mb: Mailbox<u32>| {
                        if mb.recv().unwrap() == 0 {
                            panic!("told to crash");
                        }
                    });
                    // What an Erlang child does in its init: take its name.
                    smarm::register("worker", &addr).expect("the old binding is gone");
                    h.actor_ref()
                })
                .restart(Restart::Permanent),
            );
        let (sup, sh) = rt.spawn_actor(move |mb| smarm::supervise(mb, spec));
        let mut ids = Vec::new();
        for _ in 0..3 {
            // Wait until a started child holds the name, then crash it.
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            let a = loop {
                match rt.whereis::<u32>("worker") {
                    Some(a) if !ids.contains(&a.id()) => break a,
                    _ => assert!(std::time::Instant::now() < deadline, "no new worker registered"),
                }
                std::thread::yield_now();
            };
            ids.push(a.id());
            a.send(0).unwrap();
        }
        assert_eq!(ids.len(), 3, "three distinct workers held the name in turn");
        drop(sup);
        // The supervisor's own reports: the names were held, in turn, by
        // exactly the children it started (three starts, then the fourth).
        let mut started = Vec::new();
        while started.len() < 4 {
            match ev.recv_timeout(Duration::from_secs(20)) {
                Ok(SupervisorEvent::Started { id, .. }) => started.push(id),
                Ok(_) => {}
                Err(e) => panic!("no supervisor event in 20 s: {e:?}"),
            }
        }
        assert_eq!(ids, started[..3]);
        rt.shutdown();
        let _ = sh.join();
    });
}
