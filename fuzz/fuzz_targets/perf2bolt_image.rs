//! Function discovery, CFG building, hashing and a trace walk of `pcmap-perf2bolt` on arbitrary
//! ELF bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::perf2bolt_image(data));
