//! The long-hold monitor: reports an actor that held its worker past the
//! bound without reaching a safe point.

#[allow(unused_imports)]
use super::*;

/// What [`Runtime`](crate::Runtime)'s long-hold hook receives: an actor held
/// its worker without reaching a safe point for longer than the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongHold {
    /// The actor's id.
    pub actor: u64,
    /// The worker it holds.
    pub worker: usize,
    /// How long it has held it (a lower bound while `finished` is false:
    /// the monitor samples every quarter of the bound).
    pub held: Duration,
    /// `false`: reported by the monitor while the actor still runs; `true`:
    /// reported by the worker when the actor finally switched out.
    pub finished: bool,
}

/// The long-hold hook.
pub type LongHoldHook = Arc<dyn Fn(&LongHold) + Send + Sync>;

impl<P: Platform> RtCore<P> {
    /// After an actor switched out of worker `index` (long-hold monitor
    /// on): clears the running id and, if the monitor reported this hold,
    /// reports its full length.
    #[inline]
    pub(crate) fn end_hold(&self, w: &WorkerShared, index: usize, id: u64, resumes: u64) {
        // Relaxed: samples for the monitor.
        w.samples.running.store(0, Ordering::Relaxed);
        if w.samples.hold_since.load(Ordering::Relaxed) != 0 {
            self.report_end_hold(w, index, id, resumes);
        }
    }

    #[cold]
    pub(crate) fn report_end_hold(&self, w: &WorkerShared, index: usize, id: u64, resumes: u64) {
        // Acquire: pairs with the monitor's Release store of `hold_since`,
        // after its store of `hold_seq`.
        let since = w.samples.hold_since.swap(0, Ordering::Acquire);
        // A report about an earlier hold that ended while the monitor was
        // reporting it (Relaxed: ordered by the swap above).
        if since == 0 || w.samples.hold_seq.load(Ordering::Relaxed) != resumes {
            return;
        }
        let held = || Duration::from_nanos(P::now_ns().saturating_sub(since));
        crate::seam::trace::long_hold(id, index, held, true);
        if let Some(hook) = &self.hold_hook {
            hook(&LongHold {
                actor: id,
                worker: index,
                held: held(),
                finished: true,
            });
        }
    }
}

/// The long-hold monitor: samples every worker every quarter of the bound
/// and reports an actor that has held one past the bound without reaching
/// a safe point (once per hold; the worker reports the hold's full length
/// when it ends).
pub(crate) fn run_monitor<P: Platform, Q: RunQueue<P>>(shared: &Shared<P, Q>) {
    let core = &shared.core;
    let n = core.workers.len();
    let period = (core.hold_ns / 4).max(100_000);
    // Per worker: the resume count last seen, and when it was first seen.
    let mut seen: Vec<(u64, u64)> = (0..n).map(|_| (u64::MAX, 0)).collect();
    let mut reported: Vec<bool> = (0..n).map(|_| false).collect();
    loop {
        let now = P::now_ns();
        // SeqCst: pairs with the store in `Runtime::stop`.
        if core.monitor_word.load(Ordering::SeqCst) != 0 {
            return;
        }
        for (i, w) in core.workers.iter().enumerate() {
            // Relaxed: samples (see `WorkerShared`).
            let resumes = w.samples.resumes.load(Ordering::Relaxed);
            let id = w.samples.running.load(Ordering::Relaxed);
            if id == 0 || resumes != seen[i].0 {
                seen[i] = (resumes, now);
                reported[i] = false;
                continue;
            }
            let held = now - seen[i].1;
            if held >= core.hold_ns && !reported[i] {
                reported[i] = true;
                // The monitor is this counter's only writer.
                w.counters.long_holds(1);
                crate::seam::trace::long_hold(id, i, || Duration::from_nanos(held), false);
                if let Some(hook) = &core.hold_hook {
                    hook(&LongHold {
                        actor: id,
                        worker: i,
                        held: Duration::from_nanos(held),
                        finished: false,
                    });
                }
                // Relaxed, then Release: pairs with the worker's Acquire
                // swap of `hold_since`, which it reads `hold_seq` after.
                w.samples.hold_seq.store(resumes, Ordering::Relaxed);
                w.samples.hold_since.store(seen[i].1.max(1), Ordering::Release);
            }
        }
        P::wait(&core.monitor_word, 0, Some(now + period));
    }
}
