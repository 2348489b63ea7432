//! Unix-domain sockets: [`UnixListener`], [`UnixStream`], [`UnixDatagram`]
//! (std's `std::os::unix::net` types, whose blocking calls park the
//! calling actor).

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::unix::net::{self as unet, SocketAddr};
use std::path::Path;

use smarm_core::io::Interest;
use smarm_core::Platform;

use crate::io::{Async, Timeout};

/// A Unix-domain socket server.
pub struct UnixListener<P: Platform> {
    io: Async<P, unet::UnixListener>,
}

impl<P: Platform> UnixListener<P> {
    /// Binds to `path` and listens.
    pub fn bind<Q: AsRef<Path>>(path: Q) -> io::Result<Self> {
        Ok(UnixListener {
            io: Async::new(unet::UnixListener::bind(path)?)?,
        })
    }

    /// Accepts a connection, parking the calling actor until one arrives.
    pub fn accept(&self) -> io::Result<(UnixStream<P>, SocketAddr)> {
        let (s, a) = self.io.read_with(|l| l.accept())?;
        Ok((UnixStream::wrap(Async::new(s)?), a))
    }

    /// An endless iterator of [`accept`](Self::accept)'s streams.
    pub fn incoming(&self) -> impl Iterator<Item = io::Result<UnixStream<P>>> + '_ {
        std::iter::repeat_with(move || self.accept().map(|(s, _)| s))
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Another handle to the same socket.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(UnixListener {
            io: Async::new(self.io.get_ref().try_clone()?)?,
        })
    }
}

impl<P: Platform> From<unet::UnixListener> for UnixListener<P> {
    /// Takes over std's listener (made non-blocking).
    fn from(l: unet::UnixListener) -> Self {
        UnixListener {
            io: Async::new_or_blocking(l),
        }
    }
}

/// A Unix-domain stream.
pub struct UnixStream<P: Platform> {
    io: Async<P, unet::UnixStream>,
    read_timeout: Timeout,
    write_timeout: Timeout,
}

impl<P: Platform> UnixStream<P> {
    fn wrap(io: Async<P, unet::UnixStream>) -> Self {
        UnixStream {
            io,
            read_timeout: Timeout::default(),
            write_timeout: Timeout::default(),
        }
    }

    /// Connects to the socket at `path`. A local connect completes at once
    /// unless the listener's backlog is full; then it runs through
    /// `blocking` (off the workers) until the listener accepts (a
    /// Unix-domain connect that would block cannot be waited for).
    pub fn connect<Q: AsRef<Path>>(path: Q) -> io::Result<Self> {
        let path = path.as_ref();
        if let Some(s) = Self::connect_nonblocking(path)? {
            return Ok(s);
        }
        let s = if smarm_core::current_id::<P>().is_some() {
            smarm_core::blocking::<P, _>(|| unet::UnixStream::connect(path))?
        } else {
            unet::UnixStream::connect(path)?
        };
        Ok(Self::wrap(Async::new(s)?))
    }

    /// A non-blocking connect; `None` when the listener's backlog is full
    /// (`EAGAIN`: a Unix-domain connect cannot be waited for).
    fn connect_nonblocking(path: &Path) -> io::Result<Option<Self>> {
        use std::os::fd::{FromRawFd, IntoRawFd};
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        // SAFETY: all-zero is a valid sockaddr_un.
        let mut sun: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        if bytes.len() >= sun.sun_path.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "path must be shorter than SUN_LEN",
            ));
        }
        sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, b) in sun.sun_path.iter_mut().zip(bytes) {
            *d = *b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
        #[cfg(target_vendor = "apple")]
        {
            sun.sun_len = len as u8;
        }
        let fd = super::addr::socket(libc::AF_UNIX, libc::SOCK_STREAM)?;
        let raw = fd.as_raw_fd();
        // SAFETY: `sun` is a sockaddr_un whose first `len` bytes are set.
        let r = unsafe {
            libc::connect(
                raw,
                (&sun as *const libc::sockaddr_un).cast(),
                len as libc::socklen_t,
            )
        };
        // SAFETY: a stream socket we own, handed to std.
        let s = unsafe { unet::UnixStream::from_raw_fd(fd.into_raw_fd()) };
        let io = Async::new_nonblocking(s);
        if r != 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EINPROGRESS) | Some(libc::EINTR) => {
                    io.io_with(Interest::WRITABLE, None, |_| {
                        match super::addr::connect_result(raw)? {
                            true => Ok(()),
                            false => Err(io::ErrorKind::WouldBlock.into()),
                        }
                    })?;
                }
                _ => return Err(e),
            }
        }
        Ok(Some(Self::wrap(io)))
    }

    /// A connected pair.
    pub fn pair() -> io::Result<(Self, Self)> {
        let (a, b) = unet::UnixStream::pair()?;
        Ok((Self::wrap(Async::new(a)?), Self::wrap(Async::new(b)?)))
    }

    /// Shuts down the read half, the write half, or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
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

impl<P: Platform> Read for &UnixStream<P> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .io_with(Interest::READABLE, self.read_timeout.get(), |mut s| s.read(buf))
    }
}

impl<P: Platform> Write for &UnixStream<P> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .io_with(Interest::WRITABLE, self.write_timeout.get(), |mut s| s.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<P: Platform> Read for UnixStream<P> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl<P: Platform> Write for UnixStream<P> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<P: Platform> From<unet::UnixStream> for UnixStream<P> {
    /// Takes over std's stream (made non-blocking).
    fn from(s: unet::UnixStream) -> Self {
        Self::wrap(Async::new_or_blocking(s))
    }
}

/// A Unix-domain datagram socket.
pub struct UnixDatagram<P: Platform> {
    io: Async<P, unet::UnixDatagram>,
    read_timeout: Timeout,
    write_timeout: Timeout,
}

impl<P: Platform> UnixDatagram<P> {
    fn wrap(io: Async<P, unet::UnixDatagram>) -> Self {
        UnixDatagram {
            io,
            read_timeout: Timeout::default(),
            write_timeout: Timeout::default(),
        }
    }

    /// Binds to `path`.
    pub fn bind<Q: AsRef<Path>>(path: Q) -> io::Result<Self> {
        Ok(Self::wrap(Async::new(unet::UnixDatagram::bind(path)?)?))
    }

    /// An unbound socket.
    pub fn unbound() -> io::Result<Self> {
        Ok(Self::wrap(Async::new(unet::UnixDatagram::unbound()?)?))
    }

    /// A connected pair.
    pub fn pair() -> io::Result<(Self, Self)> {
        let (a, b) = unet::UnixDatagram::pair()?;
        Ok((Self::wrap(Async::new(a)?), Self::wrap(Async::new(b)?)))
    }

    /// Sets the peer for [`send`](Self::send) and [`recv`](Self::recv).
    pub fn connect<Q: AsRef<Path>>(&self, path: Q) -> io::Result<()> {
        self.io.get_ref().connect(path)
    }

    /// Sends `buf` to the socket at `path`.
    pub fn send_to<Q: AsRef<Path>>(&self, buf: &[u8], path: Q) -> io::Result<usize> {
        let path = path.as_ref();
        self.io
            .io_with(Interest::WRITABLE, self.write_timeout.get(), |s| {
                s.send_to(buf, path)
            })
    }

    /// Receives one datagram, and its sender.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io
            .io_with(Interest::READABLE, self.read_timeout.get(), |s| s.recv_from(buf))
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

    timeout_methods!();

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Shuts down the read half, the write half, or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }
}

impl<P: Platform> From<unet::UnixDatagram> for UnixDatagram<P> {
    /// Takes over std's socket (made non-blocking).
    fn from(s: unet::UnixDatagram) -> Self {
        Self::wrap(Async::new_or_blocking(s))
    }
}

socket_traits!(
    UnixListener => unet::UnixListener,
    UnixStream => unet::UnixStream,
    UnixDatagram => unet::UnixDatagram
);
