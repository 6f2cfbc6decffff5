//! `.BTF.inline` (RFC layout) and compact-encoding decoders on arbitrary bytes, with a base that
//! has a FUNC at id 3 so site records can resolve.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcmap_btf::encoding::{compact::CompactBlob, rfc::RfcBlob};
use pcmap_btf::{Btf, BtfWriter, Format};

fuzz_target!(|data: &[u8]| {
    let mut w = BtfWriter::new_base();
    let int = w.add_int("int", 4, 1, 32).unwrap();
    let proto = w.add_func_proto(int, &[(Some("x"), int)], false).unwrap();
    w.add_func("f", proto, 0).unwrap();
    let base_bytes = w.finish();
    let base = Btf::parse(&base_bytes).unwrap();
    let _ = pcmap_btf::decode(Format::Rfc, data, None, &base);
    let _ = pcmap_btf::decode(Format::Compact, data, None, &base);
    if let Ok(b) = RfcBlob::parse(data) {
        for s in b.sites().take(10_000) {
            let Ok(s) = s else { break };
            for &o in &s.param_locations {
                let _ = b.location(o);
            }
        }
    }
    if let Ok(b) = CompactBlob::parse(data) {
        for i in 0..b.lists.len().min(10_000) {
            let _ = b.list(i as u32);
        }
    }
});
