//! Function discovery, CFG building, hashing and a trace walk of `pcmap-perf2bolt` on arbitrary
//! ELF bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::{aggregate::Aggregator, block_hash, preagg};

fuzz_target!(|data: &[u8]| {
    let Ok(binary) = pcmap_binary::Binary::parse(data) else { return };
    let Ok(image) = BoltFunctions::discover(&binary) else { return };
    let agg = Aggregator::new(&image);
    let ctx = block_hash::Context::new(&image);
    for (i, f) in image.functions().iter().enumerate().take(64) {
        let _ = block_hash::function_hash(&ctx, f, agg.cfg(i));
    }
    if let Some(f) = image.functions().first() {
        let a = f.address;
        let text = format!("T {a:x} {:x} {:x} 1\nB {:x} {a:x} 1 0\nF {a:x} {:x} 1\n", a + 1, a + 9, a + 3, a + 200);
        if let Ok(p) = preagg::parse(text.as_bytes(), &|_| {}) {
            let _ = agg.aggregate_traces(&p, &|_| {});
        }
    }
});
