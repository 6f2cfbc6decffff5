//! Properties of the ext-TSP objective, the block layout, hot/cold splitting and function ordering.

use pcmap_propeller::ext_tsp::{self, ExtTspParams};
use pcmap_propeller::function_order::{FunctionOrderOptions, order_functions};
use pcmap_propeller::layout::{LayoutOptions, layout_function};
use pcmap_propeller::{CallEdge, CfgBlock, CfgEdge, EdgeKind, FunctionCfg, ProgramCfg};
use proptest::prelude::*;

fn func(name: &str, sizes: &[u64], counts: &[u64], edges: &[(usize, usize, u64)]) -> FunctionCfg {
    let mut addr = 0x1000;
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
    FunctionCfg {
        name: name.into(),
        aliases: vec![],
        blocks,
        edges: edges
            .iter()
            .map(|&(src, dst, count)| CfgEdge {
                src,
                dst,
                count,
                kind: EdgeKind::Branch,
            })
            .collect(),
    }
}

#[test]
fn edge_scores_follow_the_documented_formula() {
    let p = ExtTspParams::default();
    // Fall-through: end of source == start of destination.
    assert_eq!(p.edge_score(0, 10, 10, 7), 7.0);
    // Forward jump of 512 bytes: 0.1 * (1 - 512/1024) = 0.05 per execution.
    assert!((p.edge_score(0, 10, 522, 100) - 5.0).abs() < 1e-12);
    // Backward jump of 320 bytes: 0.1 * (1 - 320/640) = 0.05 per execution.
    assert!((p.edge_score(400, 20, 100, 100) - 5.0).abs() < 1e-12);
    // Too far either way.
    assert_eq!(p.edge_score(0, 10, 10 + 1025, 100), 0.0);
    assert_eq!(p.edge_score(1000, 10, 1010 - 641, 100), 0.0);
}

#[test]
fn hot_path_becomes_fall_through_and_cold_blocks_split() {
    // 0 -> 1 (rare) / 0 -> 2 (hot); 1 -> 3; 2 -> 3; 3 never reaches 4 (cold).
    let f = func(
        "f",
        &[10, 10, 10, 10, 10],
        &[100, 1, 99, 100, 0],
        &[(0, 1, 1), (0, 2, 99), (1, 3, 1), (2, 3, 99)],
    );
    let l = layout_function(&f, &LayoutOptions::default()).unwrap();
    assert_eq!(l.clusters, vec![vec![0, 2, 3, 1]]);
    assert_eq!(l.cold, vec![4]);
    // Original contiguous order 0 1 2 3: 0->2 forward jump of 10, 2->3 fall-through, 1->3 jump.
    assert!(l.score_after > l.score_before);
    // New order 0 2 3 1 at 0, 10, 20, 30: two fall-throughs (99 each), 0->1 forward 20 bytes,
    // 1->3 backward (end 40 -> 20) 20 bytes.
    let expected = 198.0 + 0.1 * (1.0 - 20.0 / 1024.0) + 0.1 * (1.0 - 20.0 / 640.0);
    assert!((l.score_after - expected).abs() < 1e-9, "{}", l.score_after);
}

#[test]
fn cold_function_is_not_laid_out() {
    let f = func("f", &[4, 4], &[0, 0], &[]);
    assert!(layout_function(&f, &LayoutOptions::default()).is_none());
}

#[test]
fn call_chain_clustering_puts_callee_after_hottest_caller() {
    // main calls a (10x) and b (1000x); b calls c (1000x). All tiny, so everything merges into
    // main's cluster: main, b (hottest callee first), c, then a.
    let mk = |n: &str, c: u64| func(n, &[16], &[c], &[]);
    let program = ProgramCfg {
        functions: vec![
            mk("main", 1),
            mk("a", 10),
            mk("b", 1000),
            mk("c", 1000),
            mk("lonely", 5),
        ],
        calls: vec![
            CallEdge {
                caller: 0,
                callee: 1,
                count: 10,
            },
            CallEdge {
                caller: 0,
                callee: 2,
                count: 1000,
            },
            CallEdge {
                caller: 2,
                callee: 3,
                count: 1000,
            },
        ],
    };
    let hot: Vec<usize> = (0..5).collect();
    let order = order_functions(&program, &hot, &FunctionOrderOptions::default());
    let pos = |f: usize| order.iter().position(|&x| x == f).unwrap();
    assert_eq!(pos(3), pos(2) + 1, "c right after b: {order:?}");
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(sorted, hot);
    // Without clustering: pure density order.
    let order = order_functions(
        &program,
        &hot,
        &FunctionOrderOptions {
            call_chain_clustering: false,
            ..FunctionOrderOptions::default()
        },
    );
    assert_eq!(order, vec![2, 3, 1, 4, 0]);
}

fn arb_function() -> impl Strategy<Value = FunctionCfg> {
    (1usize..24).prop_flat_map(|n| {
        (
            prop::collection::vec(0u64..200, n),
            prop::collection::vec(prop_oneof![Just(0u64), 1u64..1000], n),
            prop::collection::vec((0..n, 0..n, 0u64..1000), 0..(3 * n)),
        )
            .prop_map(|(sizes, counts, edges)| {
                let mut f = func("f", &sizes, &counts, &edges);
                f.make_counts_consistent();
                f
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn order_blocks_is_a_permutation_with_entry_first(
        n in 1usize..40,
        seed_edges in prop::collection::vec((0usize..40, 0usize..40, 0u64..500), 0..120),
        entry_pick in 0usize..40,
    ) {
        let sizes: Vec<u64> = (0..n as u64).map(|i| (i * 7) % 50).collect();
        let counts: Vec<u64> = (0..n as u64).map(|i| (i * 13) % 17).collect();
        let edges: Vec<(usize, usize, u64)> = seed_edges.into_iter().filter(|&(s, d, _)| s < n && d < n).collect();
        let entry = entry_pick % n;
        let order = ext_tsp::order_blocks(&ExtTspParams::default(), &sizes, &counts, &edges, entry);
        prop_assert_eq!(order[0], entry);
        let mut s = order.clone();
        s.sort();
        prop_assert_eq!(s, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn layout_is_a_split_permutation_that_never_scores_lower(f in arb_function()) {
        let Some(l) = layout_function(&f, &LayoutOptions::default()) else {
            prop_assert!(!f.is_hot());
            return Ok(());
        };
        let hot: Vec<usize> = l.hot_order().collect();
        prop_assert_eq!(hot[0], 0, "entry first");
        let mut all: Vec<usize> = hot.iter().chain(l.cold.iter()).copied().collect();
        all.sort();
        prop_assert_eq!(all, (0..f.blocks.len()).collect::<Vec<_>>());
        for &c in &l.cold {
            prop_assert_eq!(f.blocks[c].count, 0, "cold block was executed");
        }
        for &h in &hot[1..] {
            prop_assert!(f.blocks[h].count > 0, "unexecuted block kept hot");
        }
        prop_assert!(l.score_after + 1e-6 >= l.score_before, "{} < {}", l.score_after, l.score_before);
        // The reported scores are the objective evaluated on the orders.
        let sizes: Vec<u64> = f.blocks.iter().map(|b| b.size).collect();
        let edges = f.merged_edges();
        let p = ExtTspParams::default();
        let orig: Vec<usize> = (0..f.blocks.len()).collect();
        prop_assert!((ext_tsp::score(&p, &sizes, &edges, &orig) - l.score_before).abs() < 1e-6);
        prop_assert!((ext_tsp::score(&p, &sizes, &edges, &hot) - l.score_after).abs() < 1e-6);
    }

    #[test]
    fn function_order_is_a_permutation(
        n in 1usize..30,
        calls in prop::collection::vec((0usize..30, 0usize..30, 0u64..100), 0..60),
        counts in prop::collection::vec(1u64..1000, 30),
    ) {
        let functions: Vec<FunctionCfg> = (0..n).map(|i| func(&format!("f{i}"), &[8 + i as u64], &[counts[i]], &[])).collect();
        let calls = calls.into_iter().filter(|&(a, b, _)| a < n && b < n)
            .map(|(caller, callee, count)| CallEdge { caller, callee, count }).collect();
        let program = ProgramCfg { functions, calls };
        let hot: Vec<usize> = (0..n).collect();
        let mut order = order_functions(&program, &hot, &FunctionOrderOptions::default());
        order.sort();
        prop_assert_eq!(order, hot);
    }
}

#[test]
fn hot_functions_sharing_a_name_are_skipped() {
    use pcmap_propeller::{PropellerOptions, SkipReason, generate};
    let program = ProgramCfg {
        functions: vec![
            func("helper", &[8], &[5], &[]),
            func("helper", &[8], &[7], &[]),
            func("main", &[8], &[1], &[]),
            func("helper", &[8], &[0], &[]), // cold: does not count
        ],
        calls: vec![],
    };
    let r = generate(&program, &PropellerOptions::default());
    let names: Vec<&str> = r
        .functions
        .iter()
        .map(|f| program.functions[f.function].name.as_str())
        .collect();
    assert_eq!(names, vec!["main"]);
    assert_eq!(
        r.skipped,
        vec![
            (0, SkipReason::AmbiguousName),
            (1, SkipReason::AmbiguousName)
        ]
    );
}
