//! Supervisors under a controllable clock: strategies, restart types,
//! exact intensity bounds, escalation, and fault injection (1,000 panics
//! across 100 children, each reported exactly once).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smarm_tests::smarm::{
    self, Addr, ChildSpec, ExitReason, Mailbox, Restart, Runtime, Strategy, SupervisorEvent, SupervisorMsg,
    SupervisorSpec, UnboundedReceiver,
};
use smarm_tests::with_timeout;

enum Cmd {
    Panic,
    Exit,
}

/// The current address of each child, by spec index (replaced at restart).
type Registry = Arc<Mutex<Vec<Option<Addr<Cmd>>>>>;

/// A child that panics or exits normally on command.
fn child(name: &str, i: usize, reg: &Registry) -> ChildSpec {
    let (name_owned, reg) = (name.to_string(), reg.clone());
    ChildSpec::new(name, move || {
        let (addr, h) =
            smarm::spawn_actor_named(&name_owned, |mut mb: Mailbox<Cmd>| match mb.recv().unwrap() {
                Cmd::Panic => panic!("injected"),
                Cmd::Exit => {}
            });
        let r = h.actor_ref();
        reg.lock().unwrap()[i] = Some(addr);
        r
    })
}

fn registry(n: usize) -> Registry {
    Arc::new(Mutex::new((0..n).map(|_| None).collect()))
}

/// Sends `cmd` to child `i`'s current address.
fn tell(reg: &Registry, i: usize, cmd: Cmd) {
    let a = reg.lock().unwrap()[i].clone().expect("child running");
    assert!(a.send(cmd).is_ok(), "child alive");
}

fn next(ev: &mut UnboundedReceiver<SupervisorEvent>) -> SupervisorEvent {
    ev.recv_timeout(Duration::from_secs(20))
        .expect("a supervisor event within 20 s")
}

/// A supervisor over `names` with a frozen manual clock; returns its
/// address, join handle, registry, event receiver, the clock, and the ids
/// of the first starts.
#[allow(clippy::type_complexity)]
fn start_sup(
    rt: &Runtime,
    strategy: Strategy,
    max: u32,
    names: &[&str],
    restart: Restart,
) -> (
    Addr<SupervisorMsg>,
    smarm::JoinHandle<()>,
    Registry,
    UnboundedReceiver<SupervisorEvent>,
    Arc<AtomicU64>,
    Vec<u64>,
) {
    let reg = registry(names.len());
    let clock = Arc::new(AtomicU64::new(0)); // the manual clock, in ns
    let (tx, mut ev) = smarm::channel();
    let c = clock.clone();
    let mut spec = SupervisorSpec::new("sup", strategy, max, Duration::from_secs(10))
        .clock(move || Duration::from_nanos(c.load(Ordering::SeqCst)))
        .events(tx);
    for (i, n) in names.iter().enumerate() {
        spec = spec.child(child(n, i, &reg).restart(restart));
    }
    let (addr, h) = rt.spawn_actor(move |mb| smarm::supervise(mb, spec));
    let mut ids = Vec::new();
    for n in names {
        match next(&mut ev) {
            SupervisorEvent::Started { child, id } => {
                assert_eq!(&child, n, "children start in spec order");
                ids.push(id);
            }
            e => panic!("unexpected {e:?}"),
        }
    }
    (addr, h, reg, ev, clock, ids)
}

fn exited(e: SupervisorEvent) -> (String, ExitReason) {
    match e {
        SupervisorEvent::Exited { child, down } => (child, down.reason),
        e => panic!("expected an exit, got {e:?}"),
    }
}

fn started(e: SupervisorEvent) -> String {
    match e {
        SupervisorEvent::Started { child, .. } => child,
        e => panic!("expected a start, got {e:?}"),
    }
}

#[test]
fn one_for_one_restarts_exactly_max_restarts_then_gives_up() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (_addr, h, reg, mut ev, _clock, _) =
            start_sup(&rt, Strategy::OneForOne, 3, &["a", "b", "c"], Restart::Permanent);
        let panicked = ExitReason::Panicked("injected".into());
        for _ in 0..3 {
            tell(&reg, 1, Cmd::Panic);
            assert_eq!(exited(next(&mut ev)), ("b".into(), panicked.clone()));
            assert_eq!(started(next(&mut ev)), "b", "only the failed child restarts");
        }
        // The fourth within the (frozen) period exceeds the intensity: the
        // others stop in reverse start order, then the supervisor fails.
        tell(&reg, 1, Cmd::Panic);
        assert_eq!(exited(next(&mut ev)), ("b".into(), panicked));
        assert_eq!(exited(next(&mut ev)), ("c".into(), ExitReason::Killed));
        assert_eq!(exited(next(&mut ev)), ("a".into(), ExitReason::Killed));
        assert_eq!(next(&mut ev), SupervisorEvent::GaveUp);
        let e = h.join().unwrap_err();
        assert!(
            e.panic_message().unwrap().contains("restart intensity exceeded"),
            "{e}"
        );
    });
}

#[test]
fn restarts_outside_the_period_do_not_count() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (addr, h, reg, mut ev, clock, _) =
            start_sup(&rt, Strategy::OneForOne, 2, &["a"], Restart::Permanent);
        for k in 0..10 {
            // Two restarts per 10 s window are allowed: advance 5 s each.
            clock.fetch_add(5_000_000_000, Ordering::SeqCst);
            tell(&reg, 0, Cmd::Panic);
            assert_eq!(exited(next(&mut ev)).0, "a", "round {k}");
            assert_eq!(started(next(&mut ev)), "a", "round {k}");
        }
        addr.send(SupervisorMsg::Stop).ok().unwrap();
        assert_eq!(exited(next(&mut ev)), ("a".into(), ExitReason::Killed));
        assert_eq!(next(&mut ev), SupervisorEvent::Stopped);
        h.join().unwrap();
    });
}

#[test]
fn one_for_all_and_rest_for_one_restart_in_order() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // one_for_all: b fails; c then a are stopped; a, b, c restart.
        let (addr, h, reg, mut ev, _, _) =
            start_sup(&rt, Strategy::OneForAll, 5, &["a", "b", "c"], Restart::Permanent);
        tell(&reg, 1, Cmd::Panic);
        assert_eq!(exited(next(&mut ev)).0, "b");
        assert_eq!(exited(next(&mut ev)), ("c".into(), ExitReason::Killed));
        assert_eq!(exited(next(&mut ev)), ("a".into(), ExitReason::Killed));
        let order: Vec<String> = (0..3).map(|_| started(next(&mut ev))).collect();
        assert_eq!(order, ["a", "b", "c"]);
        addr.send(SupervisorMsg::Stop).ok().unwrap();
        h.join().unwrap();

        // rest_for_one: b fails; c is stopped; b, c restart; a untouched.
        let (addr, h, reg, mut ev, _, ids) =
            start_sup(&rt, Strategy::RestForOne, 5, &["a", "b", "c"], Restart::Permanent);
        tell(&reg, 1, Cmd::Panic);
        assert_eq!(exited(next(&mut ev)).0, "b");
        assert_eq!(exited(next(&mut ev)), ("c".into(), ExitReason::Killed));
        let order: Vec<String> = (0..2).map(|_| started(next(&mut ev))).collect();
        assert_eq!(order, ["b", "c"]);
        // a is the same actor as at the start.
        let a_now = reg.lock().unwrap()[0].clone().unwrap().id();
        assert_eq!(a_now, ids[0]);
        addr.send(SupervisorMsg::Stop).ok().unwrap();
        h.join().unwrap();
    });
}

#[test]
fn transient_and_temporary_children() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // Transient: a normal exit is final; a panic restarts.
        let (addr, h, reg, mut ev, _, _) = start_sup(&rt, Strategy::OneForOne, 5, &["t"], Restart::Transient);
        tell(&reg, 0, Cmd::Panic);
        assert_eq!(exited(next(&mut ev)).0, "t");
        assert_eq!(started(next(&mut ev)), "t");
        tell(&reg, 0, Cmd::Exit);
        assert_eq!(exited(next(&mut ev)), ("t".into(), ExitReason::Normal));
        addr.send(SupervisorMsg::Stop).ok().unwrap();
        assert_eq!(
            next(&mut ev),
            SupervisorEvent::Stopped,
            "no restart after a normal exit"
        );
        h.join().unwrap();
        // Temporary: never restarted.
        let (addr, h, reg, mut ev, _, _) =
            start_sup(&rt, Strategy::OneForOne, 5, &["tmp"], Restart::Temporary);
        tell(&reg, 0, Cmd::Panic);
        assert_eq!(exited(next(&mut ev)).0, "tmp");
        addr.send(SupervisorMsg::Stop).ok().unwrap();
        assert_eq!(next(&mut ev), SupervisorEvent::Stopped);
        h.join().unwrap();
    });
}

#[test]
fn a_supervisor_that_gives_up_is_restarted_by_its_own_supervisor() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let reg = registry(1);
        let (itx, mut inner_ev) = smarm::channel();
        let (otx, mut outer_ev) = smarm::channel();
        let r2 = reg.clone();
        let inner = ChildSpec::new("inner", move || {
            let spec = SupervisorSpec::new("inner", Strategy::OneForOne, 0, Duration::from_secs(10))
                .child(child("leaf", 0, &r2))
                .events(itx.clone());
            let (_a, h) = smarm::spawn_actor_named("inner", move |mb| smarm::supervise(mb, spec));
            h.actor_ref()
        });
        let outer = SupervisorSpec::new("outer", Strategy::OneForOne, 5, Duration::from_secs(10))
            .child(inner)
            .events(otx);
        let (oaddr, oh) = rt.spawn_actor(move |mb| smarm::supervise(mb, outer));
        assert_eq!(started(next(&mut outer_ev)), "inner");
        assert_eq!(started(next(&mut inner_ev)), "leaf");
        // Intensity 0: the leaf's first failure makes the inner supervisor
        // give up; the outer one sees it panic and restarts it.
        tell(&reg, 0, Cmd::Panic);
        assert_eq!(exited(next(&mut inner_ev)).0, "leaf");
        assert_eq!(next(&mut inner_ev), SupervisorEvent::GaveUp);
        let (name, reason) = exited(next(&mut outer_ev));
        assert_eq!(name, "inner");
        assert!(matches!(reason, ExitReason::Panicked(m) if m.contains("restart intensity exceeded")));
        assert_eq!(started(next(&mut outer_ev)), "inner");
        assert_eq!(started(next(&mut inner_ev)), "leaf");
        oaddr.send(SupervisorMsg::Stop).ok().unwrap();
        oh.join().unwrap();
    });
}

#[test]
fn thousand_injected_panics_across_a_hundred_children_each_reported_once() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        const N: usize = 100;
        const PANICS: usize = 1000;
        let names: Vec<String> = (0..N).map(|i| format!("c{i}")).collect();
        let name_refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let (addr, h, reg, mut ev, _, _) = start_sup(
            &rt,
            Strategy::OneForOne,
            PANICS as u32,
            &name_refs,
            Restart::Permanent,
        );
        let mut exits = vec![0usize; N];
        let mut starts = vec![0usize; N];
        for k in 0..PANICS {
            let i = (k * 37) % N;
            tell(&reg, i, Cmd::Panic);
            // Each panic: exactly one exit (of that child, panicked) and one
            // restart of that child; no sibling is touched.
            let (c, reason) = exited(next(&mut ev));
            assert_eq!(
                (c.as_str(), reason),
                (names[i].as_str(), ExitReason::Panicked("injected".into()))
            );
            exits[i] += 1;
            assert_eq!(started(next(&mut ev)), names[i]);
            starts[i] += 1;
        }
        assert_eq!(exits.iter().sum::<usize>(), PANICS);
        assert_eq!(exits, starts);
        assert!(
            ev.try_recv().is_err(),
            "no extra event: each panic reported exactly once"
        );
        addr.send(SupervisorMsg::Stop).ok().unwrap();
        for _ in 0..N {
            assert_eq!(exited(next(&mut ev)).1, ExitReason::Killed);
        }
        assert_eq!(next(&mut ev), SupervisorEvent::Stopped);
        h.join().unwrap();
    });
}

/// A leaf child that parks until killed, its `ActorRef` sent to `seen`.
fn parked_leaf(name: &str, seen: smarm::UnboundedSender<smarm::ActorRef>) -> ChildSpec {
    logged_leaf(name, seen, EndLog::default())
}

/// The names of actors in the order their bodies ended (pushed by an
/// [`Ends`] guard as the actor's body returns or unwinds, before its exit
/// notices go out). Unlike the order in which a third party receives
/// `Down` notices — notices from different actors are not ordered with one
/// another, as in Erlang — this order is causal: a supervisor's body ends
/// only after it has received its children's notices.
#[derive(Clone, Default)]
struct EndLog(Arc<Mutex<Vec<String>>>);

impl EndLog {
    fn names(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Pushes its name to the log when dropped (at the end of the actor body
/// that holds it, however it ends).
struct Ends(String, EndLog);

impl Drop for Ends {
    fn drop(&mut self) {
        (self.1).0.lock().unwrap().push(std::mem::take(&mut self.0));
    }
}

/// [`parked_leaf`] whose end is pushed to `log`.
fn logged_leaf(name: &str, seen: smarm::UnboundedSender<smarm::ActorRef>, log: EndLog) -> ChildSpec {
    let n = name.to_string();
    ChildSpec::new(name, move || {
        let g = Ends(n.clone(), log.clone());
        let (_a, h) = smarm::spawn_actor_named(&n, move |mut mb: Mailbox<()>| {
            let _g = g;
            // Its own address keeps the mailbox open: it parks until killed.
            let _me = mb.addr();
            mb.recv()
        });
        seen.send(h.actor_ref()).unwrap();
        h.actor_ref()
    })
}

/// `top` supervises `sub` (a supervisor over `w1`, `w2`) and `w3`; returns
/// the top's address and handle and every actor of the tree by name, once
/// all have started. Each of the five pushes its name to `log` as its body
/// ends.
#[allow(clippy::type_complexity)]
fn start_tree(
    rt: &Runtime,
    log: &EndLog,
) -> (
    Addr<SupervisorMsg>,
    smarm::JoinHandle<()>,
    Vec<(String, smarm::ActorRef)>,
) {
    let (seen_tx, mut seen) = smarm::channel();
    let (s1, s2, s3, ssub) = (seen_tx.clone(), seen_tx.clone(), seen_tx.clone(), seen_tx);
    let (l1, l2, l3, lsub, ltop) = (log.clone(), log.clone(), log.clone(), log.clone(), log.clone());
    let sub_spec = move || {
        SupervisorSpec::new("sub", Strategy::OneForOne, 3, Duration::from_secs(5))
            .child(logged_leaf("w1", s1.clone(), l1.clone()))
            .child(logged_leaf("w2", s2.clone(), l2.clone()))
    };
    let top = SupervisorSpec::new("top", Strategy::OneForOne, 0, Duration::from_secs(5))
        .child(ChildSpec::new("sub", move || {
            let spec = sub_spec();
            let g = Ends("sub".into(), lsub.clone());
            let (_a, h) = smarm::spawn_actor_named("sub", move |mb| {
                let _g = g;
                smarm::supervise(mb, spec)
            });
            ssub.send(h.actor_ref()).unwrap();
            h.actor_ref()
        }))
        .child(logged_leaf("w3", s3, l3));
    let g = Ends("top".into(), ltop);
    let (addr, h) = rt.spawn_actor_named("top", move |mb| {
        let _g = g;
        smarm::supervise(mb, top)
    });
    let mut tree = Vec::new();
    for _ in 0..4 {
        let r = seen
            .recv_timeout(Duration::from_secs(20))
            .expect("every child starts");
        tree.push((r.name().unwrap().to_string(), r));
    }
    (addr, h, tree)
}

/// Watches every actor of `tree` and `top` into one mailbox; returns the
/// names of the `Down` notices it received, sorted, once five have come.
fn downs(
    rt: &Runtime,
    tree: &[(String, smarm::ActorRef)],
    top: smarm::ActorRef,
) -> smarm::JoinHandle<Vec<String>> {
    let (watch, h) = rt.spawn_actor(|mut mb: Mailbox<smarm::Down>| {
        let mut names = (0..5)
            .map(|_| mb.recv().unwrap().name.unwrap().to_string())
            .collect::<Vec<_>>();
        names.sort();
        names
    });
    for (_, r) in tree {
        r.monitor_into(&watch, |d| d);
    }
    top.monitor_into(&watch, |d| d);
    h
}

#[test]
fn killing_a_supervisor_stops_its_whole_subtree_depth_first() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let log = EndLog::default();
        let (_addr, top, tree) = start_tree(&rt, &log);
        let downs = downs(&rt, &tree, top.actor_ref());
        top.actor_ref().kill();
        assert!(top.join().unwrap_err().is_killed());
        // Last started first, each subtree before its root: w3, then sub's
        // children in reverse (w2, w1), then sub, then top.
        assert_eq!(log.names(), ["w3", "w2", "w1", "sub", "top"]);
        // One notice each.
        assert_eq!(downs.join().unwrap(), ["sub", "top", "w1", "w2", "w3"]);
        assert!(tree.iter().all(|(_, r)| r.has_exited()));
    });
}

#[test]
fn stopping_a_supervisor_stops_a_child_supervisors_children() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let log = EndLog::default();
        let (addr, top, tree) = start_tree(&rt, &log);
        let downs = downs(&rt, &tree, top.actor_ref());
        addr.send(SupervisorMsg::Stop)
            .unwrap_or_else(|_| panic!("top alive"));
        top.join().unwrap();
        assert_eq!(log.names(), ["w3", "w2", "w1", "sub", "top"]);
        assert_eq!(downs.join().unwrap(), ["sub", "top", "w1", "w2", "w3"]);
    });
}

#[test]
fn a_start_that_panics_stops_the_siblings_before_escalating() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (seen_tx, mut seen) = smarm::channel();
        let starts = Arc::new(AtomicU64::new(0));
        let st = starts.clone();
        let spec = SupervisorSpec::new("sup", Strategy::OneForOne, 5, Duration::from_secs(5))
            .child(parked_leaf("healthy", seen_tx))
            .child(ChildSpec::new("flaky", move || {
                // The first start crashes at once; the restart's start panics.
                if st.fetch_add(1, Ordering::SeqCst) > 0 {
                    panic!("cannot start flaky");
                }
                smarm::spawn_named("flaky", || panic!("crash")).actor_ref()
            }));
        let (_addr, sup) = rt.spawn_actor_named("sup", move |mb| smarm::supervise(mb, spec));
        let healthy = seen.recv_timeout(Duration::from_secs(20)).unwrap();
        let healthy_down = healthy.monitor();
        let e = sup.join().unwrap_err();
        assert_eq!(e.panic_message(), Some("cannot start flaky"));
        // The sibling was stopped before the supervisor ended (its join
        // result only comes after its children are gone).
        assert!(healthy.has_exited(), "a healthy sibling was left running");
        assert_eq!(healthy_down.recv().unwrap().reason, ExitReason::Killed);
    });
}

#[test]
fn a_supervisor_killed_inside_a_start_closure_still_stops_that_child() {
    // Found by fault_torture (seed 10126): a kill raised at a safe point
    // inside a start closure, after its spawn, left the child unrecorded
    // and running after its supervisor ended.
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (seen_tx, mut seen) = smarm::channel();
        let spec = SupervisorSpec::new("sup", Strategy::OneForOne, 3, Duration::from_secs(5)).child(
            ChildSpec::new("victim", move || {
                let (_a, h) = smarm::spawn_actor_named("victim", |mut mb: Mailbox<()>| {
                    let _me = mb.addr(); // parks until killed
                    mb.recv()
                });
                // The supervisor is killed while its start closure runs,
                // which then reaches a resume point.
                smarm::current().expect("the supervisor").kill();
                smarm::yield_now();
                seen_tx.send(h.actor_ref()).unwrap();
                h.actor_ref()
            }),
        );
        let (_addr, sup) = rt.spawn_actor_named("sup", move |mb| smarm::supervise(mb, spec));
        assert!(sup.join().unwrap_err().is_killed());
        let child = seen
            .recv_timeout(Duration::from_secs(20))
            .expect("the start closure finished");
        assert!(child.has_exited(), "the child outlived its supervisor");
    });
}
