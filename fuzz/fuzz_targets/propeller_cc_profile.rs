//! The cc profile reader must not panic, and whatever it accepts must write back and read back equal.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::propeller_cc_profile(data));
