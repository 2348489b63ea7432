//! Typed channels (unbounded, bounded, rendezvous, oneshot) between actors
//! and threads: every direction, disconnection both ways, backpressure, FIFO
//! per sender with many senders, parking (not blocking) a worker on a full
//! channel, ping-pong (a park and a wake per message), the rendezvous
//! (`bounded(0)`: a send completes only when received; killed waiters leave
//! nothing behind; in a `Select`), and cancelled actors that must not park.
//! (No allocation per message: `channel_alloc.rs`.)
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use smarm_tests::smarm::{
    self, bounded, channel, oneshot, try_bounded, ActorState, BoundedReceiver, BoundedSender, CapacityError,
    RecvError, Runtime, Select, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
// The unbounded handles under short names (the tests are written for them).
use smarm_tests::smarm::{UnboundedReceiver as Receiver, UnboundedSender as Sender};
use smarm_tests::{eventually, next_spawn_work_first, with_timeout};

const N: u32 = 1000;

/// Both MPSC kinds behind one face, so each scenario runs on both.
trait Tx: Clone + Send + 'static {
    fn put(&self, v: u32) -> Result<(), SendError<u32>>;
}
trait Rx: Send + 'static {
    fn get(&mut self) -> Result<u32, RecvError>;
    fn try_get(&mut self) -> Result<u32, TryRecvError>;
}
impl Tx for Sender<u32> {
    fn put(&self, v: u32) -> Result<(), SendError<u32>> {
        self.send(v)
    }
}
impl Tx for BoundedSender<u32> {
    fn put(&self, v: u32) -> Result<(), SendError<u32>> {
        self.send(v)
    }
}
impl Rx for Receiver<u32> {
    fn get(&mut self) -> Result<u32, RecvError> {
        self.recv()
    }
    fn try_get(&mut self) -> Result<u32, TryRecvError> {
        self.try_recv()
    }
}
impl Rx for BoundedReceiver<u32> {
    fn get(&mut self) -> Result<u32, RecvError> {
        self.recv()
    }
    fn try_get(&mut self) -> Result<u32, TryRecvError> {
        self.try_recv()
    }
}

/// Sends `0..n`, then drops the sender.
fn send_all(tx: impl Tx, n: u32) {
    for i in 0..n {
        tx.put(i).unwrap();
    }
}

/// Receives until disconnected; checks the values are `0..n` in order.
fn recv_all(mut rx: impl Rx, n: u32) {
    for i in 0..n {
        assert_eq!(rx.get(), Ok(i));
    }
    assert_eq!(rx.get(), Err(RecvError));
    assert_eq!(rx.try_get(), Err(TryRecvError::Disconnected));
}

fn actor_to_actor<S: Tx, R: Rx>((tx, rx): (S, R)) {
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.block_on(move || {
        let r = smarm::spawn(move || recv_all(rx, N));
        let s = smarm::spawn(move || send_all(tx, N));
        s.join().unwrap();
        r.join().unwrap();
    });
}

fn thread_to_actor<S: Tx, R: Rx>((tx, rx): (S, R)) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let r = rt.spawn(move || recv_all(rx, N));
    send_all(tx, N);
    r.join().unwrap();
}

fn actor_to_thread<S: Tx, R: Rx>((tx, rx): (S, R)) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let s = rt.spawn(move || {
        for i in 0..N {
            tx.put(i).unwrap();
            if i % 16 == 0 {
                smarm::yield_now();
            }
        }
    });
    recv_all(rx, N);
    s.join().unwrap();
}

#[test]
fn unbounded_every_direction() {
    with_timeout(60, || {
        actor_to_actor(channel::<u32>());
        thread_to_actor(channel::<u32>());
        actor_to_thread(channel::<u32>());
    });
}

#[test]
fn bounded_every_direction() {
    with_timeout(60, || {
        for cap in [0, 1, 3] {
            actor_to_actor(bounded::<u32>(cap));
            thread_to_actor(bounded::<u32>(cap));
            actor_to_thread(bounded::<u32>(cap));
        }
    });
}

fn disconnect_after_drain<S: Tx, R: Rx>((tx, mut rx): (S, R)) {
    for i in 0..3 {
        tx.put(i).unwrap();
    }
    drop(tx);
    for i in 0..3 {
        assert_eq!(rx.get(), Ok(i));
    }
    assert_eq!(rx.get(), Err(RecvError));
    assert_eq!(rx.try_get(), Err(TryRecvError::Disconnected));
}

#[test]
fn disconnect_after_drain_both_kinds() {
    with_timeout(30, || {
        disconnect_after_drain(channel::<u32>());
        disconnect_after_drain(bounded::<u32>(3));
    });
}

fn last_sender_drop_wakes_a_waiting_receiver<S: Tx, R: Rx>(mk: impl Fn() -> (S, R)) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    // An actor receiver, woken by a thread dropping the last of two senders.
    let (tx, rx) = mk();
    let tx2 = tx.clone();
    let r = rt.spawn(move || {
        let mut rx = rx;
        rx.get()
    });
    drop(tx);
    drop(tx2);
    assert_eq!(r.join().unwrap(), Err(RecvError));
    // A thread receiver, woken by an actor dropping the sender.
    let (tx, mut rx) = mk();
    let s = rt.spawn(move || {
        smarm::yield_now();
        drop(tx);
    });
    assert_eq!(rx.get(), Err(RecvError));
    s.join().unwrap();
}

#[test]
fn last_sender_drop_wakes_the_receiver() {
    with_timeout(30, || {
        last_sender_drop_wakes_a_waiting_receiver(channel::<u32>);
        last_sender_drop_wakes_a_waiting_receiver(|| bounded::<u32>(2));
        last_sender_drop_wakes_a_waiting_receiver(|| bounded::<u32>(0));
    });
}

#[test]
fn receiver_drop_fails_sends_and_drops_queued_messages() {
    with_timeout(30, || {
        let token = Arc::new(());
        let (tx, rx) = channel::<Arc<()>>();
        tx.send(token.clone()).unwrap();
        tx.send(token.clone()).unwrap();
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(Arc::strong_count(&token), 1, "queued messages dropped");
        let err = tx.send(token.clone()).unwrap_err();
        assert!(Arc::ptr_eq(&err.into_inner(), &token), "the value comes back");

        let (btx, brx) = bounded::<Arc<()>>(4);
        btx.send(token.clone()).unwrap();
        drop(brx);
        assert_eq!(Arc::strong_count(&token), 1);
        assert!(btx.send(token.clone()).is_err());
        match btx.try_send(token.clone()) {
            Err(TrySendError::Disconnected(v)) => assert!(Arc::ptr_eq(&v, &token)),
            other => panic!("expected Disconnected, got {other:?}"),
        }
    });
}

#[test]
fn bounded_backpressure() {
    with_timeout(60, || {
        const CAP: usize = 2;
        const COUNT: u64 = 100;
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, mut rx) = bounded::<u64>(CAP);
        assert_eq!(tx.capacity(), CAP);
        // Full at exactly `cap` queued messages.
        tx.try_send(0).unwrap();
        tx.try_send(1).unwrap();
        match tx.try_send(2) {
            Err(e @ TrySendError::Full(_)) => {
                assert!(e.is_full());
                assert_eq!(e.into_inner(), 2);
            }
            other => panic!("expected Full, got {other:?}"),
        }
        assert_eq!(rx.try_recv(), Ok(0));
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));

        // An actor sending 100 must wait for the receiver: after the
        // receiver has taken `k`, at most `k + cap` sends have returned.
        let sent = Arc::new(AtomicU64::new(0));
        let s2 = sent.clone();
        let sender = rt.spawn(move || {
            for i in 0..COUNT {
                tx.send(i).unwrap();
                s2.fetch_add(1, Ordering::SeqCst);
            }
        });
        // The sender fills the channel and parks on its next send before
        // the first receive: the blocked-sender path is taken.
        let id = sender.id();
        eventually(30, "the sender parks on the full channel", || {
            rt.dump()
                .actors
                .iter()
                .any(|a| a.id == id && a.state == ActorState::WaitingChannel)
        });
        assert_eq!(
            sent.load(Ordering::SeqCst),
            CAP as u64,
            "parked with the channel not full"
        );
        for k in 1..=COUNT {
            assert_eq!(rx.recv(), Ok(k - 1), "FIFO");
            let s = sent.load(Ordering::SeqCst);
            assert!(s <= k + CAP as u64, "{s} sends returned with {k} received");
        }
        sender.join().unwrap();
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// The calling OS thread's id (Linux: its tid; elsewhere unused).
fn os_thread_id() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u64 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        1
    }
}

/// Whether thread `tid` of this process is asleep in a smarm thread
/// waiter's wait: `futex(word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0,
/// ..)` in `/proc/self/task/TID/syscall`. Nothing else waits that way with
/// an expected 0: the port's lock waits for 2, the C library's locks use
/// plain `FUTEX_WAIT`. So for a thread inside a bounded send, it means the
/// sender is listed on the channel and asleep. Off Linux there is no such
/// view: `true` (the send may then not have reached its wait yet; the
/// test still passes, by the send's own check of the receiver).
fn waits_on_a_smarm_word(tid: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        let Ok(s) = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")) else {
            return false;
        };
        let f: Vec<&str> = s.split_whitespace().collect();
        let op = format!("{:#x}", libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG);
        f.len() > 3 && f[2] == op && f[3] == "0x0"
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tid;
        true
    }
}

#[test]
fn bounded_receiver_drop_wakes_blocked_senders() {
    with_timeout(30, || {
        // One worker, actors only: the sender runs at once (a work-first
        // spawn) and parks on the full channel before the parent resumes
        // and drops the receiver, so the wake-on-drop path is the one taken.
        let rt = Runtime::builder().workers(1).build().unwrap();
        let r = rt.block_on(|| {
            let (tx, rx) = bounded::<String>(1);
            tx.send("queued".to_string()).unwrap();
            next_spawn_work_first();
            let h = smarm::spawn(move || tx.send("blocked".to_string()));
            drop(rx);
            h.join().unwrap()
        });
        assert_eq!(r, Err(SendError("blocked".to_string())));

        // A thread blocked on a full channel, the receiver dropped by an
        // actor. The drop waits until the thread is asleep in the send's
        // wait (Linux: seen in /proc), so the wake-on-drop path is the
        // one taken, not the send's own check of a receiver gone first.
        let (tx, rx) = bounded::<u32>(1);
        tx.send(1).unwrap();
        let tid = Arc::new(AtomicU64::new(0));
        let id = tid.clone();
        let t = std::thread::spawn(move || {
            id.store(os_thread_id(), Ordering::SeqCst);
            tx.send(2)
        });
        eventually(30, "the sender thread starts", || tid.load(Ordering::SeqCst) != 0);
        let tid = tid.load(Ordering::SeqCst);
        eventually(30, "the sender thread waits in its send", || {
            waits_on_a_smarm_word(tid)
        });
        rt.spawn(move || drop(rx)).join().unwrap();
        assert_eq!(t.join().unwrap(), Err(SendError(2)));
    });
}

#[test]
fn full_bounded_send_parks_the_actor_not_the_worker() {
    with_timeout(30, || {
        // One worker: if a full send blocked the worker thread, the receiver
        // actor could never run and this would time out.
        let rt = Runtime::builder().workers(1).build().unwrap();
        let got = rt.block_on(|| {
            let (tx, mut rx) = bounded::<u32>(2);
            let s = smarm::spawn(move || send_all(tx, N));
            let r = smarm::spawn(move || {
                let mut v = Vec::new();
                while let Ok(x) = rx.recv() {
                    v.push(x);
                }
                v
            });
            s.join().unwrap();
            r.join().unwrap()
        });
        assert_eq!(got, (0..N).collect::<Vec<_>>());
    });
}

fn many_senders<S: Tx, R: Rx>((tx, mut rx): (S, R)) {
    const SENDERS: u32 = 8;
    const EACH: u32 = 2000;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let enc = |s: u32, seq: u32| s * EACH + seq;
    // Half actors, half plain threads.
    let actors: Vec<_> = (0..SENDERS / 2)
        .map(|s| {
            let tx = tx.clone();
            rt.spawn(move || {
                for seq in 0..EACH {
                    tx.put(enc(s, seq)).unwrap();
                    if seq % 64 == 0 {
                        smarm::yield_now();
                    }
                }
            })
        })
        .collect();
    let threads: Vec<_> = (SENDERS / 2..SENDERS)
        .map(|s| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for seq in 0..EACH {
                    tx.put(enc(s, seq)).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let next = rt
        .spawn(move || {
            let mut next = vec![0u32; SENDERS as usize];
            while let Ok(v) = rx.get() {
                let (s, seq) = ((v / EACH) as usize, v % EACH);
                assert_eq!(seq, next[s], "sender {s}: out of order or duplicated");
                next[s] += 1;
            }
            next
        })
        .join()
        .unwrap();
    assert_eq!(next, vec![EACH; SENDERS as usize], "nothing lost");
    for a in actors {
        a.join().unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn many_senders_fifo_per_sender_nothing_lost() {
    with_timeout(120, || {
        many_senders(channel::<u32>());
        many_senders(bounded::<u32>(4));
        many_senders(bounded::<u32>(0));
    });
}

/// Echoes every value back until the ping channel disconnects.
fn echo<S: Tx, R: Rx>(mut ping: R, pong: S) {
    while let Ok(v) = ping.get() {
        pong.put(v).unwrap();
    }
}

/// `rounds` round trips; each side waits for every message, so every
/// message is a park and a wake (the receiver-registration races).
fn ping_pong<S: Tx, R: Rx>(ping: S, pong: &mut R, rounds: u32) {
    for i in 0..rounds {
        ping.put(i).unwrap();
        assert_eq!(pong.get(), Ok(i));
    }
}

#[test]
fn ping_pong_actors_and_threads() {
    with_timeout(120, || {
        const ROUNDS: u32 = 20_000;
        for workers in [1, 2] {
            let rt = Runtime::builder().workers(workers).build().unwrap();
            // actor <-> actor, unbounded then bounded(1).
            rt.block_on(|| {
                let (ping, ping_rx) = channel::<u32>();
                let (pong_tx, mut pong) = channel::<u32>();
                let e = smarm::spawn(move || echo(ping_rx, pong_tx));
                ping_pong(ping, &mut pong, ROUNDS);
                e.join().unwrap();
                let (ping, ping_rx) = bounded::<u32>(1);
                let (pong_tx, mut pong) = bounded::<u32>(1);
                let e = smarm::spawn(move || echo(ping_rx, pong_tx));
                ping_pong(ping, &mut pong, ROUNDS);
                e.join().unwrap();
            });
            // thread <-> actor.
            let (ping, ping_rx) = channel::<u32>();
            let (pong_tx, mut pong) = bounded::<u32>(1);
            let e = rt.spawn(move || echo(ping_rx, pong_tx));
            ping_pong(ping, &mut pong, ROUNDS / 4);
            e.join().unwrap();
            // A oneshot reply per request (the request/response pattern).
            let n = rt.block_on(|| {
                let (req, mut req_rx) = channel::<(u32, smarm::OneshotSender<u32>)>();
                let server = smarm::spawn(move || {
                    while let Ok((v, reply)) = req_rx.recv() {
                        reply.send(v + 1).unwrap();
                    }
                });
                let mut n = 0;
                for i in 0..ROUNDS {
                    let (tx, rx) = oneshot::<u32>();
                    req.send((i, tx)).unwrap();
                    assert_eq!(rx.recv(), Ok(i + 1));
                    n += 1;
                }
                drop(req);
                server.join().unwrap();
                n
            });
            assert_eq!(n, ROUNDS);
        }
    });
}

#[test]
fn oneshot_every_direction() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // actor -> actor
        let v = rt.block_on(|| {
            let (tx, rx) = oneshot::<String>();
            let r = smarm::spawn(move || rx.recv());
            smarm::spawn(move || tx.send("a2a".to_string()).unwrap())
                .join()
                .unwrap();
            r.join().unwrap()
        });
        assert_eq!(v.as_deref(), Ok("a2a"));
        // thread -> actor
        let (tx, rx) = oneshot::<u32>();
        let r = rt.spawn(move || rx.recv());
        tx.send(7).unwrap();
        assert_eq!(r.join().unwrap(), Ok(7));
        // actor -> thread
        let (tx, rx) = oneshot::<u32>();
        let s = rt.spawn(move || {
            smarm::yield_now();
            tx.send(8).unwrap();
        });
        assert_eq!(rx.recv(), Ok(8));
        s.join().unwrap();
    });
}

#[test]
fn oneshot_disconnection() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        // Sender dropped unsent, while an actor waits and before a thread does.
        let (tx, rx) = oneshot::<u32>();
        let r = rt.spawn(move || rx.recv());
        drop(tx);
        assert_eq!(r.join().unwrap(), Err(RecvError));
        let (tx, rx) = oneshot::<u32>();
        drop(tx);
        assert_eq!(rx.recv(), Err(RecvError));
        // A thread waiting while an actor drops the sender.
        let (tx, rx) = oneshot::<u32>();
        let d = rt.spawn(move || {
            smarm::yield_now();
            drop(tx);
        });
        assert_eq!(rx.recv(), Err(RecvError));
        d.join().unwrap();
        // Receiver dropped: the value comes back.
        let (tx, rx) = oneshot::<String>();
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.send("back".to_string()), Err("back".to_string()));
        // try_recv: Empty, then the value, then Disconnected.
        let (tx, mut rx) = oneshot::<u32>();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        tx.send(3).unwrap();
        assert_eq!(rx.try_recv(), Ok(3));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        // A value sent and never received is dropped with the receiver.
        let token = Arc::new(());
        let (tx, rx) = oneshot::<Arc<()>>();
        tx.send(token.clone()).unwrap();
        drop(rx);
        assert_eq!(Arc::strong_count(&token), 1);
    });
}

#[test]
fn handle_traits() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    fn clone<T: Clone>() {}
    send_sync::<Sender<String>>();
    send_sync::<BoundedSender<String>>();
    clone::<Sender<String>>();
    clone::<BoundedSender<String>>();
    send::<Receiver<String>>();
    send::<BoundedReceiver<String>>();
    send::<smarm::OneshotSender<String>>();
    send::<smarm::OneshotReceiver<String>>();
}

#[test]
fn errors_display_and_debug_without_t_debug() {
    struct Opaque;
    // Capacity 0 is a rendezvous now: `CapacityError` is never returned.
    assert_eq!(
        try_bounded::<Opaque>(0).map(|(tx, _)| tx.capacity()).ok(),
        Some(0)
    );
    assert!(CapacityError.to_string().contains("never returned"));
    let (tx, rx) = channel::<Opaque>();
    let (btx, brx) = bounded::<Opaque>(1);
    let (otx, orx) = oneshot::<Opaque>();
    assert!(format!("{tx:?}{rx:?}{btx:?}{brx:?}{otx:?}{orx:?}").contains("BoundedSender"));
    drop((rx, brx));
    let e = tx.send(Opaque).unwrap_err();
    assert_eq!(format!("{e:?}"), "SendError(..)");
    assert!(e.to_string().contains("receiver was dropped"));
    let e = btx.try_send(Opaque).unwrap_err();
    assert_eq!(format!("{e:?}"), "Disconnected(..)");
    assert!(e.is_disconnected());
    assert!(RecvError.to_string().contains("senders were all dropped"));
    assert!(TryRecvError::Empty.to_string().contains("empty"));
    let boxed: Box<dyn std::error::Error> = Box::new(TrySendError::Full(Opaque));
    assert!(boxed.to_string().contains("full"));
    drop((otx, orx));
}

/// Blocks in every kind of channel wait from a destructor.
struct WaitOnDrop {
    rx: Receiver<u32>,
    brx: BoundedReceiver<u32>,
    btx: BoundedSender<u32>,
    zrx: BoundedReceiver<u32>,
    ztx: BoundedSender<u32>,
    orx: Option<smarm::OneshotReceiver<u32>>,
    results: Arc<std::sync::Mutex<Vec<bool>>>,
}

impl Drop for WaitOnDrop {
    fn drop(&mut self) {
        let mut r = self.results.lock().unwrap();
        r.push(self.rx.recv().is_err());
        r.push(self.brx.recv().is_err());
        r.push(self.btx.send(2).is_err());
        r.push(self.zrx.recv().is_err());
        r.push(self.ztx.send(3) == Err(SendError(3)));
        r.push(self.orx.take().unwrap().recv().is_err());
    }
}

#[test]
fn a_cancelled_actor_does_not_park_in_channel_waits() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        // Every channel is empty (or full) and stays connected, so each
        // wait in the destructor would park forever; cancellation at
        // shutdown must make them fail instead.
        let (tx, rx) = channel::<u32>();
        let (btx_keep, brx) = bounded::<u32>(1);
        let (btx, brx_full) = bounded::<u32>(1);
        btx.send(1).unwrap();
        // Rendezvous: nobody sends to `zrx`, nobody receives from `ztx`.
        let (ztx_keep, zrx) = bounded::<u32>(0);
        let (ztx, zrx_keep) = bounded::<u32>(0);
        let (otx, orx) = oneshot::<u32>();
        let results = Arc::new(std::sync::Mutex::new(Vec::new()));
        let started = Arc::new(AtomicBool::new(false));
        let (r2, s2) = (results.clone(), started.clone());
        let h = rt.spawn(move || {
            let _guard = WaitOnDrop {
                rx,
                brx,
                btx,
                zrx,
                ztx,
                orx: Some(orx),
                results: r2,
            };
            s2.store(true, Ordering::SeqCst);
            loop {
                smarm::yield_now();
            }
        });
        eventually(30, "the actor runs", || started.load(Ordering::SeqCst));
        rt.shutdown();
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(*results.lock().unwrap(), vec![true; 6]);
        drop((tx, btx_keep, brx_full, ztx_keep, zrx_keep, otx));
    });
}

// ---------------------------------------------------------------------------
// Rendezvous (`bounded(0)`)
// ---------------------------------------------------------------------------

/// Whether actor `id` is parked on a channel (a send or receive waiting).
fn parked_on_channel(rt: &Runtime, id: u64) -> bool {
    rt.dump()
        .actors
        .iter()
        .any(|a| a.id == id && a.state == ActorState::WaitingChannel)
}

#[test]
fn rendezvous_ping_pong_actors_and_threads() {
    with_timeout(120, || {
        const ROUNDS: u32 = 10_000;
        for workers in [1, 2] {
            let rt = Runtime::builder().workers(workers).build().unwrap();
            // actor <-> actor over two rendezvous channels: every message a
            // meeting (one side waits for the other each time).
            rt.block_on(|| {
                let (ping, ping_rx) = bounded::<u32>(0);
                let (pong_tx, mut pong) = bounded::<u32>(0);
                assert_eq!((ping.capacity(), pong.capacity()), (0, 0));
                let e = smarm::spawn(move || echo(ping_rx, pong_tx));
                ping_pong(ping, &mut pong, ROUNDS);
                e.join().unwrap();
                assert_eq!(pong.recv(), Err(RecvError));
            });
            // thread <-> actor.
            let (ping, ping_rx) = bounded::<u32>(0);
            let (pong_tx, mut pong) = bounded::<u32>(0);
            let e = rt.spawn(move || echo(ping_rx, pong_tx));
            ping_pong(ping, &mut pong, ROUNDS / 4);
            e.join().unwrap();
        }
    });
}

#[test]
fn rendezvous_send_completes_only_when_received() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx, mut rx) = bounded::<u32>(0);
        let (log, mut log_rx) = channel::<&'static str>();
        let s = rt.spawn(move || {
            tx.send(1).unwrap();
            log.send("sent").unwrap();
            // Nobody receives now: a timed send comes back with its value.
            tx.send_timeout(2, std::time::Duration::from_millis(5))
        });
        let id = s.id();
        eventually(30, "the sender parks in its send", || parked_on_channel(&rt, id));
        assert_eq!(
            log_rx.try_recv(),
            Err(TryRecvError::Empty),
            "the send completed before any receive"
        );
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(log_rx.recv(), Ok("sent"));
        assert_eq!(s.join().unwrap(), Err(SendTimeoutError::Timeout(2)));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

#[test]
fn rendezvous_killed_waiters_leave_nothing_behind() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let token = Arc::new(());
        let (tx, rx) = bounded::<Arc<()>>(0);
        // A sender killed while it waits for the receiver: its value is
        // dropped with it; the receiver never gets a value from a dead
        // sender.
        let (tx2, t2) = (tx.clone(), token.clone());
        let s = rt.spawn(move || tx2.send(t2));
        let id = s.id();
        eventually(30, "the sender parks in its send", || parked_on_channel(&rt, id));
        assert_eq!(Arc::strong_count(&token), 2, "the value waits with its sender");
        s.actor_ref().kill();
        assert!(s.join().unwrap_err().is_killed());
        assert_eq!(
            Arc::strong_count(&token),
            1,
            "the dead sender's value was dropped, once"
        );
        // A receiver killed while it waits for a sender (its receiver
        // survives the kill: a guard puts it back): its registration goes
        // with it, so a `try_send` finds nobody waiting and nothing is
        // handed to the dead receive.
        let slot = Arc::new(std::sync::Mutex::new(Some(rx)));
        struct PutBack(
            Option<BoundedReceiver<Arc<()>>>,
            Arc<std::sync::Mutex<Option<BoundedReceiver<Arc<()>>>>>,
        );
        impl Drop for PutBack {
            fn drop(&mut self) {
                *self.1.lock().unwrap() = self.0.take();
            }
        }
        let slot2 = slot.clone();
        let r = rt.spawn(move || {
            let mut g = PutBack(slot2.lock().unwrap().take(), slot2.clone());
            g.0.as_mut().unwrap().recv().is_ok()
        });
        let id = r.id();
        eventually(30, "the receiver parks in its receive", || {
            parked_on_channel(&rt, id)
        });
        r.actor_ref().kill();
        assert!(r.join().unwrap_err().is_killed());
        let mut rx = slot.lock().unwrap().take().expect("the receiver was put back");
        match tx.try_send(token.clone()) {
            Err(TrySendError::Full(v)) => drop(v),
            other => panic!("a killed receive still took values: {other:?}"),
        }
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
        // The channel still works both ways.
        let s = rt.spawn(move || tx.send(Arc::new(())).is_ok());
        assert!(rx.recv().is_ok());
        assert!(s.join().unwrap());
        assert!(matches!(rx.recv(), Err(RecvError)));
        assert_eq!(Arc::strong_count(&token), 1);
    });
}

#[derive(Debug, PartialEq)]
enum Ev {
    Zero(Result<u32, RecvError>),
    Other(Result<u32, RecvError>),
}

#[test]
fn rendezvous_receiver_in_a_select() {
    with_timeout(60, || {
        for workers in [1, 2] {
            let rt = Runtime::builder().workers(workers).build().unwrap();
            let (ztx, mut zrx) = bounded::<u32>(0);
            let (tx, mut rx) = channel::<u32>();
            let select = |zrx: &mut BoundedReceiver<u32>, rx: &mut Receiver<u32>| {
                Select::new().recv(zrx, Ev::Zero).recv(rx, Ev::Other).wait()
            };
            // A sender already waiting: the rendezvous arm is ready, and its
            // poll completes that send.
            let z = ztx.clone();
            let s = rt.spawn(move || z.send(1));
            let id = s.id();
            eventually(30, "the sender parks", || parked_on_channel(&rt, id));
            assert_eq!(select(&mut zrx, &mut rx), Ev::Zero(Ok(1)));
            assert_eq!(s.join().unwrap(), Ok(()));
            // The select waits first; a sender arriving wakes it.
            let z = ztx.clone();
            let s = rt.spawn(move || {
                smarm::sleep(std::time::Duration::from_millis(2));
                z.send(2)
            });
            assert_eq!(select(&mut zrx, &mut rx), Ev::Zero(Ok(2)));
            assert_eq!(s.join().unwrap(), Ok(()));
            // The other arm wins while no sender waits: the rendezvous is
            // untouched, and a waiting select is not a receive for
            // `try_send`.
            tx.send(3).unwrap();
            assert_eq!(select(&mut zrx, &mut rx), Ev::Other(Ok(3)));
            assert!(matches!(ztx.try_send(4), Err(TrySendError::Full(4))));
            // Both ready: exactly one taken, the other intact (a waiting
            // sender stays waiting, its value not taken).
            tx.send(5).unwrap();
            let z = ztx.clone();
            let s = rt.spawn(move || z.send(6));
            let id = s.id();
            eventually(30, "the sender parks", || parked_on_channel(&rt, id));
            match select(&mut zrx, &mut rx) {
                Ev::Zero(Ok(6)) => assert_eq!(rx.try_recv(), Ok(5)),
                Ev::Other(Ok(5)) => assert_eq!(zrx.recv(), Ok(6)),
                other => panic!("unexpected {other:?}"),
            }
            assert_eq!(s.join().unwrap(), Ok(()));
            // Every sender gone: the rendezvous arm is ready, closed.
            drop(ztx);
            assert_eq!(select(&mut zrx, &mut rx), Ev::Zero(Err(RecvError)));
            drop(tx);
        }
    });
}

#[test]
fn unbounded_and_channel_make_the_same_unbounded_channel() {
    with_timeout(30, || {
        // `unbounded()` (crossbeam's name) and `channel()` (std's) give
        // the same handles, `UnboundedSender`/`UnboundedReceiver`; the old
        // names are deprecated aliases of them.
        let (tx, mut rx): (smarm::UnboundedSender<u8>, smarm::UnboundedReceiver<u8>) = smarm::unbounded();
        #[allow(deprecated)]
        let (old_tx, _old_rx): (smarm::Sender<u8>, smarm::Receiver<u8>) = smarm::channel();
        let tx2: smarm::UnboundedSender<u8> = old_tx; // the very same type
        drop(tx2);
        for i in 0..100 {
            tx.send(i).unwrap(); // never waits
        }
        drop(tx);
        assert_eq!((0..100).map(|_| u32::from(rx.recv().unwrap())).sum::<u32>(), 4950);
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// A channel's receives register without a reference only for the first
/// actor that waits on it (the channel pins that actor until its own
/// drop). Its receiver moved to a second actor registers counted there,
/// and every send still wakes whoever waits, after the first actor ended.
#[test]
fn a_receiver_moved_to_another_actor_wakes_it() {
    with_timeout(30, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let got = rt.block_on(|| {
            let (tx, mut rx) = channel::<u32>();
            // Work-first: each child runs up to its park in `recv` first.
            next_spawn_work_first();
            let first = smarm::spawn(move || {
                let v = rx.recv().unwrap();
                (v, rx)
            });
            tx.send(1).unwrap();
            let (v, mut rx) = first.join().unwrap();
            next_spawn_work_first();
            let second = smarm::spawn(move || (0..3).map(|_| rx.recv().unwrap()).collect::<Vec<_>>());
            for i in 2..5 {
                tx.send(i).unwrap();
                smarm::yield_now();
            }
            let mut all = vec![v];
            all.extend(second.join().unwrap());
            all
        });
        assert_eq!(got, [1, 2, 3, 4]);
    });
}
