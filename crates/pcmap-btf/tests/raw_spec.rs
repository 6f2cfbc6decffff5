//! The raw dump of the 2026 location kinds follows the revision's selftest style
//! (`VALIDATE_RAW_BTF` lines quoted in shared/reference/btf-inline.md §1.3).

use pcmap_btf::layout::Layout;
use pcmap_btf::raw::dump_raw;
use pcmap_btf::{Btf, BtfWriter, Kind};

#[test]
fn location_kinds_print_like_the_2026_selftests() {
    let mut w = BtfWriter::new_base();
    w.set_layout(Some(Layout::revision_2026()));
    let int = w.add_int("int", 4, 1, 32).unwrap(); // [1]
    w.add_ref(Kind::PTR, None, int).unwrap(); // [2]
    w.add_ref(Kind::CONST, None, int).unwrap(); // [3]
    let proto = w.add_func_proto(int, &[(Some("a"), int)], false).unwrap(); // [4]
    let func = w.add_func("foo", proto, 0).unwrap(); // [5]
    let param = w
        .add_raw(0, Kind::LOC_PARAM, false, 1, 4, &[0x1, 0])
        .unwrap(); // [6]
    let lproto = w
        .add_raw(0, Kind::LOC_PROTO, false, 1, 0, &[param])
        .unwrap(); // [7]
    let name = w.add_str(".locs");
    w.add_raw(
        name,
        Kind::LOCSEC,
        false,
        2,
        0,
        &[func, lproto, 128, func, lproto, 256],
    )
    .unwrap(); // [8]
    let bytes = w.finish();
    let btf = Btf::parse(&bytes).unwrap();
    assert_eq!(btf.loc_flavor(), pcmap_btf::LocFlavor::Rev2026);
    let mut out = String::new();
    dump_raw(&btf, &mut out).unwrap();
    let expected = "[6] LOC_PARAM '(anon)' size=4 flags=0x1 vlen=1\n\tvalue=0\n[7] LOC_PROTO '(anon)' vlen=1\n\ttype_id=6\n[8] LOCSEC '.locs' vlen=2\n\tfunc_type_id=5 loc_proto_type_id=7 offset=128\n";
    assert!(out.contains(expected), "{out}");
}

#[test]
fn header_with_layout_is_32_bytes_and_layout_sits_between_types_and_strings() {
    let mut w = BtfWriter::new_base();
    w.set_layout(Some(Layout::revision_2026()));
    w.add_int("int", 4, 1, 32).unwrap();
    let bytes = w.finish();
    let h = pcmap_btf::header::Header::parse(&bytes).unwrap();
    assert_eq!(h.hdr_len, 32);
    let (off, len) = h.layout.unwrap();
    assert_eq!((off, len), (h.type_off + h.type_len, 23 * 4));
    assert_eq!(h.str_off, off + len);
    // LOC_PARAM 4/4, LOC_PROTO 0/4, LOCSEC 0/12 as the revision defines them.
    let l = Btf::parse(&bytes).unwrap().layout().unwrap().clone();
    let k = |n: u8| l.get(Kind(n)).map(|k| (k.info_sz, k.elem_sz));
    assert_eq!(
        (k(20), k(21), k(22)),
        (Some((4, 4)), Some((0, 4)), Some((0, 12)))
    );
}
