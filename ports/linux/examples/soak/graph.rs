//! The soak's message graph: `actors` slots, each holding one actor (an
//! incarnation) at a time, sending checksummed, per-pair-sequenced messages
//! to random slots until the round's message budget is spent.
//!
//! # Accounting (what "0 lost" means)
//!
//! Every data message is one [`Data`], counted once as `CREATED` when made
//! and once more by exactly one of its ends:
//! - `RECEIVED`: a receiver took it from its mailbox and checked it;
//! - `FAILED`: `send` returned it in a `SendError` (the slot's incarnation
//!   had exited: its mailbox was closed);
//! - `DROPPED`: it was accepted and then dropped inside a mailbox that its
//!   actor closed (exited) before taking it (`Data`'s `Drop` counts this).
//!
//! A message that vanished without one of these (leaked, or lost inside the
//! runtime) leaves `CREATED > RECEIVED + FAILED + DROPPED`: lost. One
//! delivered twice trips the receiver's per-pair sequence check.
//!
//! # Per-pair sequence
//!
//! A sender numbers its messages to each receiving incarnation 0, 1, 2, ...
//! (the table entry carries the incarnation; a new one restarts at 0) and
//! advances the number only on a successful send. The receiver requires
//! exactly the next number from each sender slot: lower is a duplicate,
//! higher a reorder (or a message lost from the middle of a mailbox). The
//! sender's numbers move with the slot to its next incarnation, which starts
//! only after the previous one closed its mailbox, so a slot never has two
//! senders at once.
//!
//! # Replacement
//!
//! After a receive, an actor may exit and be replaced: it handles what is
//! already in its mailbox (bounded), closes it, spawns its successor (which
//! inherits the sender numbers), publishes it in the table and exits. The
//! message that triggered this is counted `RECEIVED` only after the
//! successor is published, so "nothing in flight" implies no replacement
//! is half done.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::io::{ErrorKind, Read, Write};

use smarm_linux::unix::net::UnixStream;
use smarm_linux::{self as smarm, Addr, JoinError, Mailbox, RecvTimeoutError, SendError, TryRecvError};

use crate::guard::PROGRESS;

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        $(pub static $name: AtomicU64 = AtomicU64::new(0);)*
        /// Zeroes every counter (between rounds, when no actor runs).
        pub fn reset() {
            // Relaxed: no actor runs between rounds (the runtime was dropped).
            $($name.store(0, Ordering::Relaxed);)*
        }
        /// Every counter as `name=value`.
        pub fn snapshot() -> String {
            let mut s = String::new();
            $(s.push_str(&format!("{}={} ", stringify!($name).to_lowercase(), get(&$name)));)*
            s
        }
    };
}

counters!(
    CLAIMED,      // budget claims (may overshoot the budget)
    CREATED,      // data messages made
    SENT,         // sends that returned Ok
    RECEIVED,     // data messages received and checked
    FAILED,       // sends that returned SendError (receiver exited)
    DROPPED,      // accepted, then dropped by the receiver's close
    BAD_SUM,      // checksum mismatch
    MISDELIVERED, // a message for another slot or incarnation
    DUPLICATED,   // sequence below the expected one
    REORDERED,    // sequence above the expected one (a gap)
    FALSE_FAIL,   // SendError from a mailbox that is not closed
    LATE,         // data found after Stop
    REPLACED,     // actors that exited and were replaced
    HELPERS,      // short-lived helper actors spawned
    YIELDS,
    SLEEPS,
    BLOCKING, // blocking() calls
    TIMED_RECVS,
    SELECTIVE, // selective receives tried
    EXITS,
    PANICS,      // panics injected (an incarnation panics mid-turn)
    KILLS,       // kills injected (an incarnation kills itself, then yields)
    LINKS,       // links made to another slot's incarnation (trapped)
    DOWNS,       // trapped link notices received
    UNWOUND,     // incarnations replaced from their destructor while unwinding
    BAD_UNWIND,  // an unwinding destructor that did not see `panicking()`
    PANICKING,   // a turn of a healthy actor that saw `panicking()`
    IO_ROUNDS,   // echo round trips over a socket pair (the poller parks both ends)
    IO_TIMEOUTS, // reads in a round trip that timed out first (then resumed)
    IO_KILLS,    // helpers killed while parked on a socket read
    IO_BAD,      // an IO turn that went wrong (wrong bytes, a lost EOF, an error)
);

/// SeqCst read of a counter (the termination check reads several in order).
pub fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::SeqCst)
}

fn bump(c: &AtomicU64) {
    // SeqCst: `in_flight` reads the counters in an order that needs each
    // increment in one total order with the others.
    c.fetch_add(1, Ordering::SeqCst);
}

/// Data messages created and not yet received, failed or dropped. Reads the
/// ends before `CREATED`, so a message in flight is never missed: each end
/// is counted after its message's creation.
pub fn in_flight() -> u64 {
    let ended = get(&RECEIVED) + get(&FAILED) + get(&DROPPED);
    get(&CREATED).saturating_sub(ended)
}

// -------------------------------------------------------------- sabotage

/// A deliberate fault, once per process, to show the checks can fail
/// (`--sabotage`; `.ci/run` requires each to fail the soak).
pub static SABOTAGE: AtomicU8 = AtomicU8::new(NONE);
pub const NONE: u8 = 0;
/// A sender forgets one message after counting it created: 1 lost.
pub const LOSE: u8 = 1;
/// A sender sends one message twice: 1 duplicated.
pub const DUP: u8 = 2;
/// One actor ignores Stop and waits forever: the watchdog fires.
pub const HANG: u8 = 3;
/// `main` maps a guarded 3 MiB stack and never unmaps it (guard.rs): the
/// memory checks fail.
pub const LEAK: u8 = 4;

/// Whether to commit sabotage `kind` now (true once, then never again).
fn sabotage(kind: u8) -> bool {
    // Relaxed: a flag with nothing behind it; the CAS makes it once.
    SABOTAGE.load(Ordering::Relaxed) == kind
        && SABOTAGE
            .compare_exchange(kind, NONE, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

// ------------------------------------------------------------------- rng

/// splitmix64: seeded per actor incarnation, so a seed fixes each actor's
/// choices (the interleaving is the OS's).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, a: u64, b: u64) -> Rng {
        let mut r = Rng(seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next();
        r
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True once in `n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

// -------------------------------------------------------------- messages

/// One data message.
pub struct Data {
    from: u32,
    to: u32,
    to_inc: u32,
    seq: u64,
    words: [u64; 3],
    /// A heap payload on some messages (allocator traffic across workers).
    bytes: Option<Box<[u8]>>,
    sum: u64,
    /// Still to be accounted for: its `Drop` counts it `DROPPED`.
    live: bool,
}

impl Data {
    fn checksum(&self) -> u64 {
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        let mut mix = |x: u64| {
            h = (h ^ x).wrapping_mul(0x0000_0100_0000_01B3).rotate_left(29);
        };
        mix(self.from as u64);
        mix(self.to as u64);
        mix(self.to_inc as u64);
        mix(self.seq);
        self.words.iter().for_each(|&w| mix(w));
        if let Some(b) = &self.bytes {
            mix(b.len() as u64);
            b.iter().for_each(|&x| mix(x as u64));
        }
        h
    }

    /// Accounts for it as ended by `end` (it must not count as dropped).
    fn end(mut self, end: &AtomicU64) {
        self.live = false;
        bump(end);
        PROGRESS.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Data {
    fn drop(&mut self) {
        if self.live {
            bump(&DROPPED);
            PROGRESS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub enum Msg {
    Data(Data),
    /// The round is over: exit.
    Stop,
    /// A linked incarnation ended abnormally (this one traps exits).
    Down,
}

// ----------------------------------------------------------------- world

pub struct Entry {
    pub inc: u32,
    pub addr: Addr<Msg>,
}

/// What every actor of a round shares.
pub struct World {
    pub seed: u64,
    pub budget: u64,
    pub table: Vec<Mutex<Option<Entry>>>,
    /// Per slot, the incarnation that traps exits by now (`u32::MAX`:
    /// none yet). A link is made only to such an incarnation: one linked
    /// before its first turn (still queued) would be killed by its
    /// partner's exit before it could trap, and die unreplaced.
    pub trapping: Vec<AtomicU32>,
}

impl World {
    /// The current incarnation of `slot` and its address.
    fn lookup(&self, slot: usize) -> (u32, Addr<Msg>) {
        let e = self.table[slot].lock().expect("table lock");
        let e = e.as_ref().expect("every slot is filled before the first send");
        (e.inc, e.addr.clone())
    }

    pub fn publish(&self, slot: usize, inc: u32, addr: Addr<Msg>) {
        *self.table[slot].lock().expect("table lock") = Some(Entry { inc, addr });
    }
}

/// A sender's numbers: per receiving slot, (incarnation, next seq).
pub struct Sender {
    pub slot: u32,
    seqs: Vec<(u32, u64)>,
}

impl Sender {
    pub fn new(slot: u32, slots: usize) -> Sender {
        Sender {
            slot,
            seqs: vec![(0, 0); slots],
        }
    }
}

/// Sends one message to a random slot if the budget allows; `false` once it
/// is spent. In an actor, one send in 32 goes through a short-lived helper
/// actor (spawned from the actor; its result comes back over a oneshot channel
/// and the caller joins it, so the pair's order is kept).
pub fn send_one(w: &World, s: &mut Sender, rng: &mut Rng, in_actor: bool) -> bool {
    if CLAIMED.fetch_add(1, Ordering::SeqCst) >= w.budget {
        return false;
    }
    let to = rng.below(w.table.len() as u64) as usize;
    let (inc, addr) = w.lookup(to);
    let entry = &mut s.seqs[to];
    if entry.0 != inc {
        *entry = (inc, 0);
    }
    let bytes = rng.one_in(16).then(|| {
        (0..rng.below(200))
            .map(|_| rng.next() as u8)
            .collect::<Box<[u8]>>()
    });
    let mut d = Data {
        from: s.slot,
        to: to as u32,
        to_inc: inc,
        seq: entry.1,
        words: [rng.next(), rng.next(), rng.next()],
        bytes,
        sum: 0,
        live: true,
    };
    d.sum = d.checksum();
    bump(&CREATED);
    if sabotage(DUP) && CLAIMED.fetch_add(1, Ordering::SeqCst) < w.budget {
        // A second message with the same sequence number, right behind the
        // first (with its own budget unit, so only the order check fails).
        let copy = Data {
            bytes: d.bytes.clone(),
            ..d
        };
        bump(&CREATED);
        deliver(&addr, d);
        deliver(&addr, copy);
        entry.1 += 1;
        return true;
    }
    if sabotage(LOSE) {
        std::mem::forget(d);
        return true;
    }
    let ok = if in_actor && rng.one_in(32) {
        bump(&HELPERS);
        let (tx, rx) = smarm::oneshot::<bool>();
        let h = smarm::spawn(move || {
            let ok = deliver(&addr, d);
            let _ = tx.send(ok);
        });
        let ok = rx.recv().expect("the helper answers before it exits");
        h.join().expect("helper");
        ok
    } else {
        deliver(&addr, d)
    };
    if ok {
        entry.1 += 1;
    }
    true
}

/// One send; a failure is counted (and checked to be a closed mailbox).
fn deliver(addr: &Addr<Msg>, d: Data) -> bool {
    match addr.send(Msg::Data(d)) {
        Ok(()) => {
            bump(&SENT);
            true
        }
        Err(SendError(m)) => {
            if !addr.is_closed() {
                bump(&FALSE_FAIL);
            }
            if let Msg::Data(d) = m {
                d.end(&FAILED);
            }
            false
        }
    }
}

// ---------------------------------------------------------------- actors

/// An actor's receiving side: the next sequence expected from each slot
/// (the injector, `main`, is the last slot).
struct Checker {
    slot: u32,
    inc: u32,
    expect: Vec<u64>,
}

impl Checker {
    fn check(&mut self, d: Data) {
        self.verify(&d);
        d.end(&RECEIVED);
    }

    /// The receiver's checks, without the accounting.
    fn verify(&mut self, d: &Data) {
        if d.sum != d.checksum() {
            bump(&BAD_SUM);
        }
        if d.to != self.slot || d.to_inc != self.inc {
            bump(&MISDELIVERED);
        }
        let want = &mut self.expect[d.from as usize];
        match d.seq.cmp(want) {
            std::cmp::Ordering::Equal => {}
            std::cmp::Ordering::Less => bump(&DUPLICATED),
            std::cmp::Ordering::Greater => bump(&REORDERED),
        }
        *want = d.seq + 1;
    }
}

/// The state that moves from one incarnation of a slot to the next.
pub struct Carry {
    pub sender: Sender,
    pub inc: u32,
}

/// Spawns `slot`'s incarnation `carry.inc` (from an actor) and publishes it.
fn spawn_incarnation(w: Arc<World>, carry: Carry) {
    let slot = carry.sender.slot as usize;
    let inc = carry.inc;
    let w2 = w.clone();
    let (addr, h) = smarm::spawn_actor(move |mb| actor(mb, w2, carry));
    drop(h);
    w.publish(slot, inc, addr);
}

/// What an incarnation holds that must outlive an unwind (an injected
/// panic or kill): its mailbox, its sender numbers and the message it is
/// handling. Dropped with `carry` still in it only while unwinding: then it
/// replaces the incarnation from its destructor, as an exit would (the
/// destructor waits, yields, sends and spawns while unwinding), and ends
/// the message only after the successor is published, so "nothing in
/// flight" still implies no replacement is half done.
struct Incarnation {
    w: Arc<World>,
    mb: Option<Mailbox<Msg>>,
    carry: Option<Carry>,
    cur: Option<Data>,
    rng: Rng,
}

impl Drop for Incarnation {
    fn drop(&mut self) {
        let Some(mut carry) = self.carry.take() else {
            return; // a normal exit took it
        };
        if !std::thread::panicking() {
            bump(&BAD_UNWIND);
        }
        bump(&UNWOUND);
        let rng = &mut self.rng;
        // Safe points and waits while unwinding: none may switch this
        // thread to another actor (the runtime detaches us instead).
        smarm::yield_now();
        if rng.one_in(4) {
            bump(&SLEEPS);
            smarm::sleep(Duration::from_micros(rng.below(100)));
        }
        if rng.one_in(16) {
            bump(&BLOCKING);
            let us = rng.below(100);
            smarm::blocking(|| std::thread::sleep(Duration::from_micros(us)));
        }
        // One message out in place of the one we are handling (spawns a
        // helper now and then: a spawn while unwinding).
        send_one(&self.w, &mut carry.sender, rng, true);
        drop(self.mb.take());
        bump(&REPLACED);
        let next = Carry {
            sender: carry.sender,
            inc: carry.inc + 1,
        };
        spawn_incarnation(self.w.clone(), next);
        if let Some(d) = self.cur.take() {
            d.end(&RECEIVED);
        }
        bump(&EXITS);
        PROGRESS.fetch_add(1, Ordering::Relaxed);
    }
}

/// The body of every graph actor.
pub fn actor(mb: Mailbox<Msg>, w: Arc<World>, carry: Carry) {
    let slot = carry.sender.slot;
    let senders = w.table.len() + 1;
    let mut check = Checker {
        slot,
        inc: carry.inc,
        expect: vec![0; senders],
    };
    let mut me = Incarnation {
        rng: Rng::new(w.seed, slot as u64, carry.inc as u64 + 1),
        w,
        mb: Some(mb),
        carry: Some(carry),
        cur: None,
    };
    let w = me.w.clone();
    // Every incarnation traps exits, so a link never kills (an injected
    // panic's partner gets a `Down` message instead): only the injected
    // faults unwind, each accounted for.
    smarm::trap_exits_into(&me.mb.as_ref().expect("open").addr(), |_| Msg::Down);
    // Release: pairs with the Acquire load before a link to this slot, so
    // a linker that sees this incarnation here links to one that traps.
    w.trapping[slot as usize].store(me.carry.as_ref().expect("held").inc, Ordering::Release);
    loop {
        let rng = &mut me.rng;
        let mb = me.mb.as_mut().expect("open while the incarnation runs");
        let m = if rng.one_in(32) {
            // Selective receive: the first message from a sender of one
            // parity (or Stop); the others wait in the save queue, in order.
            bump(&SELECTIVE);
            let parity = rng.below(2) as u32;
            let pick = |m: &Msg| match m {
                Msg::Data(d) => d.from % 2 == parity,
                Msg::Stop | Msg::Down => true,
            };
            match mb.try_recv_matching(pick) {
                Ok(m) => m,
                Err(TryRecvError::Empty) => continue,
                Err(TryRecvError::Disconnected) => break,
            }
        } else if rng.one_in(64) {
            bump(&TIMED_RECVS);
            match mb.recv_timeout(Duration::from_micros(rng.below(100))) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            let Ok(m) = mb.recv() else { break };
            m
        };
        let d = match m {
            Msg::Stop if sabotage(HANG) => {
                let _me = mb.addr(); // never closed: the wait is forever
                let _ = mb.recv_matching(|_| false);
                unreachable!("nothing matches");
            }
            Msg::Stop => break,
            Msg::Down => {
                bump(&DOWNS);
                continue;
            }
            Msg::Data(d) => d,
        };
        if std::thread::panicking() {
            bump(&PANICKING);
        }
        // Checked now, counted received only at the end of this turn.
        check.verify(&d);
        me.cur = Some(d);
        let rng = &mut me.rng;
        let carry = me.carry.as_mut().expect("held while running");
        // One message in, one out (the injector tops up what failed or was
        // dropped).
        send_one(&w, &mut carry.sender, rng, true);
        if rng.one_in(16) {
            bump(&YIELDS);
            smarm::yield_now();
        }
        if rng.one_in(1024) {
            // A blocking call: the worker hands its duty to a spare thread
            // while this one sleeps in the kernel.
            bump(&BLOCKING);
            let us = rng.below(200);
            smarm::blocking(|| std::thread::sleep(Duration::from_micros(us)));
        }
        if rng.one_in(256) {
            io_turn(rng);
        }
        if rng.one_in(512) {
            bump(&SLEEPS);
            smarm::sleep(Duration::from_micros(rng.below(200)));
        }
        // Faults, while the budget lasts (an unwinding incarnation replaces
        // itself, as an exit does): a panic, a kill, a trapped link.
        if get(&CLAIMED) < w.budget {
            if rng.one_in(1024) {
                bump(&PANICS);
                // A panic without the hook's report (thousands per run).
                std::panic::resume_unwind(Box::new("soak: injected panic"));
            }
            if rng.one_in(1024) {
                bump(&KILLS);
                smarm::current().expect("in an actor").kill();
                smarm::yield_now(); // the resume point unwinds
                unreachable!("a killed actor resumed");
            }
            if rng.one_in(512) {
                let peer_slot = rng.below(w.table.len() as u64) as usize;
                let (inc, peer) = w.lookup(peer_slot);
                // Acquire: pairs with the peer's Release store after it
                // trapped exits (see `World::trapping`).
                if w.trapping[peer_slot].load(Ordering::Acquire) == inc && smarm::link(&peer.actor_ref()) {
                    bump(&LINKS);
                }
            }
        }
        let rng = &mut me.rng;
        if rng.one_in(2048) && get(&CLAIMED) < w.budget {
            // Exit and be replaced: handle some of what is queued (none,
            // half the time: what is left is dropped by the close and
            // counted), close, hand over.
            let mut carry = me.carry.take().expect("held");
            let mut mb = me.mb.take().expect("open");
            let drain = if rng.one_in(2) { 0 } else { rng.below(64) };
            for _ in 0..drain {
                match mb.try_recv() {
                    Ok(Msg::Data(d)) => {
                        check.check(d);
                        send_one(&w, &mut carry.sender, rng, true);
                    }
                    Ok(Msg::Down) => bump(&DOWNS),
                    Ok(Msg::Stop) => unreachable!("Stop is sent only when nothing is in flight"),
                    Err(_) => break,
                }
            }
            drop(mb);
            bump(&REPLACED);
            let next = Carry {
                sender: carry.sender,
                inc: carry.inc + 1,
            };
            spawn_incarnation(w.clone(), next);
            me.cur.take().expect("handling one").end(&RECEIVED);
            bump(&EXITS);
            PROGRESS.fetch_add(1, Ordering::Relaxed);
            return;
        }
        me.cur.take().expect("handling one").end(&RECEIVED);
    }
    let mut mb = me.mb.take().expect("open");
    me.carry = None;
    while let Ok(m) = mb.try_recv() {
        if let Msg::Data(d) = m {
            bump(&LATE);
            check.check(d);
        }
    }
    bump(&EXITS);
    PROGRESS.fetch_add(1, Ordering::Relaxed);
}

/// IO in the mix: a fresh socket pair (registered with the runtime's
/// poller), and either an echo round trip through a helper actor, this
/// actor's reads racing a random read timeout (a timeout must lose no
/// byte: the read resumes), or a helper killed while it is parked on a
/// read (its unwind closes its end: this end reads end of stream). What
/// goes wrong is counted in `IO_BAD` and fails the soak.
fn io_turn(rng: &mut Rng) {
    let bad = |what: &str| {
        eprintln!("soak: IO turn: {what}");
        bump(&IO_BAD);
    };
    let (a, b) = match UnixStream::pair() {
        Ok(p) => p,
        Err(e) => return bad(&format!("socketpair: {e}")),
    };
    if rng.one_in(4) {
        let h = smarm::spawn(move || {
            let _ = (&b).read(&mut [0u8; 1]);
        });
        if rng.one_in(2) {
            smarm::yield_now();
        }
        h.actor_ref().kill();
        match h.join() {
            Err(JoinError::Killed { .. }) => bump(&IO_KILLS),
            r => return bad(&format!("a helper parked on a read, killed, joined as {r:?}")),
        }
        match (&a).read(&mut [0u8; 1]) {
            Ok(0) => {}
            r => bad(&format!("the killed helper's peer read {r:?}, not end of stream")),
        }
        return;
    }
    let len = 1 + rng.below(4096) as usize;
    let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    let echo = smarm::spawn(move || -> std::io::Result<()> {
        let mut buf = vec![0u8; len];
        (&b).read_exact(&mut buf)?;
        (&b).write_all(&buf)
    });
    if rng.one_in(2) {
        let t = Duration::from_micros(1 + rng.below(50));
        if let Err(e) = a.set_read_timeout(Some(t)) {
            return bad(&format!("set_read_timeout: {e}"));
        }
    }
    if let Err(e) = (&a).write_all(&data) {
        return bad(&format!("write: {e}"));
    }
    let mut back = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match (&a).read(&mut back[got..]) {
            Ok(0) => return bad("end of stream before the echo"),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::TimedOut => bump(&IO_TIMEOUTS),
            Err(e) => return bad(&format!("read: {e}")),
        }
    }
    if back != data {
        return bad("the echo differs");
    }
    match echo.join() {
        Ok(Ok(())) => bump(&IO_ROUNDS),
        r => bad(&format!("the echo helper ended with {r:?}")),
    }
}
