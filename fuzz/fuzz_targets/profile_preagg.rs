//! Pre-aggregated text: serial and parallel parsing must agree and never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::profile_preagg(data));
