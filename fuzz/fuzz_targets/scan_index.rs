//! perf2bolt's scan index (`--scan-cache`): decode arbitrary bytes; whatever decodes re-encodes
//! and decodes to the same index.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::scan_index(data));
