//! echo_server: a TCP echo server, one actor per connection, on smarm's
//! poller (each connection's actor parks on its socket while the workers
//! run the others).
//!
//! ```text
//! cargo run --release -p smarm-examples --example echo_server -- [--addr 127.0.0.1:7878] [--workers W]
//! ```
//!
//! Drive it with `echo_client` (a load generator). An accept that fails
//! (out of descriptors: `EMFILE`) is reported and the server keeps
//! accepting.
use std::io::{Read, Write};

use smarm_examples::smarm::{self, net::TcpListener, Runtime};

fn main() {
    let mut addr = String::from("127.0.0.1:7878");
    let mut workers = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--addr" => addr = args.next().expect("--addr ADDR"),
            "--workers" => workers = Some(args.next().and_then(|v| v.parse().ok()).expect("--workers N")),
            other => {
                eprintln!("unknown argument {other:?}; usage: echo_server [--addr A] [--workers W]");
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
        let listener = TcpListener::bind(&addr).unwrap_or_else(|e| {
            eprintln!("echo_server: cannot bind {addr}: {e}");
            std::process::exit(1);
        });
        println!(
            "echo_server: listening on {}",
            listener.local_addr().expect("local_addr")
        );
        for conn in listener.incoming() {
            let stream = match conn {
                Ok(s) => s,
                Err(e) => {
                    // EMFILE and friends: say so, keep serving the others.
                    eprintln!("echo_server: accept failed: {e}");
                    smarm::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            smarm::spawn(move || {
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match (&stream).read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if (&stream).write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
}
