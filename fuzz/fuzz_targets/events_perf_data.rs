//! The `events_perf_data` target (body and documentation in `crates/pcmap-fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::events_perf_data(data));
