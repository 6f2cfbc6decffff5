//! Corrupted and truncated binaries never make function discovery, CFG building, hashing or
//! aggregation panic.

use pcmap_perf2bolt::{aggregate::Aggregator, hash, image::Image, preagg};
use pcmap_testkit as tk;

#[test]
fn corrupted_binaries_do_not_panic() {
    let bin = tk::build(
        "perf2bolt-p1",
        &["perf2bolt/p1.c"],
        &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let original = std::fs::read(bin).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut parsed = 0;
    for round in 0..300 {
        let mut data = original.clone();
        if round % 10 == 0 {
            data.truncate((next() as usize) % data.len());
        }
        for _ in 0..(1 + next() % 64) {
            let i = (next() as usize) % data.len().max(1);
            if let Some(b) = data.get_mut(i) {
                *b = next() as u8;
            }
        }
        let Ok(image) = Image::parse(&data) else {
            continue;
        };
        parsed += 1;
        let agg = Aggregator::new(&image);
        let mut text = String::new();
        for (i, f) in image.functions().iter().enumerate() {
            let _ = hash::function_hash(agg.cfg(i));
            let a = f.address;
            text.push_str(&format!(
                "T {a:x} {:x} {:x} 1\nF {a:x} {:x} 2\n",
                a + 3,
                a + 40,
                a + 9
            ));
        }
        let p = preagg::parse(text.as_bytes(), &|_| {}).unwrap();
        let _ = agg.aggregate_traces(&p, &|_| {});
        let _ = agg.aggregate_samples(&p);
    }
    assert!(parsed > 50, "only {parsed} corrupted copies parsed");
}
