//! Inter-function reordering (several clusters per function): the clusters partition each
//! function's hot blocks with the entry block first, the link order names every cluster once,
//! the several-cluster layout is kept only when it scores better and never takes more
//! intra-function branches than one cluster per function, and a caller whose hot parts call
//! different callees is split next to them.

use pcmap_propeller::cc_profile::write_cc_profile;
use pcmap_propeller::{
    BlockCall, CfgBlock, CfgEdge, EdgeKind, FunctionCfg, ProgramCfg, PropellerOptions,
    generate_with_calls,
};
use proptest::prelude::*;

fn func(
    name: &str,
    base: u64,
    sizes: &[u64],
    counts: &[u64],
    edges: &[(usize, usize, u64)],
) -> FunctionCfg {
    let mut addr = base;
    let blocks = sizes
        .iter()
        .zip(counts)
        .enumerate()
        .map(|(i, (&size, &count))| {
            let b = CfgBlock {
                bb_id: i as u32,
                address: addr,
                size,
                count,
                hash: None,
            };
            addr += size;
            b
        })
        .collect();
    let mut f = FunctionCfg {
        name: name.into(),
        aliases: vec![],
        blocks,
        edges: edges
            .iter()
            .map(|&(src, dst, count)| CfgEdge {
                src,
                dst,
                count,
                kind: if dst == src + 1 {
                    EdgeKind::FallThrough
                } else {
                    EdgeKind::Branch
                },
            })
            .collect(),
    };
    f.make_counts_consistent();
    f
}

fn several() -> PropellerOptions {
    PropellerOptions {
        inter_function_reordering: true,
        ..PropellerOptions::default()
    }
}

/// `work` dispatches (block 0, indirect) to two big hot loops (blocks 1-2 and 4-5, separated by
/// a cold block 3), each calling its own helper `h1` / `h2` 1000 times.
fn two_regions() -> (ProgramCfg, Vec<BlockCall>) {
    let work = func(
        "work",
        0x1000,
        &[16, 400, 8, 64, 400, 8],
        &[10, 0, 0, 0, 0, 0],
        &[
            (0, 1, 5),
            (1, 1, 995),
            (1, 2, 5),
            (0, 4, 5),
            (4, 4, 995),
            (4, 5, 5),
        ],
    );
    let h1 = func("h1", 0x3000, &[200], &[1000], &[]);
    let h2 = func("h2", 0x3100, &[200], &[1000], &[]);
    let calls = vec![
        BlockCall {
            src_function: 0,
            src_block: 1,
            dst_function: 1,
            dst_block: 0,
            count: 1000,
        },
        BlockCall {
            src_function: 0,
            src_block: 4,
            dst_function: 2,
            dst_block: 0,
            count: 1000,
        },
    ];
    let program = ProgramCfg {
        functions: vec![work, h1, h2],
        calls: vec![],
    };
    (program, calls)
}

#[test]
fn a_caller_with_two_hot_regions_is_split_next_to_its_callees() {
    let (program, calls) = two_regions();
    let one = generate_with_calls(&program, &calls, &PropellerOptions::default());
    assert!(one.placement.is_empty());
    assert!(one.summary.several_clusters.is_none());
    let p = generate_with_calls(&program, &calls, &several());
    assert!(p.summary.chose_several, "{:?}", p.summary);
    let s = p.summary.several_clusters.as_ref().unwrap();
    assert!(s.score > p.summary.one_cluster.score);
    assert!(s.taken_branches <= p.summary.one_cluster.taken_branches);
    let work = p.functions.iter().find(|f| f.function == 0).unwrap();
    assert_eq!(work.layout.clusters.len(), 2, "{:?}", work.layout);
    let ld = p.ld_symbols(&program);
    // Each helper sits right next to the part of `work` that calls it.
    let pos = |s: &str| ld.iter().position(|x| x == s).unwrap();
    let part_of = |b: usize| {
        let c = work
            .layout
            .clusters
            .iter()
            .position(|c| c.contains(&b))
            .unwrap();
        if c == 0 {
            "work".to_string()
        } else {
            format!("work.__part.{c}")
        }
    };
    assert_eq!(pos("h1").abs_diff(pos(&part_of(1))), 1, "{ld:?}");
    assert_eq!(pos("h2").abs_diff(pos(&part_of(4))), 1, "{ld:?}");
    assert!(ld.contains(&"work.cold".to_string()));
    // The cc profile is writable (unique block ids, entry first).
    let mut out = Vec::new();
    write_cc_profile(&p.cc_profile(&program, false, false), &mut out).unwrap();
    assert!(String::from_utf8(out).unwrap().contains("f work\nc 0"));
}

#[test]
fn switched_off_inter_function_reordering_and_chain_split_still_lay_out() {
    let (program, calls) = two_regions();
    let mut opts = several();
    opts.layout.ext_tsp.chain_split_threshold = 0;
    let p = generate_with_calls(&program, &calls, &opts);
    assert!(p.summary.several_clusters.is_some());
    opts.layout.reorder_blocks = false;
    let p = generate_with_calls(&program, &calls, &opts);
    assert!(
        p.summary.several_clusters.is_none(),
        "needs block reordering"
    );
    assert!(p.placement.is_empty());
}

fn arb_program() -> impl Strategy<Value = (ProgramCfg, Vec<BlockCall>)> {
    let function = (1usize..10).prop_flat_map(|n| {
        (
            prop::collection::vec(1u64..300, n),
            prop::collection::vec(0u64..50, n),
            prop::collection::vec((0..n, 0..n, 0u64..2000), 0..3 * n),
        )
    });
    (
        prop::collection::vec(function, 1..6),
        prop::collection::vec((0usize..6, 0usize..10, 0usize..6, 1u64..3000), 0..12),
    )
        .prop_map(|(fs, raw_calls)| {
            let functions: Vec<FunctionCfg> = fs
                .iter()
                .enumerate()
                .map(|(i, (sizes, counts, edges))| {
                    let mut counts = counts.clone();
                    counts[0] = counts[0].max(1);
                    func(
                        &format!("f{i}"),
                        0x10000 * (i as u64 + 1),
                        sizes,
                        &counts,
                        edges,
                    )
                })
                .collect();
            let calls = raw_calls
                .into_iter()
                .filter(|&(a, b, c, _)| {
                    a < functions.len()
                        && c < functions.len()
                        && a != c
                        && b < functions[a].blocks.len()
                })
                .map(|(a, b, c, count)| BlockCall {
                    src_function: a,
                    src_block: b,
                    dst_function: c,
                    dst_block: 0,
                    count,
                })
                .collect();
            (
                ProgramCfg {
                    functions,
                    calls: vec![],
                },
                calls,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn several_clusters_partition_the_hot_blocks_and_never_lose_a_fall_through(
        (program, calls) in arb_program()
    ) {
        let one = generate_with_calls(&program, &calls, &PropellerOptions::default());
        let p = generate_with_calls(&program, &calls, &several());
        prop_assert_eq!(p.functions.len(), one.functions.len());
        let s = p.summary.several_clusters.clone().unwrap();
        if p.summary.chose_several {
            prop_assert!(s.score > p.summary.one_cluster.score);
        } else {
            prop_assert!(p.placement.is_empty());
        }
        prop_assert!(s.taken_branches <= p.summary.one_cluster.taken_branches,
            "{} > {}", s.taken_branches, p.summary.one_cluster.taken_branches);
        for lf in &p.functions {
            let f = &program.functions[lf.function];
            let l = &lf.layout;
            prop_assert_eq!(l.clusters[0][0], 0, "entry first");
            prop_assert!(l.clusters.iter().all(|c| !c.is_empty()));
            let mut all: Vec<usize> = l.clusters.iter().flatten().chain(l.cold.iter()).copied().collect();
            all.sort();
            prop_assert_eq!(all, (0..f.blocks.len()).collect::<Vec<_>>());
            let mine = one.functions.iter().find(|o| o.function == lf.function).unwrap();
            prop_assert_eq!(&l.cold, &mine.layout.cold);
        }
        // The link order names every cluster once.
        let ld = p.ld_symbols(&program);
        let mut uniq = ld.clone();
        uniq.sort();
        uniq.dedup();
        prop_assert_eq!(uniq.len(), ld.len());
        let clusters: usize = p.functions.iter().map(|f| f.layout.clusters.len()).sum();
        let colds = p.functions.iter().filter(|f| !f.layout.cold.is_empty()).count();
        prop_assert_eq!(ld.len(), clusters + colds);
        let mut out = Vec::new();
        prop_assert!(write_cc_profile(&p.cc_profile(&program, true, false), &mut out).is_ok());
    }
}
