//! A runtime's table of registered names (Erlang's `register`/`whereis`):
//! name -> (actor id, a type-erased weak address), under one lock. The
//! typed API is `crate::supervise::names`; this layer only stores.
//!
//! A binding counts only while its actor lives: an entry whose actor has
//! ended (its exit hooks closed, which happens before any of them runs) is
//! skipped by every lookup and replaced by the next `insert`, so whoever
//! hears of the exit first (a supervisor's `Down`, a joiner) can take the
//! name at once, whatever order the exit hooks run in. The actor's exit
//! hook also removes the entry (only if it is still that actor's: the id
//! must match, so a name re-bound to a newer actor survives the older
//! one's exit), and `unregister` does. Entries hold weak references: the
//! table keeps no mailbox open and no actor alive.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;

use crate::actor::LifeRef;
use crate::seam::lock::Mutex;
use crate::seam::platform::RawLock;

/// One registered name.
pub(crate) struct Entry {
    /// The actor the name is bound to.
    pub(crate) id: u64,
    /// Its `Life`, to tell whether it still lives (the address below
    /// holds it too).
    pub(crate) life: LifeRef,
    /// Its address, type-erased (`Addr<M, P>`): a registered actor's
    /// mailbox stays open while the name is bound.
    pub(crate) addr: Box<dyn Any + Send + Sync>,
}

impl Entry {
    fn live(&self) -> bool {
        !self.life.hooks.is_closed()
    }
}

/// The names of one runtime.
pub(crate) struct Names<L: RawLock> {
    map: Mutex<L, BTreeMap<Arc<str>, Entry>>,
}

impl<L: RawLock> Names<L> {
    pub(crate) fn new() -> Self {
        Names {
            map: Mutex::new(BTreeMap::new()),
        }
    }

    /// Binds `name` (replacing a binding whose actor has ended); gives the
    /// entry back if a live actor holds the name.
    pub(crate) fn insert(&self, name: Arc<str>, entry: Entry) -> Result<(), Entry> {
        let old = {
            let mut map = self.map.lock();
            if map.get(&name).is_some_and(Entry::live) {
                return Err(entry);
            }
            map.insert(name, entry)
        };
        // Dropped outside the lock.
        drop(old);
        Ok(())
    }

    /// `f` of the entry bound to `name`, if any (under the lock: `f` must
    /// not block or register).
    pub(crate) fn with<R>(&self, name: &str, f: impl FnOnce(&Entry) -> R) -> Option<R> {
        self.map.lock().get(name).filter(|e| e.live()).map(f)
    }

    /// Unbinds `name` if actor `id` holds it; whether it did. The entry is
    /// dropped after the lock is released.
    pub(crate) fn remove_if(&self, name: &str, id: u64) -> bool {
        let gone = {
            let mut map = self.map.lock();
            match map.get(name) {
                Some(e) if e.id == id => map.remove(name),
                _ => None,
            }
        };
        gone.is_some()
    }

    /// Unbinds `name`; whether a live actor held it.
    pub(crate) fn remove(&self, name: &str) -> bool {
        let gone = self.map.lock().remove(name);
        gone.is_some_and(|e| e.live())
    }

    /// Unbinds every name (at runtime shutdown); the entries are dropped
    /// after the lock is released.
    pub(crate) fn clear(&self) {
        let all = core::mem::take(&mut *self.map.lock());
        drop(all);
    }

    /// Every name a live actor holds, sorted.
    pub(crate) fn names(&self) -> Vec<Arc<str>> {
        let map = self.map.lock();
        map.iter()
            .filter(|(_, e)| e.live())
            .map(|(n, _)| n.clone())
            .collect()
    }
}
