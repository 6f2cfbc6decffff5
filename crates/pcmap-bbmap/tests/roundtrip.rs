//! Encoder/decoder round trips over arbitrary maps, in every layout, byte order and address size.

use pcmap_bbmap::decode::{DecodeOptions, Endian, LegacyMode, StoredAddress, decode_section};
use pcmap_bbmap::encode::{EncodeOptions, encode_section};
use pcmap_bbmap::model::{
    BbEntry, BbRange, BlockMetadata, Features, FunctionMap, Layout, PgoAnalysis, PgoBbEntry,
    PgoSuccessor,
};
use proptest::prelude::*;

fn entry(callsites: bool, hash: bool) -> impl Strategy<Value = BbEntry> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        0u32..32,
        prop::collection::vec(any::<u32>(), 0..4),
        any::<u64>(),
    )
        .prop_map(move |(id, offset, size, md, mut cs, h)| {
            cs.sort_unstable();
            BbEntry {
                id,
                offset,
                size,
                metadata: BlockMetadata(md),
                callsite_end_offsets: if callsites { cs } else { Vec::new() },
                hash: if hash { h } else { 0 },
            }
        })
}

fn function(address_size: u8) -> impl Strategy<Value = FunctionMap> {
    (2u8..=5, 0u16..=0xff).prop_flat_map(move |(version, raw)| {
        let mut f = Features(raw);
        if f.min_version() > version {
            f = Features(raw & 0x1f);
        }
        let nranges = if f.multi_bb_range() {
            1..4usize
        } else {
            1..2usize
        };
        let addr = if address_size == 8 {
            any::<u64>().boxed()
        } else {
            (0..=u64::from(u32::MAX)).boxed()
        };
        let range = (
            addr,
            prop::collection::vec(entry(f.callsite_end_offsets(), f.bb_hash()), 0..6),
            0u32..10,
        )
            .prop_map(move |(base_address, entries, omitted)| BbRange {
                base_address,
                num_blocks: if f.omit_bb_entries() {
                    omitted
                } else {
                    entries.len() as u32
                },
                entries: if f.omit_bb_entries() {
                    Vec::new()
                } else {
                    entries
                },
            });
        (
            prop::collection::vec(range, nranges),
            any::<u64>(),
            prop::collection::vec(
                (
                    any::<u64>(),
                    any::<u32>(),
                    prop::collection::vec((any::<u32>(), any::<u32>(), any::<u32>()), 0..3),
                ),
                0..30,
            ),
        )
            .prop_map(move |(ranges, count, pgo_blocks)| {
                let total: usize = ranges.iter().map(|r| r.entries.len()).sum();
                let pgo = f.has_pgo_analysis().then(|| PgoAnalysis {
                    func_entry_count: if f.func_entry_count() { count } else { 0 },
                    bb_entries: if f.has_pgo_analysis_bb_data() {
                        (0..total)
                            .map(|i| {
                                let (freq, pl, succ) =
                                    pgo_blocks.get(i).cloned().unwrap_or_default();
                                PgoBbEntry {
                                    frequency: if f.bb_freq() { freq } else { 0 },
                                    post_link_frequency: if f.post_link_cfg() { pl } else { 0 },
                                    successors: if f.br_prob() {
                                        succ.into_iter()
                                            .map(|(id, p, e)| PgoSuccessor {
                                                id,
                                                probability: p,
                                                post_link_frequency: if f.post_link_cfg() {
                                                    e
                                                } else {
                                                    0
                                                },
                                            })
                                            .collect()
                                    } else {
                                        Vec::new()
                                    },
                                }
                            })
                            .collect()
                    } else {
                        Vec::new()
                    },
                });
                FunctionMap {
                    layout: Layout::Versioned(version),
                    features: f,
                    ranges,
                    pgo,
                }
            })
    })
}

fn legacy_function(layout: Layout) -> impl Strategy<Value = FunctionMap> {
    (
        0u64..=u64::from(u32::MAX),
        prop::collection::vec((any::<u32>(), any::<u32>(), 0u32..32), 0..8),
    )
        .prop_map(move |(base, blocks)| {
            let entries: Vec<BbEntry> = blocks
                .into_iter()
                .enumerate()
                .map(|(i, (offset, size, md))| BbEntry {
                    id: i as u32,
                    offset: if i == 0 && layout == Layout::BbInfoProposal {
                        0
                    } else {
                        offset
                    },
                    size,
                    metadata: BlockMetadata(md),
                    ..Default::default()
                })
                .collect();
            FunctionMap {
                layout,
                features: Features(0),
                ranges: vec![BbRange {
                    base_address: base,
                    num_blocks: entries.len() as u32,
                    entries,
                }],
                pgo: None,
            }
        })
}

fn options(endian: bool, address_size: u8) -> (EncodeOptions, DecodeOptions) {
    let endian = if endian { Endian::Big } else { Endian::Little };
    (
        EncodeOptions {
            endian,
            address_size,
        },
        DecodeOptions {
            endian,
            address_size,
            legacy: LegacyMode::Strict,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn versioned_round_trip(be in any::<bool>(), wide in any::<bool>(),
                            fs in prop::collection::vec(function(8), 1..5),
                            fs32 in prop::collection::vec(function(4), 1..5)) {
        let (size, fs) = if wide { (8, fs) } else { (4, fs32) };
        let (eo, dopt) = options(be, size);
        let (bytes, fields) = encode_section(&fs, eo).unwrap();
        prop_assert_eq!(fields.len(), fs.iter().map(|f| f.ranges.len()).sum::<usize>());
        let back = decode_section(&bytes, dopt, &StoredAddress).unwrap();
        prop_assert_eq!(back, fs);
    }

    #[test]
    fn legacy_versions_round_trip(be in any::<bool>(), v in 0u8..2,
                                  f in legacy_function(Layout::Unversioned)) {
        let mut f = f;
        f.layout = Layout::Versioned(v);
        let (eo, mut dopt) = options(be, 8);
        let (bytes, _) = encode_section(std::slice::from_ref(&f), eo).unwrap();
        // Strict mode refuses versions 0 and 1, the legacy option reads them.
        prop_assert!(decode_section(&bytes, dopt, &StoredAddress).is_err());
        dopt.legacy = LegacyMode::Versions0And1;
        prop_assert_eq!(decode_section(&bytes, dopt, &StoredAddress).unwrap(), vec![f]);
    }

    #[test]
    fn unversioned_layouts_round_trip(be in any::<bool>(), proposal in any::<bool>(),
                                      seed in legacy_function(Layout::Unversioned),
                                      seed2 in legacy_function(Layout::BbInfoProposal)) {
        let (layout, mode, f) = if proposal {
            (Layout::BbInfoProposal, LegacyMode::BbInfoProposal, seed2)
        } else {
            (Layout::Unversioned, LegacyMode::Unversioned, seed)
        };
        prop_assert_eq!(f.layout, layout);
        let (eo, mut dopt) = options(be, 4);
        dopt.legacy = mode;
        let (bytes, _) = encode_section(std::slice::from_ref(&f), eo).unwrap();
        prop_assert_eq!(decode_section(&bytes, dopt, &StoredAddress).unwrap(), vec![f]);
    }

    /// Arbitrary bytes never panic, and a failure reports an offset inside the section.
    #[test]
    fn arbitrary_bytes_do_not_panic(data in prop::collection::vec(any::<u8>(), 0..200),
                                    be in any::<bool>(), wide in any::<bool>()) {
        let (_, dopt) = options(be, if wide { 8 } else { 4 });
        if let Err(e) = decode_section(&data, dopt, &StoredAddress) {
            prop_assert!(e.offset <= data.len() as u64);
        }
    }
}
