//! Open arbitrary bytes as an ELF binary, walk its sections, notes, symbols and functions, and
//! decode every function: must never panic, only return errors.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::binary_open(data));
