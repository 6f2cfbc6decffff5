//! The block index against a brute-force scan of the blocks, and the streaming index builder
//! against the index built from decoded functions.

use pcmap_bbmap::decode::{DecodeOptions, StoredAddress, decode_section, visit_section};
use pcmap_bbmap::encode::{EncodeOptions, encode_section};
use pcmap_bbmap::index::{BlockIndex, BlockIndexBuilder};
use pcmap_bbmap::model::{BbEntry, BbRange, BlockMetadata, Features, FunctionMap, Layout};
use proptest::prelude::*;

/// Functions with blocks laid out from `base` with random sizes (some zero) and gaps.
fn functions() -> impl Strategy<Value = Vec<FunctionMap>> {
    prop::collection::vec(
        (
            0u64..64,
            prop::collection::vec((0u32..12, 0u32..3, 0u32..32), 1..8),
        ),
        1..12,
    )
    .prop_map(|fs| {
        let mut addr = 0x1000u64;
        fs.into_iter()
            .map(|(gap, blocks)| {
                addr += gap;
                let mut off = 0u32;
                let entries: Vec<BbEntry> = blocks
                    .iter()
                    .enumerate()
                    .map(|(i, &(size, pad, md))| {
                        off += pad;
                        let e = BbEntry {
                            id: (i as u32) % 3, // IDs repeat, as with cloned blocks
                            offset: off,
                            size,
                            metadata: BlockMetadata(md),
                            ..Default::default()
                        };
                        off += size;
                        e
                    })
                    .collect();
                let f = FunctionMap {
                    layout: Layout::Versioned(2),
                    features: Features(0),
                    ranges: vec![BbRange {
                        base_address: addr,
                        num_blocks: entries.len() as u32,
                        entries,
                    }],
                    pgo: None,
                };
                addr += u64::from(off);
                f
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn lookup_matches_a_linear_scan(fs in functions(), probes in prop::collection::vec(0x0f00u64..0x2000, 64)) {
        let ix = BlockIndex::new(&fs);
        // Every (function, range, index) is findable and round-trips through its position.
        for (fi, f) in fs.iter().enumerate() {
            for (bi, e) in f.ranges[0].entries.iter().enumerate() {
                let h = pcmap_bbmap::BlockHandle { function: fi as u32, range: 0, index: bi as u32 };
                let b = ix.block(ix.position(h).unwrap());
                prop_assert_eq!(b.handle, h);
                prop_assert_eq!(b.start, f.ranges[0].base_address + u64::from(e.offset));
            }
        }
        for pc in probes {
            // Samples: the non-empty block containing pc (blocks never overlap here).
            let expect = fs.iter().enumerate().find_map(|(fi, f)| {
                f.ranges[0].entries.iter().enumerate().find_map(|(bi, e)| {
                    let s = f.ranges[0].base_address + u64::from(e.offset);
                    (pc >= s && pc < s + u64::from(e.size)).then_some((fi as u32, bi as u32))
                })
            });
            let got = ix.lookup(pc).map(|p| (ix.block(p).handle.function, ix.block(p).handle.index));
            prop_assert_eq!(got, expect, "lookup({:#x})", pc);
            // Branch targets: the first zero-sized block of the function at pc, else the block
            // containing pc, else the block ending exactly at pc.
            let starts_here: Vec<(u32, u32, u32)> = fs.iter().enumerate().flat_map(|(fi, f)| {
                f.ranges[0].entries.iter().enumerate().filter_map(move |(bi, e)| {
                    (f.ranges[0].base_address + u64::from(e.offset) == pc).then_some((fi as u32, bi as u32, e.size))
                })
            }).collect();
            let target = ix.lookup_branch_target(pc).map(|p| (ix.block(p).handle.function, ix.block(p).handle.index));
            if let Some(&(f_ne, _, _)) = starts_here.iter().find(|x| x.2 > 0) {
                let first = starts_here.iter().find(|x| x.0 == f_ne).map(|x| (x.0, x.1));
                prop_assert_eq!(target, first, "target({:#x})", pc);
            } else if expect.is_some() {
                prop_assert_eq!(target, expect);
            }
        }
    }

    #[test]
    fn streaming_builder_equals_index_from_functions(fs in functions()) {
        let (bytes, _) = encode_section(&fs, EncodeOptions::ELF64LE).unwrap();
        let decoded = decode_section(&bytes, DecodeOptions::ELF64LE, &StoredAddress).unwrap();
        let a = BlockIndex::new(&decoded);
        let mut builder = BlockIndexBuilder::default();
        visit_section(&bytes, DecodeOptions::ELF64LE, &StoredAddress, &mut builder).unwrap();
        let b = builder.finish();
        prop_assert_eq!(a.blocks(), b.blocks());
    }
}
