//! BTF reader: parse arbitrary bytes as base BTF and as split BTF over a small fixed base, then
//! touch every record and string the way the raw printer and the location decoders do.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcmap_btf::{Btf, BtfWriter, Format};

fn exercise(btf: &Btf<'_>) {
    let mut out = String::new();
    let _ = pcmap_btf::raw::dump_raw(btf, &mut out);
    let _ = pcmap_btf::encoding::btf2026::decode_any(btf);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(btf) = Btf::parse(data) {
        exercise(&btf);
    }
    let mut w = BtfWriter::new_base();
    let int = w.add_int("int", 4, 1, 32).unwrap();
    let proto = w.add_func_proto(int, &[(Some("x"), int)], false).unwrap();
    w.add_func("f", proto, 0).unwrap();
    let base_bytes = w.finish();
    let base = Btf::parse(&base_bytes).unwrap();
    if let Ok(split) = Btf::parse_split(data, &base) {
        exercise(&split);
    }
    let _ = pcmap_btf::decode(Format::Btf2026, data, None, &base);
});
