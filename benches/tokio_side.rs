//! The tokio side of the benches (tokio is a dev-dependency only, so this
//! file is included by each bench binary: `#[path = "tokio_side.rs"] mod tokio_side;`).
#![allow(dead_code)]

/// A tokio runtime comparable to a smarm runtime with `workers` workers:
/// current_thread for 1, multi_thread(workers) otherwise.
pub fn tokio_rt(workers: usize) -> tokio::runtime::Runtime {
    if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("tokio runtime")
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .build()
            .expect("tokio runtime")
    }
}

/// Runs `f` as a task spawned on `tk` and blocks on its result, so the
/// timed work goes through tokio's scheduler (as smarm's runs inside an
/// actor), not through `block_on`'s own polling.
pub fn in_task<F>(tk: &tokio::runtime::Runtime, f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tk.block_on(async move { tokio::spawn(f).await.expect("tokio task") })
}

/// The same workload on tokio tasks with unbounded mpsc channels.
pub async fn tokio_pairs(pairs: u64, msgs_each: u64) -> u64 {
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
    async fn play(mut rx: UnboundedReceiver<u64>, tx: UnboundedSender<u64>) -> u64 {
        let mut seen = 0;
        while let Some(n) = rx.recv().await {
            seen += 1;
            if n == 0 {
                return seen;
            }
            tx.send(n - 1).expect("partner alive");
            if n == 1 {
                return seen;
            }
        }
        seen
    }
    let mut hs = Vec::with_capacity(2 * pairs as usize);
    for _ in 0..pairs {
        let (atx, arx) = unbounded_channel();
        let (btx, brx) = unbounded_channel();
        btx.send(msgs_each - 1).expect("fresh channel");
        hs.push(tokio::spawn(play(arx, btx)));
        hs.push(tokio::spawn(play(brx, atx)));
    }
    let mut sum = 0;
    for h in hs {
        sum += h.await.expect("player");
    }
    sum
}

/// As [`tokio_rt`], with tokio's IO driver on (the echo bench's sockets).
pub fn tokio_rt_io(workers: usize) -> tokio::runtime::Runtime {
    if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("tokio runtime")
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_io()
            .build()
            .expect("tokio runtime")
    }
}

/// The echo benches' server side on tokio: echoes until end of stream.
pub async fn tokio_echo(mut s: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if s.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// [`smarm_echo_pairs`](smarm_benches::smarm_echo_pairs) on tokio (in a
/// task).
pub async fn tokio_echo_pairs(conns: usize) -> Vec<tokio::net::TcpStream> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        for _ in 0..conns {
            let (s, _) = l.accept().await.expect("accept");
            let _ = s.set_nodelay(true);
            tokio::spawn(tokio_echo(s));
        }
    });
    let mut v = Vec::with_capacity(conns);
    for _ in 0..conns {
        let s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let _ = s.set_nodelay(true);
        v.push(s);
    }
    v
}
