//! Registered names, Erlang's `register` / `whereis` / `unregister`: a
//! runtime-wide map from a name to an actor's address, which forgets the
//! actor when it exits. A supervised child that registers itself when it
//! starts is found under the same name after every restart: an ended
//! actor's binding no longer counts from the moment it ends, before its
//! supervisor can hear of it.
//!
//! The free functions work on the runtime of the calling actor; the
//! `Runtime` methods of the same names work from any thread. A name is
//! bound to one actor at a time; an actor may hold several names. The map
//! holds the address: while the name is bound, the actor's mailbox does
//! not close for lack of addresses (anyone may still look it up and send),
//! so a registered server's `recv` keeps waiting; the binding goes when
//! the actor ends or the name is unregistered.
//!
//! ```ignore
//! // With a port crate (`smarm_linux`, `smarm_darwin`) as `smarm`:
//! let (addr, h) = smarm::spawn_actor(|mut mb: smarm::Mailbox<u32>| mb.recv().unwrap());
//! smarm::register("counter", &addr).unwrap();
//! let found: smarm::Addr<u32> = smarm::whereis("counter").unwrap();
//! found.send(1).unwrap();
//! h.join().unwrap();
//! assert!(smarm::whereis::<u32>("counter").is_none(), "forgotten at exit");
//! ```

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::msg::mailbox::Addr;
use crate::sched::names::{Entry, Names};
use crate::seam::error::RegisterError;
use crate::seam::platform::{Platform, RawLock};

/// The name table of the calling actor's runtime.
fn here<P: Platform>() -> Option<Arc<Names<P::Lock>>> {
    crate::sched::current_actor::<P>()?;
    let c = crate::sched::ctx::<P>();
    // SAFETY: a running actor's worker context is live and its `core`
    // outlives the actors it runs.
    Some(unsafe { (*(*c).core).names.clone() })
}

/// Binds `name` to `addr`'s actor in `names`.
pub(crate) fn register_in<M, P, L>(
    names: &Arc<Names<L>>,
    name: &str,
    addr: &Addr<M, P>,
) -> Result<(), RegisterError>
where
    M: Send + 'static,
    P: Platform,
    L: RawLock + 'static,
{
    let life = addr.life();
    if life.hooks.is_closed() {
        return Err(RegisterError::NotAlive { id: life.id });
    }
    let name: Arc<str> = Arc::from(name);
    let entry = Entry {
        id: life.id,
        life: life.clone(),
        addr: Box::new(addr.clone()),
    };
    if names.insert(name.clone(), entry).is_err() {
        return Err(RegisterError::Taken { name });
    }
    // Lookups skip an ended actor's binding already; this hook frees the
    // entry. (If the actor ended since the check above, it runs now.)
    let (table, id) = (names.clone(), life.id);
    life.hooks.add(Box::new(move |_| {
        table.remove_if(&name, id);
    }));
    Ok(())
}

/// The address bound to `name` in `names`, if it is an `Addr<M>`.
pub(crate) fn whereis_in<M, P, L>(names: &Names<L>, name: &str) -> Option<Addr<M, P>>
where
    M: Send + 'static,
    P: Platform,
    L: RawLock,
{
    names
        .with(name, |e| e.addr.downcast_ref::<Addr<M, P>>().cloned())
        .flatten()
}

/// Binds `name` to `addr`'s actor in the calling actor's runtime, until
/// that actor exits or [`unregister`] unbinds it.
/// [`RegisterError::Taken`] if another actor holds the name,
/// [`RegisterError::NotAlive`] if `addr`'s actor has ended,
/// [`RegisterError::NoRuntime`] on a plain thread (use
/// `Runtime::register`).
pub fn register<M: Send + 'static, P: Platform>(name: &str, addr: &Addr<M, P>) -> Result<(), RegisterError> {
    let names = here::<P>().ok_or(RegisterError::NoRuntime)?;
    register_in(&names, name, addr)
}

/// The address registered as `name` in the calling actor's runtime; `None`
/// if no live actor holds the name, if it was registered with another
/// message type than `M`, or on a plain thread (use `Runtime::whereis`).
pub fn whereis<M: Send + 'static, P: Platform>(name: &str) -> Option<Addr<M, P>> {
    whereis_in(&*here::<P>()?, name)
}

/// Unbinds `name` in the calling actor's runtime; whether a live actor held it.
pub fn unregister<P: Platform>(name: &str) -> bool {
    here::<P>().is_some_and(|n| n.remove(name))
}

/// Every registered name of the calling actor's runtime, sorted (empty on
/// a plain thread).
pub fn registered<P: Platform>() -> Vec<Arc<str>> {
    here::<P>().map_or_else(Vec::new, |n| n.names())
}
