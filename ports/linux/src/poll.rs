//! The IO poller: one epoll instance per runtime, every descriptor
//! registered once for both directions, edge-triggered (`EPOLLET`), and an
//! eventfd registered beside them as the kick.

use smarm_core::poll::{PollError, PollEvent, Poller, READABLE, WRITABLE};

/// The kick's token: no registration's (those are addresses of readiness
/// records, never 0).
const KICK: u64 = 0;

/// Events taken from the kernel per `epoll_wait`, at most.
const BATCH: usize = 256;

/// An epoll instance and its kick.
#[derive(Debug)]
pub struct Epoll {
    epfd: i32,
    kick: i32,
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: both descriptors are ours (made in `new`), closed once.
        unsafe {
            libc::close(self.kick);
            libc::close(self.epfd);
        }
    }
}

fn deadline_to_ms(deadline_ns: Option<u64>) -> i32 {
    match deadline_ns {
        None => -1,
        Some(0) => 0,
        Some(d) => {
            let now = <crate::Linux as smarm_core::Platform>::now_ns();
            // Rounded up, so a wait never ends before its deadline and
            // spins on a 0 ms timeout.
            let ms = d.saturating_sub(now).div_ceil(1_000_000);
            ms.min(i32::MAX as u64) as i32
        }
    }
}

// SAFETY: epoll reports, for an `EPOLLET` registration, every transition
// to ready after `EPOLL_CTL_ADD` (and a readiness that holds at ADD: the
// kernel checks it when inserting); the eventfd is registered edge-triggered
// for input, and each `write` to it queues a new event, so a kick before or
// during `epoll_wait` makes it return; the kick's event is filtered out.
// Every call is a syscall on descriptors this struct owns, safe from any
// thread.
unsafe impl Poller for Epoll {
    fn new() -> Result<Self, PollError> {
        // SAFETY: plain syscalls; results are checked.
        unsafe {
            let epfd = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            if epfd < 0 {
                return Err(PollError::Os(errno()));
            }
            let kick = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
            if kick < 0 {
                let e = errno();
                libc::close(epfd);
                return Err(PollError::Os(e));
            }
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLET) as u32,
                u64: KICK,
            };
            if libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, kick, &mut ev) < 0 {
                let e = errno();
                libc::close(kick);
                libc::close(epfd);
                return Err(PollError::Os(e));
            }
            Ok(Epoll { epfd, kick })
        }
    }

    fn register(&self, fd: i32, token: usize) -> Result<(), PollError> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: token as u64,
        };
        // SAFETY: `ev` is a valid epoll_event for the call.
        if unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(PollError::Os(errno()));
        }
        Ok(())
    }

    fn deregister(&self, fd: i32) -> Result<(), PollError> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as in `register` (the event is ignored for DEL; pre-2.6.9
        // kernels wanted it non-null).
        if unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_DEL, fd, &mut ev) } < 0 {
            return Err(PollError::Os(errno()));
        }
        Ok(())
    }

    fn wait(&self, events: &mut [PollEvent], deadline_ns: Option<u64>) -> usize {
        let mut raw = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
        let max = events.len().min(BATCH);
        if max == 0 {
            return 0;
        }
        let timeout = deadline_to_ms(deadline_ns);
        // SAFETY: `raw` has room for `max` events.
        let n = unsafe { libc::epoll_wait(self.epfd, raw.as_mut_ptr(), max as i32, timeout) };
        if n <= 0 {
            // 0: the timeout; < 0: EINTR (callers re-check).
            return 0;
        }
        let mut filled = 0;
        for ev in &raw[..n as usize] {
            let token = ev.u64;
            if token == KICK {
                continue;
            }
            let e = ev.events;
            let mut ready = 0;
            if e & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLPRI) as u32 != 0 {
                ready |= READABLE;
            }
            if e & libc::EPOLLOUT as u32 != 0 {
                ready |= WRITABLE;
            }
            if e & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                ready |= READABLE | WRITABLE;
            }
            events[filled] = PollEvent {
                token: token as usize,
                ready,
            };
            filled += 1;
        }
        filled
    }

    fn kick(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        let r = unsafe { libc::write(self.kick, (&one as *const u64).cast(), 8) };
        if r < 0 && errno() == libc::EAGAIN {
            // The counter is at its maximum (never in practice): drain it
            // and kick again.
            let mut buf: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64 from our eventfd.
            unsafe {
                libc::read(self.kick, (&mut buf as *mut u64).cast(), 8);
                libc::write(self.kick, (&one as *const u64).cast(), 8);
            }
        }
    }
}
