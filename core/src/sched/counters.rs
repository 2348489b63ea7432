//! Per-worker counters, readable as a snapshot before and after a workload.
//!
//! Each worker owns one [`Counters`] block and is its only writer, so an
//! increment is a Relaxed load plus a Relaxed store (no locked RMW on the hot
//! path); readers take Relaxed loads, which is enough for statistics (a
//! snapshot taken while workers run may be slightly stale, never torn per
//! field). Plain OS threads outside the runtime (a `Runtime::spawn` from
//! `main`) share one extra block updated with `fetch_add`.
//!
//! Without the `counters` feature the same names compile to no-ops, so call
//! sites carry no `cfg`.

use core::fmt;
use core::ops::AddAssign;

/// What one worker (or the outside-thread block) counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// Actors pushed onto the shared run queue.
    pub enqueued: u64,
    /// Actors popped from the shared run queue.
    pub dequeued: u64,
    /// Sum of the queue's length seen at each dequeue (mean = sum / dequeued;
    /// the run queue's `depth_hint`: with the striped queue, the worker's own
    /// stripe and the overflow).
    pub depth_sum: u64,
    /// Largest queue length seen at a dequeue (as `depth_sum` sees it).
    pub depth_peak: u64,
    /// Actors run from the worker's own run-next slot.
    pub run_next: u64,
    /// Futex wakes issued to idle workers.
    pub wakeups: u64,
    /// Times the worker went to sleep for lack of work.
    pub parks: u64,
    /// Context switches into actors.
    pub switches: u64,
    /// Of those, switches straight from one actor to the next (a park, a
    /// yield or a spawn that handed its worker's turn over without a pass
    /// through the worker loop: the direct handoff).
    pub direct_switches: u64,
    /// Actors spawned.
    pub spawned: u64,
    /// Timers that fired (woke a sleeper or ended a timed wait).
    pub timer_fires: u64,
    /// IO readiness events delivered by polls.
    pub io_events: u64,
    /// Safe points that found the timeslice spent and yielded.
    pub timeslice_expiries: u64,
    /// Blocking calls for which the worker handed its duty to another thread.
    pub blocking_handoffs: u64,
    /// Actors reported for holding a worker beyond the long-hold bound.
    pub long_holds: u64,
}

impl CounterSnapshot {
    /// Mean queue length at dequeue (0 when nothing was dequeued).
    pub fn mean_depth(&self) -> f64 {
        if self.dequeued == 0 {
            0.0
        } else {
            self.depth_sum as f64 / self.dequeued as f64
        }
    }
}

impl AddAssign for CounterSnapshot {
    fn add_assign(&mut self, o: Self) {
        self.enqueued += o.enqueued;
        self.dequeued += o.dequeued;
        self.depth_sum += o.depth_sum;
        self.depth_peak = self.depth_peak.max(o.depth_peak);
        self.run_next += o.run_next;
        self.wakeups += o.wakeups;
        self.parks += o.parks;
        self.switches += o.switches;
        self.direct_switches += o.direct_switches;
        self.spawned += o.spawned;
        self.timer_fires += o.timer_fires;
        self.io_events += o.io_events;
        self.timeslice_expiries += o.timeslice_expiries;
        self.blocking_handoffs += o.blocking_handoffs;
        self.long_holds += o.long_holds;
    }
}

impl fmt::Display for CounterSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "enqueued={} dequeued={} depth(mean={:.2} peak={}) run_next={} \
             wakeups={} parks={} switches={} direct_switches={} spawned={} timer_fires={} \
             io_events={} \
             timeslice_expiries={} blocking_handoffs={} long_holds={}",
            self.enqueued,
            self.dequeued,
            self.mean_depth(),
            self.depth_peak,
            self.run_next,
            self.wakeups,
            self.parks,
            self.switches,
            self.direct_switches,
            self.spawned,
            self.timer_fires,
            self.io_events,
            self.timeslice_expiries,
            self.blocking_handoffs,
            self.long_holds
        )
    }
}

/// Calls `$m!` with the list of plain (add-only) counter fields, so the
/// real counters and their no-op twin cannot drift apart.
macro_rules! fields {
    ($m:ident) => {
        $m!(
            enqueued,
            dequeued,
            depth_sum,
            run_next,
            wakeups,
            parks,
            switches,
            direct_switches,
            spawned,
            timer_fires,
            io_events,
            timeslice_expiries,
            blocking_handoffs,
            long_holds,
        );
    };
}

#[cfg(feature = "counters")]
mod imp {
    use super::CounterSnapshot;
    use crate::sync::{AtomicU64, Ordering};

    macro_rules! counters {
        ($($field:ident),* $(,)?) => {
            /// One block of counters (see the module doc for who writes it).
            #[derive(Debug, Default)]
            #[repr(align(128))]
            pub struct Counters {
                $($field: AtomicU64,)*
                depth_peak: AtomicU64,
            }

            impl Counters {
                $(
                    /// Adds `n` (single writer: the owning worker).
                    #[inline(always)]
                    pub fn $field(&self, n: u64) {
                        // Relaxed: single writer; readers want statistics only.
                        let v = self.$field.load(Ordering::Relaxed);
                        self.$field.store(v + n, Ordering::Relaxed);
                    }
                )*

                /// Reads every field (Relaxed: statistics).
                pub fn snapshot(&self) -> CounterSnapshot {
                    CounterSnapshot {
                        $($field: self.$field.load(Ordering::Relaxed),)*
                        depth_peak: self.depth_peak.load(Ordering::Relaxed),
                    }
                }
            }
        };
    }

    fields!(counters);

    impl Counters {
        /// Adds to `enqueued` from any thread (the outside-thread block).
        pub fn shared_enqueued(&self, n: u64) {
            // Relaxed: statistics; several outside threads may add at once.
            self.enqueued.fetch_add(n, Ordering::Relaxed);
        }

        /// Adds to `spawned` from any thread (the outside-thread block).
        pub fn shared_spawned(&self, n: u64) {
            // Relaxed: statistics.
            self.spawned.fetch_add(n, Ordering::Relaxed);
        }

        /// Adds to `wakeups` from any thread (the outside-thread block).
        pub fn shared_wakeups(&self, n: u64) {
            // Relaxed: statistics.
            self.wakeups.fetch_add(n, Ordering::Relaxed);
        }

        /// Records one dequeue that saw the queue `depth` long.
        #[inline(always)]
        pub fn dequeue_at(&self, depth: u64) {
            self.dequeued(1);
            self.depth_sum(depth);
            // Relaxed: single writer.
            if depth > self.depth_peak.load(Ordering::Relaxed) {
                self.depth_peak.store(depth, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(not(feature = "counters"))]
mod imp {
    use super::CounterSnapshot;

    /// The no-op twin: every call compiles to nothing.
    #[derive(Debug, Default)]
    pub struct Counters;

    macro_rules! noops {
        ($($field:ident),* $(,)?) => {
            impl Counters {
                $(
                    /// No-op (the `counters` feature is off).
                    #[inline(always)]
                    pub fn $field(&self, _n: u64) {}
                )*
            }
        };
    }
    fields!(noops);

    impl Counters {
        /// No-op.
        #[inline(always)]
        pub fn dequeue_at(&self, _depth: u64) {}
        /// All zero.
        pub fn snapshot(&self) -> CounterSnapshot {
            CounterSnapshot::default()
        }
        /// No-op.
        pub fn shared_enqueued(&self, _n: u64) {}
        /// No-op.
        pub fn shared_spawned(&self, _n: u64) {}
        /// No-op.
        pub fn shared_wakeups(&self, _n: u64) {}
    }
}

pub use imp::Counters;
