//! Channels (unbounded, bounded, oneshot) against a model, driven by an
//! operation sequence on the host port (`smarm-linux`) from plain threads:
//! sends, try/timed/blocking receives, sender clones and drops, receiver
//! drop, a full bounded channel. The main thread runs every step; the two
//! blocking operations (a send on a full bounded channel, a receive on an
//! empty channel) run on a scoped helper thread while the main thread does
//! what unblocks it, so their outcome is still deterministic. Checked at
//! every step: each message is received exactly once and in order, every
//! error is reported exactly when the model says, `is_closed`, and (through
//! a live-message count) no message is leaked or dropped twice.
#![no_main]

use std::collections::VecDeque;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use smarm_fuzz::{live, reset_live, Tracked};
use smarm_linux::{
    bounded, channel, oneshot, BoundedReceiver, BoundedSender, RecvError, RecvTimeoutError, TryRecvError,
    TrySendError, UnboundedReceiver as Receiver, UnboundedSender as Sender,
};

/// Gives a just-spawned helper thread time to reach its blocking call, so
/// the blocked path (register, sleep, be woken) is what usually runs. Not
/// synchronisation: the outcome is the same whichever side goes first.
fn settle() {
    std::thread::sleep(Duration::from_micros(300));
}

#[derive(Arbitrary, Debug)]
enum Kind {
    Unbounded,
    /// Capacity `n % 8 + 1`.
    Bounded(u8),
    Oneshot,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    /// `send` on sender `i` (on a full bounded channel: `try_send`, which must say Full).
    Send(u8),
    /// `try_send` on sender `i`.
    TrySend(u8),
    TryRecv,
    /// `recv_timeout(0)`.
    RecvTimeout0,
    /// Blocking `recv`, only when it cannot block (a message is queued or no sender is left).
    Recv,
    /// A helper thread blocks in `recv` on the empty channel; sender `i` then sends.
    RecvWhileSend(u8),
    /// A helper thread blocks in `send` on a full bounded channel; then
    /// the main thread receives one (or, with `drop_rx`, drops the receiver).
    SendWhileFull {
        sender: u8,
        drop_rx: bool,
    },
    Clone(u8),
    DropSender(u8),
    DropReceiver,
    IsClosed(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    kind: Kind,
    ops: Vec<Op>,
}

enum Tx {
    U(Sender<Tracked>),
    B(BoundedSender<Tracked>),
}

enum Rx {
    U(Receiver<Tracked>),
    B(BoundedReceiver<Tracked>),
}

impl Tx {
    fn send(&self, v: Tracked) -> Result<(), Tracked> {
        match self {
            Tx::U(s) => s.send(v).map_err(|e| e.0),
            Tx::B(s) => s.send(v).map_err(|e| e.0),
        }
    }
    fn try_send(&self, v: Tracked) -> Result<(), TrySendError<Tracked>> {
        match self {
            Tx::U(s) => s.send(v).map_err(|e| TrySendError::Disconnected(e.0)),
            Tx::B(s) => s.try_send(v),
        }
    }
    fn is_closed(&self) -> bool {
        match self {
            Tx::U(s) => s.is_closed(),
            Tx::B(s) => s.is_closed(),
        }
    }
    fn clone(&self) -> Tx {
        match self {
            Tx::U(s) => Tx::U(s.clone()),
            Tx::B(s) => Tx::B(s.clone()),
        }
    }
}

impl Rx {
    fn try_recv(&mut self) -> Result<Tracked, TryRecvError> {
        match self {
            Rx::U(r) => r.try_recv(),
            Rx::B(r) => r.try_recv(),
        }
    }
    fn recv_timeout(&mut self, t: Duration) -> Result<Tracked, RecvTimeoutError> {
        match self {
            Rx::U(r) => r.recv_timeout(t),
            Rx::B(r) => r.recv_timeout(t),
        }
    }
    fn recv(&mut self) -> Option<Tracked> {
        match self {
            Rx::U(r) => r.recv().ok(),
            Rx::B(r) => r.recv().ok(),
        }
    }
}

/// The model of an MPSC channel.
struct Model {
    queue: VecDeque<u64>,
    cap: Option<usize>,
    rx: bool,
    next: u64,
}

impl Model {
    fn full(&self) -> bool {
        self.cap.is_some_and(|c| self.queue.len() >= c)
    }
    fn fresh(&mut self) -> Tracked {
        self.next += 1;
        Tracked::new(self.next)
    }
    /// What a receive must return: the front message, or whether it is
    /// "empty" (senders remain) rather than "disconnected".
    fn expect_recv(&mut self, senders: usize) -> Result<u64, bool> {
        match self.queue.pop_front() {
            Some(id) => Ok(id),
            None => Err(senders > 0),
        }
    }
}

fn mpsc(cap: Option<usize>, ops: &[Op]) {
    let (tx, rx) = match cap {
        None => {
            let (t, r) = channel::<Tracked>();
            (Tx::U(t), Rx::U(r))
        }
        Some(c) => {
            let (t, r) = bounded::<Tracked>(c);
            (Tx::B(t), Rx::B(r))
        }
    };
    let mut txs = vec![tx];
    let mut rx = Some(rx);
    let mut m = Model {
        queue: VecDeque::new(),
        cap,
        rx: true,
        next: 0,
    };
    for &op in ops {
        let pick = |i: u8, n: usize| usize::from(i) % n;
        match op {
            Op::Send(i) | Op::TrySend(i) if !txs.is_empty() => {
                let s = &txs[pick(i, txs.len())];
                let v = m.fresh();
                let id = v.0;
                let use_try = matches!(op, Op::TrySend(_)) || (m.rx && m.full());
                if use_try {
                    match s.try_send(v) {
                        Ok(()) => {
                            assert!(
                                m.rx && !m.full(),
                                "try_send succeeded on a full or closed channel"
                            );
                            m.queue.push_back(id);
                        }
                        Err(TrySendError::Full(v)) => {
                            assert!(m.rx && m.full(), "try_send said Full wrongly");
                            assert_eq!(v.0, id);
                        }
                        Err(TrySendError::Disconnected(v)) => {
                            assert!(!m.rx, "try_send said Disconnected with the receiver alive");
                            assert_eq!(v.0, id);
                        }
                    }
                } else {
                    match s.send(v) {
                        Ok(()) => {
                            assert!(m.rx, "send succeeded after the receiver was dropped");
                            m.queue.push_back(id);
                        }
                        Err(v) => {
                            assert!(!m.rx, "send failed with the receiver alive");
                            assert_eq!(v.0, id);
                        }
                    }
                }
            }
            Op::TryRecv if m.rx => {
                let got = rx.as_mut().unwrap().try_recv();
                match m.expect_recv(txs.len()) {
                    Ok(id) => assert_eq!(got.map(|v| v.0), Ok(id), "try_recv"),
                    Err(true) => assert_eq!(got, Err(TryRecvError::Empty), "try_recv"),
                    Err(false) => assert_eq!(got, Err(TryRecvError::Disconnected), "try_recv"),
                }
            }
            Op::RecvTimeout0 if m.rx => {
                let got = rx.as_mut().unwrap().recv_timeout(Duration::ZERO);
                match m.expect_recv(txs.len()) {
                    Ok(id) => assert_eq!(got.map(|v| v.0), Ok(id), "recv_timeout(0)"),
                    Err(true) => assert_eq!(got, Err(RecvTimeoutError::Timeout), "recv_timeout(0)"),
                    Err(false) => {
                        assert_eq!(got, Err(RecvTimeoutError::Disconnected), "recv_timeout(0)")
                    }
                }
            }
            Op::Recv if m.rx && (!m.queue.is_empty() || txs.is_empty()) => {
                let got = rx.as_mut().unwrap().recv().map(|v| v.0);
                assert_eq!(got, m.queue.pop_front(), "recv");
            }
            Op::RecvWhileSend(i) if m.rx && m.queue.is_empty() && !txs.is_empty() => {
                let r = rx.as_mut().unwrap();
                let s = &txs[pick(i, txs.len())];
                let v = m.fresh();
                let id = v.0;
                let got = std::thread::scope(|sc| {
                    // No timeout: a lost wake-up hangs, and libFuzzer's
                    // -timeout reports the input (a timed receive would
                    // hide it behind its deadline's last re-check).
                    let h = sc.spawn(move || r.recv());
                    settle();
                    s.send(v).map_err(|_| ()).expect("send to a live receiver");
                    h.join().expect("receiver thread panicked")
                });
                assert_eq!(
                    got.map(|v| v.0),
                    Some(id),
                    "a receive blocked on an empty channel"
                );
            }
            Op::SendWhileFull { sender, drop_rx } if m.rx && m.full() && !txs.is_empty() => {
                let s = txs[pick(sender, txs.len())].clone();
                let v = m.fresh();
                let id = v.0;
                let mut r = rx.take().unwrap();
                let (res, r) = std::thread::scope(|sc| {
                    let h = sc.spawn(move || s.send(v));
                    settle();
                    if drop_rx {
                        drop(r);
                        (h.join().expect("sender thread panicked"), None)
                    } else {
                        let front = r.try_recv().map(|v| v.0);
                        assert_eq!(
                            front,
                            Ok(m.queue.pop_front().unwrap()),
                            "try_recv on a full channel"
                        );
                        (h.join().expect("sender thread panicked"), Some(r))
                    }
                });
                rx = r;
                if drop_rx {
                    m.rx = false;
                    m.queue.clear();
                    let v = res.expect_err("a blocked send must fail when the receiver goes");
                    assert_eq!(v.0, id);
                } else {
                    res.map_err(|_| ())
                        .expect("a blocked send must succeed once a slot frees");
                    m.queue.push_back(id);
                }
            }
            Op::Clone(i) if !txs.is_empty() => {
                let c = txs[pick(i, txs.len())].clone();
                txs.push(c);
            }
            Op::DropSender(i) if !txs.is_empty() => {
                let n = txs.len();
                drop(txs.swap_remove(pick(i, n)));
            }
            Op::DropReceiver if m.rx => {
                drop(rx.take());
                m.rx = false;
                m.queue.clear();
            }
            Op::IsClosed(i) if !txs.is_empty() => {
                assert_eq!(txs[pick(i, txs.len())].is_closed(), !m.rx, "is_closed");
            }
            _ => {}
        }
        assert_eq!(live(), m.queue.len(), "messages alive != messages queued");
    }
    drop(txs);
    drop(rx);
    assert_eq!(live(), 0, "a message leaked or was dropped twice");
}

fn one(ops: &[Op]) {
    let (tx, rx) = oneshot::<Tracked>();
    let mut tx = Some(tx);
    let mut rx = Some(rx);
    // The value sent and not yet taken; whether the sender was dropped
    // unsent (or its value already taken: either way nothing more comes).
    let mut value: Option<u64> = None;
    let mut done = false;
    let mut next = 0;
    for &op in ops {
        match op {
            Op::Send(_) | Op::TrySend(_) if tx.is_some() => {
                next += 1;
                let got = tx.take().unwrap().send(Tracked::new(next));
                if rx.is_some() {
                    assert!(got.is_ok(), "oneshot send failed with the receiver alive");
                    value = Some(next);
                } else {
                    assert_eq!(
                        got.map_err(|v| v.0),
                        Err(next),
                        "oneshot send to a dropped receiver"
                    );
                }
                done = true;
            }
            Op::DropSender(_) if tx.is_some() => {
                drop(tx.take());
                done = true;
            }
            Op::IsClosed(_) if tx.is_some() => {
                assert_eq!(
                    tx.as_ref().unwrap().is_closed(),
                    rx.is_none(),
                    "oneshot is_closed"
                );
            }
            Op::TryRecv if rx.is_some() => {
                let got = rx.as_mut().unwrap().try_recv().map(|v| v.0);
                let want = match value.take() {
                    Some(id) => Ok(id),
                    None if done => Err(TryRecvError::Disconnected),
                    None => Err(TryRecvError::Empty),
                };
                assert_eq!(got, want, "oneshot try_recv");
            }
            Op::RecvTimeout0 if rx.is_some() => {
                let got = rx.as_mut().unwrap().recv_timeout(Duration::ZERO).map(|v| v.0);
                let want = match value.take() {
                    Some(id) => Ok(id),
                    None if done => Err(RecvTimeoutError::Disconnected),
                    None => Err(RecvTimeoutError::Timeout),
                };
                assert_eq!(got, want, "oneshot recv_timeout(0)");
            }
            Op::Recv if rx.is_some() && done => {
                let got = rx.take().unwrap().recv().map(|v| v.0);
                assert_eq!(got.ok(), value.take(), "oneshot recv");
            }
            Op::RecvWhileSend(i) if rx.is_some() && !done => {
                // `recv` consumes the receiver: it is gone afterwards.
                let r = rx.take().unwrap();
                let t = tx.take().unwrap();
                next += 1;
                let v = Tracked::new(next);
                let send = i % 2 == 0;
                let got = std::thread::scope(|sc| {
                    // The message comes back to this thread: `Tracked` counts
                    // per thread. No timeout: a lost wake-up hangs (see above).
                    let h = sc.spawn(move || r.recv());
                    settle();
                    if send {
                        t.send(v)
                            .map_err(|_| ())
                            .expect("oneshot send to a live receiver");
                    } else {
                        drop(t);
                        drop(v);
                    }
                    h.join().expect("receiver thread panicked").map(|v| v.0)
                });
                let want = if send { Ok(next) } else { Err(RecvError) };
                assert_eq!(got, want, "a oneshot receive blocked on an empty channel");
                done = true;
            }
            Op::DropReceiver if rx.is_some() => {
                drop(rx.take());
                value = None;
            }
            _ => {}
        }
        assert_eq!(live(), usize::from(value.is_some()), "oneshot: messages alive");
    }
    drop(tx);
    drop(rx);
    assert_eq!(live(), 0, "oneshot: a message leaked or was dropped twice");
}

fuzz_target!(|input: Input| {
    reset_live();
    match input.kind {
        Kind::Unbounded => mpsc(None, &input.ops),
        Kind::Bounded(n) => mpsc(Some(usize::from(n % 8) + 1), &input.ops),
        Kind::Oneshot => one(&input.ops),
    }
});
