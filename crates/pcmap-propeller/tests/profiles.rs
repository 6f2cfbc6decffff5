//! The cc profile (clang `-fbasic-block-sections=list=`) and ld symbol-order writers and readers.

use pcmap_propeller::cc_profile::{
    CcFunction, CcProfile, CcProfileError, CfgNode, read_cc_profile, write_cc_profile,
};
use pcmap_propeller::ld_profile::{cluster_symbol, cold_symbol, read_ld_profile, write_ld_profile};
use proptest::prelude::*;

fn text(p: &CcProfile) -> String {
    let mut v = Vec::new();
    write_cc_profile(p, &mut v).unwrap();
    String::from_utf8(v).unwrap()
}

#[test]
fn writes_version_1_syntax() {
    let p = CcProfile {
        functions: vec![
            CcFunction {
                names: vec!["main".into(), "main_alias".into()],
                clusters: vec![vec![0, 3, 1], vec![5]],
                cfg: vec![
                    CfgNode {
                        bb_id: 0,
                        count: 10,
                        successors: vec![(3, 9), (1, 1)],
                    },
                    CfgNode {
                        bb_id: 3,
                        count: 9,
                        successors: vec![],
                    },
                ],
                hashes: vec![(0, 0xdead_beef), (3, 0x1)],
            },
            CcFunction {
                names: vec!["f".into()],
                clusters: vec![vec![0]],
                ..CcFunction::default()
            },
        ],
    };
    // The layout documented in bbaddrmap.md §2.4: single spaces, one cluster per `c` line.
    assert_eq!(
        text(&p),
        "v1\nf main main_alias\nc 0 3 1\nc 5\ng 0:10,3:9,1:1 3:9\nh 0:deadbeef 3:1\nf f\nc 0\n"
    );
    assert_eq!(read_cc_profile(&text(&p)).unwrap(), p);
}

#[test]
fn writer_refuses_what_clang_would_reject() {
    let dup = CcProfile {
        functions: vec![CcFunction {
            names: vec!["f".into()],
            clusters: vec![vec![0, 1], vec![1]],
            ..Default::default()
        }],
    };
    let mut out = Vec::new();
    assert!(matches!(
        write_cc_profile(&dup, &mut out),
        Err(CcProfileError::DuplicateBlock { bb_id: 1, .. })
    ));
    assert!(out.is_empty(), "nothing written on error");
    let space = CcProfile {
        functions: vec![CcFunction {
            names: vec!["a b".into()],
            clusters: vec![vec![0]],
            ..Default::default()
        }],
    };
    assert!(matches!(
        write_cc_profile(&space, &mut out),
        Err(CcProfileError::BadName { .. })
    ));
    let empty = CcProfile {
        functions: vec![CcFunction {
            names: vec!["f".into()],
            ..Default::default()
        }],
    };
    assert!(matches!(
        write_cc_profile(&empty, &mut out),
        Err(CcProfileError::Incomplete { .. })
    ));
}

#[test]
fn reader_applies_clangs_rules_with_positions() {
    let e = read_cc_profile("v1\nf f\nc 0 1 # hot\n").unwrap_err();
    assert!(
        matches!(
            e,
            CcProfileError::Syntax {
                line: 3,
                column: 7,
                ..
            }
        ),
        "{e}"
    );
    let e = read_cc_profile("v1\nf f\nc 0  1\n").unwrap_err();
    assert!(matches!(e, CcProfileError::Syntax { line: 3, .. }), "{e}");
    let e = read_cc_profile("v1\nf f\nc 0 1\nc 1\n").unwrap_err();
    assert!(e.to_string().contains("duplicate"), "{e}");
    let e = read_cc_profile("v1\nf f\nh 0:xyz\n").unwrap_err();
    assert!(e.to_string().contains("hex"), "{e}");
    let e = read_cc_profile("v1\ni 0\n").unwrap_err();
    assert!(e.to_string().contains("unsupported"), "{e}");
    assert!(read_cc_profile("# comment\n\nv1\n# x\nf f\nc 0 2 1\n").is_ok());
}

#[test]
fn ld_symbols() {
    assert_eq!(cluster_symbol("f", 0), "f");
    assert_eq!(cluster_symbol("f", 2), "f.__part.2");
    assert_eq!(cold_symbol("f"), "f.cold");
    let syms: Vec<String> = vec!["main".into(), "f.__part.1".into(), "main.cold".into()];
    let mut out = Vec::new();
    write_ld_profile(&syms, &mut out).unwrap();
    assert_eq!(out, b"main\nf.__part.1\nmain.cold\n");
    assert_eq!(read_ld_profile(std::str::from_utf8(&out).unwrap()), syms);
    assert!(write_ld_profile(&["a b".to_string()], &mut Vec::new()).is_err());
}

fn arb_name() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_.$]{0,20}"
}

fn arb_function() -> impl Strategy<Value = CcFunction> {
    (
        prop::collection::vec(arb_name(), 1..4),
        prop::collection::btree_set(0u32..10_000, 1..40),
        1usize..4,
        prop::collection::vec(
            (
                0u32..10_000,
                0u64..u64::MAX,
                prop::collection::vec((0u32..10_000, any::<u64>()), 0..3),
            ),
            0..5,
        ),
        prop::collection::vec((0u32..10_000, any::<u64>()), 0..5),
    )
        .prop_map(|(names, ids, parts, cfg, hashes)| {
            let ids: Vec<u32> = ids.into_iter().collect();
            let per = ids.len().div_ceil(parts);
            CcFunction {
                names,
                clusters: ids.chunks(per).map(<[u32]>::to_vec).collect(),
                cfg: cfg
                    .into_iter()
                    .map(|(bb_id, count, successors)| CfgNode {
                        bb_id,
                        count,
                        successors,
                    })
                    .collect(),
                hashes,
            }
        })
}

proptest! {
    #[test]
    fn cc_profile_round_trips(functions in prop::collection::vec(arb_function(), 0..6)) {
        let p = CcProfile { functions };
        let t = text(&p);
        prop_assert!(!t.contains("  ") && !t.contains(" \n") && !t.contains('#'));
        prop_assert_eq!(read_cc_profile(&t).unwrap(), p);
    }

    #[test]
    fn ld_profile_round_trips(syms in prop::collection::vec(arb_name(), 0..20)) {
        let mut out = Vec::new();
        write_ld_profile(&syms, &mut out).unwrap();
        prop_assert_eq!(read_ld_profile(std::str::from_utf8(&out).unwrap()), syms);
    }
}
