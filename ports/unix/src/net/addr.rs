//! Raw sockets: a non-blocking, close-on-exec socket and a non-blocking
//! `connect` (the one socket call std has no non-blocking form of).

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A `sockaddr_storage` holding `addr`, and its length.
pub(crate) fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for any
            // sockaddr (its purpose).
            let sin = unsafe { &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            };
            #[cfg(target_vendor = "apple")]
            {
                sin.sin_len = mem::size_of::<libc::sockaddr_in>() as u8;
            }
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above.
            let sin6 = unsafe { &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            #[cfg(target_vendor = "apple")]
            {
                sin6.sin6_len = mem::size_of::<libc::sockaddr_in6>() as u8;
            }
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// A new non-blocking, close-on-exec socket.
pub(crate) fn socket(domain: i32, ty: i32) -> io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain syscall; result checked.
        let fd = unsafe { libc::socket(domain, ty | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
    #[cfg(not(target_os = "linux"))]
    {
        // SAFETY: plain syscall; result checked.
        let fd = unsafe { libc::socket(domain, ty, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: fcntl on our descriptor; result checked.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        crate::io::set_nonblocking(fd)?;
        #[cfg(target_vendor = "apple")]
        {
            let one: libc::c_int = 1;
            // SAFETY: SO_NOSIGPIPE with a live int: a write to a closed
            // peer returns EPIPE instead of raising SIGPIPE.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_NOSIGPIPE,
                    (&one as *const libc::c_int).cast(),
                    mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        }
        Ok(owned)
    }
}

/// Connections a listener queues before the kernel drops new SYNs (the
/// `listen` backlog; Linux caps it at `net.core.somaxconn`, 4096 by
/// default). std's `bind` asks for 128, which a burst of connects
/// overflows: a dropped SYN costs the client a 1 s retransmission. 1024 is
/// what tokio and mio ask for.
pub(crate) const BACKLOG: libc::c_int = 1024;

/// A non-blocking, close-on-exec TCP socket bound to `addr` with
/// `SO_REUSEADDR` (as std's listeners have), listening with [`BACKLOG`].
pub(crate) fn tcp_listener(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let domain = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let fd = socket(domain, libc::SOCK_STREAM)?;
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    let one: libc::c_int = 1;
    // SAFETY: SO_REUSEADDR with a live int of the size given.
    let r = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let (ss, len) = sockaddr(addr);
    // SAFETY: `ss` holds a sockaddr of `len` bytes.
    if unsafe { libc::bind(raw, (&ss as *const libc::sockaddr_storage).cast(), len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain syscall on our bound socket; result checked.
    if unsafe { libc::listen(raw, BACKLOG) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Starts a connect on non-blocking `fd`: `Ok(true)` connected,
/// `Ok(false)` in progress (wait writable, then [`connect_result`]).
pub(crate) fn connect_start(fd: RawFd, addr: &SocketAddr) -> io::Result<bool> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: `ss` holds a sockaddr of `len` bytes.
    let r = unsafe { libc::connect(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINPROGRESS) | Some(libc::EINTR) | Some(libc::EALREADY) => Ok(false),
        _ => Err(e),
    }
}

/// The outcome of a connect in progress on `fd` that became writable:
/// `Ok(true)` connected, `Ok(false)` still in progress.
pub(crate) fn connect_result(fd: RawFd) -> io::Result<bool> {
    let mut err: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_ERROR into a live int of `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if err != 0 {
        return Err(io::Error::from_raw_os_error(err));
    }
    // No error: connected if it has a peer (a wake may be early).
    let mut ss: libc::sockaddr_storage =
        // SAFETY: all-zero is a valid sockaddr_storage.
        unsafe { mem::zeroed() };
    let mut sl = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getpeername into a live sockaddr_storage of `sl` bytes.
    let r = unsafe { libc::getpeername(fd, (&mut ss as *mut libc::sockaddr_storage).cast(), &mut sl) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOTCONN) {
        return Ok(false);
    }
    Err(e)
}
