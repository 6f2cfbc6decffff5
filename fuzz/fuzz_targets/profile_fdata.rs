//! fdata: parse arbitrary bytes; whatever parses writes back and re-parses to the same profile.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::profile_fdata(data));
