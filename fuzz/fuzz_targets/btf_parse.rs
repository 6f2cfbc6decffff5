//! BTF reader: parse arbitrary bytes as base BTF and as split BTF over a small fixed base, then
//! touch every record and string the way the raw printer and the location decoders do.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::btf_parse(data));
