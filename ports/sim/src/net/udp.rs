//! Simulated UDP: each datagram draws its own latency (so datagrams are
//! reordered), may be lost, and is dropped while the network is
//! partitioned.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::{block, check_timeout, deadline, err, resolve, source, Bell, Kind, Locked, Step};

/// The largest UDP payload over IPv4.
const MAX_DATAGRAM: usize = 65_507;
/// Bytes a socket's receive queue holds before arriving datagrams are
/// dropped (as a full `SO_RCVBUF` drops them).
const QUEUE_BYTES: usize = 256 * 1024;

struct Dgram {
    due: u64,
    /// Send order across the network (ties of `due` keep it; reordering is
    /// counted against it).
    seq: u64,
    from: SocketAddr,
    data: Vec<u8>,
}

/// A UDP socket's state.
pub(crate) struct Udp {
    addr: SocketAddr,
    queue: Vec<Dgram>,
    bytes: usize,
    peer: Option<SocketAddr>,
    pub(super) waiters: Vec<Bell>,
    handles: usize,
    timeouts: (Option<Duration>, Option<Duration>),
    broadcast: bool,
    /// Per sender, the highest `seq` taken so far (for `reordered`).
    seen: std::collections::BTreeMap<SocketAddr, u64>,
}

/// A UDP socket, as `std::net::UdpSocket`, on the simulated network.
pub struct UdpSocket {
    gen: u64,
    id: u64,
    addr: SocketAddr,
}

impl UdpSocket {
    /// Binds `addr` (port 0: an ephemeral port); `AddrInUse` if a UDP
    /// socket has it.
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        let addrs = resolve(addr)?;
        let mut l = Locked::current();
        let gen = l.gen;
        let net = l.net();
        let id = net.id();
        let addr = net.bind_first(Kind::Udp, &addrs, id)?;
        net.udps.insert(
            id,
            Udp {
                addr,
                queue: Vec::new(),
                bytes: 0,
                peer: None,
                waiters: Vec::new(),
                handles: 1,
                timeouts: (None, None),
                broadcast: false,
                seen: Default::default(),
            },
        );
        Ok(UdpSocket { gen, id, addr })
    }

    /// Sends `buf` to `addr` as one datagram; returns its length. As on a
    /// real network, a datagram lost, dropped by a partition, or sent to
    /// an unbound port still counts as sent. Over 65,507 bytes is
    /// `InvalidInput`.
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let to = resolve(addr)?[0];
        self.send_inner(buf, to)
    }

    /// Sends to the connected peer (`NotConnected` without one).
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let peer = self.peer_addr()?;
        self.send_inner(buf, peer)
    }

    /// Waits for a datagram; copies what fits of it into `buf` (the rest
    /// is discarded, as UDP does) and returns its length and sender.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_inner(buf, false)
    }

    /// [`recv_from`](Self::recv_from) without taking the datagram.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_inner(buf, true)
    }

    /// Receives from the connected peer (`NotConnected` without one).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.peer_addr()?;
        self.recv_inner(buf, false).map(|(n, _)| n)
    }

    /// [`recv`](Self::recv) without taking the datagram.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.peer_addr()?;
        self.recv_inner(buf, true).map(|(n, _)| n)
    }

    /// Sets the peer `send` and `recv` use; datagrams from others are
    /// discarded from now on.
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        let to = resolve(addr)?[0];
        self.with(|u| u.peer = Some(to))
    }

    /// The address bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }

    /// The connected peer (`NotConnected` without one).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.with(|u| u.peer)?
            .ok_or_else(|| err(io::ErrorKind::NotConnected, "not connected"))
    }

    /// Stored only.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.with(|u| u.broadcast = on)
    }

    /// What [`set_broadcast`](Self::set_broadcast) stored.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.with(|u| u.broadcast)
    }

    /// Bounds later receives: one that waits longer returns `TimedOut` (on
    /// the virtual clock). A zero duration is `InvalidInput`.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        let t = check_timeout(t)?;
        self.with(|u| u.timeouts.0 = t)
    }

    /// Stored (a send never waits here).
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        let t = check_timeout(t)?;
        self.with(|u| u.timeouts.1 = t)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        self.with(|u| u.timeouts.0)
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        self.with(|u| u.timeouts.1)
    }

    /// Another handle to the same socket.
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        self.with(|u| u.handles += 1)?;
        Ok(UdpSocket {
            gen: self.gen,
            id: self.id,
            addr: self.addr,
        })
    }

    /// Pending socket errors: none are kept.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        Ok(None)
    }

    fn with<R>(&self, f: impl FnOnce(&mut Udp) -> R) -> io::Result<R> {
        let mut l = Locked::of(self.gen)?;
        let u = l
            .net()
            .udps
            .get_mut(&self.id)
            .ok_or_else(|| err(io::ErrorKind::NotConnected, "socket is closed"))?;
        Ok(f(u))
    }

    fn send_inner(&self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        if buf.len() > MAX_DATAGRAM {
            return Err(err(
                io::ErrorKind::InvalidInput,
                &format!("a datagram of {} bytes is over UDP's {MAX_DATAGRAM}", buf.len()),
            ));
        }
        let mut l = Locked::of(self.gen)?;
        let now = super::now_ns();
        let net = l.net();
        let from = source(self.addr, to);
        let leave = net.departure(now);
        let lost = net.partitioned(now) || net.chance(net.cfg.loss);
        let latency = net.latency();
        let target = net.lookup(Kind::Udp, to);
        let seq = net.id();
        let Some(u) = target
            .and_then(|t| net.udps.get_mut(&t))
            .filter(|u| u.bytes + buf.len() <= QUEUE_BYTES)
        else {
            net.stats.dropped += 1;
            return Ok(buf.len());
        };
        if lost {
            net.stats.dropped += 1;
            return Ok(buf.len());
        }
        u.queue.push(Dgram {
            due: leave + latency,
            seq,
            from,
            data: buf.to_vec(),
        });
        u.bytes += buf.len();
        let bells = std::mem::take(&mut u.waiters);
        net.ring.extend(bells);
        net.stats.datagrams += 1;
        Ok(buf.len())
    }

    fn recv_inner(&self, buf: &mut [u8], peek: bool) -> io::Result<(usize, SocketAddr)> {
        let id = self.id;
        let dl = deadline(self.read_timeout()?);
        block(self.gen, dl, |net, now, w| {
            let Some(u) = net.udps.get_mut(&id) else {
                return Step::Ready(Err(err(io::ErrorKind::NotConnected, "socket is closed")));
            };
            if let Some(peer) = u.peer {
                let before = u.queue.len();
                u.queue.retain(|d| d.from == peer);
                if u.queue.len() != before {
                    u.bytes = u.queue.iter().map(|d| d.data.len()).sum();
                }
            }
            let best = u
                .queue
                .iter()
                .enumerate()
                .filter(|(_, d)| d.due <= now)
                .min_by_key(|(_, d)| (d.due, d.seq))
                .map(|(i, _)| i);
            let Some(i) = best else {
                if let Some(t) = u.queue.iter().map(|d| d.due).min() {
                    w.until(t);
                }
                w.on(&mut u.waiters);
                return Step::Pending;
            };
            let d = &u.queue[i];
            let n = d.data.len().min(buf.len());
            buf[..n].copy_from_slice(&d.data[..n]);
            let from = d.from;
            if !peek {
                let d = u.queue.swap_remove(i);
                u.bytes -= d.data.len();
                let hi = u.seen.entry(from).or_insert(0);
                if d.seq < *hi {
                    net.stats.reordered += 1;
                } else {
                    *hi = d.seq;
                }
            }
            Step::Ready(Ok((n, from)))
        })
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let Ok(mut l) = Locked::of(self.gen) else { return };
        let net = l.net();
        let Some(u) = net.udps.get_mut(&self.id) else {
            return;
        };
        u.handles -= 1;
        if u.handles == 0 {
            let u = net.udps.remove(&self.id).expect("present above");
            net.bound.remove(&(Kind::Udp, u.addr));
            net.ring.extend(u.waiters);
        }
    }
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket").field("addr", &self.addr).finish()
    }
}
