//! Faults that must never take the process down: kills, panics and
//! unwinding across switches, blocking calls and exit hooks.
//!
//! Each scenario that used to abort the process runs in a child process
//! (this test binary re-run with `SMARM_FAULT_CHILD` naming the body): the
//! parent asserts that the child ran its body to the end and exited 0. An
//! abort, a hang (killed after `child::CHILD_TIMEOUT`) or a failed assertion
//! inside the body all fail the test, with the child's output.
//!
//! The bodies spin on atomics (to catch an actor between two safe points),
//! which a seeded single-baton schedule cannot run: on the deterministic
//! port these are covered by `fault_torture.rs` instead.
#![cfg(not(feature = "sim"))]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smarm_tests::smarm::{self, Down, ExitReason, Mailbox, Runtime};
use smarm_tests::{eventually, next_spawn_work_first, with_timeout};

mod child;
use child::{child_entry, expect_child_passes};

/// Spins until `flag` is set (no safe point: the caller is "running").
fn spin_until(flag: &AtomicBool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !flag.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "spun for 60 s");
        std::hint::spin_loop();
    }
}

/// An actor that signals `started`, then runs without a safe point until
/// `go`: kill it in between and the kill is pending while it runs.
struct Gate {
    started: Arc<AtomicBool>,
    go: Arc<AtomicBool>,
}

impl Gate {
    fn new() -> (Gate, Gate) {
        let g = Gate {
            started: Arc::new(AtomicBool::new(false)),
            go: Arc::new(AtomicBool::new(false)),
        };
        let h = Gate {
            started: g.started.clone(),
            go: g.go.clone(),
        };
        (g, h)
    }

    /// Actor side.
    fn pass(&self) {
        self.started.store(true, Ordering::SeqCst);
        spin_until(&self.go);
    }

    /// Outside: waits for the actor to be inside `pass`, runs `f`, lets it go.
    fn while_inside(&self, f: impl FnOnce()) {
        spin_until(&self.started);
        f();
        self.go.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_kill_pending_at_a_blocking_call_unwinds_before_it() {
    child_entry("kill_blocking", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let (gate, outside) = Gate::new();
        let r = ran.clone();
        let h = rt.spawn(move || {
            gate.pass();
            smarm::blocking(|| r.store(true, Ordering::SeqCst));
            7
        });
        outside.while_inside(|| h.actor_ref().kill());
        let e = h.join().unwrap_err();
        assert!(e.is_killed(), "{e}");
        assert!(!ran.load(Ordering::SeqCst), "a killed actor's blocking call ran");
        // The runtime carries on, blocking calls included.
        assert_eq!(rt.block_on(|| smarm::blocking(|| 5)), 5);
    });
    expect_child_passes(
        "a_kill_pending_at_a_blocking_call_unwinds_before_it",
        "kill_blocking",
        &[],
    );
}

#[test]
fn a_kill_inside_a_blocking_call_shows_after_it() {
    child_entry("kill_in_blocking", || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (gate, outside) = Gate::new();
        let h = rt.spawn(move || {
            let v = smarm::blocking(|| {
                gate.pass();
                11
            });
            // Not reached: the kill unwinds at the rejoin.
            v + 1
        });
        outside.while_inside(|| h.actor_ref().kill());
        assert!(h.join().unwrap_err().is_killed());
        assert_eq!(rt.block_on(|| 3), 3);
    });
    expect_child_passes(
        "a_kill_inside_a_blocking_call_shows_after_it",
        "kill_in_blocking",
        &[],
    );
}

#[test]
fn exit_hooks_of_a_killed_actor_that_returned_run_to_the_end() {
    child_entry("kill_then_return", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (watch, watcher) =
            rt.spawn_actor(|mut mb: Mailbox<Down>| (0..8).map(|_| mb.recv().unwrap()).collect::<Vec<_>>());
        let (gate, outside) = Gate::new();
        let h = rt.spawn(move || {
            // Stamps the timeslice, so the exit hooks' sends find it spent.
            smarm::checkpoint();
            gate.pass();
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(2) {
                std::hint::spin_loop();
            }
            42
        });
        for _ in 0..8 {
            h.actor_ref().monitor_into(&watch, |d| d);
        }
        outside.while_inside(|| h.actor_ref().kill());
        // The body returned before any resume point saw the kill: a normal
        // exit, reported once to each monitor.
        assert_eq!(h.join().unwrap(), 42);
        let downs = watcher.join().unwrap();
        assert_eq!(downs.len(), 8);
        assert!(downs.iter().all(|d| d.reason == ExitReason::Normal), "{downs:?}");
    });
    expect_child_passes(
        "exit_hooks_of_a_killed_actor_that_returned_run_to_the_end",
        "kill_then_return",
        &[],
    );
}

/// Signals that it runs, then waits for a value in its destructor (and
/// sleeps and yields once it has it), recording what it got.
struct WaitsInDrop {
    entered: Option<smarm::OneshotSender<()>>,
    rx: smarm::UnboundedReceiver<u32>,
    got: Arc<AtomicU32>,
}

impl Drop for WaitsInDrop {
    fn drop(&mut self) {
        self.entered.take().unwrap().send(()).unwrap();
        let v = self.rx.recv().expect("the value comes");
        smarm::sleep(Duration::from_millis(1));
        smarm::yield_now();
        self.got.store(v, Ordering::SeqCst);
    }
}

#[test]
fn a_kill_during_a_panics_unwind_lets_the_destructor_finish() {
    child_entry("kill_during_unwind", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (entered_tx, entered) = smarm::oneshot();
        let (tx, rx) = smarm::channel();
        let got = Arc::new(AtomicU32::new(0));
        let g = got.clone();
        let h = rt.spawn(move || {
            let _w = WaitsInDrop {
                entered: Some(entered_tx),
                rx,
                got: g,
            };
            panic!("boom");
        });
        entered.recv().unwrap();
        // The actor waits in its destructor: kill it (as a supervisor's
        // stop or a linked partner would), then answer it.
        h.actor_ref().kill();
        tx.send(9).unwrap();
        let e = h.join().unwrap_err();
        assert_eq!(e.panic_message(), Some("boom"), "{e}");
        assert_eq!(got.load(Ordering::SeqCst), 9, "the destructor ran to the end");
        assert_eq!(rt.block_on(|| 1), 1);
    });
    expect_child_passes(
        "a_kill_during_a_panics_unwind_lets_the_destructor_finish",
        "kill_during_unwind",
        &[],
    );
}

#[test]
fn a_killed_actors_destructor_waits_too() {
    child_entry("kill_wait", || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (entered_tx, entered) = smarm::oneshot();
        let (tx, rx) = smarm::channel();
        let got = Arc::new(AtomicU32::new(0));
        let g = got.clone();
        let (ready_tx, ready) = smarm::oneshot();
        let (addr, h) = rt.spawn_actor(move |mut mb: Mailbox<()>| {
            let _w = WaitsInDrop {
                entered: Some(entered_tx),
                rx,
                got: g,
            };
            ready_tx.send(()).unwrap();
            mb.recv().unwrap();
        });
        ready.recv().unwrap();
        // Killed while parked on its mailbox.
        addr.actor_ref().kill();
        entered.recv().unwrap();
        // One worker: the answer comes from an actor, which can only run
        // because the waiting destructor does not hold the worker.
        let answer = rt.spawn(move || tx.send(4).unwrap());
        answer.join().unwrap();
        assert!(h.join().unwrap_err().is_killed());
        assert_eq!(got.load(Ordering::SeqCst), 4);
    });
    expect_child_passes("a_killed_actors_destructor_waits_too", "kill_wait", &[]);
}

/// A destructor that waits until `release` (recording that it began).
struct HoldsUnwind {
    entered: Option<smarm::OneshotSender<()>>,
    release: smarm::UnboundedReceiver<()>,
}

impl Drop for HoldsUnwind {
    fn drop(&mut self) {
        self.entered.take().unwrap().send(()).unwrap();
        let _ = self.release.recv();
    }
}

/// Yields and sleeps in its destructor, so its unwind crosses safe points.
struct YieldsInDrop;

impl Drop for YieldsInDrop {
    fn drop(&mut self) {
        for i in 0..50 {
            smarm::yield_now();
            if i % 10 == 0 {
                smarm::sleep(Duration::from_micros(200));
            }
        }
    }
}

#[test]
fn unwinding_actors_never_make_others_panicking() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // Unwinds that cross safe points (they used to move an unwind to
        // another worker, unbalancing both threads' panic counts).
        let hs: Vec<_> = (0..8)
            .map(|_| {
                rt.spawn(|| {
                    let _y = YieldsInDrop;
                    panic!("crossing");
                })
            })
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap_err().panic_message(), Some("crossing"));
        }
        // One actor stays in the middle of its unwind ...
        let (entered_tx, entered) = smarm::oneshot();
        let (release_tx, release) = smarm::channel();
        let unwinding = rt.spawn(move || {
            let _h = HoldsUnwind {
                entered: Some(entered_tx),
                release,
            };
            panic!("held");
        });
        entered.recv().unwrap();
        // ... while healthy actors on every worker lock a std mutex and look.
        let lock = Arc::new(Mutex::new(0u64));
        let saw_panicking = Arc::new(AtomicUsize::new(0));
        let healthy: Vec<_> = (0..64)
            .map(|_| {
                let (lock, saw) = (lock.clone(), saw_panicking.clone());
                rt.spawn(move || {
                    for _ in 0..20 {
                        if std::thread::panicking() {
                            saw.fetch_add(1, Ordering::SeqCst);
                        }
                        *lock.lock().expect("poisoned by a healthy actor") += 1;
                        smarm::yield_now();
                    }
                })
            })
            .collect();
        for h in healthy {
            h.join().unwrap();
        }
        release_tx.send(()).unwrap();
        assert_eq!(unwinding.join().unwrap_err().panic_message(), Some("held"));
        assert_eq!(
            saw_panicking.load(Ordering::SeqCst),
            0,
            "healthy actors saw panicking()"
        );
        assert!(!lock.is_poisoned());
        assert_eq!(*lock.lock().unwrap(), 64 * 20);
    });
}

#[test]
fn an_unwinding_actor_keeps_its_identity_and_can_spawn() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        /// What the destructor saw: its id, and its child's result.
        type Seen = Option<(Option<u64>, u32)>;
        struct Spawns(Arc<Mutex<Seen>>);
        impl Drop for Spawns {
            fn drop(&mut self) {
                // A wait (detaches), then identity and a spawn.
                smarm::sleep(Duration::from_millis(1));
                let child = smarm::spawn(|| 3u32);
                *self.0.lock().unwrap() = Some((smarm::current_id(), child.join().unwrap()));
            }
        }
        let seen = Arc::new(Mutex::new(None));
        let s = seen.clone();
        let h = rt.spawn(move || {
            let _s = Spawns(s);
            panic!("x")
        });
        let id = h.id();
        assert!(h.join().is_err());
        assert_eq!(*seen.lock().unwrap(), Some((Some(id), 3)));
    });
}

#[test]
fn a_panic_caught_inside_an_actor_rejoins_the_scheduler() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let h = rt.spawn(|| {
            let r = std::panic::catch_unwind(|| {
                let _y = YieldsInDrop;
                panic!("inner");
            });
            assert!(r.is_err());
            // Detached during the unwind, back on the scheduler now: waits
            // park again, and other actors run meanwhile.
            let (tx, mut rx) = smarm::channel::<u32>();
            let h = smarm::spawn(move || tx.send(5).unwrap());
            let v = rx.recv().unwrap();
            h.join().unwrap();
            (v, smarm::current_worker().is_some())
        });
        assert_eq!(h.join().unwrap(), (5, true));
    });
}

#[test]
fn a_trap_on_the_actors_own_mailbox_keeps_nothing_alive() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        struct Sentinel(Arc<AtomicUsize>);
        impl Drop for Sentinel {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let freed = Arc::new(AtomicUsize::new(0));
        let dropped_msgs = Arc::new(AtomicUsize::new(0));
        let (s, n) = (Sentinel(freed.clone()), 100);
        let (addr, h) = rt.spawn_actor(move |mb: Mailbox<Sentinel>| {
            let s = s;
            smarm::trap_exits_into(&mb.addr(), move |_d| Sentinel(s.0.clone()));
            mb.id()
        });
        let id = h.join().unwrap();
        assert_eq!(addr.id(), id);
        // Sends to the ended actor fail and hand the message back.
        for _ in 0..n {
            let e = addr.send(Sentinel(dropped_msgs.clone())).unwrap_err();
            drop(e.into_inner());
        }
        assert_eq!(dropped_msgs.load(Ordering::SeqCst), n);
        drop(addr);
        // The trap (and what it captured) goes with the actor's last handle.
        eventually(30, "the trap's context is freed", || {
            freed.load(Ordering::SeqCst) == 1
        });
    });
}

#[test]
fn a_second_link_to_the_same_partner_adds_nothing() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (go_tx, go) = smarm::oneshot::<()>();
        let partner = rt.spawn(move || {
            go.recv().unwrap();
            panic!("partner");
        });
        let pref = partner.actor_ref();
        let (addr, trapper) = rt.spawn_actor(move |mut mb: Mailbox<Down>| {
            smarm::trap_exits_into(&mb.addr(), |d| d);
            assert!(smarm::link(&pref));
            assert!(smarm::link(&pref));
            assert!(smarm::link(&smarm::current().unwrap()));
            go_tx.send(()).unwrap();
            let d = mb.recv().unwrap();
            // Nothing more comes: the second link added no notice.
            (d, mb.recv_timeout(Duration::from_millis(100)))
        });
        let (d, more) = trapper.join().unwrap();
        assert_eq!(d.reason, ExitReason::Panicked("partner".into()));
        assert!(
            matches!(more, Err(smarm::RecvTimeoutError::Timeout)),
            "a second notice: {more:?}"
        );
        assert!(partner.join().is_err());
        drop(addr);
    });
}

#[test]
fn a_parent_killed_during_spawn_gets_the_childs_handle() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let got = Arc::new(Mutex::new(None));
        let g = got.clone();
        let parent = rt.spawn(move || {
            let me = smarm::current().unwrap();
            // The child runs inside the spawn (work-first) and kills its
            // parent.
            next_spawn_work_first();
            let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let r = ran.clone();
            let child = smarm::spawn(move || {
                me.kill();
                r.store(true, std::sync::atomic::Ordering::SeqCst);
                smarm::current_id().unwrap()
            });
            *g.lock().unwrap() = Some((child.id(), ran.load(std::sync::atomic::Ordering::SeqCst)));
            // The next resume point unwinds.
            smarm::yield_now();
            unreachable!("killed at the yield")
        });
        let parent_id = parent.id();
        assert!(parent.join().unwrap_err().is_killed());
        let (child_id, killed_inside) = got.lock().unwrap().expect("spawn returned the child's handle");
        assert!(
            killed_inside,
            "the child ran (and killed its parent) inside the spawn"
        );
        // Ids are unique: the handle's id is the child's, not the parent's.
        assert_ne!(child_id, parent_id);
    });
}

#[test]
fn builder_values_out_of_range_are_errors() {
    use smarm::{BuildError, MAX_QUEUE_CAPACITY, MAX_WORKERS};
    let e = Runtime::builder().workers(100_000).build().err();
    assert_eq!(
        e,
        Some(BuildError::TooManyWorkers {
            requested: 100_000,
            maximum: MAX_WORKERS
        })
    );
    let e = Runtime::builder()
        .workers(1)
        .queue_capacity(usize::MAX)
        .build()
        .err();
    assert_eq!(
        e,
        Some(BuildError::QueueTooLarge {
            requested: usize::MAX,
            maximum: MAX_QUEUE_CAPACITY
        })
    );
    let e = Runtime::builder().workers(1).thread_name("a\0b").build().err();
    assert_eq!(e, Some(BuildError::ThreadName));
    assert!(e.unwrap().to_string().contains("NUL"));
    // The largest values are fine.
    let rt = Runtime::builder()
        .workers(1)
        .queue_capacity(MAX_QUEUE_CAPACITY)
        .long_hold(Duration::MAX, None)
        .timeslice(Some(Duration::MAX))
        .build()
        .unwrap();
    assert_eq!(rt.block_on(|| 2), 2);
}

/// `vm.max_map_count`, if readable.
#[cfg(target_os = "linux")]
fn max_map_count() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(target_os = "linux")]
#[test]
#[cfg_attr(
    any(smarm_tsan, smarm_asan),
    ignore = "the sanitizers' allocators and shadow memory take maps of their own, unbounded by the reserve"
)]
fn at_the_map_limit_spawn_fails_and_the_process_still_works() {
    // Per-stack mappings (forced: guard regions need no such limit; see
    // tests/rt_density.rs for those).
    child_entry("map_limit", || {
        assert_eq!(
            smarm::stack_guard(),
            smarm::StackGuard::Mapping,
            "forced by the parent"
        );
        let rt = Runtime::builder()
            .workers(2)
            .stack_size(16 * 1024)
            .build()
            .unwrap();
        let mut live = Vec::new();
        let err = loop {
            match rt.try_spawn_actor(|mut mb: Mailbox<()>| mb.recv().unwrap()) {
                Ok(a) => live.push(a),
                Err(e) => break e,
            }
            assert!(live.len() < 1_000_000, "no limit reached");
        };
        eprintln!("child: {} actors live when spawn said: {err}", live.len());
        assert!(
            matches!(
                err,
                smarm::SpawnError::Stack(smarm::StackError::MapReserve { .. })
            ),
            "{err:?}"
        );
        // The rest of the process has its maps: threads, large blocks
        // (mmap'd by malloc), a backtrace (it maps debug info).
        let t = std::thread::spawn(|| vec![7u8; 8 << 20].iter().map(|&b| b as usize).sum::<usize>());
        assert_eq!(t.join().unwrap(), 7 * (8 << 20));
        let bt = std::backtrace::Backtrace::force_capture();
        assert!(!bt.to_string().is_empty());
        let r = std::panic::catch_unwind(|| panic!("still panics normally"));
        assert!(r.is_err());
        for (a, h) in live {
            a.send(()).unwrap();
            h.join().unwrap();
        }
        // Stacks come back: spawning works again.
        assert_eq!(rt.block_on(|| smarm::spawn(|| 1).join().unwrap()), 1);
    });
    if child::launcher().is_some() {
        // qemu-user's own mappings share the process's limit, and 30,000
        // emulated stack maps take minutes.
        eprintln!("skipped under emulation");
        return;
    }
    match max_map_count() {
        // A raised limit would take minutes and gigabytes to reach.
        Some(n) if n <= 262_144 => {}
        other => {
            eprintln!("skipped: vm.max_map_count is {other:?}");
            return;
        }
    }
    expect_child_passes(
        "at_the_map_limit_spawn_fails_and_the_process_still_works",
        "map_limit",
        &[(smarm::STACK_GUARD_ENV, "mapping")],
    );
}
