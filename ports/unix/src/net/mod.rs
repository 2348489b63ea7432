//! Sockets with std's names and methods, whose blocking calls park the
//! calling actor instead of its worker: [`TcpListener`], [`TcpStream`],
//! [`UdpSocket`], and, for Unix-domain sockets, [`unix`]'s
//! `UnixListener`, `UnixStream`, `UnixDatagram`.
//!
//! Each is std's socket, in non-blocking mode, inside an
//! [`Async`](crate::io::Async): inside an actor a call that would block
//! parks the actor on the runtime's poller; on a plain thread it blocks as
//! std's does. Read and write timeouts park with a timer and return
//! [`std::io::ErrorKind::TimedOut`]. Errors are
//! the OS's (`io::Error` with its kind); an `accept` that fails (`EMFILE`:
//! out of descriptors) returns the error and the listener keeps working.
//!
//! Addresses are given as std's are ([`ToSocketAddrs`]: an address, a
//! literal, a host name and port); resolving a host name can block for as
//! long as DNS takes, so inside an actor it runs through `blocking`, off
//! the workers.

/// The timeout methods of a socket type with `read_timeout` and
/// `write_timeout` fields ([`Timeout`](crate::io::Timeout)s): std's
/// signatures; the wait parks with a timer.
macro_rules! timeout_methods {
    () => {
        /// Bounds every later read or receive (`None`: no bound); one that
        /// waits longer returns `TimedOut`. The wait parks with a timer
        /// (the socket's `SO_RCVTIMEO` is not used). A zero duration is
        /// `InvalidInput`.
        pub fn set_read_timeout(&self, t: Option<std::time::Duration>) -> std::io::Result<()> {
            self.read_timeout.set(t)
        }

        /// Bounds every later write or send (as `set_read_timeout`).
        pub fn set_write_timeout(&self, t: Option<std::time::Duration>) -> std::io::Result<()> {
            self.write_timeout.set(t)
        }

        /// The read timeout.
        pub fn read_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
            Ok(self.read_timeout.get())
        }

        /// The write timeout.
        pub fn write_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
            Ok(self.write_timeout.get())
        }
    };
}

/// `Debug` (std's socket's), `AsRawFd` and `AsFd` for socket types whose
/// `io` field is an [`Async`](crate::io::Async) around std's socket.
macro_rules! socket_traits {
    ($($t:ident => $inner:ty),*) => {$(
        impl<P: smarm_core::Platform> $t<P> {
            /// The socket's registration with the calling actor's runtime,
            /// for a `Select::ready` arm (see
            /// [`Async::registration`](crate::io::Async::registration)).
            pub fn registration(&self) -> std::io::Result<&smarm_core::io::Registration<P>> {
                self.io.registration()
            }

            /// Runs `op` on std's socket once, without waiting: a call that
            /// would block returns `WouldBlock` (see
            /// [`Async::try_io`](crate::io::Async::try_io)).
            pub fn try_io<R>(&self, op: impl FnOnce(&$inner) -> std::io::Result<R>) -> std::io::Result<R> {
                self.io.try_io(op)
            }
        }
        impl<P: smarm_core::Platform> std::fmt::Debug for $t<P> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.io.get_ref().fmt(f)
            }
        }
        impl<P: smarm_core::Platform> std::os::fd::AsRawFd for $t<P> {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(&self.io)
            }
        }
        impl<P: smarm_core::Platform> std::os::fd::AsFd for $t<P> {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                std::os::fd::AsFd::as_fd(&self.io)
            }
        }
    )*};
}

mod addr;
mod tcp;
mod udp;
pub mod unix;

pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;

use std::io;
use std::net::SocketAddr;

use smarm_core::Platform;

/// What a socket can be bound or connected to: std's
/// [`ToSocketAddrs`](std::net::ToSocketAddrs) types, resolved without
/// blocking a worker. Addresses and address literals (`"127.0.0.1:80"`)
/// convert in place; a host name (`"example.com:80"`) is resolved by the
/// OS, which can take a DNS round trip, so inside an actor it runs through
/// `blocking` (off the workers). Sealed: implemented for the same types as
/// std's trait.
pub trait ToSocketAddrs: sealed::Sealed {
    /// The addresses, resolved (`P`: the platform whose `blocking` a host
    /// name's lookup runs through).
    #[doc(hidden)]
    fn resolve<P: Platform>(&self) -> io::Result<Vec<SocketAddr>>;
}

mod sealed {
    pub trait Sealed {}
}

fn lookup<P: Platform, A: std::net::ToSocketAddrs + ?Sized>(a: &A) -> io::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = if smarm_core::current_id::<P>().is_some() {
        smarm_core::blocking::<P, _>(|| a.to_socket_addrs().map(Iterator::collect))?
    } else {
        a.to_socket_addrs()?.collect()
    };
    Ok(addrs)
}

macro_rules! in_place {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl ToSocketAddrs for $t {
            fn resolve<P: Platform>(&self) -> io::Result<Vec<SocketAddr>> {
                Ok(std::net::ToSocketAddrs::to_socket_addrs(self)?.collect())
            }
        }
    )*};
}
in_place!(
    SocketAddr,
    std::net::SocketAddrV4,
    std::net::SocketAddrV6,
    (std::net::IpAddr, u16),
    (std::net::Ipv4Addr, u16),
    (std::net::Ipv6Addr, u16)
);

impl sealed::Sealed for [SocketAddr] {}
impl ToSocketAddrs for [SocketAddr] {
    fn resolve<P: Platform>(&self) -> io::Result<Vec<SocketAddr>> {
        Ok(self.to_vec())
    }
}

impl sealed::Sealed for str {}
impl ToSocketAddrs for str {
    fn resolve<P: Platform>(&self) -> io::Result<Vec<SocketAddr>> {
        if let Ok(a) = self.parse::<SocketAddr>() {
            return Ok(vec![a]);
        }
        lookup::<P, _>(self)
    }
}

impl sealed::Sealed for String {}
impl ToSocketAddrs for String {
    fn resolve<P: Platform>(&self) -> io::Result<Vec<SocketAddr>> {
        self.as_str().resolve::<P>()
    }
}

impl sealed::Sealed for (&str, u16) {}
impl ToSocketAddrs for (&str, u16) {
    fn resolve<P: Platform>(&self) -> io::Result<Vec<SocketAddr>> {
        if let Ok(ip) = self.0.parse::<std::net::IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, self.1)]);
        }
        lookup::<P, _>(self)
    }
}

impl sealed::Sealed for (String, u16) {}
impl ToSocketAddrs for (String, u16) {
    fn resolve<P: Platform>(&self) -> io::Result<Vec<SocketAddr>> {
        (self.0.as_str(), self.1).resolve::<P>()
    }
}

impl<T: ToSocketAddrs + ?Sized> sealed::Sealed for &T {}
impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {
    fn resolve<P: Platform>(&self) -> io::Result<Vec<SocketAddr>> {
        (**self).resolve::<P>()
    }
}

impl sealed::Sealed for Vec<SocketAddr> {}
impl ToSocketAddrs for Vec<SocketAddr> {
    fn resolve<P: Platform>(&self) -> io::Result<Vec<SocketAddr>> {
        Ok(self.clone())
    }
}

/// Resolves `addr` (see [`ToSocketAddrs`]); an empty result is an error.
pub(crate) fn resolve<P: Platform, A: ToSocketAddrs>(addr: A) -> io::Result<Vec<SocketAddr>> {
    let addrs = addr.resolve::<P>()?;
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any addresses",
        ));
    }
    Ok(addrs)
}

/// Tries `f` on each address in turn; the first success, or the last
/// error.
pub(crate) fn each_addr<T>(
    addrs: &[SocketAddr],
    mut f: impl FnMut(&SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in addrs {
        match f(a) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no addresses")))
}
