//! The cc profile reader must not panic, and whatever it accepts must write back and read back equal.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(profile) = pcmap_propeller::read_cc_profile(text) {
        let mut out = Vec::new();
        if pcmap_propeller::write_cc_profile(&profile, &mut out).is_ok() {
            let again =
                pcmap_propeller::read_cc_profile(std::str::from_utf8(&out).unwrap()).unwrap();
            assert_eq!(again, profile);
        }
    }
});
