//! The parallel pre-aggregated reader of `pcmap-perf2bolt` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::perf2bolt_preagg(data));
