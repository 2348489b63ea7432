//! http_hello: an HTTP/1.1 keep-alive server answering "hello", one actor
//! per connection, requests parsed with `httparse`. Load it with `wrk`:
//!
//! ```text
//! cargo run --release -p smarm-examples --example http_hello -- [--addr 127.0.0.1:8080] [--workers W]
//! wrk -t2 -c1000 -d10s http://127.0.0.1:8080/
//! ```
//!
//! A request the parser rejects gets `400 Bad Request` and the connection
//! closes; a connection that sends nothing for 60 s is closed; requests
//! larger than 16 KiB get `431`.
use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

use smarm_examples::smarm::{
    self,
    net::{TcpListener, TcpStream},
    Runtime,
};

const BODY: &[u8] = b"hello";
const MAX_REQUEST: usize = 16 * 1024;

/// Serves one connection until the peer closes, asks to close, or errs.
fn serve(s: TcpStream) {
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    let mut buf = vec![0u8; MAX_REQUEST];
    let mut filled = 0;
    let mut out = Vec::with_capacity(4096);
    loop {
        // Answer every complete request in the buffer (pipelining).
        let mut used = 0;
        let mut close = false;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf[used..filled]) {
                Ok(httparse::Status::Complete(n)) => {
                    used += n;
                    // HTTP/1.0 closes unless asked to keep alive; 1.1 keeps
                    // alive unless asked to close.
                    let conn = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("connection"))
                        .map(|h| h.value.to_ascii_lowercase());
                    close = match req.version {
                        Some(1) => conn.as_deref() == Some(b"close".as_slice()),
                        _ => conn.as_deref() != Some(b"keep-alive".as_slice()),
                    };
                    out.extend_from_slice(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n",
                    );
                    if close {
                        out.extend_from_slice(b"Connection: close\r\n");
                    }
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(BODY);
                    if close {
                        break;
                    }
                }
                Ok(httparse::Status::Partial) => break,
                Err(_) => {
                    out.extend_from_slice(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    close = true;
                    break;
                }
            }
        }
        if !out.is_empty() {
            if (&s).write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        if close {
            return;
        }
        buf.copy_within(used..filled, 0);
        filled -= used;
        if filled == buf.len() {
            let _ = (&s).write_all(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            return;
        }
        match (&s).read(&mut buf[filled..]) {
            Ok(0) => return,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

fn main() {
    let mut addr = String::from("127.0.0.1:8080");
    let mut workers = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--addr" => addr = args.next().unwrap_or_default(),
            "--workers" => workers = args.next().and_then(|v| v.parse().ok()),
            other => {
                eprintln!("unknown argument {other:?}; usage: http_hello [--addr A] [--workers W]");
                std::process::exit(2);
            }
        }
    }
    let mut b = Runtime::builder();
    if let Some(w) = workers {
        b = b.workers(w);
    }
    let rt = b.build().expect("runtime");
    rt.block_on(move || {
        let l = TcpListener::bind(&addr).unwrap_or_else(|e| {
            eprintln!("http_hello: cannot bind {addr}: {e}");
            std::process::exit(1);
        });
        println!(
            "http_hello: listening on http://{}/",
            l.local_addr().expect("local_addr")
        );
        for conn in l.incoming() {
            match conn {
                Ok(s) => {
                    smarm::spawn(move || serve(s));
                }
                Err(e) => {
                    // Out of descriptors (EMFILE) and the like: report, back
                    // off a little, keep serving.
                    eprintln!("http_hello: accept failed: {e}");
                    smarm::sleep(Duration::from_millis(10));
                }
            }
        }
    });
}
