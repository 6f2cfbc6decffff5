//! Fuzz the basic-block address map decoder (every layout and ELF shape) and the block index.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::bbmap_decode(data));
