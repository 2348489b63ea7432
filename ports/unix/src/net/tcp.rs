//! TCP: [`TcpListener`] and [`TcpStream`].

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{self, Shutdown, SocketAddr};

use super::ToSocketAddrs;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::time::Duration;

use smarm_core::io::Interest;
use smarm_core::Platform;

use super::addr;
use crate::io::{Async, Timeout};

/// A TCP socket server, listening for connections (std's
/// [`TcpListener`](net::TcpListener), with an `accept` that parks the
/// calling actor).
pub struct TcpListener<P: Platform> {
    io: Async<P, net::TcpListener>,
}

impl<P: Platform> TcpListener<P> {
    /// Binds to `addr` (the first of its addresses that binds) and listens,
    /// with a backlog of 1,024 connections (std's `bind` asks for 128,
    /// which a burst of connects overflows: each SYN the kernel drops costs
    /// its client a 1 s retransmission).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<Self> {
        let addrs = super::resolve::<P, _>(addr)?;
        super::each_addr(&addrs, |a| {
            let fd = addr::tcp_listener(a)?;
            // SAFETY: a fresh listening socket we own, handed to std.
            let l = unsafe { net::TcpListener::from_raw_fd(fd.into_raw_fd()) };
            Ok(TcpListener {
                io: Async::new_nonblocking(l),
            })
        })
    }

    /// Accepts a connection: parks the calling actor until one arrives. An
    /// error (`EMFILE`: out of descriptors, `ECONNABORTED`) is returned and
    /// the listener stays usable.
    pub fn accept(&self) -> io::Result<(TcpStream<P>, SocketAddr)> {
        let (s, a) = self.io.read_with(|l| l.accept())?;
        Ok((TcpStream::from_std_checked(s)?, a))
    }

    /// An endless iterator of [`accept`](Self::accept)'s streams.
    pub fn incoming(&self) -> Incoming<'_, P> {
        Incoming { listener: self }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Another handle to the same socket.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(TcpListener {
            io: Async::new(self.io.get_ref().try_clone()?)?,
        })
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

/// The iterator of [`TcpListener::incoming`]: never ends (`None` is never
/// returned); each item is one `accept`.
#[derive(Debug)]
pub struct Incoming<'a, P: Platform> {
    listener: &'a TcpListener<P>,
}

impl<P: Platform> Iterator for Incoming<'_, P> {
    type Item = io::Result<TcpStream<P>>;
    fn next(&mut self) -> Option<Self::Item> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

impl<P: Platform> From<net::TcpListener> for TcpListener<P> {
    /// Takes over std's listener (made non-blocking).
    fn from(l: net::TcpListener) -> Self {
        TcpListener {
            io: Async::new_or_blocking(l),
        }
    }
}

/// A TCP stream (std's [`TcpStream`](net::TcpStream), whose `connect`,
/// reads and writes park the calling actor). Read and write through
/// `&TcpStream` too, so one actor can read while another writes.
pub struct TcpStream<P: Platform> {
    io: Async<P, net::TcpStream>,
    read_timeout: Timeout,
    write_timeout: Timeout,
}

impl<P: Platform> TcpStream<P> {
    fn from_async(io: Async<P, net::TcpStream>) -> Self {
        TcpStream {
            io,
            read_timeout: Timeout::default(),
            write_timeout: Timeout::default(),
        }
    }

    fn from_std_checked(s: net::TcpStream) -> io::Result<Self> {
        Ok(Self::from_async(Async::new(s)?))
    }

    /// Connects to `addr` (each of its addresses in turn, until one
    /// connects), parking the calling actor while the handshake runs.
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<Self> {
        let addrs = super::resolve::<P, _>(addr)?;
        super::each_addr(&addrs, |a| Self::connect_addr(a, None))
    }

    /// Connects to `addr`, giving up after `timeout` (`TimedOut`).
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<Self> {
        if timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot set a 0 duration timeout",
            ));
        }
        Self::connect_addr(addr, Some(timeout))
    }

    fn connect_addr(a: &SocketAddr, timeout: Option<Duration>) -> io::Result<Self> {
        let domain = match a {
            SocketAddr::V4(_) => libc::AF_INET,
            SocketAddr::V6(_) => libc::AF_INET6,
        };
        let fd = addr::socket(domain, libc::SOCK_STREAM)?;
        // SAFETY: a fresh stream socket we own, handed to std.
        let s = unsafe { net::TcpStream::from_raw_fd(fd.into_raw_fd()) };
        let io = Async::new_nonblocking(s);
        let raw = io.as_raw_fd();
        // Registered before the connect starts, and the first wait is for
        // the poller's writable report even where the kernel finished the
        // handshake inside `connect` (loopback), as Go's and tokio's
        // connects do: a loop of connects then lets its worker run others
        // (their acceptor) once per connect. Probing at once instead let
        // ten connecting actors starve one acceptor until the listen
        // backlog overflowed (a 1 s SYN retransmission per dropped SYN).
        let ticket = io.register_now();
        if !addr::connect_start(raw, a)? {
            io.wait_then_io(
                Interest::WRITABLE,
                timeout,
                ticket,
                |_| match addr::connect_result(raw)? {
                    true => Ok(()),
                    false => Err(io::ErrorKind::WouldBlock.into()),
                },
            )?;
        }
        Ok(Self::from_async(io))
    }

    /// Receives into `buf` without taking the data from the queue.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .io_with(Interest::READABLE, self.read_timeout.get(), |s| s.peek(buf))
    }

    /// Shuts down the read half, the write half, or both. A reader parked
    /// on the stream (or on a clone) wakes: it reads end-of-stream.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.get_ref().set_nodelay(nodelay)
    }

    /// `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.get_ref().nodelay()
    }

    timeout_methods!();

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Another handle to the same socket (its own registration, its own
    /// timeouts, set from this one's).
    pub fn try_clone(&self) -> io::Result<Self> {
        let s = Self::from_std_checked(self.io.get_ref().try_clone()?)?;
        s.read_timeout.set(self.read_timeout.get())?;
        s.write_timeout.set(self.write_timeout.get())?;
        Ok(s)
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

impl<P: Platform> Read for &TcpStream<P> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .io_with(Interest::READABLE, self.read_timeout.get(), |mut s| s.read(buf))
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.io
            .io_with(Interest::READABLE, self.read_timeout.get(), |mut s| {
                s.read_vectored(bufs)
            })
    }
}

impl<P: Platform> Write for &TcpStream<P> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .io_with(Interest::WRITABLE, self.write_timeout.get(), |mut s| s.write(buf))
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.io
            .io_with(Interest::WRITABLE, self.write_timeout.get(), |mut s| {
                s.write_vectored(bufs)
            })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<P: Platform> Read for TcpStream<P> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        (&*self).read_vectored(bufs)
    }
}

impl<P: Platform> Write for TcpStream<P> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<P: Platform> From<net::TcpStream> for TcpStream<P> {
    /// Takes over std's stream (made non-blocking; std's timeouts are not
    /// carried over).
    fn from(s: net::TcpStream) -> Self {
        Self::from_async(Async::new_or_blocking(s))
    }
}

socket_traits!(TcpListener => net::TcpListener, TcpStream => net::TcpStream);
