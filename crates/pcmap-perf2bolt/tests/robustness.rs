//! Corrupted and truncated binaries never make function discovery, CFG building, hashing or
//! aggregation panic.

use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::{aggregate::Aggregator, block_hash, preagg};
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
    // The binary model (pcmap-binary) rejects corrupt headers and string tables with located
    // errors, so besides corruption anywhere, every other round corrupts only section contents
    // the model reads leniently (code, unwind tables, symbol values, relocations, data): those
    // copies parse and drive discovery, CFGs, hashing and aggregation.
    let contents: Vec<std::ops::Range<usize>> = {
        let bin = pcmap_binary::Binary::parse(&original).unwrap();
        bin.sections()
            .iter()
            .filter(|s| !s.raw.is_empty() && !s.name.ends_with("str") && !s.name.contains("strtab"))
            .map(|s| s.offset as usize..s.offset as usize + s.raw.len())
            .collect()
    };
    let mut parsed = 0;
    for round in 0..600 {
        let mut data = original.clone();
        if round % 2 == 1 {
            for _ in 0..(1 + next() % 64) {
                let r = &contents[(next() as usize) % contents.len()];
                let i = r.start + (next() as usize) % r.len();
                data[i] = next() as u8;
            }
        } else {
            if round % 20 == 0 {
                data.truncate((next() as usize) % data.len());
            }
            for _ in 0..(1 + next() % 64) {
                let i = (next() as usize) % data.len().max(1);
                if let Some(b) = data.get_mut(i) {
                    *b = next() as u8;
                }
            }
        }
        let Ok(binary) = pcmap_binary::Binary::parse(&data) else {
            continue;
        };
        let Ok(image) = BoltFunctions::discover(&binary) else {
            continue;
        };
        parsed += 1;
        let agg = Aggregator::new(&image);
        let ctx = block_hash::Context::new(&image);
        let mut text = String::new();
        for (i, f) in image.functions().iter().enumerate() {
            let _ = block_hash::function_hash(&ctx, f, agg.cfg(i));
            let _ = block_hash::block_hashes(&ctx, f, agg.cfg(i));
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
