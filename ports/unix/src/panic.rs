//! The actor-aware panic hook: a panic inside an actor is reported with the
//! actor's id and name first, then as std reports it.
//!
//! Core calls its port's `Platform::install_panic_hook` at every runtime
//! build with a function that describes the running actor (or writes
//! nothing off actors). The first call in the process wraps std's hook;
//! every call adds its describer once, so runtimes of two platforms in one
//! process (a port and the simulator, say) each name their own actors.

use std::sync::{Mutex, Once};

use smarm_core::DescribePanic;

/// Reports the actor's `line` (`smarm: actor 7 "name" panicked:`) for the
/// panic `info`: on stderr, before the previous hook's own report (not
/// `eprintln!`: a closed stderr must not panic in a hook). With the `log`
/// feature and a logger that takes it, an error record instead (target
/// `smarm`) that also carries the message and place, since std's line,
/// which the previous hook prints, stays on stderr.
fn report_panic(line: &str, info: &std::panic::PanicHookInfo<'_>) {
    #[cfg(feature = "log")]
    if log::log_enabled!(target: "smarm", log::Level::Error) {
        let payload = info.payload();
        let msg = match payload.downcast_ref::<&str>() {
            Some(s) => s,
            None => payload
                .downcast_ref::<String>()
                .map_or("Box<dyn Any>", String::as_str),
        };
        match info.location() {
            Some(at) => log::error!(target: "smarm", "{line} {msg} (at {at})"),
            None => log::error!(target: "smarm", "{line} {msg}"),
        }
        return;
    }
    let _ = info;
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The describers installed so far (each once), in installation order.
static DESCRIBERS: Mutex<Vec<DescribePanic>> = Mutex::new(Vec::new());

/// The first non-empty description among `describers` (a thread runs at
/// most one platform's actor, so at most one writes); empty off actors.
pub(crate) fn describe_first(describers: &[DescribePanic]) -> String {
    let mut line = String::new();
    for f in describers {
        if f(&mut line).is_ok() && !line.is_empty() {
            return line;
        }
        line.clear();
    }
    line
}

/// The describers installed so far (a copy).
#[cfg(test)]
pub(crate) fn installed() -> Vec<DescribePanic> {
    DESCRIBERS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Adds `describe` to the hook, wrapping the process's panic hook the first
/// time (the previous hook still runs, after the actor's line).
pub fn install_panic_hook(describe: DescribePanic) {
    {
        let mut d = DESCRIBERS.lock().unwrap_or_else(|e| e.into_inner());
        if !d.iter().any(|&f| f as usize == describe as usize) {
            d.push(describe);
        }
    }
    static WRAP: Once = Once::new();
    WRAP.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // A poisoned list (a panic elsewhere while it was locked) still
            // holds every describer added before.
            let describers = DESCRIBERS.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let line = describe_first(&describers);
            if !line.is_empty() {
                report_panic(&line, info);
            }
            prev(info)
        }));
    });
}
