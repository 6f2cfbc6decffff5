#![no_main]
//! Open arbitrary bytes as an ELF binary, walk its sections, notes, symbols and functions, and
//! decode every function: must never panic, only return errors.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pcmap_binary::fuzz_walk(data);
});
