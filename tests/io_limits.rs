//! Sockets at the OS's limits, each in a child process (its own descriptor
//! table and limit): `accept` at `RLIMIT_NOFILE` returns `EMFILE` and the
//! listener keeps serving once descriptors free up; 10,000 connections
//! open at once, each echoing its own bytes. (The host's port only.)
#![cfg(not(feature = "sim"))]

mod child;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use child::{child_entry, describe, run_child};
use smarm_tests::smarm::net::{TcpListener, TcpStream};
use smarm_tests::smarm::{self, Runtime};

/// Opens `/dev/null` until the process is out of descriptors; returns them.
fn fill_descriptors() -> Vec<std::fs::File> {
    let mut held = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
                return held;
            }
        }
    }
}

fn set_nofile(soft: u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a live rlimit.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        r.rlim_cur = soft.min(r.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
    }
}

#[test]
fn accept_at_the_descriptor_limit_returns_emfile_and_keeps_serving() {
    child_entry("emfile", || {
        set_nofile(256);
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let clients: Vec<_> = (0..3)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            let mut held = fill_descriptors();
            // Out of descriptors: the error, not a hang or a crash.
            let e = l.accept().unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
            let e = l.accept().unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
            // Free two: the listener serves the waiting connections again.
            held.truncate(held.len() - 2);
            let (s, _) = l.accept().expect("accept after descriptors freed");
            let mut c0 = &clients[0];
            c0.write_all(b"ping").unwrap();
            let mut buf = [0u8; 4];
            (&s).read_exact(&mut buf).unwrap();
            (&s).write_all(&buf).unwrap();
            c0.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"ping");
            drop(held);
            let more: Vec<_> = (0..2).map(|_| l.accept().expect("accept").0).collect();
            assert_eq!(more.len(), 2);
        });
        eprintln!("emfile: ok");
    });
    let out = run_child(
        "accept_at_the_descriptor_limit_returns_emfile_and_keeps_serving",
        "emfile",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("emfile: ok"),
        "{}",
        describe(&out)
    );
}

const CONNS: usize = 10_000;

#[test]
fn ten_thousand_connections_at_once() {
    child_entry("server", || {
        // The server's side: 10,000 accepted streams (+ the listener and
        // the runtime) under the machine's limit; the clients are the
        // parent's descriptors, in its own table.
        set_nofile(CONNS as u64 + 512);
        let rt = Runtime::builder().workers(2).build().unwrap();
        let peak = rt.block_on(|| {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            println!("addr {}", l.local_addr().unwrap());
            let live = Arc::new(AtomicUsize::new(0));
            let peak = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..CONNS)
                .map(|_| {
                    let (s, _) = l.accept().expect("accept");
                    let (live, peak) = (live.clone(), peak.clone());
                    smarm::spawn(move || {
                        let n = live.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        let mut buf = [0u8; 512];
                        loop {
                            match (&s).read(&mut buf) {
                                Ok(0) => break,
                                Ok(k) => (&s).write_all(&buf[..k]).expect("server write"),
                                Err(e) => panic!("server read: {e}"),
                            }
                        }
                        live.fetch_sub(1, Ordering::SeqCst);
                    })
                })
                .collect();
            for h in hs {
                h.join().expect("connection");
            }
            peak.load(Ordering::SeqCst)
        });
        eprintln!("server: peak {peak}");
    });
    // The parent: start the server, connect 10,000 clients, hold them all
    // open, then echo a distinct message on each and close them.
    let exe = std::env::current_exe().unwrap();
    if child::launcher().is_some() {
        eprintln!("skipped under an emulator: 10,000 sockets through qemu-user take minutes");
        return;
    }
    let mut cmd = std::process::Command::new(exe);
    cmd.args([
        "ten_thousand_connections_at_once",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ]);
    let server = child::spawn(&mut cmd, "server").expect("spawn the server");
    /// Kills the server if the test fails before it ends (no orphan).
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server = Reap(server);
    let stdout = server.0.stdout.take().unwrap();
    smarm_tests::with_timeout(300, move || {
        use std::io::BufRead;
        let mut out = std::io::BufReader::new(stdout);
        let mut line = String::new();
        // libtest prints the test's name on the same line before it.
        let addr = loop {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "the server ended before its address"
            );
            if let Some(a) = line.trim().split("addr ").nth(1) {
                break a.parse::<std::net::SocketAddr>().unwrap();
            }
        };
        let rt = Runtime::builder().workers(2).build().unwrap();
        rt.block_on(move || {
            let streams: Vec<TcpStream> = (0..CONNS)
                .map(|_| TcpStream::connect(addr).expect("connect"))
                .collect();
            let hs: Vec<_> = streams
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    smarm::spawn(move || {
                        let msg = format!("connection {i}");
                        (&s).write_all(msg.as_bytes()).unwrap();
                        let mut back = vec![0u8; msg.len()];
                        (&s).read_exact(&mut back).unwrap();
                        assert_eq!(back, msg.as_bytes());
                        // Kept open: every echo back means the server holds
                        // that connection; all close together below.
                        s
                    })
                })
                .collect();
            let open: Vec<TcpStream> = hs.into_iter().map(|h| h.join().expect("client")).collect();
            assert_eq!(open.len(), CONNS);
        });
    });
    let status = server.0.wait().unwrap();
    let mut err = String::new();
    server.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "server: {status:?}\n{err}");
    assert!(
        err.contains(&format!("server: peak {CONNS}")),
        "all 10,000 open at once: {err}"
    );
}
