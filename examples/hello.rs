//! The smallest program: start a runtime, spawn a tree of actors, join.
use smarm_examples::smarm;

fn main() {
    let rt = smarm::Runtime::builder().workers(2).build().expect("runtime");
    let sum = rt.block_on(|| {
        let hs: Vec<_> = (0..10u64).map(|i| smarm::spawn(move || i * i)).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    println!("sum of squares 0..10 = {sum}");
    let c = rt.counters().total();
    println!("{c}");
}
