//! The IO poller: one kqueue per runtime, every descriptor registered once
//! with an `EVFILT_READ` and an `EVFILT_WRITE` filter, both `EV_CLEAR`
//! (edge-triggered), and an `EVFILT_USER` event (ident 0) beside them as
//! the kick.
//!
//! - `register` adds both filters, read first, in one `kevent` call with no
//!   event list: the kernel applies the changes in order and stops at the
//!   first it refuses, failing the call with that errno. A descriptor with
//!   no write readiness refuses the write filter (`EINVAL`: a kqueue, some
//!   devices), and on older kernels so does the write end of a pipe whose
//!   reader is gone (`EPIPE`; newer ones attach a filter that fires only at
//!   EOF); either way the read filter is kept (a second call, on that path
//!   only, tells which filter refused). Any other refusal removes the read
//!   filter again and fails the registration, so no knote is left behind.
//!   `EV_RECEIPT` (one result per change) is not used: on macOS 10.12 and
//!   10.13 (xnu-3789, xnu-4570) it reports a refused change as a success
//!   (the receipt's `data` is overwritten with 0).
//! - `deregister` deletes both (write first); the write filter's absence
//!   (`ENOENT`, after a refused write filter) is not an error.
//! - `wait` turns core's absolute deadline (on [`Darwin::now_ns`]'s clock,
//!   `mach_absolute_time`, the clock the kevent timeout is measured on)
//!   into the time remaining, takes up to [`BATCH`] events, and maps
//!   `EVFILT_READ` to [`READABLE`], `EVFILT_WRITE` to [`WRITABLE`], and
//!   `EV_EOF` / `EV_ERROR` to both. One descriptor may yield two events in
//!   one wait (one per filter), each with its token.
//! - `kick` triggers the user event (`NOTE_TRIGGER`); with `EV_CLEAR` it
//!   re-arms itself when a wait takes it, and triggers coalesce.
//!
//! [`Darwin::now_ns`]: crate::Darwin

use core::ffi::c_void;
use core::ptr;

use smarm_core::poll::{PollError, PollEvent, Poller, READABLE, WRITABLE};

/// The kick's ident within `EVFILT_USER` (a filter of its own: no
/// descriptor's ident space).
const KICK_IDENT: usize = 0;

/// Events taken from the kernel per `kevent`, at most.
const BATCH: usize = 256;

/// The longest single wait, in seconds (a day). Darwin rejects very large
/// timeouts with `EINVAL` (older kernels anything above 10^8 s); a longer
/// deadline returns early, as a time-out, and the caller waits again.
const MAX_TIMEOUT_S: u64 = 86_400;

/// A kqueue and its armed kick.
#[derive(Debug)]
pub struct Kqueue {
    kq: i32,
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// One change or event record.
fn kev(ident: usize, filter: i16, flags: u16, fflags: u32, udata: usize) -> libc::kevent {
    libc::kevent {
        ident,
        filter,
        flags,
        fflags,
        data: 0,
        udata: udata as *mut c_void,
    }
}

impl Kqueue {
    /// Applies `changes` in order, with no event list: the kernel stops at
    /// the first change it refuses and the call fails with that change's
    /// errno (the changes before it stay applied, the ones after it are not
    /// tried). Without an event list nothing pending is dequeued, and the
    /// call never blocks.
    fn change(&self, changes: &[libc::kevent]) -> Result<(), i32> {
        // SAFETY: `changes` is a live slice of kevents; the event list is
        // empty (null, 0), so the kernel writes nothing and never waits.
        let r = unsafe {
            libc::kevent(
                self.kq,
                changes.as_ptr(),
                changes.len() as i32,
                ptr::null_mut(),
                0,
                ptr::null(),
            )
        };
        if r < 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }
}

impl Drop for Kqueue {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours (made in `new`), closed once.
        unsafe {
            libc::close(self.kq);
        }
    }
}

/// The kevent timeout for a deadline on `Darwin::now_ns`'s clock: `None`
/// (block), zero (poll), or the time remaining, capped at `MAX_TIMEOUT_S`.
fn deadline_to_timespec(deadline_ns: Option<u64>) -> Option<libc::timespec> {
    let left = match deadline_ns {
        None => return None,
        Some(0) => 0,
        Some(d) => d.saturating_sub(<crate::Darwin as smarm_core::Platform>::now_ns()),
    };
    let left = left.min(MAX_TIMEOUT_S * 1_000_000_000);
    Some(libc::timespec {
        tv_sec: (left / 1_000_000_000) as libc::time_t,
        tv_nsec: (left % 1_000_000_000) as libc::c_long,
    })
}

// SAFETY: both filters are added with EV_CLEAR, so each is edge-triggered:
// after a wait takes its event the knote's state resets, and the next data
// arrival / buffer space (or EOF, error) activates it again, so every change
// to ready after EV_ADD is reported. At EV_ADD the kernel runs the filter
// once when it attaches the knote and queues an event if the descriptor is
// already ready, so a readiness that holds at registration is reported too.
// A write filter the descriptor refuses (EINVAL: no write readiness; EPIPE:
// a pipe without a reader) loses nothing: such a descriptor's `write` never
// says EAGAIN, so no one ever waits for its writability. The kick is an
// EVFILT_USER knote (EV_CLEAR); NOTE_TRIGGER activates it and it stays
// queued until a wait takes it, so a kick before a wait still makes that
// wait return, and triggers coalesce; the kick's event is filtered out of
// what `wait` returns. Returned tokens are the `udata` of knotes `register`
// added: EV_DELETE (and closing the descriptor) removes a knote with its
// queued event, so a deregistered descriptor is reported only by a wait
// that had already taken its event. Every call is a syscall on a
// descriptor this struct owns, safe from any thread.
unsafe impl Poller for Kqueue {
    fn new() -> Result<Self, PollError> {
        // SAFETY: a plain syscall; the result is checked.
        let kq = unsafe { libc::kqueue() };
        if kq < 0 {
            return Err(PollError::Os(errno()));
        }
        // From here `Drop` closes it on every error path.
        let this = Kqueue { kq };
        // SAFETY: F_SETFD on our own descriptor; the result is checked.
        if unsafe { libc::fcntl(kq, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(PollError::Os(errno()));
        }
        let kick = kev(KICK_IDENT, libc::EVFILT_USER, libc::EV_ADD | libc::EV_CLEAR, 0, 0);
        this.change(&[kick]).map_err(PollError::Os)?;
        Ok(this)
    }

    fn register(&self, fd: i32, token: usize) -> Result<(), PollError> {
        let flags = libc::EV_ADD | libc::EV_CLEAR;
        let read = kev(fd as usize, libc::EVFILT_READ, flags, 0, token);
        let write = kev(fd as usize, libc::EVFILT_WRITE, flags, 0, token);
        // Read first: a refusal of the read filter leaves nothing added; a
        // refusal of the write filter leaves the read filter added.
        let Err(e) = self.change(&[read, write]) else {
            return Ok(());
        };
        if e == libc::EINVAL || e == libc::EPIPE {
            // The write filter refused (no write readiness, or a pipe with
            // no reader), or the read filter refused: add the read filter
            // alone (re-adding an existing knote only updates it) to tell.
            return self.change(&[read]).map_err(PollError::Os);
        }
        // Either refusal: the read filter may be in place; remove it so no
        // knote is left reporting this token.
        let _ = self.change(&[kev(fd as usize, libc::EVFILT_READ, libc::EV_DELETE, 0, 0)]);
        Err(PollError::Os(e))
    }

    fn deregister(&self, fd: i32) -> Result<(), PollError> {
        let read = kev(fd as usize, libc::EVFILT_READ, libc::EV_DELETE, 0, 0);
        let write = kev(fd as usize, libc::EVFILT_WRITE, libc::EV_DELETE, 0, 0);
        // Write first: it is the one that may be missing (refused at
        // `register`); a refusal there leaves the read filter untried.
        let Err(e) = self.change(&[write, read]) else {
            return Ok(());
        };
        match self.change(&[read]) {
            // The write delete failed, the read filter is now gone: fine if
            // the write filter was never there.
            Ok(()) if e == libc::ENOENT => Ok(()),
            Ok(()) => Err(PollError::Os(e)),
            // The read filter was not there either (ENOENT: never
            // registered, or the descriptor was closed, which drops its
            // knotes).
            Err(e) => Err(PollError::Os(e)),
        }
    }

    fn wait(&self, events: &mut [PollEvent], deadline_ns: Option<u64>) -> usize {
        let max = events.len().min(BATCH);
        if max == 0 {
            return 0;
        }
        let mut raw = [kev(0, 0, 0, 0, 0); BATCH];
        let timeout = deadline_to_timespec(deadline_ns);
        let timeout_ptr = timeout
            .as_ref()
            .map_or(ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `raw` has room for `max` events; `timeout_ptr` is null or
        // points to `timeout`, live across the call; no changes are passed.
        let n = unsafe { libc::kevent(self.kq, ptr::null(), 0, raw.as_mut_ptr(), max as i32, timeout_ptr) };
        if n <= 0 {
            // 0: the timeout; < 0: EINTR (callers re-check).
            return 0;
        }
        let mut filled = 0;
        for ev in &raw[..(n as usize).min(max)] {
            let (filter, flags, udata) = (ev.filter, ev.flags, ev.udata);
            if filter == libc::EVFILT_USER {
                // The kick.
                continue;
            }
            let mut ready = match filter {
                libc::EVFILT_READ => READABLE,
                libc::EVFILT_WRITE => WRITABLE,
                _ => 0,
            };
            if flags & (libc::EV_EOF | libc::EV_ERROR) != 0 {
                ready |= READABLE | WRITABLE;
            }
            events[filled] = PollEvent {
                token: udata as usize,
                ready,
            };
            filled += 1;
        }
        filled
    }

    fn kick(&self) {
        let trigger = kev(KICK_IDENT, libc::EVFILT_USER, 0, libc::NOTE_TRIGGER, 0);
        loop {
            match self.change(&[trigger]) {
                Ok(()) => return,
                Err(libc::EINTR) => continue,
                // A lost kick is a worker asleep with work waiting, a hang
                // nobody could diagnose: say so and stop (as the wakes do).
                Err(e) => smarm_unix::abort(&format!("smarm-darwin: kqueue kick failed (errno {e})")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use smarm_core::Platform;

    use super::*;
    use crate::Darwin;

    const TOKEN: usize = 0x1000;

    /// A non-blocking pipe: (read end, write end).
    fn pipe() -> (i32, i32) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        for fd in fds {
            // SAFETY: F_GETFL/F_SETFL on descriptors made here.
            unsafe {
                let fl = libc::fcntl(fd, libc::F_GETFL);
                assert!(libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) >= 0);
            }
        }
        (fds[0], fds[1])
    }

    fn close(fd: i32) {
        // SAFETY: a descriptor made by the test, closed once.
        unsafe { libc::close(fd) };
    }

    fn write_byte(fd: i32) {
        // SAFETY: writes one byte from a live buffer.
        assert_eq!(unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) }, 1);
    }

    /// What `token` became ready for within `within` (or at once, for
    /// `Duration::ZERO`): the union of its events, until `want` is seen.
    fn ready_of(p: &Kqueue, token: usize, want: u32, within: Duration) -> u32 {
        let deadline = Darwin::now_ns() + within.as_nanos() as u64;
        let mut seen = 0;
        let mut buf = [PollEvent::default(); 16];
        loop {
            let n = p.wait(&mut buf, Some(deadline.max(1)));
            for ev in &buf[..n] {
                assert_ne!(ev.ready, 0, "an event with no direction");
                if ev.token == token {
                    seen |= ev.ready;
                }
            }
            if seen & want == want || Darwin::now_ns() >= deadline {
                return seen;
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support kqueue")]
    fn a_kick_before_the_wait_makes_it_return() {
        let p = Kqueue::new().unwrap();
        p.kick();
        p.kick(); // kicks coalesce
        let mut buf = [PollEvent::default(); 4];
        assert_eq!(p.wait(&mut buf, None), 0);
        // Taken: the next poll finds nothing.
        assert_eq!(p.wait(&mut buf, Some(0)), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support kqueue")]
    fn a_kick_from_another_thread_ends_the_wait() {
        // The kick lands before the wait or during it (no sleep to aim
        // it): the kick is sticky, so either way the wait ends (a lost
        // kick hangs this test).
        let p = Arc::new(Kqueue::new().unwrap());
        let kicker = {
            let p = Arc::clone(&p);
            std::thread::spawn(move || p.kick())
        };
        let mut buf = [PollEvent::default(); 4];
        assert_eq!(p.wait(&mut buf, None), 0);
        kicker.join().unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support kqueue")]
    fn a_deadline_ends_the_wait_no_earlier() {
        let p = Kqueue::new().unwrap();
        let start = Darwin::now_ns();
        let deadline = start + 20_000_000;
        let mut buf = [PollEvent::default(); 4];
        assert_eq!(p.wait(&mut buf, Some(deadline)), 0);
        // Within a clock tick's rounding (ns <-> mach ticks, both ways).
        assert!(
            Darwin::now_ns() + 1_000 >= deadline,
            "returned before its deadline"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support kqueue")]
    fn data_makes_the_read_end_readable_once() {
        let p = Kqueue::new().unwrap();
        let (r, w) = pipe();
        p.register(r, TOKEN).unwrap();
        assert_eq!(ready_of(&p, TOKEN, READABLE, Duration::ZERO) & READABLE, 0);
        write_byte(w);
        assert_ne!(
            ready_of(&p, TOKEN, READABLE, Duration::from_secs(5)) & READABLE,
            0
        );
        // Edge-triggered: not reported again until something new happens
        // (the byte is still unread).
        assert_eq!(ready_of(&p, TOKEN, READABLE, Duration::ZERO) & READABLE, 0);
        write_byte(w);
        assert_ne!(
            ready_of(&p, TOKEN, READABLE, Duration::from_secs(5)) & READABLE,
            0
        );
        p.deregister(r).unwrap();
        close(r);
        close(w);
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support kqueue")]
    fn readiness_at_registration_is_reported() {
        // One kqueue per end: `ready_of` drops other tokens' events.
        let (pr, pw) = (Kqueue::new().unwrap(), Kqueue::new().unwrap());
        let (r, w) = pipe();
        write_byte(w);
        pr.register(r, TOKEN).unwrap();
        pw.register(w, TOKEN + 1).unwrap();
        assert_ne!(
            ready_of(&pr, TOKEN, READABLE, Duration::from_secs(5)) & READABLE,
            0
        );
        assert_ne!(
            ready_of(&pw, TOKEN + 1, WRITABLE, Duration::from_secs(5)) & WRITABLE,
            0
        );
        close(r);
        close(w);
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support kqueue")]
    fn a_hang_up_is_reported_as_both_directions() {
        let p = Kqueue::new().unwrap();
        let (r, w) = pipe();
        p.register(r, TOKEN).unwrap();
        close(w);
        let both = READABLE | WRITABLE;
        assert_eq!(ready_of(&p, TOKEN, both, Duration::from_secs(5)) & both, both);
        close(r);
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support kqueue")]
    fn a_descriptor_without_a_write_filter_keeps_its_read_filter() {
        // A kqueue descriptor has only EVFILT_READ (EVFILT_WRITE: EINVAL);
        // it is readable while it holds a pending event.
        let p = Kqueue::new().unwrap();
        let inner = Kqueue::new().unwrap();
        p.register(inner.kq, TOKEN).unwrap();
        inner.kick();
        assert_ne!(
            ready_of(&p, TOKEN, READABLE, Duration::from_secs(5)) & READABLE,
            0
        );
        p.deregister(inner.kq).unwrap();
        assert_eq!(p.deregister(inner.kq), Err(PollError::Os(libc::ENOENT)));
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support kqueue")]
    fn a_deregistered_descriptor_is_not_reported() {
        let p = Kqueue::new().unwrap();
        let (r, w) = pipe();
        p.register(r, TOKEN).unwrap();
        p.deregister(r).unwrap();
        write_byte(w);
        assert_eq!(ready_of(&p, TOKEN, READABLE, Duration::from_millis(20)), 0);
        assert_eq!(p.deregister(r), Err(PollError::Os(libc::ENOENT)));
        close(r);
        close(w);
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support kqueue")]
    fn a_bad_descriptor_is_refused() {
        // (A closed descriptor's number could be reused by a test running
        // beside this one: -1 is never a descriptor.)
        let p = Kqueue::new().unwrap();
        assert_eq!(p.register(-1, TOKEN), Err(PollError::Os(libc::EBADF)));
        // Not registered (no knote for it: ENOENT).
        assert!(p.deregister(-1).is_err());
    }
}
