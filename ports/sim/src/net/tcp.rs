//! Simulated TCP: listeners, connections as two ordered pipes of
//! segments, and the streams on either end.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::{block, check_timeout, deadline, err, resolve, source, Bell, Kind, Locked, Net, Step};

/// A listening socket's state.
pub(crate) struct Listener {
    addr: SocketAddr,
    /// Connections made to it, not yet accepted (ids, in connect order).
    backlog: Vec<u64>,
    pub(super) waiters: Vec<Bell>,
    handles: usize,
}

/// One write's bytes, on their way.
pub(crate) struct Seg {
    /// When they arrive (virtual ns).
    pub(super) due: u64,
    /// The latency drawn for them (a healed partition delivers them this
    /// long after it heals).
    pub(super) latency: u64,
    data: Vec<u8>,
    /// Bytes of `data` already read.
    off: usize,
}

/// One direction of a connection.
#[derive(Default)]
pub(crate) struct Pipe {
    pub(super) segs: VecDeque<Seg>,
    /// Bytes sent and not yet read (in flight or arrived): the send
    /// buffer's fill.
    bytes: usize,
    /// Arrival of the last segment (segments arrive in order).
    pub(super) last_due: u64,
    /// The writer shut down: end of stream arrives at this time.
    pub(super) fin: Option<u64>,
    /// The reader is gone (shut down for reading, or every handle of its
    /// end dropped): arriving bytes are discarded, writes fail.
    reader_gone: bool,
    readers: Vec<Bell>,
    writers: Vec<Bell>,
}

/// A connection: end 0 connected, end 1 was accepted. End `e` writes into
/// `pipes[e]` and reads from `pipes[1 - e]`.
pub(crate) struct Conn {
    pub(super) pipes: [Pipe; 2],
    addr: [SocketAddr; 2],
    /// Handles (streams, clones) per end; the connecting end's is 1 while
    /// it connects.
    handles: [usize; 2],
    /// When the handshake completes (virtual ns).
    pub(super) established: u64,
    /// The latency the handshake drew.
    pub(super) latency: u64,
    accepted: bool,
    reset: bool,
    /// Parked connectors (the listener's close refuses them).
    connectors: Vec<Bell>,
    timeouts: [(Option<Duration>, Option<Duration>); 2],
    nodelay: [bool; 2],
}

impl Conn {
    pub(super) fn take_bells(&mut self, out: &mut Vec<Bell>) {
        for p in self.pipes.iter_mut() {
            out.append(&mut p.readers);
            out.append(&mut p.writers);
        }
        out.append(&mut self.connectors);
    }
}

impl Net {
    /// Resets connection `id`: both ends' calls fail from now on.
    fn reset_conn(&mut self, id: u64) {
        let mut bells = Vec::new();
        if let Some(c) = self.conns.get_mut(&id) {
            if !c.reset {
                c.reset = true;
                self.stats.resets += 1;
            }
            for p in c.pipes.iter_mut() {
                p.segs.clear();
                p.bytes = 0;
            }
            c.take_bells(&mut bells);
        }
        self.ring.extend(bells);
        self.gc(id);
    }

    /// Forgets connection `id` once no handle and no backlog holds it.
    fn gc(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        if c.handles == [0, 0] && (c.accepted || c.reset) {
            let mut bells = Vec::new();
            c.take_bells(&mut bells);
            self.ring.extend(bells);
            self.conns.remove(&id);
        }
    }

    /// End `end` of connection `id` shuts down `how`.
    fn shutdown_end(&mut self, id: u64, end: usize, how: Shutdown) {
        let now = super::now_ns();
        let leave = now.max(self.partition_until) + self.latency();
        let Some(c) = self.conns.get_mut(&id) else { return };
        let mut bells = Vec::new();
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            let p = &mut c.pipes[end];
            if p.fin.is_none() {
                p.fin = Some(p.last_due.max(leave));
            }
            bells.append(&mut p.readers);
        }
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            let p = &mut c.pipes[1 - end];
            p.reader_gone = true;
            p.segs.clear();
            p.bytes = 0;
            bells.append(&mut p.readers);
            bells.append(&mut p.writers);
        }
        self.ring.extend(bells);
    }
}

/// A TCP socket listening for connections, as `std::net::TcpListener`,
/// on the simulated network.
pub struct TcpListener {
    gen: u64,
    id: u64,
    addr: SocketAddr,
}

impl TcpListener {
    /// Binds `addr` (port 0: an ephemeral port) on the caller's network;
    /// `AddrInUse` if a listener has it.
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        let addrs = resolve(addr)?;
        let mut l = Locked::current();
        let gen = l.gen;
        let net = l.net();
        let id = net.id();
        let addr = net.bind_first(Kind::Tcp, &addrs, id)?;
        net.listeners.insert(
            id,
            Listener {
                addr,
                backlog: Vec::new(),
                waiters: Vec::new(),
                handles: 1,
            },
        );
        Ok(TcpListener { gen, id, addr })
    }

    /// Waits for a connection and returns its stream and the peer's
    /// address. Parks the calling actor (a plain thread blocks).
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (gen, lid) = (self.gen, self.id);
        block(gen, None, |net, now, w| {
            let Some(l) = net.listeners.get_mut(&lid) else {
                return Step::Ready(Err(err(io::ErrorKind::InvalidInput, "listener is closed")));
            };
            // Connections whose connector gave up are dropped from the
            // backlog; of the rest, the earliest established is taken.
            let conns = &net.conns;
            l.backlog.retain(|id| conns.get(id).is_some_and(|c| !c.reset));
            let best = l
                .backlog
                .iter()
                .enumerate()
                .min_by_key(|(_, id)| (conns[id].established, **id))
                .map(|(i, id)| (i, *id, conns[id].established));
            match best {
                Some((i, id, at)) if at <= now => {
                    l.backlog.remove(i);
                    let c = net.conns.get_mut(&id).expect("backlog holds live connections");
                    c.accepted = true;
                    c.handles[1] = 1;
                    let peer = c.addr[0];
                    Step::Ready(Ok((TcpStream { gen, id, end: 1 }, peer)))
                }
                Some((_, _, at)) => {
                    w.until(at);
                    w.on(&mut l.waiters);
                    Step::Pending
                }
                None => {
                    w.on(&mut l.waiters);
                    Step::Pending
                }
            }
        })
    }

    /// An iterator of [`accept`](Self::accept)s' streams (never `None`).
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }

    /// Another handle to the same listener.
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        let mut l = Locked::of(self.gen)?;
        let li = l
            .net()
            .listeners
            .get_mut(&self.id)
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, "listener is closed"))?;
        li.handles += 1;
        Ok(TcpListener {
            gen: self.gen,
            id: self.id,
            addr: self.addr,
        })
    }

    /// Pending socket errors: none are kept.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        Ok(None)
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let Ok(mut l) = Locked::of(self.gen) else { return };
        let net = l.net();
        let Some(li) = net.listeners.get_mut(&self.id) else {
            return;
        };
        li.handles -= 1;
        if li.handles > 0 {
            return;
        }
        let li = net.listeners.remove(&self.id).expect("present above");
        net.bound.remove(&(Kind::Tcp, li.addr));
        net.ring.extend(li.waiters);
        // Connections never accepted are refused or reset.
        for id in li.backlog {
            net.reset_conn(id);
        }
    }
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener").field("addr", &self.addr).finish()
    }
}

/// [`TcpListener::incoming`]'s iterator.
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

/// A TCP connection's end, as `std::net::TcpStream`, on the simulated
/// network.
pub struct TcpStream {
    gen: u64,
    id: u64,
    end: usize,
}

impl TcpStream {
    /// Connects to the first address that accepts; `ConnectionRefused`
    /// when nothing listens there.
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        let mut last = None;
        for a in resolve(addr)? {
            match Self::connect_inner(a, None) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| err(io::ErrorKind::InvalidInput, "no address to connect to")))
    }

    /// Connects to `addr`, giving up with `TimedOut` after `timeout` (a
    /// partition can hold a connect up). A zero timeout is `InvalidInput`.
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        check_timeout(Some(timeout))?;
        Self::connect_inner(*addr, deadline(Some(timeout)))
    }

    fn connect_inner(to: SocketAddr, dl: Option<u64>) -> io::Result<TcpStream> {
        let (gen, id) = {
            let mut l = Locked::current();
            let gen = l.gen;
            let now = super::now_ns();
            let net = l.net();
            let Some(lid) = net.lookup(Kind::Tcp, to) else {
                return Err(err(
                    io::ErrorKind::ConnectionRefused,
                    &format!("nothing listens on {to}"),
                ));
            };
            let Some(listener) = net.listeners.get(&lid) else {
                return Err(err(
                    io::ErrorKind::ConnectionRefused,
                    &format!("nothing listens on {to}"),
                ));
            };
            let server = source(listener.addr, to);
            let ip = server.ip();
            let port = net.ephemeral(Kind::Tcp, ip)?;
            let client = std::net::SocketAddr::new(ip, port);
            let leave = net.departure(now);
            let latency = net.latency();
            let id = net.id();
            net.conns.insert(
                id,
                Conn {
                    pipes: [Pipe::default(), Pipe::default()],
                    addr: [client, server],
                    handles: [1, 0],
                    established: leave + latency,
                    latency,
                    accepted: false,
                    reset: false,
                    connectors: Vec::new(),
                    timeouts: [(None, None); 2],
                    nodelay: [false; 2],
                },
            );
            net.stats.connections += 1;
            let li = net.listeners.get_mut(&lid).expect("looked up above");
            li.backlog.push(id);
            let bells = std::mem::take(&mut li.waiters);
            net.ring.extend(bells);
            (gen, id)
        };
        let r = block(gen, dl, |net, now, w| {
            let Some(c) = net.conns.get_mut(&id) else {
                return Step::Ready(Err(err(io::ErrorKind::ConnectionRefused, "connection refused")));
            };
            if c.reset {
                return Step::Ready(Err(err(io::ErrorKind::ConnectionRefused, "connection refused")));
            }
            if c.established <= now {
                return Step::Ready(Ok(()));
            }
            w.until(c.established);
            w.on(&mut c.connectors);
            Step::Pending
        });
        let s = TcpStream { gen, id, end: 0 };
        match r {
            Ok(()) => Ok(s),
            Err(e) => {
                // The stream's drop releases the end; a connect given up
                // leaves no connection in the backlog.
                if let Ok(mut l) = Locked::of(gen) {
                    let net = l.net();
                    if let Some(c) = net.conns.get_mut(&id) {
                        if !c.accepted {
                            c.reset = true;
                        }
                    }
                }
                drop(s);
                Err(e)
            }
        }
    }

    /// Reads into `buf` without taking the bytes (a later read returns
    /// them again).
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buf, true)
    }

    /// Shuts down reading, writing or both: the peer reads end of stream
    /// after the bytes sent before; reads here return 0.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let mut l = Locked::of(self.gen)?;
        let net = l.net();
        match net.conns.get(&self.id) {
            Some(c) if c.reset => return Err(err(io::ErrorKind::ConnectionReset, "connection reset")),
            Some(_) => {}
            None => return Err(err(io::ErrorKind::NotConnected, "not connected")),
        }
        net.shutdown_end(self.id, self.end, how);
        Ok(())
    }

    /// Stored only (the simulation has no Nagle).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.with_conn(|c, e| c.nodelay[e] = nodelay)
    }

    /// What [`set_nodelay`](Self::set_nodelay) stored.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.with_conn(|c, e| c.nodelay[e])
    }

    /// This end's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.with_conn(|c, e| c.addr[e])
    }

    /// The other end's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.with_conn(|c, e| c.addr[1 - e])
    }

    /// Another handle to this end (shares its timeouts).
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        self.with_conn(|c, e| c.handles[e] += 1)?;
        Ok(TcpStream {
            gen: self.gen,
            id: self.id,
            end: self.end,
        })
    }

    /// Bounds later reads: a read that waits longer returns `TimedOut`
    /// (on the virtual clock). A zero duration is `InvalidInput`.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        let t = check_timeout(t)?;
        self.with_conn(|c, e| c.timeouts[e].0 = t)
    }

    /// Bounds later writes (as `set_read_timeout`).
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        let t = check_timeout(t)?;
        self.with_conn(|c, e| c.timeouts[e].1 = t)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        self.with_conn(|c, e| c.timeouts[e].0)
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        self.with_conn(|c, e| c.timeouts[e].1)
    }

    /// Pending socket errors: none are kept (a reset is reported by the
    /// calls themselves).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        Ok(None)
    }

    fn with_conn<R>(&self, f: impl FnOnce(&mut Conn, usize) -> R) -> io::Result<R> {
        let mut l = Locked::of(self.gen)?;
        let c = l
            .net()
            .conns
            .get_mut(&self.id)
            .ok_or_else(|| err(io::ErrorKind::NotConnected, "not connected"))?;
        Ok(f(c, self.end))
    }

    pub(super) fn reset(&self) {
        if let Ok(mut l) = Locked::of(self.gen) {
            l.net().reset_conn(self.id);
        }
    }

    fn read_inner(&self, buf: &mut [u8], peek: bool) -> io::Result<usize> {
        let (id, end) = (self.id, self.end);
        let dl = deadline(self.read_timeout()?);
        block(self.gen, dl, |net, now, w| {
            let partial = |net: &Net, n| net.portion(n);
            let c = match live(net, id) {
                Ok(c) => c,
                Err(e) => return Step::Ready(Err(e)),
            };
            let p = &c.pipes[1 - end];
            if p.reader_gone || buf.is_empty() {
                return Step::Ready(Ok(0));
            }
            let ready: usize = p
                .segs
                .iter()
                .take_while(|s| s.due <= now)
                .map(|s| s.data.len() - s.off)
                .sum();
            if ready > 0 {
                let fit = ready.min(buf.len());
                let n = partial(net, fit);
                if n < fit {
                    net.stats.short_reads += 1;
                }
                let c = net.conns.get_mut(&id).expect("looked up above");
                let p = &mut c.pipes[1 - end];
                let mut done = 0;
                for s in p.segs.iter_mut() {
                    if done == n {
                        break;
                    }
                    let k = (s.data.len() - s.off).min(n - done);
                    buf[done..done + k].copy_from_slice(&s.data[s.off..s.off + k]);
                    done += k;
                    if !peek {
                        s.off += k;
                    }
                }
                if !peek {
                    while p.segs.front().is_some_and(|s| s.off == s.data.len()) {
                        p.segs.pop_front();
                    }
                    p.bytes -= n;
                    let bells = std::mem::take(&mut p.writers);
                    net.ring.extend(bells);
                }
                return Step::Ready(Ok(n));
            }
            if p.segs.is_empty() && p.fin.is_some_and(|f| f <= now) {
                return Step::Ready(Ok(0));
            }
            let next = p.segs.front().map(|s| s.due).or(p.fin);
            let c = net.conns.get_mut(&id).expect("looked up above");
            if let Some(t) = next {
                w.until(t);
            }
            w.on(&mut c.pipes[1 - end].readers);
            Step::Pending
        })
    }

    fn write_inner(&self, buf: &[u8]) -> io::Result<usize> {
        let (id, end) = (self.id, self.end);
        let dl = deadline(self.write_timeout()?);
        block(self.gen, dl, |net, now, w| {
            let c = match live(net, id) {
                Ok(c) => c,
                Err(e) => return Step::Ready(Err(e)),
            };
            let p = &c.pipes[end];
            if p.fin.is_some() {
                return Step::Ready(Err(err(
                    io::ErrorKind::BrokenPipe,
                    "this end is shut down for writing",
                )));
            }
            if p.reader_gone {
                return Step::Ready(Err(err(io::ErrorKind::BrokenPipe, "the peer has closed its end")));
            }
            if buf.is_empty() {
                return Step::Ready(Ok(0));
            }
            let space = net.cfg.buffer.saturating_sub(p.bytes);
            if space == 0 {
                let c = net.conns.get_mut(&id).expect("looked up above");
                w.on(&mut c.pipes[end].writers);
                return Step::Pending;
            }
            if net.chance(net.cfg.resets) {
                net.reset_conn(id);
                return Step::Ready(Err(err(
                    io::ErrorKind::ConnectionReset,
                    "connection reset by peer",
                )));
            }
            let fit = space.min(buf.len());
            let n = net.portion(fit);
            if n < fit {
                net.stats.short_writes += 1;
            }
            let leave = net.departure(now);
            let latency = net.latency();
            net.stats.segments += 1;
            net.stats.tcp_bytes += n as u64;
            let c = net.conns.get_mut(&id).expect("looked up above");
            let p = &mut c.pipes[end];
            let due = p.last_due.max(leave + latency);
            p.last_due = due;
            p.bytes += n;
            p.segs.push_back(Seg {
                due,
                latency,
                data: buf[..n].to_vec(),
                off: 0,
            });
            let bells = std::mem::take(&mut p.readers);
            net.ring.extend(bells);
            Step::Ready(Ok(n))
        })
    }
}

/// Connection `id`, if it is there and not reset (else the error a call
/// on it returns).
fn live(net: &Net, id: u64) -> io::Result<&Conn> {
    match net.conns.get(&id) {
        None => Err(err(io::ErrorKind::NotConnected, "not connected")),
        Some(c) if c.reset => Err(err(io::ErrorKind::ConnectionReset, "connection reset by peer")),
        Some(c) => Ok(c),
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        let Ok(mut l) = Locked::of(self.gen) else { return };
        let net = l.net();
        let Some(c) = net.conns.get_mut(&self.id) else {
            return;
        };
        c.handles[self.end] -= 1;
        if c.handles[self.end] == 0 {
            net.shutdown_end(self.id, self.end, Shutdown::Both);
            net.gc(self.id);
        }
    }
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("TcpStream");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        if let Ok(p) = self.peer_addr() {
            d.field("peer", &p);
        }
        d.finish()
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buf, false)
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_inner(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
