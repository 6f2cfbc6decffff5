#![no_main]
//! fdata: parse arbitrary bytes; whatever parses writes back and re-parses to the same profile.

use libfuzzer_sys::fuzz_target;
use pcmap_profile::fdata;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = fdata::parse(data) {
        let mut out = Vec::new();
        fdata::write(&mut out, &p).unwrap();
        assert_eq!(fdata::parse(&out).unwrap(), p);
    }
});
