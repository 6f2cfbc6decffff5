//! Decoders of untrusted bytes return errors, never panic: arbitrary bytes and single-byte
//! mutations of valid blobs of every encoding (the fuzz targets go further).

use pcmap_btf::{
    Btf, BtfWriter, CodeSection, Format, FuncParam, InlineFunc, Loc, ParamLoc, Site, SiteSet,
    TypeDesc,
};
use proptest::prelude::*;

fn base() -> Vec<u8> {
    let mut w = BtfWriter::new_base();
    let int = w.add_int("int", 4, 1, 32).unwrap();
    let proto = w.add_func_proto(int, &[(Some("x"), int)], false).unwrap();
    w.add_func("f", proto, 0).unwrap();
    w.finish()
}

fn blobs(base: &Btf<'_>) -> Vec<(Format, Vec<u8>, Vec<u8>)> {
    let int = TypeDesc::Int {
        name: "int".into(),
        size: 4,
        signed: true,
        char: false,
        bool: false,
    };
    let set = SiteSet {
        sections: vec![CodeSection {
            name: ".text".into(),
            address: 0,
            size: 0x1000,
        }],
        funcs: vec![InlineFunc {
            name: "g".into(),
            ret: int.clone(),
            params: vec![
                FuncParam {
                    name: "a".into(),
                    ty: int.clone(),
                },
                FuncParam {
                    name: "b".into(),
                    ty: TypeDesc::Pointer(Box::new(int)),
                },
            ],
            varargs: false,
        }],
        sites: (0..6)
            .map(|i| Site {
                address: i * 16,
                func: 0,
                params: vec![
                    Some(ParamLoc {
                        size: 4,
                        signed: true,
                        loc: [Loc::Reg(5), Loc::Const(7), Loc::RegPair(1, 2)][i as usize % 3],
                    }),
                    Some(ParamLoc {
                        size: 8,
                        signed: false,
                        loc: Loc::Deref {
                            reg: 7,
                            offset: 8 * i as i32,
                        },
                    }),
                ],
            })
            .collect(),
    };
    Format::ALL
        .iter()
        .map(|&f| {
            let e = pcmap_btf::encode(&set, base, f).unwrap();
            (f, e.blob, e.types)
        })
        .collect()
}

fn decode_all(data: &[u8], types: &[u8], base: &Btf<'_>) {
    for f in Format::ALL {
        let _ = pcmap_btf::decode(f, data, Some(types), base);
        let _ = pcmap_btf::decode(f, data, None, base);
    }
    if let Ok(b) = Btf::parse(data) {
        let mut s = String::new();
        let _ = pcmap_btf::raw::dump_raw(&b, &mut s);
    }
    if let Ok(b) = Btf::parse_split(data, base) {
        let mut s = String::new();
        let _ = pcmap_btf::raw::dump_raw(&b, &mut s);
    }
    let _ = pcmap_btf::elf_append::section_data(data, ".BTF");
    let _ = pcmap_btf::elf_append::append_sections(data, &[]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let b = base();
        let base = Btf::parse(&b).unwrap();
        decode_all(&data, &[], &base);
    }

    #[test]
    fn mutated_valid_blobs(which in 0usize..4, pos in any::<prop::sample::Index>(), byte in any::<u8>(), truncate in any::<bool>()) {
        let b = base();
        let base = Btf::parse(&b).unwrap();
        let all = blobs(&base);
        let (_, blob, types) = &all[which];
        let mut m = blob.clone();
        let i = pos.index(m.len());
        if truncate { m.truncate(i) } else { m[i] = byte }
        decode_all(&m, types, &base);
        let mut t = types.clone();
        if !t.is_empty() {
            let j = pos.index(t.len());
            t[j] = byte;
        }
        decode_all(blob, &t, &base);
    }
}
