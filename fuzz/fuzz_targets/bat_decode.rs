//! Decode arbitrary bytes as a BAT payload and as a `.note.bolt_bat` section: never a panic.
//! Whatever decodes must re-encode, decode to the same model (a fixed point), index, and
//! translate without panicking.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::bat_decode(data));
