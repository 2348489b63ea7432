//! A runtime's scheduler state, built from the builder's settings.

#[allow(unused_imports)]
use super::*;

/// Runtime settings the scheduler needs (from the builder).
pub(crate) struct SchedConfig {
    pub(crate) workers: usize,
    pub(crate) stack_size: usize,
    pub(crate) timeslice: Option<Duration>,
    pub(crate) hold: Option<(Duration, Option<LongHoldHook>)>,
    pub(crate) mailbox_depths: bool,
}

impl<P: Platform> RtCore<P> {
    pub(crate) fn new(cfg: SchedConfig) -> Self {
        let SchedConfig {
            workers,
            stack_size,
            timeslice,
            hold,
            mailbox_depths,
        } = cfg;
        let slice_cycles = timeslice.map_or(0, |d| duration_to_cycles::<P>(d).max(1));
        let (hold_ns, hold_hook) = match hold {
            Some((d, hook)) => ((d.as_nanos().min(u64::MAX as u128) as u64).max(1), hook),
            None => (0, None),
        };
        RtCore {
            timers: Timers::new(),
            slice_cycles,
            mailbox_depths,
            blocked: AtomicUsize::new(0),
            unwinders: AtomicUsize::new(0),
            spares: Mutex::new(Vec::new()),
            extra_threads: Mutex::new(Vec::new()),
            hold_ns,
            hold_hook,
            monitor_word: AtomicU32::new(0),
            sweeps: AtomicUsize::new(0),
            spinning: CachePadded(crate::sync::AtomicBool::new(false)),
            registry: (0..=workers)
                .map(|_| crate::sched::registry::Shard::new())
                .collect(),
            idle: CachePadded(Idle::with_kick(workers, Some(kick_driver::<P>))),
            io: IoSlot(crate::sync::AtomicPtr::new(ptr::null_mut())),
            names: Arc::new(crate::sched::names::Names::new()),
            workers: (0..workers)
                .map(|index| WorkerShared {
                    // SAFETY: only the thread serving this worker puts and
                    // takes (`schedule` and `put_run_next` with its own,
                    // attached context; `find_work`, `expire` and `handoff`
                    // on its own worker); a successor gets the duty over a
                    // Release/Acquire word, and the runtime's drop joins
                    // the threads before it empties the slot.
                    run_next: unsafe { Slot::owner_only() },
                    index,
                    counters: Counters::default(),
                    server: crate::sched::serve::Server::new(),
                    samples: Samples {
                        running: AtomicU64::new(0),
                        resumes: AtomicU64::new(0),
                        hold_since: AtomicU64::new(0),
                        hold_seq: AtomicU64::new(0),
                    },
                })
                .collect(),
            outside: Counters::default(),
            // Spare stacks kept mapped: enough for a few thousand short-lived
            // actors to come and go without mmap/munmap and first-touch page
            // faults (each was ~5-10 µs: msg_pairs at 1,024 pairs spawns 2,048
            // actors per run). Idle pooled stacks cost address space and the
            // pages they once touched (a few KiB each), not their full size.
            pool: StackPool::new(stack_size, SHARED_STACKS_MIN.max(256 * workers)),
            // Beyond what the caches hold, per class: a magazine per worker
            // (a worker's cache spills one only when it is full), or 1 MiB
            // of blocks if that is more, so that a burst of queued messages
            // goes round without the allocator (docs/benchmarks.md, "A
            // burst's nodes"). What a class keeps is what the allocator
            // would have kept too: small blocks freed to it stay in its
            // free lists, not given back to the system.
            nodes: NodeDepot::with_budget(workers.max(2), DEPOT_CLASS_BYTES),
            shutdown: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            live_shards: (0..=workers)
                .map(|_| CachePadded(live::LiveShard::default()))
                .collect(),
            next_id: AtomicU64::new(1),
            sched: SchedSlot(RawCell::new(None)),
        }
    }
}
