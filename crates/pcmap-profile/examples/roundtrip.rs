//! Parse a profile file (fdata, YAML or pre-aggregated, by extension) and write it back to stdout.
use std::io::Write;
fn main() {
    let path = std::env::args().nth(1).expect("usage: roundtrip FILE");
    let data = std::fs::read(&path).expect("read");
    let mut out = Vec::new();
    if path.ends_with(".yaml") {
        let p = pcmap_profile::yaml::parse(&data).unwrap_or_else(|e| panic!("{path}:{e}"));
        pcmap_profile::yaml::write(&mut out, &p).unwrap();
    } else if path.ends_with(".fdata") {
        let p = pcmap_profile::fdata::parse(&data).unwrap_or_else(|e| panic!("{path}:{e}"));
        pcmap_profile::fdata::write(&mut out, &p).unwrap();
    } else {
        let r = pcmap_profile::preagg::parse_all(&data).unwrap_or_else(|e| panic!("{path}:{e}"));
        pcmap_profile::preagg::write(&mut out, &r).unwrap();
    }
    std::io::stdout().write_all(&out).unwrap();
}
