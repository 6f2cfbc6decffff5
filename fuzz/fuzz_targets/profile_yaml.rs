//! BOLT YAML profile: parse arbitrary bytes; whatever parses writes back and re-parses to the same model.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::profile_yaml(data));
