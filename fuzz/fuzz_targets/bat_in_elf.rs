//! The `bat_in_elf` target (body and documentation in `crates/pcmap-fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::bat_in_elf(data));
