//! The randomized fault test: kills, panics, destructors that send, sleep,
//! yield and block, `blocking` calls, links, traps, spawns and a supervisor
//! restarting crashing children, all mixed at random, on the host's port
//! and (with the `sim` feature, `scripts/sim-seeds.sh`) on the
//! deterministic port over seeds.
//!
//! Asserted, every round: the process lives (an abort fails the whole
//! binary); every actor's end is reported exactly once, to its joiner and
//! its monitor alike, with the same reason, and the only panics are the
//! injected ones (one `Panicked("torture")` per injected panic); no std
//! mutex is poisoned (no actor panics while holding one); no healthy actor
//! sees `thread::panicking()`, and every unwinding destructor does; every
//! message made is received, handed back by a failed send, or dropped
//! (by a closed mailbox or an unwinding sender): nothing vanishes, nothing
//! is counted twice, nothing is kept alive once the runtime is gone; the
//! supervisor's children have all ended once it has.
//!
//! `SMARM_TORTURE_ROUNDS=N`, `SMARM_TORTURE_TTL=T` (messages each injected
//! one may cause) and `SMARM_TORTURE_SEED=S` (first round's seed) scale and
//! replay it; the seed of a failing round is in the message. The thread
//! interleaving is the OS's on the host port (a seed fixes each actor's
//! choices, not the schedule); on the deterministic port a seed replays
//! exactly.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smarm_tests::smarm::{
    self, ActorRef, Addr, ChildSpec, Down, ExitReason, JoinError, Mailbox, Runtime, Strategy, SupervisorMsg,
    SupervisorSpec,
};
use smarm_tests::with_timeout;

/// Actors, messages each injected one may cause, rounds (smaller on the
/// deterministic port, where one thread runs at a time).
const ACTORS: usize = if cfg!(feature = "sim") { 24 } else { 160 };
const TTL: u64 = if cfg!(feature = "sim") { 12 } else { 60 };
const ROUNDS: u64 = if cfg!(feature = "sim") { 3 } else { 6 };

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        Rng(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Stats {
    created: AtomicU64,
    received: AtomicU64,
    returned: AtomicU64,
    dropped: AtomicU64,
    panics: AtomicU64,
    healthy_panicking: AtomicU64,
    unwinding_not_panicking: AtomicU64,
    poisoned: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::SeqCst);
}

/// One message; its end is counted exactly once (received, returned or,
/// by its `Drop`, dropped).
struct Tracked {
    stats: Arc<Stats>,
    ended: bool,
}

impl Tracked {
    fn new(stats: &Arc<Stats>) -> Tracked {
        bump(&stats.created);
        Tracked {
            stats: stats.clone(),
            ended: false,
        }
    }
    fn end(mut self, how: fn(&Stats) -> &AtomicU64) {
        self.ended = true;
        bump(how(&self.stats));
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if !self.ended {
            bump(&self.stats.dropped);
        }
    }
}

enum Cmd {
    Peers(Arc<Vec<Addr<Cmd>>>),
    Work(Tracked, u32),
    Down,
}

/// Sends one message to `to`, accounting for a failed send.
fn send(stats: &Arc<Stats>, to: &Addr<Cmd>, ttl: u32) {
    if let Err(e) = to.send(Cmd::Work(Tracked::new(stats), ttl)) {
        if let Cmd::Work(t, _) = e.into_inner() {
            t.end(|s| &s.returned);
        }
    }
}

/// What an actor's destructor does (while it unwinds, or at a normal end).
struct Parting {
    stats: Arc<Stats>,
    peers: Arc<Vec<Addr<Cmd>>>,
    rng: Rng,
}

impl Drop for Parting {
    fn drop(&mut self) {
        let unwinding = std::thread::panicking();
        match self.rng.below(5) {
            0 => {
                let to = &self.peers[self.rng.below(self.peers.len() as u64) as usize];
                send(&self.stats, to, 0);
            }
            1 => smarm::sleep(Duration::from_micros(self.rng.below(200))),
            2 => {
                for _ in 0..3 {
                    smarm::yield_now();
                }
            }
            3 => smarm::blocking(blocking_call),
            _ => {
                let h = smarm::spawn(|| 1u32);
                assert_eq!(h.join().ok(), Some(1));
            }
        }
        if unwinding && !std::thread::panicking() {
            bump(&self.stats.unwinding_not_panicking);
        }
    }
}

/// One chaos actor of a round.
fn chaos(mut mb: Mailbox<Cmd>, seed: u64, i: usize, stats: Arc<Stats>, lock: Arc<Mutex<u64>>) {
    let mut rng = Rng::new(seed, i as u64 + 1);
    let Ok(Cmd::Peers(peers)) = mb.recv_timeout(Duration::from_secs(30)) else {
        panic!("the peers come first");
    };
    let refs: Vec<ActorRef> = peers.iter().map(Addr::actor_ref).collect();
    if rng.below(3) == 0 {
        smarm::trap_exits_into(&mb.addr(), |_| Cmd::Down);
    }
    let _parting = Parting {
        stats: stats.clone(),
        peers: peers.clone(),
        rng: Rng::new(seed, 1000 + i as u64),
    };
    loop {
        let Ok(cmd) = mb.recv_timeout(Duration::from_millis(20)) else {
            return; // quiet (or nobody left to send): a normal exit
        };
        let ttl = match cmd {
            Cmd::Work(t, ttl) => {
                t.end(|s| &s.received);
                ttl
            }
            Cmd::Down | Cmd::Peers(_) => continue,
        };
        if std::thread::panicking() {
            bump(&stats.healthy_panicking);
        }
        match lock.lock() {
            Ok(mut g) => *g += 1,
            Err(p) => {
                bump(&stats.poisoned);
                *p.into_inner() += 1;
            }
        }
        // One message in, one out (while its time to live lasts), then a
        // random act.
        let peer = rng.below(peers.len() as u64) as usize;
        if ttl > 0 {
            send(&stats, &peers[peer], ttl - 1);
        }
        match rng.below(200) {
            0..=1 => {
                bump(&stats.panics);
                panic!("torture");
            }
            2..=3 => refs[peer].kill(),
            4..=9 => {
                smarm::link(&refs[peer]);
            }
            10..=15 => smarm::blocking(blocking_call),
            16..=35 => smarm::yield_now(),
            36..=41 => smarm::sleep(Duration::from_micros(rng.below(100))),
            42..=47 => {
                let (stats, to) = (stats.clone(), peers[peer].clone());
                let h = smarm::spawn(move || send(&stats, &to, 0));
                let _ = h.join();
            }
            _ => {}
        }
    }
}

/// `r` as the exit reason a monitor must report for it.
fn reason_of(r: &Result<(), JoinError>) -> ExitReason {
    match r {
        Ok(()) => ExitReason::Normal,
        Err(e) => e.reason(),
    }
}

/// A supervisor over three children that crash, exit or kill a sibling at
/// random; every child ever started is sent to `started`.
fn chaos_supervisor(seed: u64, started: smarm::UnboundedSender<ActorRef>) -> SupervisorSpec {
    let siblings: Arc<Mutex<Vec<ActorRef>>> = Arc::new(Mutex::new(Vec::new()));
    let mut spec = SupervisorSpec::new("chaos-sup", Strategy::OneForOne, 100_000, Duration::from_secs(1));
    for c in 0..3u64 {
        let (started, siblings) = (started.clone(), siblings.clone());
        let starts = Arc::new(AtomicU64::new(0));
        spec = spec.child(ChildSpec::new(&format!("chaos-{c}"), move || {
            let n = starts.fetch_add(1, Ordering::SeqCst);
            let mut rng = Rng::new(seed, 7_000 + c * 1_000 + n);
            let sib = siblings.clone();
            let h = smarm::spawn_named("chaos-child", move || {
                smarm::sleep(Duration::from_micros(rng.below(300)));
                match rng.below(4) {
                    0 => panic!("child"),
                    1 => {
                        let s = sib.lock().unwrap().clone();
                        if let Some(r) = s.get(rng.below(s.len().max(1) as u64) as usize) {
                            r.kill();
                        }
                        smarm::sleep(Duration::from_millis(1));
                    }
                    _ => smarm::sleep(Duration::from_millis(1)),
                }
            });
            let r = h.actor_ref();
            siblings.lock().unwrap().push(r.clone());
            let _ = started.send(r.clone());
            r
        }));
    }
    spec
}

fn round(seed: u64) {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let stats = Arc::new(Stats::default());
    let lock = Arc::new(Mutex::new(0u64));
    // The supervised part.
    let (started_tx, mut started) = smarm::channel();
    let spec = chaos_supervisor(seed, started_tx);
    let (sup_addr, sup) = rt.spawn_actor_named("chaos-sup", move |mb| smarm::supervise(mb, spec));
    // The actors, each watched by a monitor.
    let mut actors = Vec::new();
    for i in 0..ACTORS {
        let (stats, lock) = (stats.clone(), lock.clone());
        let (addr, h) = rt.spawn_actor(move |mb| chaos(mb, seed, i, stats, lock));
        let m = h.actor_ref().monitor();
        actors.push((addr, h, m));
    }
    let peers: Arc<Vec<Addr<Cmd>>> = Arc::new(actors.iter().map(|(a, _, _)| a.clone()).collect());
    for (a, _, _) in &actors {
        let _ = a.send(Cmd::Peers(peers.clone()));
    }
    let mut rng = Rng::new(seed, 0);
    let ttl = env_u64("SMARM_TORTURE_TTL", TTL) as u32;
    for _ in 0..ACTORS {
        send(&stats, &peers[rng.below(ACTORS as u64) as usize], ttl);
    }
    drop(peers);
    let mut panicked = 0;
    for (addr, h, m) in actors {
        drop(addr);
        let r = h.join();
        let down = m.recv().expect("every end is reported");
        assert_eq!(
            down.reason,
            reason_of(&r),
            "seed {seed}: monitor and joiner disagree"
        );
        match &r {
            Err(JoinError::Panicked { message, .. }) => {
                assert_eq!(message, "torture", "seed {seed}: a panic nobody injected");
                panicked += 1;
            }
            Err(e) => assert!(e.is_killed(), "seed {seed}: {e}"),
            Ok(()) => {}
        }
    }
    // Stop the supervisor (or kill it): its whole tree ends with it.
    if rng.below(2) == 0 {
        let _ = sup_addr.send(SupervisorMsg::Stop);
        let r = sup.join();
        assert!(
            r.is_ok() || r.as_ref().unwrap_err().is_killed(),
            "seed {seed}: {r:?}"
        );
    } else {
        sup.actor_ref().kill();
        let r = sup.join();
        assert!(r.as_ref().is_err_and(|e| e.is_killed()), "seed {seed}: {r:?}");
    }
    let mut children = 0;
    while let Ok(c) = started.try_recv() {
        children += 1;
        assert!(
            c.has_exited(),
            "seed {seed}: a supervised child outlived its supervisor"
        );
    }
    assert!(children >= 3, "seed {seed}: the supervisor started its children");
    drop(rt);
    let s = &stats;
    let get = |c: &AtomicU64| c.load(Ordering::SeqCst);
    assert_eq!(
        get(&s.panics),
        panicked,
        "seed {seed}: one Panicked per injected panic"
    );
    assert_eq!(get(&s.poisoned), 0, "seed {seed}: a std mutex was poisoned");
    assert_eq!(
        get(&s.healthy_panicking),
        0,
        "seed {seed}: a healthy actor saw panicking()"
    );
    assert_eq!(get(&s.unwinding_not_panicking), 0, "seed {seed}");
    let ended = get(&s.received) + get(&s.returned) + get(&s.dropped);
    assert_eq!(
        get(&s.created),
        ended,
        "seed {seed}: messages made vs ended (received {}, returned {}, dropped {})",
        get(&s.received),
        get(&s.returned),
        get(&s.dropped)
    );
    eprintln!(
        "torture seed {seed}: {} messages, {} received, {panicked} panics, {children} supervised starts",
        get(&s.created),
        get(&s.received)
    );
}

#[test]
fn random_faults_never_take_the_process_down() {
    with_timeout(600, || {
        let first = env_u64("SMARM_TORTURE_SEED", 1);
        for seed in first..first + env_u64("SMARM_TORTURE_ROUNDS", ROUNDS) {
            round(seed);
        }
    });
}

#[test]
fn a_link_kills_a_partner_that_does_not_trap_once() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (go_tx, go) = smarm::oneshot::<()>();
        let victim = rt.spawn(move || {
            go.recv().unwrap();
            smarm::sleep(Duration::from_secs(30));
        });
        let vref = victim.actor_ref();
        let down = vref.monitor();
        let linker = rt.spawn(move || {
            smarm::link(&vref);
            smarm::link(&vref);
            go_tx.send(()).unwrap();
            panic!("linker");
        });
        assert!(linker.join().is_err());
        assert!(victim.join().unwrap_err().is_killed());
        assert_eq!(down.recv().map(|d: Down| d.reason), Some(ExitReason::Killed));
    });
}

/// The work inside `smarm::blocking`: a real blocking system call (a file's
/// metadata) that holds the thread, with no timing in it.
fn blocking_call() {
    let _ = std::hint::black_box(std::fs::metadata("."));
}
