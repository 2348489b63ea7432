//! Sockets on the runtime's poller: actors park on reads, writes, accepts
//! and connects while their worker runs others; timeouts, kills, shutdown
//! and closes wake them exactly once. (The host's port only: the
//! deterministic port has no sockets.)
#![cfg(not(feature = "sim"))]

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::Duration;

use smarm_tests::smarm::net::{TcpListener, TcpStream, UdpSocket};
use smarm_tests::smarm::unix::net::UnixStream;
use smarm_tests::smarm::{self, ActorState, JoinError, Runtime};
use smarm_tests::{eventually, with_timeout};

/// A byte pattern that differs per connection and offset, so a swapped or
/// shifted chunk fails the comparison.
fn pattern(conn: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(conn.wrapping_mul(7919)) as u8)
        .collect()
}

/// Echo server: one actor per connection, until the peer closes.
fn serve_echo(l: TcpListener, conns: usize) {
    let hs: Vec<_> = (0..conns)
        .map(|_| {
            let (s, _) = l.accept().expect("accept");
            smarm::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    let n = (&s).read(&mut buf).expect("server read");
                    if n == 0 {
                        return;
                    }
                    (&s).write_all(&buf[..n]).expect("server write");
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("connection actor");
    }
}

/// Many clients, each writing its own pattern and reading the echo back
/// concurrently (a writer actor and a reader actor per connection, through
/// `&TcpStream`), on `workers` workers.
fn echo_many(workers: usize, conns: usize, len: usize) {
    let rt = Runtime::builder().workers(workers).build().unwrap();
    let before = rt.counters().total();
    rt.block_on(move || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = smarm::spawn(move || serve_echo(l, conns));
        let clients: Vec<_> = (0..conns as u64)
            .map(|c| {
                smarm::spawn(move || {
                    let s = Arc::new(TcpStream::connect(addr).expect("connect"));
                    let data = pattern(c, len);
                    let w = {
                        let s = s.clone();
                        let data = data.clone();
                        smarm::spawn(move || {
                            for chunk in data.chunks(1000) {
                                (&*s).write_all(chunk).expect("client write");
                            }
                            s.shutdown(Shutdown::Write).expect("shutdown write");
                        })
                    };
                    let mut back = Vec::with_capacity(len);
                    (&*s).read_to_end(&mut back).expect("client read");
                    w.join().expect("writer");
                    assert_eq!(back.len(), len, "connection {c}: echoed length");
                    assert!(back == data, "connection {c}: echoed bytes differ");
                })
            })
            .collect();
        for h in clients {
            h.join().expect("client");
        }
        server.join().expect("server");
    });
    let c = rt.counters().total();
    // The waits went through the poller, none through a blocking handoff
    // (the fallback for a descriptor the poller refused).
    assert!(c.io_events > before.io_events, "no IO event was delivered: {c}");
    assert_eq!(c.blocking_handoffs, before.blocking_handoffs, "{c}");
}

#[test]
fn echo_on_one_worker_needs_the_poller() {
    // Server and clients share one worker: a read that blocked the worker
    // would deadlock here.
    with_timeout(60, || echo_many(1, 20, 64 * 1024));
}

#[test]
fn echo_many_connections_on_two_workers() {
    with_timeout(120, || echo_many(2, 200, 32 * 1024));
}

#[test]
fn a_parked_reader_shows_in_the_dump_and_wakes_on_data() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        let fd = {
            use std::os::fd::AsRawFd;
            a.as_raw_fd()
        };
        let reader = rt.spawn(move || {
            let mut buf = [0u8; 5];
            (&a).read_exact(&mut buf).unwrap();
            buf
        });
        eventually(30, "the reader parks on its fd", || {
            rt.dump()
                .actors
                .iter()
                .any(|i| i.id == reader.id() && i.state == ActorState::WaitingIo { fd, write: false })
        });
        let shown = rt.dump().to_string();
        assert!(shown.contains(&format!("parked on fd {fd} (read)")), "{shown}");
        (&b).write_all(b"hello").unwrap();
        assert_eq!(&reader.join().unwrap(), b"hello");
    });
}

#[test]
fn read_timeout_parks_with_a_timer_and_other_actors_run() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let (a, b) = UnixStream::pair().unwrap();
            a.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            assert_eq!(a.read_timeout().unwrap(), Some(Duration::from_millis(50)));
            let mut buf = [0u8; 1];
            // Nothing written: the read times out.
            let e = (&a).read(&mut buf).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut);
            // A long timeout: a writer actor on the same (only) worker
            // runs while the reader waits, and the read gets its byte.
            a.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let w = smarm::spawn(move || (&b).write_all(b"x").unwrap());
            assert_eq!((&a).read(&mut buf).unwrap(), 1);
            assert_eq!(buf[0], b'x');
            w.join().unwrap();
            assert_eq!(
                a.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
        });
    });
}

#[test]
fn a_kill_wakes_an_actor_parked_on_a_socket_and_closes_it() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        let h = rt.spawn(move || {
            let mut buf = [0u8; 1];
            let _ = (&a).read(&mut buf);
            unreachable!("the read returned");
        });
        eventually(30, "the reader parks", || {
            rt.dump()
                .actors
                .iter()
                .any(|i| i.id == h.id() && matches!(i.state, ActorState::WaitingIo { .. }))
        });
        h.actor_ref().kill();
        assert!(matches!(h.join(), Err(JoinError::Killed { .. })));
        // The killed actor's stream was dropped: the peer reads EOF.
        let mut buf = [0u8; 1];
        assert_eq!((&b).read(&mut buf).unwrap(), 0);
    });
}

#[test]
fn shutdown_of_a_clone_wakes_the_parked_reader_with_eof() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let s = TcpStream::from(l.accept().unwrap().0);
        let s2 = s.try_clone().unwrap();
        let r = rt.spawn(move || {
            let mut buf = [0u8; 8];
            (&s).read(&mut buf).unwrap()
        });
        eventually(30, "the reader parks", || {
            rt.dump()
                .actors
                .iter()
                .any(|i| i.id == r.id() && matches!(i.state, ActorState::WaitingIo { write: false, .. }))
        });
        // Shut the read side down through the clone: the parked reader
        // wakes and reads end-of-stream.
        s2.shutdown(Shutdown::Read).unwrap();
        assert_eq!(r.join().unwrap(), 0);
        drop(c);
    });
}

#[test]
fn dropping_the_runtime_cancels_actors_parked_on_sockets() {
    with_timeout(120, || {
        let fds_before = open_fds();
        let rt = Runtime::builder().workers(2).build().unwrap();
        let mut peers = Vec::new();
        let mut hs = Vec::new();
        for _ in 0..1000 {
            let (a, b) = UnixStream::pair().unwrap();
            peers.push(b);
            hs.push(rt.spawn(move || {
                let mut buf = [0u8; 1];
                let _ = (&a).read(&mut buf);
            }));
        }
        eventually(60, "1,000 readers park", || {
            rt.dump()
                .actors
                .iter()
                .filter(|i| matches!(i.state, ActorState::WaitingIo { .. }))
                .count()
                == 1000
        });
        drop(rt);
        for h in hs {
            assert!(matches!(h.join(), Err(JoinError::Cancelled { .. })));
        }
        drop(peers);
        // Every socket, and the poller's descriptors, are closed.
        eventually(10, "descriptors back to the baseline", || {
            open_fds() <= fds_before
        });
    });
}

fn open_fds() -> usize {
    std::fs::read_dir("/dev/fd").map(|d| d.count()).unwrap_or(0)
}

#[test]
fn plain_threads_use_the_same_types_blocking() {
    with_timeout(60, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut buf = [0u8; 4];
            (&s).read_exact(&mut buf).unwrap();
            (&s).write_all(&buf).unwrap();
        });
        let c = TcpStream::connect(addr).unwrap();
        (&c).write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        (&c).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        t.join().unwrap();
        c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        // The peer is gone: EOF, not a timeout.
        assert_eq!((&c).read(&mut buf).unwrap(), 0);
    });
}

#[test]
fn connect_refused_is_the_os_error() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            // A port nobody listens on: bind one, note it, close it.
            let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
            let e = TcpStream::connect(addr).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
        });
    });
}

#[test]
fn udp_round_trip_between_actors_on_one_worker() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let a = UdpSocket::bind("127.0.0.1:0").unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").unwrap();
            let a_addr = a.local_addr().unwrap();
            let b_addr = b.local_addr().unwrap();
            let echo = smarm::spawn(move || {
                let mut buf = [0u8; 64];
                for _ in 0..100 {
                    let (n, from) = b.recv_from(&mut buf).unwrap();
                    assert_eq!(from, a_addr);
                    b.send_to(&buf[..n], from).unwrap();
                }
            });
            let mut buf = [0u8; 64];
            for i in 0..100u32 {
                a.send_to(&i.to_le_bytes(), b_addr).unwrap();
                let (n, from) = a.recv_from(&mut buf).unwrap();
                assert_eq!((n, from), (4, b_addr));
                assert_eq!(u32::from_le_bytes(buf[..4].try_into().unwrap()), i);
            }
            echo.join().unwrap();
        });
    });
}

#[test]
fn several_acceptors_share_one_listener() {
    // Four actors accept on one listener (the latch this runtime's first
    // record had could strand one whose wait began just after an edge
    // woke another); 64 connections in bursts all get served.
    with_timeout(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        rt.block_on(|| {
            let l = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
            let addr = l.local_addr().unwrap();
            let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let acceptors: Vec<_> = (0..4)
                .map(|_| {
                    let (l, served) = (l.clone(), served.clone());
                    smarm::spawn(move || loop {
                        let (s, _) = l.accept().unwrap();
                        let mut b = [0u8; 1];
                        if (&s).read(&mut b).unwrap() == 0 {
                            return; // the stop connection
                        }
                        // Counted before the echo: the client checks the
                        // count once it has read every echo back.
                        served.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        (&s).write_all(&b).unwrap();
                    })
                })
                .collect();
            for burst in 0..8u8 {
                let cs: Vec<_> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
                for c in &cs {
                    (&*c).write_all(&[burst]).unwrap();
                }
                for c in &cs {
                    let mut b = [0u8; 1];
                    (&*c).read_exact(&mut b).unwrap();
                    assert_eq!(b[0], burst);
                }
            }
            assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 64);
            // One empty connection per acceptor ends it.
            let stops: Vec<_> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
            drop(stops);
            for a in acceptors {
                a.join().unwrap();
            }
        });
    });
}

#[test]
fn async_reads_a_pipe_written_by_a_plain_thread() {
    use smarm_tests::smarm::io::Async;
    use std::os::fd::{FromRawFd, OwnedFd};
    with_timeout(60, || {
        let mut fds = [0i32; 2];
        // SAFETY: pipe with a live two-int array; results checked.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors we own.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let r = Async::new(std::fs::File::from(r)).unwrap();
        let mut w = std::fs::File::from(w);
        let rt = Runtime::builder().workers(1).build().unwrap();
        let reader = rt.spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            loop {
                let n = r.read_with(|mut f| f.read(&mut buf)).unwrap();
                if n == 0 {
                    return got;
                }
                got.extend_from_slice(&buf[..n]);
            }
        });
        eventually(30, "the reader parks on the pipe", || {
            rt.dump()
                .actors
                .iter()
                .any(|i| i.id == reader.id() && matches!(i.state, ActorState::WaitingIo { write: false, .. }))
        });
        for i in 0..100u8 {
            w.write_all(&[i; 10]).unwrap();
        }
        drop(w);
        let got = reader.join().unwrap();
        let want: Vec<u8> = (0..100u8).flat_map(|i| [i; 10]).collect();
        assert_eq!(got, want);
    });
}

#[test]
fn read_timeouts_racing_data_lose_nothing() {
    // A reader with a short timeout against a writer that writes in
    // bursts: each read returns data or TimedOut, and every byte written
    // is read once, in order (a timeout that ate a wake, or a wake that
    // left a stale entry, would lose or stall bytes).
    with_timeout(120, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        rt.block_on(|| {
            let (a, b) = UnixStream::pair().unwrap();
            a.set_read_timeout(Some(Duration::from_micros(200))).unwrap();
            const N: usize = 20_000;
            let w = smarm::spawn(move || {
                let mut x = 0u32;
                for i in 0..N {
                    (&b).write_all(&[i as u8]).unwrap();
                    // Irregular bursts: yield now and then, sleep rarely.
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    match x >> 28 {
                        0 => smarm::sleep(Duration::from_micros(300)),
                        1..=5 => smarm::yield_now(),
                        _ => {}
                    }
                }
            });
            let mut got = 0usize;
            let mut buf = [0u8; 256];
            while got < N {
                match (&a).read(&mut buf) {
                    Ok(0) => panic!("EOF after {got} bytes"),
                    Ok(n) => {
                        for (k, &v) in buf[..n].iter().enumerate() {
                            assert_eq!(v, (got + k) as u8, "byte {} out of order", got + k);
                        }
                        got += n;
                    }
                    // The writer's sleeps outlast the timeout now and then.
                    Err(e) if e.kind() == ErrorKind::TimedOut => {}
                    Err(e) => panic!("read: {e}"),
                }
            }
            w.join().unwrap();
            assert_eq!(got, N);
        });
    });
}

#[test]
fn io_is_served_while_a_hog_holds_the_poller_s_worker() {
    // Two workers. A starter actor parks on its mailbox, then a reader
    // parks on a socket: the worker that ran the reader is the last to go
    // idle, so it waits in the poller and is the first a wake pops; the
    // other sleeps on its futex word. A message to the starter kicks the
    // poller's worker out to run it, and the starter spawns a
    // hog that never switches out until the reader has its data. The read
    // must still be served: the worker leaving the poller hands the poll
    // role to the sleeper. (Without the handoff the read waits for the hog,
    // forever.)
    for _ in 0..10 {
        with_timeout(30, || {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let (a, b) = UnixStream::pair().unwrap();
            let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (starter, starter_h) = {
                let done = done.clone();
                rt.spawn_actor(move |mut mb: smarm::Mailbox<()>| {
                    mb.recv().unwrap();
                    let hog = smarm::spawn(move || {
                        while !done.load(std::sync::atomic::Ordering::SeqCst) {
                            std::hint::spin_loop();
                        }
                    });
                    hog.join().unwrap();
                })
            };
            eventually(10, "the starter parks", || {
                rt.dump()
                    .actors
                    .iter()
                    .any(|i| i.id == starter_h.id() && i.state == ActorState::WaitingMailbox)
            });
            let reader = {
                let done = done.clone();
                rt.spawn(move || {
                    let mut buf = [0u8; 1];
                    (&a).read_exact(&mut buf).unwrap();
                    done.store(true, std::sync::atomic::Ordering::SeqCst);
                })
            };
            eventually(10, "the reader parks", || {
                rt.dump()
                    .actors
                    .iter()
                    .any(|i| i.id == reader.id() && matches!(i.state, ActorState::WaitingIo { .. }))
            });
            starter.send(()).unwrap();
            // The hog runs once the starter, which spawned it, ends.
            eventually(10, "the hog runs", || rt.dump().actors.len() == 3);
            (&b).write_all(b"x").unwrap();
            reader.join().unwrap();
            starter_h.join().unwrap();
        });
    }
}

/// A loop of connects on one worker, to an acceptor on the same worker:
/// every connect goes through the poller (as Go's and tokio's do), so the
/// acceptor runs between them and the listen backlog never fills. Before,
/// a connect that the kernel completed inside `connect` (loopback) returned
/// at once: the connector ran on and the acceptor, parked until the next
/// poll, fell over a thousand connections behind (each SYN dropped past
/// the backlog cost a 1 s retransmission).
#[test]
fn a_loop_of_connects_lets_the_acceptor_keep_up() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let a = accepted.clone();
            const N: usize = 3000;
            let acceptor = smarm::spawn(move || {
                for _ in 0..N {
                    drop(l.accept().unwrap());
                    a.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            });
            let mut most = 0;
            for i in 1..=N {
                drop(TcpStream::connect(addr).unwrap());
                let pending = i - accepted.load(std::sync::atomic::Ordering::SeqCst);
                most = most.max(pending);
            }
            acceptor.join().unwrap();
            // Measured: 1 or 2 with the connect through the poller, 457
            // without it.
            assert!(
                most <= 64,
                "{most} connections waited for the acceptor at once (the backlog is 1024)"
            );
        });
    });
}

/// The listen backlog is 1,024 (std's `bind` asks for 128): 600 connects
/// with nobody accepting all complete. (Linux with the default
/// `net.core.somaxconn` of 4096; skipped where it is lower.)
#[cfg(target_os = "linux")]
#[test]
fn the_listen_backlog_holds_a_burst_of_connects() {
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    if somaxconn < 1024 {
        eprintln!("skipped: net.core.somaxconn is {somaxconn}, below the 1024 asked for");
        return;
    }
    with_timeout(60, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let conns: Vec<_> = (0..600)
            .map(|i| {
                std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                    .unwrap_or_else(|e| panic!("connect {i} with nobody accepting: {e}"))
            })
            .collect();
        assert_eq!(conns.len(), 600);
        drop(l);
    });
}

/// A writer of 4 MiB through a socket pair (its buffers hold a few hundred
/// KiB) meets `EAGAIN` and partial writes many times: it parks each time
/// and resumes as the reader drains, on one worker (a write that blocked
/// the worker would deadlock the reader); every byte arrives in order.
#[test]
fn a_writer_parks_on_a_full_socket_and_resumes_as_the_reader_drains() {
    with_timeout(120, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let before = rt.counters().total();
        let (a, b) = UnixStream::pair().unwrap();
        const LEN: usize = 4 << 20;
        let writer = rt.spawn(move || {
            (&a).write_all(&pattern(9, LEN)).unwrap();
            drop(a);
        });
        let reader = rt.spawn(move || {
            let mut got = Vec::with_capacity(LEN);
            let mut buf = [0u8; 1024];
            let mut reads = 0u64;
            loop {
                let n = (&b).read(&mut buf).unwrap();
                if n == 0 {
                    return (got, reads);
                }
                got.extend_from_slice(&buf[..n]);
                reads += 1;
                if reads.is_multiple_of(64) {
                    // Let the writer fill the buffer again.
                    smarm::yield_now();
                }
            }
        });
        writer.join().unwrap();
        let (got, reads) = reader.join().unwrap();
        assert!(
            got == pattern(9, LEN),
            "the bytes differ ({} of {LEN} arrived)",
            got.len()
        );
        assert!(reads >= (LEN / 1024) as u64);
        let c = rt.counters().total();
        assert!(
            c.io_events > before.io_events && c.parks > before.parks,
            "the writer never parked on the full socket: {c}"
        );
    });
}

/// Half-close: the client shuts down writing; the server reads to end of
/// stream and still answers on the other direction.
#[test]
fn a_half_closed_stream_still_carries_the_other_direction() {
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let server = smarm::spawn(move || {
                let (s, _) = l.accept().unwrap();
                let mut req = Vec::new();
                (&s).read_to_end(&mut req).unwrap();
                (&s).write_all(&[req.len() as u8; 3]).unwrap();
                req
            });
            let c = TcpStream::connect(addr).unwrap();
            (&c).write_all(b"question").unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            assert_eq!((&c).write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
            let mut answer = Vec::new();
            (&c).read_to_end(&mut answer).unwrap();
            assert_eq!(answer, [8u8; 3]);
            assert_eq!(server.join().unwrap(), b"question");
        });
    });
}

/// A peer's reset (a close with `SO_LINGER` 0 sends RST) wakes a reader
/// parked on the stream with `ConnectionReset`.
#[test]
fn a_peer_reset_wakes_the_parked_reader_with_connection_reset() {
    use std::os::fd::AsRawFd;
    with_timeout(60, || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let s = TcpStream::from(s);
        let h = rt.spawn(move || (&s).read(&mut [0u8; 16]).map_err(|e| e.kind()));
        eventually(30, "the reader parks", || {
            rt.dump()
                .actors
                .iter()
                .any(|i| i.id == h.id() && matches!(i.state, ActorState::WaitingIo { write: false, .. }))
        });
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: SO_LINGER with a live `linger` of the size given, on a
        // socket we own.
        let r = unsafe {
            libc::setsockopt(
                peer.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "setsockopt: {}", std::io::Error::last_os_error());
        drop(peer);
        assert_eq!(h.join().unwrap(), Err(ErrorKind::ConnectionReset));
    });
}
