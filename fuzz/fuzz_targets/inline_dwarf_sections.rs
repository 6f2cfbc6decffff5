//! The `inline_dwarf_sections` target (body and documentation in `crates/pcmap-fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::inline_dwarf_sections(data));
