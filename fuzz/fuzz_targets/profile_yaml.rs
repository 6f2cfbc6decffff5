#![no_main]
//! BOLT YAML profile: parse arbitrary bytes; whatever parses writes back and re-parses to the same model.

use libfuzzer_sys::fuzz_target;
use pcmap_profile::yaml;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = yaml::parse(data) {
        let mut out = Vec::new();
        yaml::write(&mut out, &p).unwrap();
        assert_eq!(yaml::parse(&out).unwrap(), p);
    }
});
