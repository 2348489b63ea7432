//! The actor mailbox against a model, driven from plain threads on the
//! host port (a detached mailbox: no actor, so the receiver takes its
//! thread-waiter path): sends from cloned and dropped addresses, try/timed/
//! blocking receives, selective receive (`try_recv_matching`,
//! `recv_matching`: the save queue), a timer's poke, and close (dropping
//! the mailbox) against dropping the addresses. The one blocking step
//! (a receive on an empty mailbox) runs on a scoped helper thread while the
//! main thread sends. Checked at every step: each message received exactly
//! once in order (selective receive: the first match, the others keeping
//! their order), `saved`, `is_closed`, sends failing exactly after close
//! with the message handed back, receives saying *closed* exactly when the
//! mailbox is drained and no address is left (and not after `addr`
//! reconnects it), and no message leaked or dropped twice.
#![no_main]

use std::collections::VecDeque;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use smarm_core::mailbox::detached;
use smarm_fuzz::{live, reset_live, Tracked};
use smarm_linux::{Addr, Linux, Mailbox, RecvError, RecvTimeoutError, TryRecvError};

/// Gives a just-spawned helper thread time to reach its blocking call, so
/// the blocked path (register, sleep, be woken) is what usually runs. Not
/// synchronisation: the outcome is the same whichever side goes first.
fn settle() {
    std::thread::sleep(Duration::from_micros(300));
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    /// Send `n % 4 + 1` messages from address `i`.
    Send(u8, u8),
    TryRecv,
    RecvTimeout0,
    /// Blocking `recv`, only when a message is there.
    Recv,
    /// `try_recv_matching(|m| m % (k % 4 + 2) == r % (k % 4 + 2))`.
    TryRecvMatching {
        k: u8,
        r: u8,
    },
    /// `recv_matching` with the same predicate, only when a message matches.
    RecvMatching {
        k: u8,
        r: u8,
    },
    /// A helper thread blocks in `recv` on the empty mailbox;
    /// address `i` then sends.
    RecvWhileSend(u8),
    /// What a receive timer does when it fires (nobody waits: a no-op).
    Poke(u8),
    Clone(u8),
    DropAddr(u8),
    /// Drop the mailbox (its actor's exit).
    Close,
    /// `Mailbox::addr`: a new address (reconnecting a mailbox every
    /// address had left).
    NewAddr,
    /// Blocking `recv`, only when it cannot block: no message and no
    /// address left (closed).
    RecvClosed,
    IsClosed(u8),
}

/// The model: every undelivered message in delivery order; the first
/// `saved` of them sit in the mailbox's save queue.
struct Model {
    msgs: VecDeque<u64>,
    saved: usize,
    open: bool,
    next: u64,
}

impl Model {
    fn pop(&mut self) -> Option<u64> {
        let m = self.msgs.pop_front()?;
        self.saved = self.saved.saturating_sub(1);
        Some(m)
    }
    /// Selective receive: the first match; what was skipped is saved.
    fn take_matching(&mut self, pred: impl Fn(u64) -> bool) -> Option<u64> {
        match self.msgs.iter().position(|&m| pred(m)) {
            Some(i) => {
                if i < self.saved {
                    self.saved -= 1;
                } else {
                    self.saved = i;
                }
                self.msgs.remove(i)
            }
            None => {
                self.saved = self.msgs.len();
                None
            }
        }
    }
}

/// What a non-blocking receive must say when nothing is there.
fn empty(addrs: usize) -> TryRecvError {
    if addrs == 0 {
        TryRecvError::Disconnected
    } else {
        TryRecvError::Empty
    }
}

fn pred(k: u8, r: u8) -> impl Fn(u64) -> bool {
    let k = u64::from(k % 4) + 2;
    let r = u64::from(r) % k;
    move |m| m % k == r
}

fuzz_target!(|ops: Vec<Op>| {
    reset_live();
    let (mb, addr) = detached::<Tracked, Linux>();
    let mut mb: Option<Mailbox<Tracked>> = Some(mb);
    let mut addrs: Vec<Addr<Tracked>> = vec![addr];
    let mut m = Model {
        msgs: VecDeque::new(),
        saved: 0,
        open: true,
        next: 0,
    };
    for &op in &ops {
        let pick = |i: u8, n: usize| usize::from(i) % n;
        match op {
            Op::Send(i, n) if !addrs.is_empty() => {
                let a = &addrs[pick(i, addrs.len())];
                for _ in 0..=(n % 4) {
                    m.next += 1;
                    let id = m.next;
                    match a.send(Tracked::new(id)) {
                        Ok(()) => {
                            assert!(m.open, "send succeeded to a closed mailbox");
                            m.msgs.push_back(id);
                        }
                        Err(e) => {
                            assert!(!m.open, "send failed to an open mailbox");
                            assert_eq!(e.0 .0, id, "send handed back another message");
                        }
                    }
                }
            }
            Op::TryRecv if m.open => {
                let got = mb.as_mut().unwrap().try_recv().map(|v| v.0);
                assert_eq!(got, m.pop().ok_or(empty(addrs.len())), "try_recv");
            }
            Op::RecvTimeout0 if m.open => {
                let got = mb.as_mut().unwrap().recv_timeout(Duration::ZERO).map(|v| v.0);
                let want = m.pop().ok_or(match empty(addrs.len()) {
                    TryRecvError::Empty => RecvTimeoutError::Timeout,
                    TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                });
                assert_eq!(got, want, "recv_timeout(0)");
            }
            Op::Recv if m.open && !m.msgs.is_empty() => {
                let got = mb.as_mut().unwrap().recv().expect("a message is there").0;
                assert_eq!(Some(got), m.pop(), "recv");
            }
            Op::TryRecvMatching { k, r } if m.open => {
                let p = pred(k, r);
                let got = mb.as_mut().unwrap().try_recv_matching(|v| p(v.0)).map(|v| v.0);
                assert_eq!(
                    got,
                    m.take_matching(p).ok_or(empty(addrs.len())),
                    "try_recv_matching"
                );
            }
            Op::RecvMatching { k, r } if m.open && m.msgs.iter().any(|&v| pred(k, r)(v)) => {
                let p = pred(k, r);
                let got = mb.as_mut().unwrap().recv_matching(|v| p(v.0)).expect("a match is there").0;
                assert_eq!(Some(got), m.take_matching(p), "recv_matching");
            }
            Op::RecvWhileSend(i) if m.open && m.msgs.is_empty() && !addrs.is_empty() => {
                let r = mb.as_mut().unwrap();
                let a = &addrs[pick(i, addrs.len())];
                m.next += 1;
                let id = m.next;
                let v = Tracked::new(id);
                let got = std::thread::scope(|sc| {
                    // The message comes back to this thread: `Tracked` counts
                    // per thread. No timeout: a lost wake-up hangs and
                    // libFuzzer's -timeout reports the input (a timed receive
                    // would hide it behind its deadline's last re-check).
                    let h = sc.spawn(move || r.recv());
                    settle();
                    a.send(v).map_err(|_| ()).expect("send to an open mailbox");
                    h.join().expect("receiver thread panicked")
                });
                assert_eq!(got.map(|v| v.0), Ok(id), "a receive blocked on an empty mailbox");
            }
            Op::Poke(i) if !addrs.is_empty() => addrs[pick(i, addrs.len())].__poke(),
            Op::Clone(i) if !addrs.is_empty() => {
                let c = addrs[pick(i, addrs.len())].clone();
                addrs.push(c);
            }
            Op::DropAddr(i) if !addrs.is_empty() => {
                let n = addrs.len();
                drop(addrs.swap_remove(pick(i, n)));
            }
            Op::Close if m.open => {
                drop(mb.take());
                m.open = false;
                m.msgs.clear();
                m.saved = 0;
            }
            Op::NewAddr if m.open => addrs.push(mb.as_ref().unwrap().addr()),
            Op::RecvClosed if m.open && m.msgs.is_empty() && addrs.is_empty() => {
                let got = mb.as_mut().unwrap().recv().map(|v| v.0);
                assert_eq!(got, Err(RecvError), "recv on a closed, drained mailbox");
            }
            Op::IsClosed(i) if !addrs.is_empty() => {
                assert_eq!(addrs[pick(i, addrs.len())].is_closed(), !m.open, "is_closed");
            }
            _ => {}
        }
        if let Some(mb) = &mb {
            assert_eq!(mb.saved(), m.saved, "saved");
        }
        assert_eq!(live(), m.msgs.len(), "messages alive != messages undelivered");
    }
    drop(mb);
    drop(addrs);
    assert_eq!(live(), 0, "a message leaked or was dropped twice");
});
