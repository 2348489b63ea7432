//! The Arch seam: what core needs from an instruction set.
//!
//! One implementation per ISA lives in an arch crate (`smarm-arch-x86_64`,
//! `smarm-arch-aarch64`); a port crate picks one with `cfg_if` and names it as
//! its [`Platform::Arch`](crate::Platform::Arch). Core never names an ISA.
//!
//! # The switch protocol
//!
//! A suspended context is a single stack pointer: everything else it needs
//! (callee-saved registers, its resume address) was pushed on its own stack by
//! [`Arch::switch`]. Switching is symmetric:
//!
//! ```text
//!   context A                               context B (suspended at sp_B)
//!   ---------                               ---------
//!   let from = switch(sp_B) ──────────────▶ B's earlier switch(..) returns sp_A
//!        (A is now suspended at sp_A)        B records sp_A wherever it belongs
//!   ...                                     ...
//!   switch(..) returns sp_B' ◀───────────── switch(sp_A)
//! ```
//!
//! The target sp travels in the first argument register and the sp of the
//! context just left comes back in the return register, so no thread-local is
//! touched on the switch path. Whoever regains control after a switch owns the
//! job of storing the returned sp: until then, nobody may resume the context
//! it names (its stack is still in use when the sp is produced, see the
//! scheduler's "after switch" step).

/// Entry point of a freshly bootstrapped context.
///
/// Called on the new stack by the first switch into it, with `from` = the sp
/// of the context that switched in (as [`Arch::switch`] would have returned
/// it) and `arg` = the pointer given to [`Arch::init_stack`]. It must never
/// return: it ends by switching away for good.
pub type EntryFn = unsafe extern "C" fn(from: *mut u8, arg: *mut u8) -> !;

/// Context switching, stack bootstrap and cycle counting for one ISA.
///
/// # Safety
///
/// An implementation guarantees:
/// - [`switch`](Arch::switch) preserves every register the platform's C ABI
///   calls callee-saved (plus floating-point control state such as MXCSR and
///   the x87 control word, or FPCR where the ABI requires it), so from the
///   compiler's point of view it is an ordinary `extern "C"` call;
/// - the sp it stores and returns is exactly what a later `switch(sp)` needs
///   to resume that context, and nothing else about the context lives outside
///   its stack;
/// - [`init_stack`](Arch::init_stack) writes only within
///   `[top - INIT_STACK_BYTES, top)` and returns an sp that, switched to,
///   calls the entry function with a correctly aligned stack, a null frame
///   pointer and a null return address (so backtraces stop there);
/// - the cycle reads have no side effects and may be called from any context.
///
/// The switch is a compiler barrier (an opaque call), but not a memory
/// fence: cross-thread ordering comes from the scheduler's atomics.
pub unsafe trait Arch: 'static {
    /// The ISA's name, for reports ("x86_64", "aarch64").
    const NAME: &'static str;

    /// Bytes at the top of a fresh stack that [`Arch::init_stack`] uses.
    const INIT_STACK_BYTES: usize;

    /// Saves the current context on its stack and resumes the context
    /// suspended at `to`. Returns (in the resumed-later sense) the sp of the
    /// context that switched back to this one.
    ///
    /// # Safety
    ///
    /// `to` must be an sp produced by a previous `switch` (returned to some
    /// context) or by [`Arch::init_stack`], not resumed since, whose stack is
    /// still mapped; the current context must be resumed later only through
    /// the sp this call hands to the other side, or never (its stack is then
    /// abandoned without unwinding).
    unsafe fn switch(to: *mut u8) -> *mut u8;

    /// Bootstraps a fresh context whose stack ends (exclusive) at `top`.
    ///
    /// # Safety
    ///
    /// `top` must be 16-byte aligned, writable for the
    /// [`INIT_STACK_BYTES`](Arch::INIT_STACK_BYTES) below it, and the stack
    /// below must be large enough for what `entry` will run.
    unsafe fn init_stack(top: *mut u8, entry: EntryFn, arg: *mut u8) -> *mut u8;

    /// A plain, non-serialising cycle-counter read (`rdtsc`, `cntvct_el0`):
    /// cheap enough for every resume. It may be reordered with nearby
    /// instructions; use it for timeslices, never for attribution.
    fn cycles() -> u64;

    /// A cycle-counter read that waits for earlier instructions to complete
    /// (`lfence; rdtsc`, `isb; mrs`): for measuring a short region.
    fn cycles_serialising() -> u64;

    /// The counter's frequency in Hz when the hardware says it
    /// (`cntfrq_el0`); `None` where it must be calibrated (x86 TSC).
    fn cycles_per_second() -> Option<u64>;

    /// A hint that the caller is spinning (`pause`, `isb`/`yield`).
    fn spin_hint();
}
