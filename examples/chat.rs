//! chat: a line-based chat server showing actors and IO together. Each
//! connection is an actor reading lines (plus a writer actor with a
//! mailbox, so a slow client never stalls anyone else); one room actor
//! owns the members and broadcasts. Try it with a few `nc 127.0.0.1 7070`.
//!
//! ```text
//! cargo run --release -p smarm-examples --example chat -- [--addr 127.0.0.1:7070]
//! ```
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;

use smarm_examples::smarm::{self, net::TcpListener, spawn_actor, Addr, Mailbox, Runtime};

/// What the room hears.
enum Room {
    Join(u64, Addr<Out>),
    Say(u64, String),
    Leave(u64),
}

/// What a connection's writer hears.
enum Out {
    Line(Arc<str>),
    Close,
}

fn room(mut mb: Mailbox<Room>) {
    let mut members: HashMap<u64, Addr<Out>> = HashMap::new();
    let broadcast = |members: &HashMap<u64, Addr<Out>>, line: String| {
        let line: Arc<str> = line.into();
        for out in members.values() {
            // A member that left meanwhile: its Leave is on its way.
            let _ = out.send(Out::Line(line.clone()));
        }
    };
    loop {
        match mb.recv().unwrap() {
            Room::Join(id, out) => {
                let _ = out.send(Out::Line(
                    format!("welcome, you are user{id}; {} here\n", members.len()).into(),
                ));
                members.insert(id, out);
                broadcast(&members, format!("* user{id} joined\n"));
            }
            Room::Say(id, text) => broadcast(&members, format!("user{id}: {text}\n")),
            Room::Leave(id) => {
                if let Some(out) = members.remove(&id) {
                    let _ = out.send(Out::Close);
                    broadcast(&members, format!("* user{id} left\n"));
                }
            }
        }
    }
}

fn main() {
    let mut addr = String::from("127.0.0.1:7070");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--addr" => addr = args.next().unwrap_or_default(),
            other => {
                eprintln!("unknown argument {other:?}; usage: chat [--addr A]");
                std::process::exit(2);
            }
        }
    }
    let rt = Runtime::builder().build().expect("runtime");
    rt.block_on(move || {
        let l = TcpListener::bind(&addr).unwrap_or_else(|e| {
            eprintln!("chat: cannot bind {addr}: {e}");
            std::process::exit(1);
        });
        println!("chat: listening on {}", l.local_addr().expect("local_addr"));
        let (room_addr, _room) = spawn_actor(room);
        for (id, conn) in (1u64..).zip(l.incoming()) {
            let s = match conn {
                Ok(s) => Arc::new(s),
                Err(e) => {
                    eprintln!("chat: accept failed: {e}");
                    smarm::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
            };
            let room_addr = room_addr.clone();
            smarm::spawn(move || {
                let w = s.clone();
                let (out, writer) = spawn_actor(move |mut mb: Mailbox<Out>| loop {
                    match mb.recv().unwrap() {
                        Out::Line(l) => {
                            if (&*w).write_all(l.as_bytes()).is_err() {
                                return;
                            }
                        }
                        Out::Close => return,
                    }
                });
                if room_addr.send(Room::Join(id, out)).is_err() {
                    return;
                }
                for line in BufReader::new(&*s).lines() {
                    let Ok(line) = line else { break };
                    if room_addr.send(Room::Say(id, line)).is_err() {
                        break;
                    }
                }
                let _ = room_addr.send(Room::Leave(id));
                let _ = writer.join();
            });
        }
    });
}
