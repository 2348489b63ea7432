//! The `log` feature: the runtime's own report of an actor's panic becomes
//! an error record (target `smarm`, with the message and place) when a
//! logger takes it, and stays a line on stderr when none does.
//!
//! Only with the feature (`cargo test -p smarm-tests --features log --test
//! obs_log`; `.ci/run` has a step for it).
use std::io::Read;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use smarm_tests::smarm::Runtime;
use smarm_tests::with_timeout;

/// A logger that keeps every record of target `smarm`, and takes them
/// only while `TAKE` is set (else `log_enabled!` says no).
struct Recorder;

static RECORDS: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());
static TAKE: AtomicBool = AtomicBool::new(true);

impl log::Log for Recorder {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target() == "smarm" && TAKE.load(Ordering::SeqCst)
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            RECORDS.lock().unwrap().push((r.level(), r.args().to_string()));
        }
    }
    fn flush(&self) {}
}

/// One test at a time (the logger and stderr are the process's), with the
/// logger installed and the records cleared.
fn begin() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    static LOGGER: Recorder = Recorder;
    let guard = ONE.lock().unwrap_or_else(|e| e.into_inner());
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Trace);
    }
    RECORDS.lock().unwrap().clear();
    guard
}

#[test]
fn an_actors_panic_is_an_error_record_with_its_message_and_place() {
    let _one = begin();
    TAKE.store(true, Ordering::SeqCst);
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let h = rt.spawn_named("logged-panicker", || -> () { panic!("disk {}", "full") });
        let id = h.id();
        assert!(h.join().is_err());
        let records = RECORDS.lock().unwrap().clone();
        let want = format!("smarm: actor {id} \"logged-panicker\" panicked: disk full (at tests/obs_log.rs:");
        let mine: Vec<_> = records.iter().filter(|(_, m)| m.starts_with(&want)).collect();
        assert_eq!(mine.len(), 1, "one record, {want}...: {records:?}");
        assert_eq!(mine[0].0, log::Level::Error);
        // A plain thread's panic is not the runtime's to report.
        let before = RECORDS.lock().unwrap().len();
        assert!(std::thread::spawn(|| panic!("not an actor")).join().is_err());
        assert_eq!(
            RECORDS.lock().unwrap().len(),
            before,
            "no record for a plain thread"
        );
    });
}

#[test]
fn without_a_logger_that_takes_it_the_report_stays_on_stderr() {
    let _one = begin();
    TAKE.store(false, Ordering::SeqCst);
    let mut file = tempfile();
    let rt = Runtime::builder().workers(1).build().unwrap();
    let id = {
        let _redirect = Redirect::stderr_to(&file);
        let h = rt.spawn_named("stderr-panicker", || -> () { panic!("no logger") });
        let id = h.id();
        assert!(h.join().is_err());
        id
    };
    TAKE.store(true, Ordering::SeqCst);
    let mut err = String::new();
    file.read_to_string(&mut err).unwrap();
    let line = format!("smarm: actor {id} \"stderr-panicker\" panicked:\n");
    assert!(err.contains(&line), "{line:?} on stderr: {err:?}");
    assert!(RECORDS.lock().unwrap().is_empty(), "no record went to the logger");
}

/// An unlinked temporary file, read from its start.
fn tempfile() -> std::fs::File {
    let path = std::env::temp_dir().join(format!("smarm-obs-log-{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    f
}

/// Points fd 2 at a file until dropped (then restores it and rewinds the
/// file for reading).
struct Redirect {
    saved: i32,
    file: i32,
}

impl Redirect {
    fn stderr_to(f: &std::fs::File) -> Redirect {
        // SAFETY: dup and dup2 on descriptors this process owns (2, and the
        // file's, which outlives the redirect).
        unsafe {
            let saved = libc::dup(2);
            assert!(saved >= 0);
            assert_eq!(libc::dup2(f.as_raw_fd(), 2), 2);
            Redirect {
                saved,
                file: f.as_raw_fd(),
            }
        }
    }
}

impl Drop for Redirect {
    fn drop(&mut self) {
        // SAFETY: `saved` is our duplicate of the original fd 2; lseek on
        // the file's descriptor, which is still open.
        unsafe {
            libc::dup2(self.saved, 2);
            libc::close(self.saved);
            libc::lseek(self.file, 0, libc::SEEK_SET);
        }
    }
}
