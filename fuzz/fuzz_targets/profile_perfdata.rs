//! perf.data: header, attributes, feature sections and the record walker over arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::profile_perfdata(data));
