//! Every blob the encoders write decodes back to the same sites and locations (as far as each
//! encoding can represent them: `Format::project`), for all four encodings.

use pcmap_btf::{
    Btf, BtfWriter, CodeSection, DecodedSite, Format, FuncParam, InlineFunc, Loc, ParamLoc, Site,
    SiteSet, TypeDesc,
};
use proptest::prelude::*;

fn base_btf() -> Vec<u8> {
    let mut w = BtfWriter::new_base();
    let int = w.add_int("int", 4, 1, 32).unwrap();
    w.add_int("unsigned long", 8, 0, 64).unwrap();
    let s = w
        .add_opaque_composite(pcmap_btf::Kind::STRUCT, Some("sk_buff"), 232)
        .unwrap();
    w.add_ref(pcmap_btf::Kind::PTR, None, s).unwrap();
    // A partially inlined function: the base already has its FUNC.
    let proto = w.add_func_proto(int, &[(Some("x"), int)], false).unwrap();
    w.add_func("out_of_line", proto, 1).unwrap();
    w.finish()
}

fn type_desc() -> impl Strategy<Value = TypeDesc> {
    let leaf = prop_oneof![
        Just(TypeDesc::Int {
            name: "int".into(),
            size: 4,
            signed: true,
            char: false,
            bool: false
        }),
        Just(TypeDesc::Int {
            name: "unsigned long".into(),
            size: 8,
            signed: false,
            char: false,
            bool: false
        }),
        Just(TypeDesc::Int {
            name: "u8".into(),
            size: 1,
            signed: false,
            char: false,
            bool: false
        }),
        Just(TypeDesc::Struct {
            name: Some("sk_buff".into()),
            size: 232
        }),
        Just(TypeDesc::Struct {
            name: Some("not_in_base".into()),
            size: 16
        }),
        Just(TypeDesc::Union {
            name: None,
            size: 8
        }),
        Just(TypeDesc::Enum {
            name: Some("e".into()),
            size: 4,
            signed: false
        }),
        Just(TypeDesc::Float {
            name: "double".into(),
            size: 8
        }),
    ];
    leaf.prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| TypeDesc::Pointer(Box::new(t))),
            inner.clone().prop_map(|t| TypeDesc::Const(Box::new(t))),
            inner.clone().prop_map(|t| TypeDesc::Typedef {
                name: "td".into(),
                target: Box::new(t)
            }),
            (inner.clone(), 0u32..8).prop_map(|(t, len)| TypeDesc::Array {
                elem: Box::new(t),
                len
            }),
            (inner.clone(), proptest::collection::vec(inner, 0..3)).prop_map(|(r, ps)| {
                TypeDesc::Pointer(Box::new(TypeDesc::Function {
                    ret: Box::new(r),
                    params: ps,
                    varargs: false,
                }))
            }),
        ]
    })
}

fn reg() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..40, 1 => Just(pcmap_btf::model::FRAME_BASE_REG), 1 => any::<u32>()]
}

fn param_loc() -> impl Strategy<Value = ParamLoc> {
    let loc = prop_oneof![
        any::<u64>().prop_map(Loc::Const),
        any::<u64>().prop_map(Loc::Addr),
        reg().prop_map(Loc::Reg),
        (0u32..40, 0u32..40).prop_map(|(a, b)| Loc::RegPair(a, b)),
        (reg(), any::<i32>()).prop_map(|(reg, offset)| Loc::RegOffset { reg, offset }),
        (reg(), any::<i32>()).prop_map(|(reg, offset)| Loc::Deref { reg, offset }),
    ];
    (
        prop_oneof![Just(1u32), Just(2), Just(4), Just(8), Just(16), 0u32..300],
        any::<bool>(),
        loc,
    )
        .prop_map(|(size, signed, loc)| ParamLoc { size, signed, loc })
}

fn site_set() -> impl Strategy<Value = SiteSet> {
    let func = (
        proptest::collection::vec(type_desc(), 0..5),
        type_desc(),
        any::<bool>(),
        0usize..3,
    );
    (
        proptest::collection::vec(func, 1..12),
        proptest::collection::vec(
            (
                0u64..0x3000,
                any::<prop::sample::Index>(),
                proptest::collection::vec(proptest::option::weighted(0.8, param_loc()), 0..6),
            ),
            0..80,
        ),
    )
        .prop_map(|(funcs, sites)| {
            let funcs: Vec<InlineFunc> = funcs
                .into_iter()
                .enumerate()
                .map(|(i, (params, ret, varargs, name_kind))| InlineFunc {
                    // Some functions share names (static functions of different CUs), one is the base's FUNC.
                    name: match name_kind {
                        0 => format!("inl_{i}"),
                        1 => "dup_name".to_string(),
                        _ => "out_of_line".to_string(),
                    },
                    ret,
                    params: params
                        .into_iter()
                        .enumerate()
                        .map(|(j, ty)| FuncParam {
                            name: format!("p{j}"),
                            ty,
                        })
                        .collect(),
                    varargs,
                })
                .collect();
            let sites = sites
                .into_iter()
                .map(|(addr, f, params)| {
                    let func = f.index(funcs.len());
                    // Sites carry one location per parameter of the callee.
                    let mut params = params;
                    params.resize(funcs[func].params.len(), None);
                    Site {
                        address: 0x1000 + addr,
                        func,
                        params,
                    }
                })
                .collect();
            SiteSet {
                sections: vec![
                    CodeSection {
                        name: ".text".into(),
                        address: 0x1000,
                        size: 0x2000,
                    },
                    CodeSection {
                        name: ".text.unlikely".into(),
                        address: 0x3000,
                        size: 0x800,
                    },
                ],
                funcs,
                sites,
            }
        })
}

fn expected(set: &SiteSet, format: Format) -> Vec<(u64, String, Vec<Option<ParamLoc>>)> {
    let mut v: Vec<_> = set
        .sites
        .iter()
        .filter(|s| {
            set.sections
                .iter()
                .any(|sec| s.address >= sec.address && s.address - sec.address < sec.size)
        })
        .map(|s| {
            (
                s.address,
                set.funcs[s.func].name.clone(),
                s.params.iter().map(|p| format.project(*p)).collect(),
            )
        })
        .collect();
    v.sort();
    v
}

fn actual(decoded: &[DecodedSite], set: &SiteSet) -> Vec<(u64, String, Vec<Option<ParamLoc>>)> {
    let mut v: Vec<_> = decoded
        .iter()
        .map(|d| {
            (
                d.address(&set.sections).expect("known section"),
                d.func.clone(),
                d.params.clone(),
            )
        })
        .collect();
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn every_encoding_round_trips(set in site_set()) {
        let base_bytes = base_btf();
        let base = Btf::parse(&base_bytes).unwrap();
        for format in Format::ALL {
            let enc = pcmap_btf::encode(&set, &base, format).unwrap();
            let decoded = pcmap_btf::decode(format, &enc.blob, Some(&enc.types), &base).unwrap();
            prop_assert_eq!(actual(&decoded, &set), expected(&set, format), "format {}", format.name());
            // The standard-kind split BTF parses on its own over the base and holds a FUNC per callee.
            let types = Btf::parse_split(&enc.types, &base).unwrap();
            for rec in types.own_records() {
                prop_assert!(rec.unwrap().kind().is_standard());
            }
        }
    }

    #[test]
    fn compact_is_lossless(p in param_loc()) {
        prop_assert_eq!(Format::Compact.project(Some(p)), Some(p.canonical()));
    }

    #[test]
    fn btf_2026_is_lossless(p in param_loc()) {
        prop_assert_eq!(Format::Btf2026.project(Some(p)), Some(p.canonical()));
    }
}

#[test]
fn partially_inlined_functions_reuse_the_base_func() {
    let base_bytes = base_btf();
    let base = Btf::parse(&base_bytes).unwrap();
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
            size: 0x100,
        }],
        funcs: vec![
            InlineFunc {
                name: "out_of_line".into(),
                ret: int.clone(),
                params: vec![FuncParam {
                    name: "x".into(),
                    ty: int.clone(),
                }],
                varargs: false,
            },
            InlineFunc {
                name: "fully".into(),
                ret: int.clone(),
                params: vec![FuncParam {
                    name: "y".into(),
                    ty: int.clone(),
                }],
                varargs: false,
            },
        ],
        sites: vec![
            Site {
                address: 0x10,
                func: 0,
                params: vec![Some(ParamLoc {
                    size: 4,
                    signed: true,
                    loc: Loc::Reg(5),
                })],
            },
            Site {
                address: 0x20,
                func: 1,
                params: vec![Some(ParamLoc {
                    size: 4,
                    signed: true,
                    loc: Loc::Reg(5),
                })],
            },
        ],
    };
    let enc = pcmap_btf::encode(&set, &base, Format::Btf2026).unwrap();
    assert_eq!(enc.stats.funcs, 2);
    assert_eq!(enc.stats.funcs_from_base, 1);
    // Only `fully` needs new types: one FUNC_PROTO (int (int), resolved to the base's int) and one FUNC.
    let types = Btf::parse_split(&enc.types, &base).unwrap();
    let kinds: Vec<_> = types.own_records().map(|r| r.unwrap().kind()).collect();
    assert_eq!(
        kinds,
        vec![pcmap_btf::Kind::FUNC_PROTO, pcmap_btf::Kind::FUNC]
    );
    let proto = types.record(types.start_id()).unwrap();
    assert_eq!(proto.size_or_type, 1, "return type is the base's int");
    assert_eq!(proto.elem_word(0, 1), 1, "parameter type is the base's int");
    // One location and one location list shared by both sites.
    assert_eq!(
        (
            enc.stats.distinct_locations,
            enc.stats.distinct_location_lists
        ),
        (1, 1)
    );
}
