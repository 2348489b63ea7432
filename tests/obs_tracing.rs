//! The `tracing` feature: a recording subscriber (hand-written, below) sees
//! each actor's span entered on the thread that resumes it and exited when
//! it switches out, the actor's own events inside its span, and the
//! runtime's events (spawn, exit with the reason, panic, supervisor
//! restart and give-up, long hold) with the right ids.
//!
//! Only with the feature (`cargo test -p smarm-tests --features tracing
//! --test obs_tracing`; `.ci/run` has a step for it): the default build
//! must compile no tracing code.
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use smarm_tests::smarm::{
    self, ChildSpec, LongHold, Mailbox, Runtime, Strategy, SupervisorEvent, SupervisorMsg, SupervisorSpec,
};
use smarm_tests::with_timeout;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// One thing the subscriber saw, in the order it saw them.
#[derive(Debug, Clone)]
enum Rec {
    /// A span entered (its recorder id) on a thread.
    Enter(u64, ThreadId),
    /// A span exited on a thread.
    Exit(u64, ThreadId),
    /// A span exited on a thread where it was not the innermost entered.
    #[allow(dead_code)] // read through Debug, in a failure's message
    BadExit(u64),
    /// An event: its message, fields, level and the span current on its
    /// thread (contextual parent), if any.
    Event {
        message: String,
        fields: HashMap<String, String>,
        level: tracing::Level,
        current: Option<u64>,
    },
}

/// A span as created: its name and fields.
#[derive(Debug, Clone)]
struct SpanInfo {
    name: &'static str,
    fields: HashMap<String, String>,
}

#[derive(Default)]
struct Inner {
    next: AtomicU64,
    spans: Mutex<HashMap<u64, SpanInfo>>,
    log: Mutex<Vec<Rec>>,
}

thread_local! {
    /// The spans entered on this thread, innermost last.
    static STACK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Records everything, from every thread (it is the global default: the
/// runtime's workers are threads of their own).
struct Recorder(&'static Inner);

#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.0.insert(f.name().into(), v.to_string());
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.0.insert(f.name().into(), v.to_string());
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.0.insert(f.name().into(), format!("{v:?}"));
    }
}

impl Subscriber for Recorder {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        // Relaxed: a unique id; it publishes nothing (the map's lock does).
        let n = self.0.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut f = Fields::default();
        attrs.record(&mut f);
        let info = SpanInfo {
            name: attrs.metadata().name(),
            fields: f.0,
        };
        self.0.spans.lock().unwrap().insert(n, info);
        Id::from_u64(n)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &Event<'_>) {
        let mut f = Fields::default();
        e.record(&mut f);
        let message = f.0.remove("message").unwrap_or_default();
        let current = STACK.with(|s| s.borrow().last().copied());
        let level = *e.metadata().level();
        self.0.log.lock().unwrap().push(Rec::Event {
            message,
            fields: f.0,
            level,
            current,
        });
    }
    fn enter(&self, id: &Id) {
        STACK.with(|s| s.borrow_mut().push(id.into_u64()));
        let t = std::thread::current().id();
        self.0.log.lock().unwrap().push(Rec::Enter(id.into_u64(), t));
    }
    fn exit(&self, id: &Id) {
        // Not an assert: this runs on a worker. The tests look for it.
        let innermost = STACK.with(|s| s.borrow_mut().pop()) == Some(id.into_u64());
        let t = std::thread::current().id();
        let rec = if innermost {
            Rec::Exit(id.into_u64(), t)
        } else {
            Rec::BadExit(id.into_u64())
        };
        self.0.log.lock().unwrap().push(rec);
    }
}

/// The process's recorder (installed once, as the global default).
fn recorder() -> &'static Inner {
    static R: OnceLock<&'static Inner> = OnceLock::new();
    R.get_or_init(|| {
        let inner: &'static Inner = Box::leak(Box::default());
        tracing::subscriber::set_global_default(Recorder(inner)).expect("no other subscriber");
        inner
    })
}

/// Starts a test: the tests of this file run one at a time (actor ids
/// restart at 1 in every runtime, so the records must be one test's), on
/// an empty record.
fn begin() -> std::sync::MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    let guard = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let r = recorder();
    r.log.lock().unwrap().clear();
    r.spans.lock().unwrap().clear();
    guard
}

fn records() -> Vec<Rec> {
    let log = recorder().log.lock().unwrap().clone();
    assert!(
        !log.iter().any(|r| matches!(r, Rec::BadExit(_))),
        "a span exited where it was not the innermost: {log:?}"
    );
    log
}

/// The recorder id of the `actor` span whose `id` field is `actor`.
fn span_of(actor: u64) -> (u64, SpanInfo) {
    let spans = recorder().spans.lock().unwrap();
    let found: Vec<_> = spans
        .iter()
        .filter(|(_, s)| s.name == "actor" && s.fields.get("id") == Some(&actor.to_string()))
        .map(|(k, s)| (*k, s.clone()))
        .collect();
    assert_eq!(found.len(), 1, "one span for actor {actor}: {found:?}");
    found[0].clone()
}

/// The events with `message` whose field `key` is `value`.
fn events(
    message: &str,
    key: &str,
    value: &str,
) -> Vec<(HashMap<String, String>, tracing::Level, Option<u64>)> {
    records()
        .into_iter()
        .filter_map(|r| match r {
            Rec::Event {
                message: m,
                fields,
                level,
                current,
            } if m == message && fields.get(key).map(String::as_str) == Some(value) => {
                Some((fields, level, current))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn an_actors_span_is_entered_while_it_runs_and_exited_when_it_switches_out() {
    let _one = begin();
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let h = rt.spawn_named("traced-yielder", || {
            let me = smarm::current_id().unwrap();
            tracing::info!(marker = "first-run", "inside");
            // Each yield switches out and back in, maybe on the other worker.
            for _ in 0..3 {
                smarm::yield_now();
            }
            let child = smarm::spawn_named("traced-child", || smarm::current_id().unwrap());
            let child = child.join().unwrap();
            tracing::info!(marker = "last-run", "inside");
            (me, child)
        });
        let (me, child) = h.join().unwrap();

        let (span, info) = span_of(me);
        assert_eq!(
            info.fields.get("name").map(String::as_str),
            Some("traced-yielder")
        );
        // Enters and exits of this span alternate, each pair on one thread:
        // the first run, three yields, the join's park (or the join's
        // switch into the child, waiting in the run-next slot).
        // The last exit is recorded by the worker once the actor's stack is
        // left, which may come after `join` has returned its result here
        // (seam/trace.rs, "The actor span"): wait for it.
        let mine_now = || -> Vec<Rec> {
            records()
                .into_iter()
                .filter(|r| matches!(r, Rec::Enter(s, _) | Rec::Exit(s, _) if *s == span))
                .collect()
        };
        smarm_tests::eventually(10, "the span's last exit", || {
            matches!(mine_now().last(), Some(Rec::Exit(..)))
        });
        let mine = mine_now();
        assert!(mine.len() >= 2 * 5, "at least five resumes: {mine:?}");
        assert_eq!(mine.len() % 2, 0, "every enter has its exit: {mine:?}");
        for pair in mine.chunks(2) {
            match pair {
                [Rec::Enter(_, a), Rec::Exit(_, b)] => assert_eq!(a, b, "exited on the thread it entered on"),
                _ => panic!("enter and exit do not alternate: {mine:?}"),
            }
        }
        // The actor's own events have its span as their context.
        for marker in ["first-run", "last-run"] {
            let ev = events("inside", "marker", marker);
            assert_eq!(ev.len(), 1, "{marker}");
            assert_eq!(ev[0].2, Some(span), "{marker} inside the actor's span");
        }
        // Spawn events: ids, names, parents (0: spawned from a plain thread).
        let spawned = events("actor spawned", "id", &me.to_string());
        assert_eq!(spawned.len(), 1);
        assert_eq!(spawned[0].0.get("parent").map(String::as_str), Some("0"));
        assert_eq!(
            spawned[0].0.get("name").map(String::as_str),
            Some("traced-yielder")
        );
        let spawned = events("actor spawned", "id", &child.to_string());
        assert_eq!(spawned.len(), 1);
        assert_eq!(spawned[0].0.get("parent"), Some(&me.to_string()));
        // The child was spawned inside the parent: the event is in its span.
        assert_eq!(spawned[0].2, Some(span));
        // The child's own span is another one, entered on its own.
        let (child_span, _) = span_of(child);
        assert_ne!(child_span, span);
        // Exits, with the reason.
        for id in [me, child] {
            let exited = events("actor exited", "id", &id.to_string());
            assert_eq!(exited.len(), 1, "one exit event for {id}");
            assert_eq!(exited[0].0.get("reason").map(String::as_str), Some("normal exit"));
            assert_eq!(exited[0].0.get("abnormal").map(String::as_str), Some("false"));
            assert_eq!(exited[0].1, tracing::Level::DEBUG);
        }
    });
}

#[test]
fn panics_and_kills_are_exit_events_with_their_reason() {
    let _one = begin();
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let h = rt.spawn_named("traced-panicker", || -> u64 { panic!("boom at {}", 42) });
        let id = h.id();
        assert!(h.join().is_err());
        let p = events("actor panicked", "id", &id.to_string());
        assert_eq!(p.len(), 1, "one panic event");
        assert_eq!(p[0].0.get("panic").map(String::as_str), Some("boom at 42"));
        assert_eq!(p[0].0.get("name").map(String::as_str), Some("traced-panicker"));
        assert_eq!(p[0].1, tracing::Level::ERROR);
        let e = events("actor exited", "id", &id.to_string());
        assert_eq!(e.len(), 1);
        assert_eq!(
            e[0].0.get("reason").map(String::as_str),
            Some("panicked: boom at 42")
        );
        assert_eq!(e[0].0.get("abnormal").map(String::as_str), Some("true"));
        assert_eq!(e[0].1, tracing::Level::WARN);

        let (addr, h) = rt.spawn_actor(|mut mb: Mailbox<()>| mb.recv());
        let id = h.id();
        h.actor_ref().kill();
        assert!(h.join().is_err());
        drop(addr);
        let e = events("actor exited", "id", &id.to_string());
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].0.get("reason").map(String::as_str), Some("killed"));
        assert!(events("actor panicked", "id", &id.to_string()).is_empty());
    });
}

/// A child that panics on its first `fails` starts, then waits to be stopped.
fn flaky(fails: u64) -> ChildSpec {
    let starts = Arc::new(AtomicU64::new(0));
    ChildSpec::new("traced-flaky", move || {
        let n = starts.fetch_add(1, Ordering::SeqCst);
        smarm::spawn_named("traced-flaky", move || {
            if n < fails {
                panic!("flaky start {n}");
            }
            let (_tx, mut rx) = smarm::channel::<()>();
            let _ = rx.recv();
        })
        .actor_ref()
    })
}

#[test]
fn supervisor_restarts_are_events_naming_the_new_child_and_its_cause() {
    let _one = begin();
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, mut rx) = smarm::channel();
        let spec = SupervisorSpec::new("traced-sup", Strategy::OneForOne, 5, Duration::from_secs(60))
            .child(flaky(2))
            .events(tx);
        let (sup, h) = rt.spawn_actor(move |mb: Mailbox<SupervisorMsg>| smarm::supervise(mb, spec));
        // Three starts: the first and two restarts; ids in order.
        let mut ids = Vec::new();
        while ids.len() < 3 {
            if let SupervisorEvent::Started { id, .. } = rx.recv().unwrap() {
                ids.push(id);
            }
        }
        sup.send(SupervisorMsg::Stop).unwrap();
        h.join().unwrap();
        // The supervisor's events are all out once it has ended.
        let r = events("supervisor restarted a child", "supervisor", "traced-sup");
        let got: Vec<(String, String, String)> = r
            .iter()
            .map(|(f, _, _)| (f["child"].clone(), f["id"].clone(), f["cause"].clone()))
            .collect();
        let want: Vec<(String, String, String)> = (1..3)
            .map(|k| ("traced-flaky".into(), ids[k].to_string(), ids[k - 1].to_string()))
            .collect();
        assert_eq!(
            got, want,
            "one restart event per restart: new id, and the id that ended"
        );
        assert!(r.iter().all(|(_, l, _)| *l == tracing::Level::WARN));
        assert!(events(
            "supervisor gave up: restart intensity exceeded",
            "supervisor",
            "traced-sup"
        )
        .is_empty());
    });
}

#[test]
fn a_supervisor_that_gives_up_says_so() {
    let _one = begin();
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let spec = SupervisorSpec::new("traced-quitter", Strategy::OneForOne, 2, Duration::from_secs(60))
            .child(flaky(u64::MAX));
        let (_sup, h) = rt.spawn_actor(move |mb: Mailbox<SupervisorMsg>| smarm::supervise(mb, spec));
        assert!(h.join().is_err(), "gave up after 2 restarts");
        let g = events(
            "supervisor gave up: restart intensity exceeded",
            "supervisor",
            "traced-quitter",
        );
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].0.get("max_restarts").map(String::as_str), Some("2"));
        assert_eq!(g[0].0.get("period_ms").map(String::as_str), Some("60000"));
        assert_eq!(
            events("supervisor restarted a child", "supervisor", "traced-quitter").len(),
            2
        );
    });
}

#[test]
fn a_long_hold_is_an_event_while_it_lasts_and_when_it_ends() {
    let _one = begin();
    with_timeout(60, || {
        let reported = Arc::new(AtomicBool::new(false));
        let holds: Arc<Mutex<Vec<LongHold>>> = Arc::default();
        let (r, hs) = (reported.clone(), holds.clone());
        let rt = Runtime::builder()
            .workers(2)
            .long_hold(
                Duration::from_millis(10),
                Some(Arc::new(move |h: &LongHold| {
                    hs.lock().unwrap().push(*h);
                    r.store(true, Ordering::SeqCst);
                })),
            )
            .build()
            .unwrap();
        let flag = reported.clone();
        let h = rt.spawn(move || {
            // No safe point until the monitor has reported this hold (the
            // trace event goes out before the hook runs).
            while !flag.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            smarm::current_id().unwrap()
        });
        let id = h.join().unwrap();
        // The worker reports the end after the actor switched out, which
        // may be after this thread woke; its event precedes the hook call.
        smarm_tests::eventually(10, "the end-of-hold report", || {
            holds.lock().unwrap().iter().any(|h| h.actor == id && h.finished)
        });
        let ev = events("actor held its worker", "id", &id.to_string());
        let finished: Vec<&str> = ev.iter().map(|(f, _, _)| f["finished"].as_str()).collect();
        assert_eq!(finished, ["false", "true"], "{ev:?}");
        assert!(ev
            .iter()
            .all(|(f, l, _)| *l == tracing::Level::WARN && f["held_ms"].parse::<u64>().unwrap() >= 10));
    });
}
