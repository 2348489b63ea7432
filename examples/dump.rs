//! Prints a runtime dump: every live actor (id, name, state, what it waits
//! on, mailbox depth, worker) and the per-worker counters, like Go's
//! goroutine dump.
//!
//! `cargo run --release -p smarm-examples --example dump`
use std::time::Duration;

use smarm_examples::smarm::{self, Mailbox, Runtime};

fn main() {
    let rt = Runtime::builder()
        .workers(2)
        .mailbox_depths(true)
        .build()
        .expect("runtime");
    // A small pipeline: a producer sleeping between batches, a consumer
    // parked on its mailbox, a stage stuck joining a slow child with
    // messages piling up behind it.
    let (consumer, hc) = rt.spawn_actor_named("consumer", |mut mb: Mailbox<u64>| {
        let mut sum = 0;
        loop {
            match mb.recv().unwrap() {
                0 => return sum,
                n => sum += n,
            }
        }
    });
    let (stuck, hs) = rt.spawn_actor_named("stage", |mut mb: Mailbox<u64>| {
        let slow = smarm::spawn_named("slow-child", || smarm::sleep(Duration::from_millis(300)));
        slow.join().expect("slow child");
        (0..5).map(|_| mb.recv().unwrap()).sum::<u64>()
    });
    for i in 1..=5 {
        stuck.send(i).expect("stage alive");
    }
    let c2 = consumer.clone();
    let hp = rt.spawn_named("producer", move || {
        for batch in 1..=3 {
            c2.send(batch).expect("consumer alive");
            smarm::sleep(Duration::from_millis(100));
        }
    });
    // Let everyone reach a waiting state, then dump.
    std::thread::sleep(Duration::from_millis(50));
    println!("{}", rt.dump());

    hp.join().expect("producer");
    consumer.send(0).expect("consumer alive");
    println!("consumer summed {}", hc.join().expect("consumer"));
    println!("stage summed {}", hs.join().expect("stage"));
    println!("after: {} live actors", rt.dump().actors.len());
}
