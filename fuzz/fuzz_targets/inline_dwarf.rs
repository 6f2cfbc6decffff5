//! Inline-site extraction, census and symbolization on arbitrary ELF bytes (seed the corpus with
//! the `fixtures/src/inline` binaries): must never panic or hang.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::inline_dwarf(data));
