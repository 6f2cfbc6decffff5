//! Arbitrary pre-aggregated records folded into a small fixed map, then laid out and written:
//! nothing may panic (addresses, counts near u64::MAX, impossible fall-throughs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::propeller_pipeline(data));
