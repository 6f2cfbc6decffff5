//! Function discovery, CFG building, hashing and a trace walk of `pcmap-perf2bolt` on arbitrary
//! ELF bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pcmap_perf2bolt::{aggregate::Aggregator, hash, image::Image, preagg};

fuzz_target!(|data: &[u8]| {
    let Ok(image) = Image::parse(data) else { return };
    let agg = Aggregator::new(&image);
    for i in 0..image.functions().len().min(64) {
        let _ = hash::function_hash(agg.cfg(i));
    }
    if let Some(f) = image.functions().first() {
        let a = f.address;
        let text = format!("T {a:x} {:x} {:x} 1\nB {:x} {a:x} 1 0\nF {a:x} {:x} 1\n", a + 1, a + 9, a + 3, a + 200);
        if let Ok(p) = preagg::parse(text.as_bytes(), &|_| {}) {
            let _ = agg.aggregate_traces(&p, &|_| {});
        }
    }
});
