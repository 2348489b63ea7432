//! echo: round trips of 64-byte messages over loopback TCP, at 1, 100 and
//! 1,000 concurrent connections, on each worker count of
//! `SMARM_BENCH_WORKERS`: smarm actors on `net::TcpStream` vs tokio tasks
//! on `tokio::net::TcpStream` in the same binary, and (once, in the
//! one-worker group) std threads, a thread per connection end. Server and
//! clients share the runtime; connections are made once per row and
//! reused, so a sample times round trips only. Throughput is in round
//! trips: criterion's time per element is ns per round trip. The
//! `accept` rows time connection setup instead: ten clients connect 100
//! times in all (closing each at once) while an acceptor accepts and
//! closes them; time per element is ns per connection. Latency
//! percentiles and memory per idle connection are in `echo_report`.
//!
//! `cargo bench -p smarm-benches --bench echo`
//!
//! 10,000 connections are not a row: both ends in one process take 20,000
//! descriptors, this machine's hard limit (`tests/io_limits.rs` holds
//! 10,000 open with the server in a child process).

#[path = "tokio_side.rs"]
mod tokio_side;

use std::io::{Read, Write};
use std::sync::mpsc;

use criterion::{Criterion, Throughput};
use smarm_benches::smarm::{
    self,
    net::{TcpListener, TcpStream},
};
use smarm_benches::{echo_until_eof, port_name, smarm_echo_pairs, smarm_rt, worker_counts};
use tokio_side::{in_task, tokio_echo_pairs, tokio_rt_io};

const TRIPS: u64 = 4_000;
const CONNS: [u64; 3] = [1, 100, 1000];
const SIZE: usize = 64;

fn each(conns: u64) -> u64 {
    (TRIPS / conns).max(1)
}

/// `n` round trips on `s` (a blocking-style stream: smarm's or std's).
fn trips<S>(s: S, n: u64)
where
    S: Read + Write,
{
    let mut s = s;
    let msg = [7u8; SIZE];
    let mut back = [0u8; SIZE];
    for _ in 0..n {
        s.write_all(&msg).expect("write");
        s.read_exact(&mut back).expect("read");
    }
}

fn smarm_rows(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, workers: usize) {
    let rt = smarm_rt(workers);
    for conns in CONNS {
        let each = each(conns);
        let mut clients = Some(rt.block_on(move || smarm_echo_pairs(conns as usize)));
        g.throughput(Throughput::Elements(each * conns));
        g.bench_function(format!("smarm/{conns}"), |b| {
            b.iter(|| {
                let cs = clients.take().expect("clients");
                let back = rt.block_on(move || {
                    let hs: Vec<_> = cs
                        .into_iter()
                        .map(|s| {
                            smarm::spawn(move || {
                                trips(&s, each);
                                s
                            })
                        })
                        .collect();
                    hs.into_iter()
                        .map(|h| h.join().expect("client"))
                        .collect::<Vec<_>>()
                });
                clients = Some(back);
            })
        });
        // Closing the clients ends the server's echo actors.
        drop(clients);
    }
}

fn tokio_rows(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, workers: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tk = tokio_rt_io(workers);
    for conns in CONNS {
        let each = each(conns);
        let mut clients = Some(in_task(&tk, tokio_echo_pairs(conns as usize)));
        g.throughput(Throughput::Elements(each * conns));
        g.bench_function(format!("tokio/{conns}"), |b| {
            b.iter(|| {
                let cs = clients.take().expect("clients");
                let back = in_task(&tk, async move {
                    let hs: Vec<_> = cs
                        .into_iter()
                        .map(|mut s| {
                            tokio::spawn(async move {
                                let msg = [7u8; SIZE];
                                let mut back = [0u8; SIZE];
                                for _ in 0..each {
                                    s.write_all(&msg).await.expect("write");
                                    s.read_exact(&mut back).await.expect("read");
                                }
                                s
                            })
                        })
                        .collect();
                    let mut v = Vec::with_capacity(hs.len());
                    for h in hs {
                        v.push(h.await.expect("client"));
                    }
                    v
                });
                clients = Some(back);
            })
        });
        drop(clients);
    }
}

fn std_rows(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    for conns in CONNS {
        let each = each(conns);
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let acceptor = std::thread::spawn(move || {
            for _ in 0..conns {
                let (s, _) = l.accept().expect("accept");
                let _ = s.set_nodelay(true);
                std::thread::spawn(move || echo_until_eof(&s));
            }
        });
        // Persistent client threads, each told how many trips to make.
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let gos: Vec<mpsc::Sender<u64>> = (0..conns)
            .map(|_| {
                let s = std::net::TcpStream::connect(addr).expect("connect");
                let _ = s.set_nodelay(true);
                let (go_tx, go_rx) = mpsc::channel::<u64>();
                let done = done_tx.clone();
                std::thread::spawn(move || {
                    while let Ok(n) = go_rx.recv() {
                        trips(&s, n);
                        let _ = done.send(());
                    }
                });
                go_tx
            })
            .collect();
        acceptor.join().expect("acceptor");
        g.throughput(Throughput::Elements(each * conns));
        g.bench_function(format!("std_threads/{conns}"), |b| {
            b.iter(|| {
                for go in &gos {
                    go.send(each).expect("go");
                }
                for _ in 0..conns {
                    done_rx.recv().expect("done");
                }
            })
        });
        // Dropping the senders ends the client threads (and so the echo
        // threads, at EOF).
        drop(gos);
    }
}

/// Connections per accept-rate sample, made by this many clients at once.
const ACCEPTS: u64 = 100;
const CONNECTORS: u64 = 10;

/// The accept rate: `CONNECTORS` actors connect `ACCEPTS` times in all and
/// close at once; an acceptor actor accepts, closes and reports each.
fn smarm_accepts(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, workers: usize) {
    let rt = smarm_rt(workers);
    let (addr, mut accepted) = rt.block_on(|| {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let (tx, rx) = smarm::channel::<()>();
        smarm::spawn(move || {
            for s in l.incoming() {
                drop(s.expect("accept"));
                if tx.send(()).is_err() {
                    return;
                }
            }
        });
        (addr, rx)
    });
    g.throughput(Throughput::Elements(ACCEPTS));
    g.bench_function("smarm/accept", |b| {
        b.iter(|| {
            let rx = std::mem::replace(&mut accepted, smarm::channel().1);
            accepted = rt.block_on(move || {
                let mut rx = rx;
                let hs: Vec<_> = (0..CONNECTORS)
                    .map(|_| {
                        smarm::spawn(move || {
                            for _ in 0..ACCEPTS / CONNECTORS {
                                drop(TcpStream::connect(addr).expect("connect"));
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().expect("connector");
                }
                for _ in 0..ACCEPTS {
                    rx.recv().expect("acceptor");
                }
                rx
            });
        })
    });
}

fn tokio_accepts(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, workers: usize) {
    let tk = tokio_rt_io(workers);
    let (addr, mut accepted) = in_task(&tk, async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        tokio::spawn(async move {
            loop {
                let (s, _) = l.accept().await.expect("accept");
                drop(s);
                if tx.send(()).is_err() {
                    return;
                }
            }
        });
        (addr, rx)
    });
    g.throughput(Throughput::Elements(ACCEPTS));
    g.bench_function("tokio/accept", |b| {
        b.iter(|| {
            let rx = std::mem::replace(&mut accepted, tokio::sync::mpsc::unbounded_channel().1);
            accepted = in_task(&tk, async move {
                let mut rx = rx;
                let hs: Vec<_> = (0..CONNECTORS)
                    .map(|_| {
                        tokio::spawn(async move {
                            for _ in 0..ACCEPTS / CONNECTORS {
                                drop(tokio::net::TcpStream::connect(addr).await.expect("connect"));
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.expect("connector");
                }
                for _ in 0..ACCEPTS {
                    rx.recv().await.expect("acceptor");
                }
                rx
            });
        })
    });
}

fn bench(c: &mut Criterion) {
    for workers in worker_counts() {
        let mut g = c.benchmark_group(format!("echo/{}/{workers}w", port_name()));
        smarm_rows(&mut g, workers);
        tokio_rows(&mut g, workers);
        if workers == 1 {
            std_rows(&mut g);
        }
        smarm_accepts(&mut g, workers);
        tokio_accepts(&mut g, workers);
        g.finish();
    }
}

smarm_benches::bench_main!(bench);
