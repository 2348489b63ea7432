//! Stack-overflow reports: a SIGSEGV/SIGBUS handler on a per-worker
//! alternate signal stack, for every POSIX port. Generic over the port's
//! `Platform` (`P`), which core's half (`smarm_core::overflow`) asks for the
//! running actor's stack and recovery point. A port calls
//! [`install_handler`] before it starts its first worker thread and
//! [`AltStack::install`] on each worker thread.
//!
//! Darwin's differences: a guard-page hit usually arrives as SIGBUS (a
//! protection failure on a mapped page) and an unmapped address as SIGSEGV,
//! so both are handled alike; `SIGSTKSZ` is 128 KiB; pages are 16 KiB on
//! Apple silicon; there is no `AT_MINSIGSTKSZ`. The Mach exception that
//! precedes the signal is left to the system (a debugger or crash reporter
//! still sees it first); a Mach exception port was rejected (it needs a
//! server thread, and taking the task's port from the crash reporter or a
//! debugger is intrusive; std uses signals too).
//!
//! # OS APIs and why
//!
//! - `sigaltstack`: an actor that overflows has no stack left to run a
//!   handler on, so each worker thread gets its own alternate signal stack
//!   (`mmap`, [`ALT_STACK_SIZE`] usable bytes above a `PROT_NONE` guard page,
//!   two map entries per worker thread), set when the thread starts and
//!   replaced by the thread's previous one (std's, for a std thread) when
//!   it ends. The first word of its usable range holds `ALT_MAGIC`: the
//!   handler asks `sigaltstack` which stack it runs on and trusts the
//!   thread's current-worker slot only on one of ours (the slot is a
//!   thread-local, and a first touch of a thread-local in a signal handler
//!   may allocate: in a `dlopen`ed library on Linux, in `tlv_get_addr` on
//!   Darwin).
//! - `sigaction(SA_SIGINFO | SA_ONSTACK)` for SIGSEGV and SIGBUS, once per
//!   process, when the first worker thread is spawned. The actions that were
//!   there before (std's stack-overflow handler, usually) are saved first,
//!   and every fault that is not in a running actor's guard page is passed
//!   to them: std still reports a plain thread's overflow, and anything
//!   else still crashes as it would without smarm. A handler installed after
//!   ours without chaining to it hides our reports.
//! - On a guard-page hit: `write(2)` of the report formatted by
//!   `smarm_core::overflow::write_report` into a stack buffer, then `abort()`.
//!   Every call in the handler (`sigaltstack`, `sigaction`, `write`,
//!   `abort`) is async-signal-safe (POSIX.1-2008, 2.4.3), and core's half
//!   neither allocates nor locks.
//!
//! Rejected: `signalfd` or a watcher thread (a fault is synchronous: the
//! faulting thread cannot continue, so the report must come from it);
//! reusing std's alternate stack (it exists only where std's handler was
//! installed, its size is std's choice, and it cannot be told from a
//! foreign one).

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use smarm_core::overflow::{overflow_at, overflow_exit, recovery_sp, write_report};

use smarm_core::Platform;

use crate::stack::MAP_FLAGS;

/// Usable bytes of each worker's alternate signal stack (at least; raised to
/// the kernel's `AT_MINSIGSTKSZ` and `SIGSTKSZ` if those are larger). The
/// handler itself needs well under 2 KiB; the rest is for the kernel's
/// signal frame (up to ~10 KiB with AVX-512 or SVE state) and a chained
/// handler (std's formats its own message). Untouched pages cost nothing.
pub const ALT_STACK_SIZE: usize = 64 * 1024;

/// Marks an alternate stack as smarm's (the bytes of "smarm-al" as a word).
const ALT_MAGIC: u64 = 0x736d_6172_6d2d_616c;

/// An `SA_SIGINFO` handler.
type SigInfoHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// The actions that were installed before ours, per signal in [`SIGNALS`].
struct PrevActions {
    actions: [UnsafeCell<MaybeUninit<libc::sigaction>>; 2],
    /// Set (Release) once `actions` are written; the handler's Acquire load
    /// pairs with it.
    ready: AtomicBool,
}

// SAFETY: `actions` are written once, inside `INSTALL.call_once`, before
// `ready` is set with Release and before our handler is installed; after
// that they are only read (by handlers that Acquire `ready`).
unsafe impl Sync for PrevActions {}

static PREV: PrevActions = PrevActions {
    actions: [
        UnsafeCell::new(MaybeUninit::zeroed()),
        UnsafeCell::new(MaybeUninit::zeroed()),
    ],
    ready: AtomicBool::new(false),
};

static INSTALL: Once = Once::new();

/// Installs the SIGSEGV/SIGBUS handler once per process (later calls do
/// nothing, whatever their `P`: a process runs one port). If an action
/// cannot be read or set, the handler is not installed for that signal and
/// overflows crash as they would without it.
pub fn install_handler<P: Platform>() {
    INSTALL.call_once(|| {
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: reading the current action into our static slot; no
            // handler of ours reads it yet (`ready` is false).
            if unsafe { libc::sigaction(sig, ptr::null(), (*PREV.actions[i].get()).as_mut_ptr()) } != 0 {
                return;
            }
        }
        // Release: pairs with the Acquire in `chain`; publishes `actions`.
        PREV.ready.store(true, Ordering::Release);
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is valid (empty mask, no flags);
            // we fill in a handler of the SA_SIGINFO signature.
            unsafe {
                let mut sa: libc::sigaction = core::mem::zeroed();
                sa.sa_sigaction = on_fault::<P> as SigInfoHandler as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, ptr::null_mut());
            }
        }
    });
}

/// A worker's alternate signal stack; dropping it puts back the thread's
/// previous one and unmaps this one.
#[derive(Debug)]
pub struct AltStack {
    map: *mut libc::c_void,
    len: usize,
    prev: libc::stack_t,
}

impl AltStack {
    /// Maps an alternate stack and makes it this thread's. `None` if the
    /// mapping fails (the thread keeps whatever it had; an overflow on it
    /// then crashes without smarm's report).
    pub fn install() -> Option<AltStack> {
        let page = crate::page_size();
        #[cfg(target_os = "linux")]
        // SAFETY: getauxval has no preconditions (0 when the entry is absent).
        let min = unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize;
        #[cfg(not(target_os = "linux"))]
        let min = 0;
        let usable = ALT_STACK_SIZE.max(libc::SIGSTKSZ).max(min * 4).div_ceil(page) * page;
        let len = usable + page;
        // SAFETY: a fresh anonymous private mapping touches no existing memory.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                MAP_FLAGS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let sp = map.cast::<u8>().wrapping_add(page);
        // SAFETY: the lowest page lies inside the mapping just made; its
        // guard catches an overflow of the handler itself. `sp` is page
        // aligned and writable, so the magic word fits.
        let ok = unsafe {
            libc::mprotect(map, page, libc::PROT_NONE) == 0 && {
                sp.cast::<u64>().write(ALT_MAGIC);
                true
            }
        };
        let mut prev: libc::stack_t = libc::stack_t {
            ss_sp: ptr::null_mut(),
            ss_flags: 0,
            ss_size: 0,
        };
        let new = libc::stack_t {
            ss_sp: sp.cast(),
            ss_flags: 0,
            ss_size: usable,
        };
        // SAFETY: `new` describes memory we own until `drop`, which
        // restores `prev` before unmapping it.
        if !ok || unsafe { libc::sigaltstack(&new, &mut prev) } != 0 {
            // SAFETY: unmapping exactly the mapping made above, unused.
            unsafe { libc::munmap(map, len) };
            return None;
        }
        Some(AltStack { map, len, prev })
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let mut prev = self.prev;
        if prev.ss_size == 0 || prev.ss_flags & libc::SS_DISABLE != 0 {
            prev.ss_flags = libc::SS_DISABLE;
        }
        prev.ss_flags &= !libc::SS_ONSTACK;
        // SAFETY: we are not on the alternate stack (a handler never returns
        // into this code), so it may be swapped; `prev` is the thread's
        // previous stack, still owned by whoever installed it.
        unsafe {
            libc::sigaltstack(&prev, ptr::null_mut());
            libc::munmap(self.map, self.len);
        }
    }
}

/// Whether the calling thread's alternate signal stack is one of ours.
/// Async-signal-safe: a `sigaltstack` query and one load.
fn on_smarm_thread() -> bool {
    let mut cur = MaybeUninit::<libc::stack_t>::zeroed();
    // SAFETY: a query (null new stack) into a valid out-pointer.
    if unsafe { libc::sigaltstack(ptr::null(), cur.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: zero-initialised, then written by the kernel.
    let cur = unsafe { cur.assume_init() };
    if cur.ss_flags & libc::SS_DISABLE != 0 || cur.ss_sp.is_null() || cur.ss_size < 8 {
        return false;
    }
    // SAFETY: an enabled alternate stack is mapped memory of at least
    // `ss_size` bytes from `ss_sp`; its lowest word is never written by a
    // signal frame (frames grow down from the top). Alignment: ours is page
    // aligned; a foreign one may not be, hence an unaligned read.
    unsafe { cur.ss_sp.cast::<u64>().read_unaligned() == ALT_MAGIC }
}

/// Writes all of `bytes` to stderr with `write(2)` (retrying on EINTR and
/// partial writes; giving up on any other error).
fn write_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a valid buffer of its length.
        let n = unsafe { libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        } else {
            return;
        }
    }
}

/// The SIGSEGV/SIGBUS handler (runs on the alternate stack).
extern "C" fn on_fault<P: Platform>(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    // `si_code > 0`: the kernel raised it for a fault (not `kill`), so
    // `si_addr` is the faulting address.
    let addr = unsafe { ((*info).si_code > 0).then(|| (*info).si_addr() as usize) };
    if let Some(addr) = addr {
        if on_smarm_thread() {
            if let Some(o) = overflow_at::<P>(addr) {
                let mut buf = [0u8; 512];
                let n = write_report(&o, &mut buf);
                write_stderr(&buf[..n]);
                if let Some(sp) = recovery_sp::<P>() {
                    // The actor opted in: end it instead of the process.
                    write_stderr(b"smarm: the actor opted in to recovery: it ends with StackOverflow\n");
                    // SAFETY: `uctx` is the kernel's ucontext for this
                    // signal; `sp` is free stack on this thread (below the
                    // worker's saved frame) and `overflow_exit` never
                    // returns. The kernel's sigreturn resumes there with
                    // the signal mask restored.
                    unsafe { redirect(uctx, sp, overflow_exit::<P> as extern "C" fn() -> ! as usize) };
                    return;
                }
                // SAFETY: abort is async-signal-safe and ends the process.
                unsafe { libc::abort() };
            }
        }
    }
    // SAFETY: called from our handler with its own arguments.
    unsafe { chain(sig, info, uctx) };
}

/// Makes the interrupted context resume at `pc` with stack pointer `sp`
/// (16-byte aligned) when the handler returns, as if `pc` had been called
/// with no arguments and no return address.
///
/// # Safety
///
/// `uctx` is the `ucontext_t` the kernel passed to this handler.
unsafe fn redirect(uctx: *mut libc::c_void, sp: usize, pc: usize) {
    let uc = uctx.cast::<libc::ucontext_t>();
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    // SAFETY: `uc` is the live ucontext of this signal (the caller's
    // contract); we only rewrite the saved registers.
    unsafe {
        // x86-64 SysV: at function entry rsp + 8 is 16-byte aligned (a call
        // pushed the return address); there is none: the callee never
        // returns.
        (*uc).uc_mcontext.gregs[libc::REG_RSP as usize] = (sp - 8) as i64;
        (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] = pc as i64;
    }
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    // SAFETY: as above.
    unsafe {
        // AAPCS64: sp 16-byte aligned; a null link register ends any
        // unwinder's walk.
        (*uc).uc_mcontext.sp = sp as u64;
        (*uc).uc_mcontext.pc = pc as u64;
        (*uc).uc_mcontext.regs[30] = 0;
    }
    #[cfg(all(target_vendor = "apple", target_arch = "x86_64"))]
    // SAFETY: as above (Darwin's `uc_mcontext` points at the saved state).
    unsafe {
        (*(*uc).uc_mcontext).__ss.__rsp = (sp - 8) as u64;
        (*(*uc).uc_mcontext).__ss.__rip = pc as u64;
    }
    #[cfg(all(target_vendor = "apple", target_arch = "aarch64"))]
    // SAFETY: as above.
    unsafe {
        (*(*uc).uc_mcontext).__ss.__sp = sp as u64;
        (*(*uc).uc_mcontext).__ss.__pc = pc as u64;
        (*(*uc).uc_mcontext).__ss.__lr = 0;
    }
}

/// Hands a fault that is not ours to the action that was there before.
///
/// # Safety
///
/// Called from [`on_fault`] with the arguments the kernel gave it.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    let i = SIGNALS.iter().position(|&s| s == sig).unwrap_or(0);
    // Acquire: pairs with the Release in `install_handler`.
    let prev = if PREV.ready.load(Ordering::Acquire) {
        // SAFETY: written before `ready` was set, read-only since.
        Some(unsafe { (*PREV.actions[i].get()).assume_init_ref() })
    } else {
        None
    };
    match prev {
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            if p.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: an SA_SIGINFO action's handler has this signature.
                let f: SigInfoHandler = unsafe { core::mem::transmute(p.sa_sigaction) };
                f(sig, info, uctx);
            } else {
                // SAFETY: a plain action's handler takes the signal number.
                let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(p.sa_sigaction) };
                f(sig);
            }
        }
        // Default (or ignored, which the kernel overrides for a fault):
        // restore the default action and return; the faulting instruction
        // runs again and the kernel kills the process by the signal, as if
        // smarm had never been installed.
        _ => {
            // SAFETY: a zeroed sigaction with SIG_DFL is the default action.
            unsafe {
                let mut sa: libc::sigaction = core::mem::zeroed();
                sa.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &sa, ptr::null_mut());
            }
        }
    }
}
