//! CFG construction from a hand-written address map and branch records, against hand-computed
//! expectations.

use pcmap_propeller::builder::{Accumulator, BuildStats, CfgBuilder, MapBlock, MapFunction};
use pcmap_propeller::{CallEdge, CfgEdge, EdgeKind};

fn blk(bb_id: u32, address: u64, size: u64, can_fall_through: bool, has_return: bool) -> MapBlock {
    MapBlock {
        bb_id,
        address,
        size,
        can_fall_through,
        has_return,
        hash: None,
    }
}

fn map() -> Vec<MapFunction> {
    vec![
        MapFunction {
            name: "main".into(),
            aliases: vec!["main_alias".into()],
            ranges: vec![
                vec![
                    blk(0, 0x100, 0x10, true, false), // b0 [100,110)
                    blk(1, 0x110, 0x08, true, false), // b1 [110,118) calls callee at 0x114
                    blk(2, 0x118, 0x08, false, true), // b2 [118,120) ret
                    blk(5, 0x120, 0x00, true, false), // b3 zero-sized at 0x120
                    blk(3, 0x120, 0x08, false, true), // b4 [120,128) ret
                ],
                vec![blk(4, 0x300, 0x04, false, false)], // b5, second range (e.g. main.cold)
            ],
        },
        MapFunction {
            name: "callee".into(),
            aliases: vec![],
            ranges: vec![vec![blk(0, 0x200, 0x10, false, true)]],
        },
        MapFunction {
            name: "never".into(),
            aliases: vec![],
            ranges: vec![vec![blk(0, 0x400, 0x10, false, true)]],
        },
    ]
}

#[test]
fn classifies_branches_and_validates_fall_throughs() {
    let m = map();
    let b = CfgBuilder::new(&m).unwrap();
    let mut acc = Accumulator::default();
    b.add_branch(&mut acc, 0x10c, 0x118, 5); // b0 -> b2: intra branch
    b.add_branch(&mut acc, 0x10c, 0x120, 2); // b0 -> zero-sized b3 (first block at 0x120)
    b.add_branch(&mut acc, 0x114, 0x200, 3); // call main -> callee
    b.add_branch(&mut acc, 0x20c, 0x116, 3); // return into the middle of b1
    b.add_branch(&mut acc, 0x11c, 0x300, 1); // b2 ends in a return: not an edge even at a block start
    b.add_branch(&mut acc, 0x5000, 0x6000, 1); // unmapped
    b.add_branch(&mut acc, 0x5000, 0x100, 1); // from outside
    b.add_branch(&mut acc, 0x10c, 0x5000, 1); // to outside
    b.add_branch(&mut acc, 0x20c, 0x300, 1); // callee (ret) -> main range 1 start: a return
    b.add_fall_through(&mut acc, 0x100, 0x114, 3); // b0 -> b1 valid
    b.add_fall_through(&mut acc, 0x118, 0x11c, 5); // inside b2
    b.add_fall_through(&mut acc, 0x116, 0x11a, 3); // return landing mid b1 -> b2: b1 not counted again
    b.add_fall_through(&mut acc, 0x110, 0x124, 9); // through b2 (cannot fall through): invalid
    b.add_fall_through(&mut acc, 0x120, 0x124, 2); // zero-sized b3 -> b4
    b.add_fall_through(&mut acc, 0x118, 0x100, 1); // backwards: invalid
    b.add_fall_through(&mut acc, 0x100, 0x204, 1); // across functions: invalid
    b.add_fall_through(&mut acc, 0x124, 0x300, 1); // across ranges: invalid
    b.add_fall_through(&mut acc, 0x100, 0x9000, 1); // end unmapped
    let stats = acc.stats.clone();
    let program = b.finish(acc);
    let stats_expected = BuildStats {
        branches: 9,
        intra_branches: 2,
        calls: 1,
        returns: 3,
        inter_function_jumps: 0,
        branches_unmapped: 1,
        branches_from_outside: 1,
        branches_to_outside: 1,
        fall_throughs: 9,
        fall_throughs_valid: 4,
        fall_throughs_unmapped: 1,
        fall_throughs_invalid: 4,
    };
    assert_eq!(stats, stats_expected);
    assert_eq!(program.functions.len(), 2, "`never` is not profiled");
    let main = &program.functions[0];
    assert_eq!(main.name, "main");
    assert_eq!(main.aliases, vec!["main_alias".to_string()]);
    let mut edges = main.edges.clone();
    edges.sort_by_key(|e| (e.src, e.dst, e.kind));
    assert_eq!(
        edges,
        vec![
            CfgEdge {
                src: 0,
                dst: 1,
                count: 3,
                kind: EdgeKind::FallThrough
            },
            CfgEdge {
                src: 0,
                dst: 2,
                count: 5,
                kind: EdgeKind::Branch
            },
            CfgEdge {
                src: 0,
                dst: 3,
                count: 2,
                kind: EdgeKind::Branch
            },
            CfgEdge {
                src: 1,
                dst: 2,
                count: 3,
                kind: EdgeKind::FallThrough
            },
            CfgEdge {
                src: 3,
                dst: 4,
                count: 2,
                kind: EdgeKind::FallThrough
            },
        ]
    );
    // Entries: b0 3 (fall-through start), raised to its out-edges 3+5+2 = 10; b1 3;
    // b2 5 (start) + 3 (entered from b1) = 8; b3 2 (start); b4 2; b5 never.
    let counts: Vec<u64> = main.blocks.iter().map(|b| b.count).collect();
    assert_eq!(counts, vec![10, 3, 8, 2, 2, 0]);
    assert_eq!(
        program.calls,
        vec![CallEdge {
            caller: 0,
            callee: 1,
            count: 3
        }]
    );
    assert_eq!(
        program.functions[1].blocks[0].count, 3,
        "callee entry counted from its calls"
    );
}

#[test]
fn stats_count_every_record_and_merge() {
    let m = map();
    let b = CfgBuilder::new(&m).unwrap();
    let mut a1 = Accumulator::default();
    let mut a2 = Accumulator::default();
    b.add_branch(&mut a1, 0x10c, 0x118, 5);
    b.add_branch(&mut a2, 0x10c, 0x118, 7);
    b.add_branch(&mut a2, 0x5000, 0x6000, 1);
    b.add_fall_through(&mut a1, 0x110, 0x124, 9);
    b.add_fall_through(&mut a2, 0x100, 0x114, 3);
    let acc = a1.merge(a2);
    assert_eq!(
        acc.stats,
        BuildStats {
            branches: 3,
            intra_branches: 2,
            branches_unmapped: 1,
            fall_throughs: 2,
            fall_throughs_valid: 1,
            fall_throughs_invalid: 1,
            ..BuildStats::default()
        }
    );
    assert_eq!(acc.stats.records(), 5);
    assert_eq!(acc.stats.mapped_records(), 4);
    let program = b.finish(acc);
    let e = program.functions[0]
        .edges
        .iter()
        .find(|e| e.dst == 2)
        .unwrap();
    assert_eq!(e.count, 12);
}
