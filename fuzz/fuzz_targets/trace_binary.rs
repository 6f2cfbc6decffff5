//! PCMTRACE: header, trailer index, records, and the streaming chunk-parallel pass.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::trace_binary(data));
