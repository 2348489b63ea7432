//! UDP: [`UdpSocket`].

use std::io;
use std::net::{self, SocketAddr};

use super::ToSocketAddrs;

use smarm_core::io::Interest;
use smarm_core::Platform;

use crate::io::{Async, Timeout};

/// A UDP socket (std's [`UdpSocket`](net::UdpSocket), whose sends and
/// receives park the calling actor).
pub struct UdpSocket<P: Platform> {
    io: Async<P, net::UdpSocket>,
    read_timeout: Timeout,
    write_timeout: Timeout,
}

impl<P: Platform> UdpSocket<P> {
    fn wrap(io: Async<P, net::UdpSocket>) -> Self {
        UdpSocket {
            io,
            read_timeout: Timeout::default(),
            write_timeout: Timeout::default(),
        }
    }

    /// Binds to `addr` (the first of its addresses that binds).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<Self> {
        let addrs = super::resolve::<P, _>(addr)?;
        Ok(Self::wrap(Async::new(net::UdpSocket::bind(&addrs[..])?)?))
    }

    /// Receives one datagram into `buf`, and its sender.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io
            .io_with(Interest::READABLE, self.read_timeout.get(), |s| s.recv_from(buf))
    }

    /// As [`recv_from`](Self::recv_from), leaving the datagram queued.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io
            .io_with(Interest::READABLE, self.read_timeout.get(), |s| s.peek_from(buf))
    }

    /// Sends `buf` to `addr` (its first address).
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let addrs = super::resolve::<P, _>(addr)?;
        let a = addrs[0];
        self.io
            .io_with(Interest::WRITABLE, self.write_timeout.get(), |s| {
                s.send_to(buf, a)
            })
    }

    /// Sets the peer for [`send`](Self::send) and [`recv`](Self::recv)
    /// (and filters what is received to it).
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        let addrs = super::resolve::<P, _>(addr)?;
        self.io.get_ref().connect(&addrs[..])
    }

    /// Sends `buf` to the connected peer.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .io_with(Interest::WRITABLE, self.write_timeout.get(), |s| s.send(buf))
    }

    /// Receives one datagram from the connected peer.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .io_with(Interest::READABLE, self.read_timeout.get(), |s| s.recv(buf))
    }

    /// As [`recv`](Self::recv), leaving the datagram queued.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .io_with(Interest::READABLE, self.read_timeout.get(), |s| s.peek(buf))
    }

    timeout_methods!();

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_broadcast(on)
    }

    /// `SO_BROADCAST`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.io.get_ref().broadcast()
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Another handle to the same socket.
    pub fn try_clone(&self) -> io::Result<Self> {
        let s = Self::wrap(Async::new(self.io.get_ref().try_clone()?)?);
        s.read_timeout.set(self.read_timeout.get())?;
        s.write_timeout.set(self.write_timeout.get())?;
        Ok(s)
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

impl<P: Platform> From<net::UdpSocket> for UdpSocket<P> {
    /// Takes over std's socket (made non-blocking).
    fn from(s: net::UdpSocket) -> Self {
        Self::wrap(Async::new_or_blocking(s))
    }
}

socket_traits!(UdpSocket => net::UdpSocket);
