//! `.BTF.inline` (RFC layout) and compact-encoding decoders on arbitrary bytes, with a base that
//! has a FUNC at id 3 so site records can resolve.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::btf_inline_decode(data));
