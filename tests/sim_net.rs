//! The simulated network (`smarm_sim::net`): TCP and UDP over the sim's
//! virtual clock, with the seed picking delays, partial reads and writes,
//! datagram reordering and loss, resets and partitions.
//!
//! Two scenarios run over 64 seeds each (echo with pipelining and a small
//! send buffer; request/reply over TCP with resets and partitions, and over
//! UDP with loss), asserting that every byte and every reply arrives intact
//! and that the faults they are meant to survive did happen. The rest pin
//! the semantics one at a time. A failure names its seed;
//! `SMARM_SIM_SEED=S` replays it.
use std::cell::RefCell;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

use smarm_sim::net::{self, NetConfig, NetStats, TcpListener, TcpStream, UdpSocket};
use smarm_sim::{self as sim, ActorState, JoinError, Runtime};
use smarm_tests::with_timeout;

const SEEDS: u64 = 64;

fn runtime() -> Runtime {
    Runtime::builder().workers(2).build().unwrap()
}

/// Client `c`'s `k`-th message: bytes the checker can recompute.
fn payload(c: u64, k: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(31) ^ c.wrapping_mul(131) ^ k.wrapping_mul(7)) as u8)
        .collect()
}

/// Sums stats over seeds.
fn add(a: &mut NetStats, b: NetStats) {
    a.connections += b.connections;
    a.segments += b.segments;
    a.tcp_bytes += b.tcp_bytes;
    a.short_reads += b.short_reads;
    a.short_writes += b.short_writes;
    a.resets += b.resets;
    a.datagrams += b.datagrams;
    a.dropped += b.dropped;
    a.partitions += b.partitions;
    a.reordered += b.reordered;
}

/// Echoes until end of stream; returns the bytes echoed.
fn echo_conn(s: TcpStream) -> u64 {
    let mut buf = [0u8; 1500];
    let mut total = 0;
    loop {
        let n = (&s).read(&mut buf).unwrap();
        if n == 0 {
            return total;
        }
        (&s).write_all(&buf[..n]).unwrap();
        total += n as u64;
    }
}

const CLIENTS: u64 = 3;
const ROUNDS: u64 = 6;

/// One echo client: a writer actor streams its messages (more than the
/// send buffer holds) while this actor reads the echo back and checks it;
/// then half-closes and expects end of stream. Returns the bytes sent.
fn echo_client(addr: SocketAddr, c: u64, seed: u64) -> u64 {
    let s = TcpStream::connect(addr).unwrap();
    let w = s.try_clone().unwrap();
    let lens: Vec<usize> = (0..ROUNDS)
        .map(|k| 1 + ((seed.wrapping_mul(2654435761) ^ (c * 97 + k * 13)) % 3000) as usize)
        .collect();
    let wl = lens.clone();
    let writer = sim::spawn(move || {
        for (k, &len) in wl.iter().enumerate() {
            (&w).write_all(&payload(c, k as u64, len)).unwrap();
        }
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut sent = 0;
    for (k, &len) in lens.iter().enumerate() {
        let mut back = vec![0u8; len];
        (&s).read_exact(&mut back).unwrap();
        assert!(
            back == payload(c, k as u64, len),
            "client {c} message {k}: the echo differs"
        );
        sent += len as u64;
    }
    writer.join().unwrap();
    let mut rest = Vec::new();
    assert_eq!(
        (&s).read_to_end(&mut rest).unwrap(),
        0,
        "bytes after the last echo"
    );
    sent
}

/// The echo scenario: a server actor accepts `CLIENTS` connections, one
/// echo actor each; every client's bytes come back in order.
fn echo_scenario(seed: u64) -> NetStats {
    let rt = runtime();
    rt.block_on(move || {
        // A 2 KiB send buffer: messages up to 3 KB park the writers.
        net::configure(NetConfig::default().with_buffer(2048)).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = sim::spawn(move || {
            let hs: Vec<_> = (0..CLIENTS)
                .map(|_| {
                    let (s, _) = l.accept().unwrap();
                    sim::spawn(move || echo_conn(s))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| sim::spawn(move || echo_client(addr, c, seed)))
            .collect();
        let sent: u64 = clients.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(
            server.join().unwrap(),
            sent,
            "the server echoed other than was sent"
        );
        net::stats()
    })
}

#[test]
fn echo_over_seeds_delivers_every_byte_in_order() {
    with_timeout(300, || {
        let total = RefCell::new(NetStats::default());
        let reports = sim::check(SEEDS, |seed| {
            let s = echo_scenario(seed);
            assert_eq!(s.connections, CLIENTS);
            add(&mut total.borrow_mut(), s);
        });
        let total = total.into_inner();
        let traces: std::collections::BTreeSet<u64> = reports.iter().map(|r| r.trace).collect();
        println!(
            "echo: {} seeds, {} traces, {total:?}",
            reports.len(),
            traces.len()
        );
        // Partial reads and writes are the point of the scenario.
        if reports.len() >= 16 {
            assert!(total.short_reads > 0 && total.short_writes > 0, "{total:?}");
            assert!(traces.len() > 1, "every seed ran the same schedule");
        }
    });
}

/// A request's answer.
fn answer(x: u64) -> u64 {
    x.wrapping_mul(2).wrapping_add(1)
}

/// Serves `[id, x]` requests with `[id, answer(x)]` until the connection
/// ends or fails (a reset is the client's to retry).
fn rr_conn(s: TcpStream) {
    let mut req = [0u8; 16];
    loop {
        if (&s).read_exact(&mut req).is_err() {
            return;
        }
        let id = u64::from_le_bytes(req[..8].try_into().unwrap());
        let x = u64::from_le_bytes(req[8..].try_into().unwrap());
        let mut rep = [0u8; 16];
        rep[..8].copy_from_slice(&id.to_le_bytes());
        rep[8..].copy_from_slice(&answer(x).to_le_bytes());
        if (&s).write_all(&rep).is_err() {
            return;
        }
    }
}

const REQUESTS: u64 = 12;

/// A client that asks `REQUESTS` questions, reconnecting and asking again
/// after any failure (a reset, a timeout in a partition). Returns the
/// retries it needed.
fn rr_client(addr: SocketAddr, c: u64) -> u64 {
    let mut retries = 0;
    let mut conn: Option<TcpStream> = None;
    let mut id = 0;
    while id < REQUESTS {
        let s = match conn.take() {
            Some(s) => s,
            None => match TcpStream::connect_timeout(&addr, Duration::from_millis(20)) {
                Ok(s) => {
                    s.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
                    s
                }
                Err(e) => {
                    assert!(
                        matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::ConnectionRefused),
                        "connect: {e}"
                    );
                    retries += 1;
                    continue;
                }
            },
        };
        let x = c * 1000 + id;
        let mut req = [0u8; 16];
        req[..8].copy_from_slice(&id.to_le_bytes());
        req[8..].copy_from_slice(&x.to_le_bytes());
        let mut rep = [0u8; 16];
        let r = (&s).write_all(&req).and_then(|()| (&s).read_exact(&mut rep));
        match r {
            Ok(()) => {
                assert_eq!(
                    u64::from_le_bytes(rep[..8].try_into().unwrap()),
                    id,
                    "a reply to another request"
                );
                assert_eq!(u64::from_le_bytes(rep[8..].try_into().unwrap()), answer(x));
                id += 1;
                conn = Some(s);
            }
            Err(e) => {
                assert!(
                    matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset
                            | ErrorKind::BrokenPipe
                            | ErrorKind::UnexpectedEof
                            | ErrorKind::TimedOut
                    ),
                    "request {id}: {e}"
                );
                // The connection is dropped (a stale reply on it must not
                // answer the next request).
                retries += 1;
            }
        }
    }
    retries
}

/// The request/reply scenario over TCP, with resets and partitions.
fn rr_scenario() -> (NetStats, u64) {
    let rt = runtime();
    rt.block_on(|| {
        net::configure(
            NetConfig::default()
                .with_resets(40)
                .with_partitions(8, Duration::from_millis(40)),
        )
        .unwrap();
        let l = TcpListener::bind("0.0.0.0:7000").unwrap();
        let addr: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let server = sim::spawn(move || {
            for s in l.incoming() {
                let s = s.unwrap();
                sim::spawn(move || rr_conn(s));
            }
        });
        let clients: Vec<_> = (0..3).map(|c| sim::spawn(move || rr_client(addr, c))).collect();
        let retries = clients.into_iter().map(|h| h.join().unwrap()).sum();
        server.actor_ref().kill();
        assert!(matches!(server.join(), Err(JoinError::Killed { .. })));
        (net::stats(), retries)
    })
}

#[test]
fn request_reply_over_seeds_survives_resets_and_partitions() {
    with_timeout(300, || {
        let total = RefCell::new(NetStats::default());
        let retries = std::cell::Cell::new(0);
        sim::check(SEEDS, |_| {
            let (s, r) = rr_scenario();
            add(&mut total.borrow_mut(), s);
            retries.set(retries.get() + r);
        });
        let (total, retries) = (total.into_inner(), retries.get());
        println!("request/reply: {retries} retries, {total:?}");
        if sim::seeds(SEEDS).count() >= 16 {
            assert!(total.resets > 0, "no seed reset a connection: {total:?}");
            assert!(total.partitions > 0, "no seed partitioned: {total:?}");
            assert!(retries > 0);
        }
    });
}

/// Request/reply over UDP with loss and reordering: the client retries
/// on a timeout and ignores stale replies.
fn udp_scenario() -> NetStats {
    let rt = runtime();
    rt.block_on(|| {
        net::configure(
            NetConfig::default()
                .with_latency(Duration::from_micros(10), Duration::from_millis(4))
                .with_loss(150),
        )
        .unwrap();
        let server = UdpSocket::bind("127.0.0.1:5300").unwrap();
        let sh = sim::spawn(move || {
            let mut buf = [0u8; 64];
            loop {
                let (n, from) = server.recv_from(&mut buf).unwrap();
                assert_eq!(n, 16);
                let x = u64::from_le_bytes(buf[8..16].try_into().unwrap());
                buf[8..16].copy_from_slice(&answer(x).to_le_bytes());
                server.send_to(&buf[..16], from).unwrap();
            }
        });
        let clients: Vec<_> = (0..2u64)
            .map(|c| {
                sim::spawn(move || {
                    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                    s.connect("127.0.0.1:5300").unwrap();
                    s.set_read_timeout(Some(Duration::from_millis(6))).unwrap();
                    for id in 0..REQUESTS {
                        let x = c * 1000 + id;
                        let mut req = [0u8; 16];
                        req[..8].copy_from_slice(&id.to_le_bytes());
                        req[8..].copy_from_slice(&x.to_le_bytes());
                        'retry: loop {
                            s.send(&req).unwrap();
                            let mut rep = [0u8; 16];
                            loop {
                                match s.recv(&mut rep) {
                                    Ok(16) => {
                                        let rid = u64::from_le_bytes(rep[..8].try_into().unwrap());
                                        if rid == id {
                                            assert_eq!(
                                                u64::from_le_bytes(rep[8..].try_into().unwrap()),
                                                answer(x)
                                            );
                                            break 'retry;
                                        }
                                        assert!(rid < id, "a reply from the future");
                                    }
                                    Ok(n) => panic!("a {n}-byte reply"),
                                    Err(e) if e.kind() == ErrorKind::TimedOut => continue 'retry,
                                    Err(e) => panic!("recv: {e}"),
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        for h in clients {
            h.join().unwrap();
        }
        sh.actor_ref().kill();
        assert!(matches!(sh.join(), Err(JoinError::Killed { .. })));
        net::stats()
    })
}

#[test]
fn udp_request_reply_over_seeds_survives_loss_and_reordering() {
    with_timeout(300, || {
        let total = RefCell::new(NetStats::default());
        sim::check(SEEDS, |_| add(&mut total.borrow_mut(), udp_scenario()));
        let total = total.into_inner();
        println!("udp: {total:?}");
        if sim::seeds(SEEDS).count() >= 16 {
            assert!(total.dropped > 0 && total.reordered > 0, "{total:?}");
        }
    });
}

#[test]
fn a_seed_replays_the_same_network_schedule() {
    with_timeout(120, || {
        let (a, ra) = sim::run(11, || echo_scenario(11));
        let (b, rb) = sim::run(11, || echo_scenario(11));
        assert_eq!(a, b);
        assert_eq!(ra.trace, rb.trace);
        let (c, rc) = sim::run(12, || echo_scenario(12));
        assert!(rc.trace != ra.trace || c != a, "seeds 11 and 12 ran alike");
    });
}

/// Runs `f` in a world with an ideal network (no latency, no partial
/// reads or writes) unless it configures its own.
fn one(f: impl FnOnce() + Send + 'static) {
    with_timeout(60, || {
        sim::run(5, || {
            runtime().block_on(move || {
                net::configure(NetConfig::ideal()).unwrap();
                f()
            })
        });
    });
}

/// A listener on an ephemeral port and one connection to it: (listener,
/// client end, server end).
fn connected() -> (TcpListener, TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (l, c, s)
}

/// From the world's root thread: waits (bounded, in scheduling points)
/// until actor `id` is parked on a channel (a simulated socket's wait).
fn wait_parked(rt: &Runtime, id: u64) {
    for _ in 0..100_000 {
        if rt
            .dump()
            .actors
            .iter()
            .any(|i| i.id == id && i.state == ActorState::WaitingChannel)
        {
            return;
        }
        sim::yield_thread();
    }
    panic!("actor {id} never parked");
}

#[test]
fn connect_without_a_listener_is_refused_and_a_bound_port_is_in_use() {
    one(|| {
        let e = TcpStream::connect("127.0.0.1:9").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        assert_ne!(a.port(), 0);
        assert_eq!(TcpListener::bind(a).unwrap_err().kind(), ErrorKind::AddrInUse);
        assert_eq!(
            TcpListener::bind(("0.0.0.0", a.port())).unwrap_err().kind(),
            ErrorKind::AddrInUse
        );
        drop(l);
        // Closed: the port is free again, and a connect to it is refused.
        assert_eq!(
            TcpStream::connect(a).unwrap_err().kind(),
            ErrorKind::ConnectionRefused
        );
        TcpListener::bind(a).unwrap();
    });
}

#[test]
fn addresses_shutdown_and_end_of_stream() {
    one(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(s.local_addr().unwrap(), c.peer_addr().unwrap());
        assert_eq!(c.peer_addr().unwrap(), l.local_addr().unwrap());
        (&c).write_all(b"abc").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        assert_eq!((&c).write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
        let mut buf = [0u8; 8];
        assert_eq!(s.peek(&mut buf).unwrap(), 3);
        let mut all = Vec::new();
        (&s).read_to_end(&mut all).unwrap();
        assert_eq!(all, b"abc");
        // The other direction still works.
        (&s).write_all(b"back").unwrap();
        let mut back = [0u8; 4];
        (&c).read_exact(&mut back).unwrap();
        assert_eq!(&back, b"back");
        // The server closes: its later bytes never come, the client reads
        // end of stream, and its writes fail.
        drop(s);
        assert_eq!((&c).read(&mut buf).unwrap(), 0);
    });
}

#[test]
fn a_write_to_a_closed_peer_is_a_broken_pipe() {
    one(|| {
        let (_l, c, s) = connected();
        drop(s);
        assert_eq!((&c).write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
    });
}

#[test]
fn a_read_timeout_fires_on_the_virtual_clock_and_loses_nothing() {
    one(|| {
        // Every segment takes exactly 20 ms.
        let ms = Duration::from_millis(20);
        net::configure(NetConfig::ideal().with_latency(ms, ms)).unwrap();
        let (_l, c, s) = connected();
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        assert_eq!(s.read_timeout().unwrap(), Some(Duration::from_millis(10)));
        (&c).write_all(b"late").unwrap();
        let t0 = sim::now_ns();
        let mut buf = [0u8; 4];
        // The bytes are due in 20 ms, the timeout in 10.
        assert_eq!((&s).read(&mut buf).unwrap_err().kind(), ErrorKind::TimedOut);
        let waited = sim::now_ns() - t0;
        assert!((10_000_000..20_000_000).contains(&waited), "waited {waited} ns");
        // Nothing was lost: the next read (no timeout) gets them at 20 ms.
        s.set_read_timeout(None).unwrap();
        (&s).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"late");
        assert!(sim::now_ns() - t0 >= 20_000_000);
        assert_eq!(
            s.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    });
}

#[test]
fn a_full_send_buffer_parks_the_writer_until_the_reader_drains_it() {
    one(|| {
        net::configure(NetConfig::ideal().with_buffer(100)).unwrap();
        let (_l, c, s) = connected();
        assert_eq!(
            (&c).write(&[1u8; 150]).unwrap(),
            100,
            "the write took more than the buffer holds"
        );
        c.set_write_timeout(Some(Duration::from_millis(5))).unwrap();
        assert_eq!((&c).write(&[2u8; 10]).unwrap_err().kind(), ErrorKind::TimedOut);
        c.set_write_timeout(None).unwrap();
        let w = sim::spawn(move || (&c).write_all(&[3u8; 300]).map(|()| c));
        let mut got = vec![0u8; 400];
        (&s).read_exact(&mut got).unwrap();
        assert!(got[..100].iter().all(|&b| b == 1) && got[100..].iter().all(|&b| b == 3));
        w.join().unwrap().unwrap();
    });
}

#[test]
fn a_reset_fails_both_ends_and_wakes_a_parked_reader() {
    with_timeout(60, || {
        sim::run(5, || {
            let rt = runtime();
            let (c, s) = rt.block_on(|| {
                net::configure(NetConfig::ideal()).unwrap();
                let (_l, c, s) = connected();
                (c, s)
            });
            let s2 = s.try_clone().unwrap();
            let reader = rt.spawn(move || (&s2).read(&mut [0u8; 4]).map_err(|e| e.kind()));
            wait_parked(&rt, reader.id());
            net::reset(&c);
            assert_eq!(reader.join().unwrap(), Err(ErrorKind::ConnectionReset));
            rt.block_on(move || {
                assert_eq!((&c).write(b"x").unwrap_err().kind(), ErrorKind::ConnectionReset);
                assert_eq!(
                    (&s).read(&mut [0u8; 1]).unwrap_err().kind(),
                    ErrorKind::ConnectionReset
                );
                assert_eq!(net::stats().resets, 1);
            });
        });
    });
}

#[test]
fn a_kill_wakes_an_actor_parked_on_a_simulated_socket_and_closes_it() {
    with_timeout(60, || {
        sim::run(3, || {
            let rt = runtime();
            let (l, c) = rt.block_on(|| {
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                (l, c)
            });
            let h = rt.spawn(move || {
                let (s, _) = l.accept().unwrap();
                let _ = (&s).read(&mut [0u8; 1]);
                unreachable!("the read returned");
            });
            wait_parked(&rt, h.id());
            h.actor_ref().kill();
            assert!(matches!(h.join(), Err(JoinError::Killed { .. })));
            // The killed actor's stream was dropped: the peer reads EOF.
            rt.block_on(move || assert_eq!((&c).read(&mut [0u8; 1]).unwrap(), 0));
        });
    });
}

#[test]
fn a_partition_holds_connects_and_segments_until_it_heals() {
    one(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let c = TcpStream::connect(a).unwrap();
        let (s, _) = l.accept().unwrap();
        net::partition(Duration::from_secs(10));
        let e = TcpStream::connect_timeout(&a, Duration::from_millis(20)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        (&c).write_all(b"held").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        assert_eq!((&s).read(&mut [0u8; 4]).unwrap_err().kind(), ErrorKind::TimedOut);
        net::heal();
        let mut buf = [0u8; 4];
        (&s).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"held");
        TcpStream::connect_timeout(&a, Duration::from_millis(20)).unwrap();
        // The given-up connect is not in the backlog: the next accept is
        // the connect after the heal.
        let (_, peer) = l.accept().unwrap();
        assert_ne!(peer, c.local_addr().unwrap());
        assert_eq!(net::stats().partitions, 1);
        assert_eq!(net::stats().connections, 3);
    });
}

#[test]
fn udp_reorders_by_latency_and_truncates_to_the_buffer() {
    one(|| {
        net::configure(NetConfig::ideal().with_latency(Duration::ZERO, Duration::from_millis(10))).unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..32u8 {
            a.send_to(&[i; 3], b.local_addr().unwrap()).unwrap();
        }
        let mut order = Vec::new();
        for _ in 0..32 {
            let mut buf = [0u8; 2];
            let (n, from) = b.recv_from(&mut buf).unwrap();
            assert_eq!((n, from), (2, a.local_addr().unwrap()), "truncated to the buffer");
            order.push(buf[0]);
        }
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..32).collect::<Vec<u8>>(),
            "a datagram was lost or duplicated"
        );
        assert_ne!(order, sorted, "no reordering");
        assert!(net::stats().reordered > 0);
        assert_eq!(
            a.send_to(&vec![0u8; 70_000], b.local_addr().unwrap())
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(a.send(b"x").unwrap_err().kind(), ErrorKind::NotConnected);
    });
}

#[test]
fn a_bad_config_is_invalid_input() {
    one(|| {
        let ms = Duration::from_millis;
        for bad in [
            NetConfig::default().with_latency(ms(2), ms(1)),
            NetConfig::default().with_buffer(0),
            NetConfig::default().with_loss(1001),
            NetConfig::default().with_partial(5000),
        ] {
            assert_eq!(net::configure(bad).unwrap_err().kind(), ErrorKind::InvalidInput);
        }
        assert_eq!(net::config(), NetConfig::ideal(), "a rejected config was applied");
    });
}

#[test]
fn a_socket_outliving_its_world_fails_cleanly() {
    with_timeout(60, || {
        let (l, _) = sim::run(1, || TcpListener::bind("127.0.0.1:0").unwrap());
        sim::run(2, || {
            // The new world's network retires the old one's.
            let _fresh = UdpSocket::bind("127.0.0.1:0").unwrap();
            assert_eq!(l.accept().unwrap_err().kind(), ErrorKind::NotConnected);
            drop(l);
        });
    });
}
