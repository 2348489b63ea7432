//! A simulated network: TCP and UDP with std's names, in memory, on the
//! virtual clock, its delays and faults drawn from the world's seed.
//!
//! [`TcpListener`], [`TcpStream`] and [`UdpSocket`] have the methods of
//! the real ports' sockets (`smarm_linux::net`), so a program written
//! against them runs here unchanged: `bind`, `accept`, `incoming`,
//! `connect`, `connect_timeout`, `Read`/`Write` (also on `&TcpStream`),
//! `peek`, `shutdown`, read and write timeouts, `try_clone`, the
//! addresses; `send_to`/`recv_from`, `connect`ed `send`/`recv`. A call
//! that would block parks the calling actor (a plain thread blocks), and
//! errors have the kinds a real socket's would (`ConnectionRefused`,
//! `ConnectionReset`, `BrokenPipe`, `AddrInUse`, `TimedOut`, ...).
//!
//! What the seed decides, per [`NetConfig`]:
//!
//! - **Delays**: every TCP segment (one `write`) and every datagram
//!   arrives after a one-way latency drawn from `latency`. A stream's
//!   segments keep their order; datagrams do not (each draws its own
//!   delay), so UDP is reordered.
//! - **Partial reads and writes**: with `partial` chance a `read` returns
//!   fewer bytes than are ready, a `write` takes fewer than offered (at
//!   least one). A full send buffer (`buffer` bytes unread per direction)
//!   parks the writer.
//! - **Faults** (off by default): `resets` (a write resets its
//!   connection: both ends get `ConnectionReset`), `loss` (a datagram is
//!   dropped), `partitions` (the whole network goes down for a while:
//!   segments sent meanwhile arrive after it heals, as retransmission would
//!   deliver them; datagrams are dropped; a connect waits for it or times
//!   out). [`partition`] and [`heal`] do the same by hand, [`reset`] resets
//!   one connection.
//!
//! Each world has its own network, empty at its start; a socket belongs to
//! the network it was made in (outside any world: one shared network, real
//! clock, no injected delays or faults). [`stats`] says what happened, so
//! a test can assert that the faults it meant to exercise did occur.
//!
//! Addresses are bound as on one host: any IP may be bound (`0.0.0.0`
//! accepts for every address of its port), port 0 picks an ephemeral port,
//! and a connecting stream's local address has the IP it connected to.
//! Names are resolved with std's `ToSocketAddrs` (use literal addresses: a
//! host name would ask the real resolver).
//!
//! Not modelled: Nagle, window sizes beyond the send buffer, half-open
//! connections after a crash, ICMP (a datagram to an unbound port is
//! dropped), a SYN backlog limit, unread data turning a close into a
//! reset (a close discards unread data and the peer's later writes get
//! `BrokenPipe`).

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::world;

mod tcp;
mod udp;

pub use std::net::{Shutdown, ToSocketAddrs};
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;

/// What the seed may do to traffic, per world ([`configure`]). Build it
/// from [`NetConfig::default`] (small delays, partial reads and writes, no
/// faults) or [`NetConfig::ideal`] with the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetConfig {
    latency: (Duration, Duration),
    partial: u32,
    buffer: usize,
    resets: u32,
    loss: u32,
    partitions: u32,
    partition_for: Duration,
}

impl Default for NetConfig {
    /// One-way latency 10 µs to 1 ms, a quarter of reads and writes
    /// partial, 64 KiB buffered per direction, no faults.
    fn default() -> Self {
        NetConfig {
            latency: (Duration::from_micros(10), Duration::from_millis(1)),
            partial: 250,
            buffer: 64 * 1024,
            resets: 0,
            loss: 0,
            partitions: 0,
            partition_for: Duration::from_millis(50),
        }
    }
}

impl NetConfig {
    /// No latency, no partial reads or writes, no faults.
    pub fn ideal() -> Self {
        NetConfig {
            latency: (Duration::ZERO, Duration::ZERO),
            partial: 0,
            ..NetConfig::default()
        }
    }

    /// One-way latency drawn uniformly from `min..=max`.
    pub fn with_latency(mut self, min: Duration, max: Duration) -> Self {
        self.latency = (min, max);
        self
    }

    /// The chance, in thousandths, that a read or write moves fewer bytes
    /// than it could.
    pub fn with_partial(mut self, per_mille: u32) -> Self {
        self.partial = per_mille;
        self
    }

    /// Bytes a direction of a stream holds (in flight and unread) before
    /// writes park. At least 1.
    pub fn with_buffer(mut self, bytes: usize) -> Self {
        self.buffer = bytes;
        self
    }

    /// The chance, in thousandths, that a TCP write resets its connection.
    pub fn with_resets(mut self, per_mille: u32) -> Self {
        self.resets = per_mille;
        self
    }

    /// The chance, in thousandths, that a datagram is lost.
    pub fn with_loss(mut self, per_mille: u32) -> Self {
        self.loss = per_mille;
        self
    }

    /// The chance, in thousandths, that a transmission (a segment, a
    /// datagram, a connect) partitions the network for `duration`.
    pub fn with_partitions(mut self, per_mille: u32, duration: Duration) -> Self {
        self.partitions = per_mille;
        self.partition_for = duration;
        self
    }

    fn check(&self) -> io::Result<()> {
        let bad = |what: &str| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("smarm-sim net: {what}"),
            ))
        };
        if self.latency.0 > self.latency.1 {
            return bad("latency: min is above max");
        }
        if self.latency.1 > Duration::from_secs(3600) || self.partition_for > Duration::from_secs(3600) {
            return bad("latency and partitions are bounded by an hour");
        }
        if self.buffer == 0 {
            return bad("a buffer of 0 bytes could never take a write");
        }
        for (name, v) in [
            ("partial", self.partial),
            ("resets", self.resets),
            ("loss", self.loss),
            ("partitions", self.partitions),
        ] {
            if v > 1000 {
                return bad(&format!("{name} is a chance in thousandths: {v} is above 1000"));
            }
        }
        Ok(())
    }
}

/// What a world's network did ([`stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct NetStats {
    /// Connections established (accepted or waiting in a backlog).
    pub connections: u64,
    /// TCP segments sent (one per write that moved bytes).
    pub segments: u64,
    /// Bytes moved over TCP (written).
    pub tcp_bytes: u64,
    /// Reads that returned fewer bytes than were ready and fit.
    pub short_reads: u64,
    /// Writes that took fewer bytes than offered and fit.
    pub short_writes: u64,
    /// Connections reset (by the seed or by [`reset`]).
    pub resets: u64,
    /// Datagrams delivered into a socket's queue.
    pub datagrams: u64,
    /// Datagrams dropped (loss, a partition, no socket bound, a full queue).
    pub dropped: u64,
    /// Partitions started (by the seed or by [`partition`]).
    pub partitions: u64,
    /// Datagrams taken out of order (one sent after another, received
    /// before it, on the same socket pair).
    pub reordered: u64,
}

/// Sets what the seed may do to the caller's network from now on (the
/// world's, or the shared one outside worlds). A bad config (min latency
/// above max, a chance above 1000, a zero buffer) is `InvalidInput`.
pub fn configure(config: NetConfig) -> io::Result<()> {
    config.check()?;
    let mut l = Locked::current();
    l.net().cfg = config;
    Ok(())
}

/// The caller's network's configuration.
pub fn config() -> NetConfig {
    Locked::current().net().cfg.clone()
}

/// What the caller's network has done so far.
pub fn stats() -> NetStats {
    Locked::current().net().stats
}

/// Partitions the caller's network for `duration` from now (extends a
/// partition already in place).
pub fn partition(duration: Duration) {
    let mut l = Locked::current();
    let now = now_ns();
    let net = l.net();
    net.partition_from(now, duration);
}

/// Ends a partition now: segments held by it are delivered (after their
/// latency), connects waiting for it proceed.
pub fn heal() {
    let mut l = Locked::current();
    let now = now_ns();
    let net = l.net();
    net.partition_until = net.partition_until.min(now);
    let fin_latency = net.cfg.latency.0.as_nanos() as u64;
    for c in net.conns.values_mut() {
        for p in c.pipes.iter_mut() {
            // Held segments come after their latency from now, still in
            // order behind the ones sent before the partition.
            let mut prev = 0;
            for s in p.segs.iter_mut() {
                s.due = s.due.min(now + s.latency).max(prev);
                prev = s.due;
            }
            p.fin = p.fin.map(|f| f.min(now + fin_latency));
            p.last_due = p.segs.back().map_or(now, |s| s.due);
        }
        c.established = c.established.min(now + c.latency);
    }
    let bells = net.all_bells();
    net.ring.extend(bells);
}

/// Resets `stream`'s connection, as a peer's RST would: both ends' later
/// calls (and the ones parked now) fail with `ConnectionReset`.
pub fn reset(stream: &TcpStream) {
    stream.reset();
}

fn now_ns() -> u64 {
    crate::now_ns()
}

/// A waiter's bell: sent (outside the network's lock) to wake it.
type Bell = crate::OneshotSender<()>;

/// One world's network.
pub(crate) struct Net {
    cfg: NetConfig,
    stats: NetStats,
    /// Next ephemeral port.
    next_port: u16,
    /// The network is down until this time (virtual ns).
    partition_until: u64,
    next_id: u64,
    listeners: BTreeMap<u64, tcp::Listener>,
    conns: BTreeMap<u64, tcp::Conn>,
    udps: BTreeMap<u64, udp::Udp>,
    /// Bound addresses: listeners and UDP sockets (by kind).
    bound: BTreeMap<(Kind, SocketAddr), u64>,
    /// Bells to ring once the lock is released.
    ring: Vec<Bell>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Tcp,
    Udp,
}

impl Net {
    fn new() -> Net {
        Net {
            cfg: NetConfig::default(),
            stats: NetStats::default(),
            next_port: 49152,
            partition_until: 0,
            next_id: 1,
            listeners: BTreeMap::new(),
            conns: BTreeMap::new(),
            udps: BTreeMap::new(),
            bound: BTreeMap::new(),
            ring: Vec::new(),
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Whether a thousandths chance comes up (never off the world's
    /// participants).
    fn chance(&self, per_mille: u32) -> bool {
        per_mille > 0 && world::draw(1000).is_some_and(|v| v < u64::from(per_mille))
    }

    /// A one-way latency in ns.
    fn latency(&self) -> u64 {
        let (lo, hi) = (
            self.cfg.latency.0.as_nanos() as u64,
            self.cfg.latency.1.as_nanos() as u64,
        );
        lo + world::draw(hi - lo + 1).unwrap_or(0)
    }

    /// `n` (>= 1), or with the `partial` chance fewer (at least 1).
    fn portion(&self, n: usize) -> usize {
        if n > 1 && self.chance(self.cfg.partial) {
            1 + world::draw(n as u64 - 1).unwrap_or(0) as usize
        } else {
            n
        }
    }

    /// Draws whether this transmission starts a partition; then when a
    /// transmission sent now may leave (after any partition).
    fn departure(&mut self, now: u64) -> u64 {
        if self.chance(self.cfg.partitions) {
            let d = self.cfg.partition_for;
            self.partition_from(now, d);
        }
        now.max(self.partition_until)
    }

    fn partitioned(&self, now: u64) -> bool {
        now < self.partition_until
    }

    fn partition_from(&mut self, now: u64, d: Duration) {
        let until = now.saturating_add(d.as_nanos() as u64);
        if until > self.partition_until {
            self.partition_until = until;
            self.stats.partitions += 1;
        }
    }

    /// Binds `addr` for `kind` (port 0: an ephemeral port); returns the
    /// address bound.
    fn bind(&mut self, kind: Kind, addr: SocketAddr, id: u64) -> io::Result<SocketAddr> {
        let mut addr = addr;
        if addr.port() == 0 {
            addr.set_port(self.ephemeral(kind, addr.ip())?);
        }
        let clash = self.bound.contains_key(&(kind, addr))
            || (addr.ip().is_unspecified()
                && self
                    .bound
                    .keys()
                    .any(|&(k, a)| k == kind && a.port() == addr.port() && a.is_ipv4() == addr.is_ipv4()))
            || self.bound.contains_key(&(kind, unspecified(addr)));
        if clash {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("smarm-sim net: {addr} is already bound"),
            ));
        }
        self.bound.insert((kind, addr), id);
        Ok(addr)
    }

    /// Binds the first of `addrs` that is free (the last error if none).
    fn bind_first(&mut self, kind: Kind, addrs: &[SocketAddr], id: u64) -> io::Result<SocketAddr> {
        let mut last = None;
        for &a in addrs {
            match self.bind(kind, a, id) {
                Ok(bound) => return Ok(bound),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| err(io::ErrorKind::InvalidInput, "no address to bind")))
    }

    /// A port no socket of `kind` has bound on `ip`.
    fn ephemeral(&mut self, kind: Kind, ip: IpAddr) -> io::Result<u16> {
        for _ in 0..16384 {
            let p = self.next_port;
            self.next_port = if p == u16::MAX { 49152 } else { p + 1 };
            let a = SocketAddr::new(ip, p);
            if !self.bound.contains_key(&(kind, a)) && !self.bound.contains_key(&(kind, unspecified(a))) {
                return Ok(p);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            "smarm-sim net: no ephemeral port is free",
        ))
    }

    /// The socket of `kind` that receives for `addr`: bound exactly, or on
    /// the unspecified address of its port.
    fn lookup(&self, kind: Kind, addr: SocketAddr) -> Option<u64> {
        self.bound
            .get(&(kind, addr))
            .or_else(|| self.bound.get(&(kind, unspecified(addr))))
            .copied()
    }

    /// Every waiter's bell (a partition healed: every wait recomputes).
    fn all_bells(&mut self) -> Vec<Bell> {
        let mut out = Vec::new();
        for l in self.listeners.values_mut() {
            out.append(&mut l.waiters);
        }
        for c in self.conns.values_mut() {
            c.take_bells(&mut out);
        }
        for u in self.udps.values_mut() {
            out.append(&mut u.waiters);
        }
        out
    }
}

/// `addr`'s port on the unspecified address of its family.
fn unspecified(addr: SocketAddr) -> SocketAddr {
    let ip = if addr.is_ipv4() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    };
    SocketAddr::new(ip, addr.port())
}

/// The address a socket bound to `addr` sends from when it talks to
/// `peer`: its own IP, or (bound to the unspecified address) the IP it
/// talks to, loopback for an unspecified peer.
fn source(addr: SocketAddr, peer: SocketAddr) -> SocketAddr {
    if !addr.ip().is_unspecified() {
        return addr;
    }
    let ip = if !peer.ip().is_unspecified() {
        peer.ip()
    } else if addr.is_ipv4() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    };
    SocketAddr::new(ip, addr.port())
}

/// Every network by world generation (0: outside worlds).
static NETS: Mutex<BTreeMap<u64, Net>> = Mutex::new(BTreeMap::new());

/// The networks' lock, with the bells to ring and the dead networks to
/// drop once it is released (a bell's `send` and a channel's drop can be
/// scheduling points of the simulation, which must never come with this
/// lock held: the thread the baton moves to could wait on it forever).
struct Locked {
    g: Option<MutexGuard<'static, BTreeMap<u64, Net>>>,
    gen: u64,
    junk: Vec<Net>,
}

impl Locked {
    /// The lock, for the network of the caller's world (made if new; a
    /// new world's network retires those of earlier worlds).
    fn current() -> Locked {
        let gen = world::generation();
        let mut g = NETS.lock().unwrap_or_else(|e| e.into_inner());
        let mut junk = Vec::new();
        if !g.contains_key(&gen) {
            let old: Vec<u64> = g.keys().copied().filter(|&k| k != 0 && k < gen).collect();
            for k in old {
                junk.extend(g.remove(&k));
            }
            g.insert(gen, Net::new());
        }
        Locked {
            g: Some(g),
            gen,
            junk,
        }
    }

    /// The lock, for the network of generation `gen` (a socket's): gone
    /// if its world has ended and another began.
    fn of(gen: u64) -> io::Result<Locked> {
        let g = NETS.lock().unwrap_or_else(|e| e.into_inner());
        if !g.contains_key(&gen) {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "smarm-sim net: this socket's world has ended (its network is gone)",
            ));
        }
        Ok(Locked {
            g: Some(g),
            gen,
            junk: Vec::new(),
        })
    }

    fn net(&mut self) -> &mut Net {
        self.g
            .as_mut()
            .and_then(|g| g.get_mut(&self.gen))
            .expect("smarm-sim net: the network is present while locked")
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        let bells = match self.g.as_mut().and_then(|g| g.get_mut(&self.gen)) {
            Some(n) => std::mem::take(&mut n.ring),
            None => Vec::new(),
        };
        self.g = None;
        for b in bells {
            // A waiter that timed out or was killed dropped its receiver:
            // nothing to wake.
            let _ = b.send(());
        }
        self.junk.clear();
    }
}

/// What a wait registers: the fresh bell (put on the list of the thing
/// waited for) and the time it must look again at the latest.
pub(crate) struct Wait {
    bell: Option<Bell>,
    at: Option<u64>,
}

impl Wait {
    /// Waits on `list` (rung when what it guards changes).
    fn on(&mut self, list: &mut Vec<Bell>) {
        // Bells of waits that ended by time (or a kill) stay on their list
        // until it is rung: drop them here so a list of a thing nobody
        // changes stays short. A closed bell's drop wakes nobody (no
        // scheduling point under the lock).
        if list.len() >= 4 {
            list.retain(|b| !b.is_closed());
        }
        if let Some(b) = self.bell.take() {
            list.push(b);
        }
    }

    /// Looks again at `t` at the latest (something becomes due then).
    fn until(&mut self, t: u64) {
        self.at = Some(self.at.map_or(t, |a| a.min(t)));
    }
}

/// `Ready` with the call's result, or `Pending` after registering on the
/// [`Wait`].
pub(crate) enum Step<T> {
    Ready(io::Result<T>),
    Pending,
}

/// Runs `f` under the lock of network `gen` until it is ready, parking
/// the caller between tries (until a bell rings, the wait's time comes,
/// or `deadline`: then `TimedOut`). `f` gets the network and the time.
pub(crate) fn block<T>(
    gen: u64,
    deadline: Option<u64>,
    mut f: impl FnMut(&mut Net, u64, &mut Wait) -> Step<T>,
) -> io::Result<T> {
    loop {
        let (tx, mut rx) = crate::oneshot::<()>();
        let mut w = Wait {
            bell: Some(tx),
            at: None,
        };
        let now = now_ns();
        {
            let mut l = Locked::of(gen)?;
            match f(l.net(), now, &mut w) {
                Step::Ready(r) => {
                    drop(l);
                    return r;
                }
                Step::Pending => {}
            }
        }
        if deadline.is_some_and(|d| now >= d) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "smarm-sim net: timed out",
            ));
        }
        let at = match (w.at, deadline) {
            (Some(a), Some(d)) => Some(a.min(d)),
            (a, d) => a.or(d),
        };
        // A bell not put on any list stays alive here, so the wait lasts
        // until `at` (the step asked for a time, not a list).
        let _kept = w.bell.take();
        let _ = match at {
            Some(t) => rx.recv_deadline_ns(t).map_err(|_| ()),
            None => rx.recv().map_err(|_| ()),
        };
    }
}

/// A deadline `t` from now, as `block` takes it.
fn deadline(t: Option<Duration>) -> Option<u64> {
    t.map(|d| now_ns().saturating_add(d.as_nanos().min(u128::from(u64::MAX)) as u64))
}

/// Resolves `addr` with std (literal addresses resolve without the OS).
fn resolve<A: ToSocketAddrs>(addr: A) -> io::Result<Vec<SocketAddr>> {
    let v: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    if v.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any addresses",
        ));
    }
    Ok(v)
}

/// A read or write timeout as std checks it (zero is `InvalidInput`).
fn check_timeout(t: Option<Duration>) -> io::Result<Option<Duration>> {
    if t == Some(Duration::ZERO) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot set a 0 duration timeout",
        ));
    }
    Ok(t)
}

/// The same shape of error a real socket gives.
fn err(kind: io::ErrorKind, what: &str) -> io::Error {
    io::Error::new(kind, format!("smarm-sim net: {what}"))
}
