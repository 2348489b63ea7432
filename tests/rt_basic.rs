//! The runtime's basic contract: spawn, join, panics, yields, builder errors.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use smarm_tests::smarm::{self, BuildError, Runtime, SpawnError};
use smarm_tests::{eventually, with_timeout};

#[cfg(all(target_os = "linux", not(feature = "sim")))]
mod child;

#[test]
fn hundred_thousand_actors_spawned_and_joined() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let sum = rt.block_on(|| {
            let hs: Vec<_> = (0..100_000u64).map(|i| smarm::spawn(move || i * 3)).collect();
            let mut sum = 0;
            for (i, h) in hs.into_iter().enumerate() {
                let v = h.join().unwrap();
                assert_eq!(v, i as u64 * 3);
                sum += v;
            }
            sum
        });
        assert_eq!(sum, 3 * (100_000 * 99_999 / 2));
        let c = rt.counters().total();
        assert_eq!(c.enqueued, c.dequeued);
        assert_eq!(c.spawned, 100_001);
        eventually(10, "live actors back to 0", || rt.live_actors() == 0);
    });
}

#[test]
fn spawn_from_plain_threads() {
    with_timeout(60, || {
        let rt = Arc::new(Runtime::builder().workers(2).build().unwrap());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let rt = rt.clone();
                std::thread::spawn(move || {
                    let hs: Vec<_> = (0..1000u64).map(|i| rt.spawn(move || t * 1000 + i)).collect();
                    hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
                })
            })
            .collect();
        let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(total, (0..4000u64).sum::<u64>());
    });
}

#[test]
fn panic_is_reported_through_join_and_others_finish() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let bad = rt.spawn(|| -> u32 { panic!("boom {}", 42) });
        let good: Vec<_> = (0..100u32).map(|i| rt.spawn(move || i + 1)).collect();
        let err = bad.join().unwrap_err();
        assert_eq!(err.panic_message(), Some("boom 42"));
        assert!(err.to_string().contains("panicked: boom 42"), "{err}");
        let sum: u32 = good.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (1..=100).sum());
        // The worker that ran the panicking actor still works.
        assert_eq!(rt.block_on(|| 7), 7);
        let static_msg = rt
            .spawn(|| -> () { panic!("static message") })
            .join()
            .unwrap_err();
        assert_eq!(static_msg.panic_message(), Some("static message"));
    });
}

/// Starts `n` actors on `rt` that first wait for each other (yielding),
/// yield once more, then each log their index and yield, `rounds` times;
/// returns the log once all have ended.
fn yield_log(rt: &Runtime, n: usize, rounds: usize) -> Vec<usize> {
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let ready = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..n)
        .map(|who| {
            let (log, ready) = (log.clone(), ready.clone());
            rt.spawn(move || {
                // Start together: the first may run before the last exists.
                ready.fetch_add(1, Ordering::SeqCst);
                while ready.load(Ordering::SeqCst) < n {
                    smarm::yield_now();
                }
                // One more yield: every actor has left the start loop and
                // sits in the queue before the first entry.
                smarm::yield_now();
                for _ in 0..rounds {
                    log.lock().unwrap().push(who);
                    smarm::yield_now();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let log = log.lock().unwrap();
    log.clone()
}

#[test]
fn two_yielding_actors_on_one_worker_both_progress() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let log = yield_log(&rt, 2, 1000);
        assert_eq!(log.len(), 2000);
        // Strict alternation after the first step: each yield lets the other run.
        let switches = log.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(
            switches >= 1990,
            "only {switches} alternations: one actor starved the other"
        );
    });
}

/// A yield hands the worker to the queue's oldest actor and queues the
/// yielder last (directly, actor to actor, or through the worker loop):
/// eight yielding actors on one worker take strict turns. (Not on the
/// deterministic port, whose seeded policy picks any queued actor.)
#[cfg(not(feature = "sim"))]
#[test]
fn yields_take_turns_in_queue_order() {
    with_timeout(60, || {
        const N: usize = 8;
        const ROUNDS: usize = 200;
        let rt = Runtime::builder().workers(1).build().unwrap();
        let log = yield_log(&rt, N, ROUNDS);
        assert_eq!(log.len(), N * ROUNDS);
        let mut first: Vec<usize> = log[..N].to_vec();
        first.sort_unstable();
        assert_eq!(
            first,
            (0..N).collect::<Vec<_>>(),
            "a first round not of all: {:?}",
            &log[..N]
        );
        for (i, w) in log.windows(N + 1).enumerate() {
            assert_eq!(w[0], w[N], "turn {i}: not round robin: {:?}", &log[i..i + N + 1]);
        }
    });
}

/// On one worker the worker's own pushes (every yield) go to a FIFO of its
/// own, and a plain thread's to the shared ring: an actor spawned from
/// outside must still run while the worker's FIFO never empties (four
/// actors yielding until that actor stops them).
#[test]
fn an_actor_spawned_from_outside_runs_during_a_yield_storm() {
    with_timeout(60, || {
        const N: usize = 4;
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (stop, started) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let hs: Vec<_> = (0..N)
            .map(|_| {
                let (stop, started) = (stop.clone(), started.clone());
                rt.spawn(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    let mut yields = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        smarm::yield_now();
                        yields += 1;
                    }
                    yields
                })
            })
            .collect();
        eventually(30, "the yielders started", || started.load(Ordering::SeqCst) == N);
        let stopper = {
            let stop = stop.clone();
            rt.spawn(move || stop.store(true, Ordering::SeqCst))
        };
        stopper.join().unwrap();
        for h in hs {
            assert!(h.join().unwrap() > 0, "a yielder never yielded");
        }
    });
}

/// Yields handed actor to actor still let the worker loop run its
/// periodic duties: a sleeper's timer fires while two actors yield to
/// each other without end.
#[test]
fn a_timer_fires_while_actors_only_yield() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let woke = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicUsize::new(0));
        let (w, s) = (woke.clone(), started.clone());
        let sleeper = rt.spawn(move || {
            // The spinners run first: from their start to the wake below
            // they only yield.
            while s.load(Ordering::SeqCst) < 2 {
                smarm::yield_now();
            }
            smarm::sleep(std::time::Duration::from_millis(5));
            w.store(true, Ordering::SeqCst);
        });
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let (woke, started) = (woke.clone(), started.clone());
                rt.spawn(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    let mut yields = 0u64;
                    while !woke.load(Ordering::SeqCst) {
                        smarm::yield_now();
                        yields += 1;
                    }
                    yields
                })
            })
            .collect();
        sleeper.join().unwrap();
        for h in spinners {
            assert!(h.join().unwrap() > 0, "a spinner never yielded");
        }
    });
}

/// The states (`/proc`'s `R`, `S`, ...) of this process's worker threads.
#[cfg(all(target_os = "linux", not(feature = "sim")))]
fn worker_thread_states() -> Vec<char> {
    let mut states = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("smarm-worker") {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // `pid (comm) S ...`: the state follows the last ')'.
        if let Some(rest) = stat.rsplit_once(')') {
            states.extend(rest.1.trim_start().chars().next());
        }
    }
    states
}

/// An idle worker watches the queue for a bounded time before it sleeps
/// (`IDLE_SPIN_NS`), then sleeps: once a runtime is idle, all its worker
/// threads end up asleep in the kernel (`S`), the one that spun included.
/// (A spin without its bound stays `R`.) In a child process, so no other
/// test's runtime is around.
#[cfg(all(target_os = "linux", not(feature = "sim")))]
#[test]
fn idle_workers_end_asleep_after_their_spin() {
    child::child_entry("idle", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        for i in 0..3u32 {
            assert_eq!(rt.block_on(move || i), i);
        }
        eventually(20, "every worker thread asleep", || {
            let s = worker_thread_states();
            s.len() == 2 && s.iter().all(|&c| c == 'S')
        });
    });
    // The child must see its workers asleep.
    child::expect_child_passes("idle_workers_end_asleep_after_their_spin", "idle", &[]);
}

fn chain(depth: u32) -> u32 {
    if depth == 0 {
        return 0;
    }
    smarm::spawn(move || chain(depth - 1)).join().unwrap() + 1
}

#[test]
fn spawn_chain_deeper_than_the_stack_pool() {
    with_timeout(60, || {
        let rt = Runtime::builder()
            .workers(2)
            .stack_size(64 * 1024)
            .build()
            .unwrap();
        // 2,000 nested live actors: far beyond a worker's 64-stack cache.
        assert_eq!(rt.block_on(|| chain(2000)), 2000);
        eventually(10, "live actors back to 0", || rt.live_actors() == 0);
    });
}

#[test]
fn more_live_actors_than_pooled_stacks() {
    with_timeout(60, || {
        const N: usize = 3000;
        let rt = Runtime::builder().workers(2).build().unwrap();
        let started = Arc::new(AtomicUsize::new(0));
        let go = Arc::new(AtomicBool::new(false));
        let (s, g) = (started.clone(), go.clone());
        let peak = rt.block_on(move || {
            let hs: Vec<_> = (0..N)
                .map(|i| {
                    let (s, g) = (s.clone(), g.clone());
                    smarm::spawn(move || {
                        s.fetch_add(1, Ordering::SeqCst);
                        while !g.load(Ordering::SeqCst) {
                            smarm::yield_now();
                        }
                        i
                    })
                })
                .collect();
            let peak = s.load(Ordering::SeqCst);
            g.store(true, Ordering::SeqCst);
            let sum: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(sum, N * (N - 1) / 2);
            peak
        });
        assert_eq!(peak, N, "all {N} actors were alive at once");
        assert_eq!(started.load(Ordering::SeqCst), N);
    });
}

#[test]
fn builder_rejects_bad_values_with_typed_errors() {
    assert_eq!(
        Runtime::builder().workers(0).build().err(),
        Some(BuildError::ZeroWorkers)
    );
    assert!(matches!(
        Runtime::builder().stack_size(1024).build().err(),
        Some(BuildError::StackTooSmall { requested: 1024, .. })
    ));
    assert!(matches!(
        Runtime::builder().stack_size(usize::MAX).build().err(),
        Some(BuildError::StackTooLarge { .. })
    ));
    assert!(matches!(
        Runtime::builder().queue_capacity(1).build().err(),
        Some(BuildError::QueueTooSmall { requested: 1 })
    ));
    let msg = Runtime::builder().workers(0).build().err().unwrap().to_string();
    assert!(msg.contains("at least one worker"), "{msg}");
}

#[test]
fn spawn_outside_an_actor_is_an_error_not_a_crash() {
    assert_eq!(smarm::try_spawn(|| 1).err(), Some(SpawnError::NoRuntime));
    assert_eq!(
        smarm::try_spawn_named("n", || 1).err(),
        Some(SpawnError::NoRuntime)
    );
    assert_eq!(
        smarm::try_spawn_actor::<u8, _, _>(|_mb| 1).err(),
        Some(SpawnError::NoRuntime)
    );
    assert_eq!(
        smarm::try_spawn_actor_named::<u8, _, _>("n", |_mb| 1).err(),
        Some(SpawnError::NoRuntime)
    );
    assert_eq!(smarm::current_id(), None);
    assert_eq!(smarm::current_worker(), None);
    smarm::yield_now(); // a plain thread just yields
}

/// Every port exports the whole spawn family (`port_api!`); the named,
/// fallible forms work from inside an actor, the child runs (help-first on
/// this idle worker: after its spawner goes on) and carries its name.
#[test]
fn the_whole_spawn_family_inside_an_actor() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let names = rt.block_on(|| {
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            let a = smarm::try_spawn_named("a", move || {
                r.store(true, Ordering::SeqCst);
                smarm::current_name()
            })
            .unwrap();
            // The worker had nothing else to run: the child waits in the
            // run-next slot while its spawner goes on (help-first).
            let first = ran.load(Ordering::SeqCst);
            let (addr, b) = smarm::try_spawn_actor_named("b", |mut mb: smarm::Mailbox<u32>| {
                (smarm::current_name(), mb.recv().unwrap())
            })
            .unwrap();
            addr.send(7).unwrap();
            let (bn, got) = b.join().unwrap();
            (first, a.join().unwrap(), bn, got)
        });
        let (first, an, bn, got) = names;
        assert!(
            !first,
            "a spawn on an idle worker runs the child after its spawner switches out"
        );
        assert_eq!(an.as_deref(), Some("a"));
        assert_eq!(bn.as_deref(), Some("b"));
        assert_eq!(got, 7);
    });
}

/// A spawn on a worker with nothing else to run (run-next slot empty,
/// nothing queued here) leaves the child in the slot and the spawner goes
/// on (help-first): a spawn-and-forget loop or chain keeps one stack hot
/// instead of leaving every spawner waiting.
#[cfg(not(feature = "sim"))]
#[test]
fn a_spawn_on_an_idle_worker_leaves_the_child_in_the_slot() {
    const N: usize = 200;
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let log = rt.block_on(|| {
            let log = Arc::new(std::sync::Mutex::new(Vec::new()));
            for i in 0..N {
                let l = log.clone();
                let h = smarm::spawn(move || l.lock().unwrap().push(2 * i + 1));
                log.lock().unwrap().push(2 * i);
                h.join().unwrap();
            }
            let log = log.lock().unwrap();
            log.clone()
        });
        // Each spawner went on before its child ran.
        assert_eq!(log, (0..2 * N).collect::<Vec<_>>());
    });
}

/// A join of a child that waits in the joiner's run-next slot (a
/// help-first spawn's) switches into it: the joiner waits in the slot
/// and is not parked on the join (which the child's exit would
/// then have to wake).
#[cfg(not(feature = "sim"))]
#[test]
fn a_join_switches_into_its_child_waiting_in_the_slot() {
    use smarm::ActorState;
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let started = Arc::new(AtomicBool::new(false));
        let go = Arc::new(AtomicBool::new(false));
        let (s, g) = (started.clone(), go.clone());
        let parent = rt.spawn(move || {
            // The worker runs nothing else: the child waits in the slot.
            let h = smarm::spawn(move || {
                s.store(true, Ordering::SeqCst);
                // Holds the one worker (no safe point) until the test has
                // looked at its parent.
                while !g.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                7
            });
            h.join().unwrap()
        });
        eventually(30, "the child runs", || started.load(Ordering::SeqCst));
        let state = rt
            .dump()
            .actors
            .iter()
            .find(|a| a.id == parent.id())
            .map(|a| a.state);
        go.store(true, Ordering::SeqCst);
        assert_eq!(parent.join().unwrap(), 7);
        // (A spawner waiting in the slot still reads `Running`, as the
        // loop leaves it; parked on the join it would read `WaitingJoin`.)
        let state = state.expect("the parent is alive");
        assert!(
            state != ActorState::WaitingJoin,
            "the joiner waits in the slot while its child runs, not parked: {state}"
        );
    });
}

/// A spawn while other work waits on the worker (here: an actor the
/// spawner just woke sits in the run-next slot) switches straight into the
/// child (work-first, the direct handoff: no pass through the worker
/// loop), and its spawner resumes from the run-next slot: a spawn tree
/// (skynet) runs depth-first instead of holding every unstarted child's
/// stack at once.
#[cfg(not(feature = "sim"))]
#[test]
fn a_spawn_with_work_waiting_switches_straight_into_the_child() {
    const N: usize = 200;
    with_timeout(60, || {
        // Slices off: an expiry queues the spawner and empties the slot,
        // and the spawn after it would find nothing waiting.
        let rt = Runtime::builder().workers(1).timeslice(None).build().unwrap();
        let before = rt.counters().total();
        let log = rt.block_on(|| {
            let log = Arc::new(std::sync::Mutex::new(Vec::new()));
            let (addr, echo) = smarm::spawn_actor(|mut mb: smarm::Mailbox<usize>| {
                let mut n = 0;
                while mb.recv().is_ok() {
                    n += 1;
                }
                n
            });
            for i in 0..N {
                // Wakes the parked echo actor into the run-next slot.
                addr.send(i).unwrap();
                let l = log.clone();
                let h = smarm::spawn(move || l.lock().unwrap().push(2 * i));
                log.lock().unwrap().push(2 * i + 1);
                h.join().unwrap();
            }
            drop(addr);
            assert_eq!(echo.join().unwrap(), N);
            let log = log.lock().unwrap();
            log.clone()
        });
        // Each child ran before its spawner went on.
        assert_eq!(log, (0..2 * N).collect::<Vec<_>>());
        let c = rt.counters().total();
        let direct = c.direct_switches - before.direct_switches;
        assert_eq!(c.spawned - before.spawned, N as u64 + 2, "{c}");
        // A spawn's switch into its child is direct (all but the loop's
        // periodic turns); through the loop, none.
        assert!(
            direct >= N as u64 / 2,
            "{direct} direct switches for {N} spawns: {c}"
        );
    });
}

/// A chain (each actor spawns the next and ends) started while other work
/// waits on the worker runs its spawns work-first only a bounded run at a
/// time: without the bound every spawner waits in the run-next slot while
/// its child runs, the next spawn displaces it to the queue, and the
/// displaced spawners keep the queue non-empty, so the whole chain (here
/// 300 links) is alive at once, a stack each.
#[cfg(not(feature = "sim"))]
#[test]
fn a_chain_of_spawns_on_a_busy_worker_keeps_few_spawners_waiting() {
    const LINKS: usize = 300;
    static ALIVE: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);
    fn link(n: usize, done: smarm::UnboundedSender<()>) {
        let alive = ALIVE.fetch_add(1, Ordering::SeqCst) + 1;
        PEAK.fetch_max(alive, Ordering::SeqCst);
        if n == 0 {
            done.send(()).unwrap();
        } else {
            drop(smarm::spawn(move || link(n - 1, done)));
        }
        ALIVE.fetch_sub(1, Ordering::SeqCst);
    }
    with_timeout(60, || {
        // Slices off: an expiry would empty the slot and queue on its own.
        let rt = Runtime::builder().workers(1).timeslice(None).build().unwrap();
        let before = rt.counters().total();
        rt.block_on(|| {
            // A no-op actor in the slot: the first link's spawn finds work
            // waiting (work-first), and the no-op actor goes to the queue.
            smarm_tests::next_spawn_work_first();
            let (tx, mut rx) = smarm::channel();
            drop(smarm::spawn(move || link(LINKS, tx)));
            rx.recv().unwrap();
        });
        let c = rt.counters().total();
        let queued = c.enqueued - before.enqueued;
        let peak = PEAK.load(Ordering::SeqCst);
        // Work-first did start (the policy under test was reached) ...
        assert!(peak > 2, "no link waited for its child: peak {peak}, {c}");
        // ... and never held more than a bounded run of spawners.
        assert!(
            peak <= 40,
            "{peak} of {LINKS} links alive at once: the chain held a stack per link ({c})"
        );
        assert!(queued > 0, "nothing was queued: {c}");
        eventually(10, "live actors back to 0", || rt.live_actors() == 0);
    });
}

#[test]
fn ids_are_unique_and_visible_inside() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let hs: Vec<_> = (0..200)
            .map(|_| rt.spawn(|| smarm::current_id().unwrap()))
            .collect();
        let mut seen = std::collections::HashSet::new();
        for h in hs {
            let id = h.id();
            assert_eq!(h.join().unwrap(), id);
            assert!(seen.insert(id), "duplicate id {id}");
        }
    });
}

macro_rules! overflow_test {
    ($name:ident, $queue:ty) => {
        #[test]
        fn $name() {
            with_timeout(60, || {
                // 1,000 runnable actors through a 4-slot ring: the excess
                // spills (ring) or queues (mutex), and none is lost.
                let rt = smarm::BuilderWith::<$queue>::new()
                    .workers(2)
                    .queue_capacity(4)
                    .build()
                    .unwrap();
                let hs: Vec<_> = (0..1000u64)
                    .map(|i| {
                        rt.spawn(move || {
                            for _ in 0..10 {
                                smarm::yield_now();
                            }
                            i
                        })
                    })
                    .collect();
                let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
                assert_eq!(sum, 999 * 1000 / 2);
                let c = rt.counters().total();
                assert_eq!(c.enqueued, c.dequeued);
                assert!(
                    c.depth_peak > 4,
                    "the queue never held more than the ring: no spill tested"
                );
            });
        }
    };
}

overflow_test!(ring_overflow_spills_without_losing_actors, smarm::RingQueue);
overflow_test!(mutex_queue_variant_runs_the_same_workload, smarm::MutexQueue);
overflow_test!(
    striped_queue_variant_spills_without_losing_actors,
    smarm::StripedQueue
);
