//! Arbitrary pre-aggregated records folded into a small fixed map, then laid out and written:
//! nothing may panic (addresses, counts near u64::MAX, impossible fall-throughs).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pcmap_propeller::builder::{CfgBuilder, MapBlock, MapFunction};

fuzz_target!(|data: &[u8]| {
    let blk =
        |bb_id: u32, address: u64, size: u64, can_fall_through: bool, has_return: bool| MapBlock {
            bb_id,
            address,
            size,
            can_fall_through,
            has_return,
            hash: Some(u64::from(bb_id)),
        };
    let map = vec![
        MapFunction {
            name: "f".into(),
            aliases: vec!["g".into()],
            ranges: vec![
                vec![
                    blk(0, 0x10, 8, true, false),
                    blk(1, 0x18, 0, true, false),
                    blk(2, 0x18, 8, false, true),
                ],
                vec![blk(3, 0x100, 4, false, false)],
            ],
        },
        MapFunction {
            name: "h".into(),
            aliases: vec![],
            ranges: vec![vec![blk(0, 0x40, 16, false, true)]],
        },
    ];
    let builder = CfgBuilder::new(&map).unwrap();
    let Ok(fold) = pcmap_propeller::input::fold_preaggregated(&builder, data) else {
        return;
    };
    let program = builder.finish(fold.acc);
    let result = pcmap_propeller::generate(&program, &pcmap_propeller::PropellerOptions::default());
    let mut out = Vec::new();
    let _ = pcmap_propeller::write_cc_profile(&result.cc_profile(&program, true, true), &mut out);
    let _ = pcmap_propeller::ld_profile::write_ld_profile(&result.ld_symbols(&program), &mut out);
});
