#![no_main]
//! Pre-aggregated text: serial and parallel parsing must agree and never panic.

use libfuzzer_sys::fuzz_target;
use pcmap_profile::preagg;

fuzz_target!(|data: &[u8]| {
    let serial = preagg::parse_all(data);
    let par = preagg::fold_parallel(data, Vec::new, |v, r| v.push(r), |mut a, b| {
        a.extend(b);
        a
    });
    assert_eq!(serial, par);
    if let Ok(records) = serial {
        let mut out = Vec::new();
        preagg::write(&mut out, &records).unwrap();
        assert_eq!(preagg::parse_all(&out).unwrap(), records);
    }
});
