//! The parallel pre-aggregated reader of `pcmap-perf2bolt` on arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pcmap_perf2bolt::preagg::parse(data, &|_| {});
});
