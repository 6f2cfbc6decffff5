//! Property tests: every valid model encodes, decodes back to itself, and indexes consistently;
//! malformed bytes give errors (never panics).

use pcmap_bat::{
    Bat, BatTable, Block, ColdFragment, DecodeErrorKind, Entry, EntryKind, Field, HotFunction,
};
use proptest::prelude::*;

/// Entries sorted by output offset; some runs with `output + skew == input` (to exercise
/// `EqualElems`), duplicates (deleted/empty blocks), decreasing block indices.
fn entries(skew: u32) -> impl Strategy<Value = Vec<Entry>> {
    prop::collection::vec(
        (
            prop_oneof![4 => 0u32..40, 1 => Just(0u32), 1 => 0u32..100_000],
            prop_oneof![3 => Just(None), 2 => (0u32..(1 << 31)).prop_map(Some)],
            prop_oneof![
                1 => Just(EntryKind::Branch),
                1 => (any::<u32>(), any::<u64>()).prop_map(|(index, hash)| EntryKind::Block(Block { index, hash })),
            ],
        ),
        0..40,
    )
    .prop_map(move |raw| {
        let mut output = 0u32;
        raw.into_iter()
            .map(|(delta, input, kind)| {
                output = output.saturating_add(delta);
                let equal = u64::from(output) + u64::from(skew);
                let input_offset = match input {
                    Some(i) => i,
                    None if equal < (1 << 31) => equal as u32,
                    None => output & 0x7fff_ffff,
                };
                Entry { output_offset: output, input_offset, kind }
            })
            .collect()
    })
}

fn hot_function() -> impl Strategy<Value = (u64, HotFunction)> {
    (
        1u64..(1 << 24),
        any::<u64>(),
        any::<u64>(),
        entries(0),
        prop::collection::vec(any::<u32>(), 0..4),
    )
        .prop_map(|(gap, hash, num_blocks, entries, secondary_entry_points)| {
            (
                gap,
                HotFunction {
                    address: 0,
                    hash,
                    num_blocks,
                    entries,
                    secondary_entry_points,
                },
            )
        })
}

fn cold_fragment() -> impl Strategy<Value = (u64, usize, ColdFragment)> {
    (1u64..(1 << 24), any::<usize>(), any::<u32>()).prop_flat_map(|(gap, which, input_skew)| {
        entries(input_skew).prop_map(move |entries| {
            (
                gap,
                which,
                ColdFragment {
                    address: 0,
                    hot_index: 0,
                    input_skew,
                    entries,
                },
            )
        })
    })
}

fn model() -> impl Strategy<Value = Bat> {
    (
        any::<u64>(),
        prop::collection::vec(hot_function(), 1..12),
        prop::collection::vec(cold_fragment(), 0..8),
    )
        .prop_map(|(start, hot, cold)| {
            // Addresses: strictly increasing within each table; the cold table may start anywhere
            // (address deltas wrap), but must not reuse a hot address.
            let mut address = start >> 8;
            let mut bat = Bat::default();
            for (gap, mut h) in hot {
                address = address.wrapping_add(gap);
                h.address = address;
                bat.hot.push(h);
            }
            let mut address = start.rotate_left(17) >> 4;
            for (gap, which, mut c) in cold {
                address = address.wrapping_add(gap);
                if bat.hot.iter().any(|h| h.address == address) {
                    continue;
                }
                if bat
                    .cold
                    .last()
                    .is_some_and(|p: &ColdFragment| p.address >= address)
                {
                    break;
                }
                c.address = address;
                c.hot_index = which % bat.hot.len();
                bat.cold.push(c);
            }
            bat
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encode_decode_round_trip(bat in model()) {
        prop_assert!(bat.validate().is_ok());
        let note = bat.encode_note().unwrap();
        let decoded = Bat::decode_note(&note).unwrap();
        prop_assert_eq!(&decoded, &bat);
        prop_assert_eq!(decoded.encode_note().unwrap(), note.clone());
        let payload = bat.encode().unwrap();
        prop_assert_eq!(Bat::decode(&payload).unwrap(), bat.clone());

        // The index sees the same functions, fragments and entries.
        let table = BatTable::parse(&note).unwrap();
        prop_assert_eq!(table.num_functions(), bat.hot.len());
        prop_assert_eq!(table.num_fragments(), bat.hot.len() + bat.cold.len());
        for h in &bat.hot {
            let f = table.function(h.address).unwrap();
            prop_assert_eq!(f.hash, h.hash);
            prop_assert_eq!(f.num_blocks, h.num_blocks);
            prop_assert_eq!(f.secondary_entry_points, &h.secondary_entry_points[..]);
            prop_assert_eq!(table.entries(h.address).collect::<Vec<_>>(), h.entries.clone());
        }
        for c in &bat.cold {
            prop_assert_eq!(table.parent_of(c.address), Some(bat.hot[c.hot_index].address));
            prop_assert!(table.function(bat.hot[c.hot_index].address).unwrap().cold_fragments.contains(&c.address));
            prop_assert_eq!(table.entries(c.address).collect::<Vec<_>>(), c.entries.clone());
        }
    }

    /// Translation follows `BoltAddressTranslation::translate`, written here as a linear scan
    /// over the model (independent of the index's binary searches).
    #[test]
    fn translation_matches_linear_scan(bat in model(), probes in prop::collection::vec((any::<prop::sample::Index>(), 0u64..200, any::<bool>()), 1..64)) {
        let table = BatTable::from_model(&bat).unwrap();
        let fragments: Vec<(u64, u64, &[Entry])> = bat.hot.iter().map(|h| (h.address, h.address, &h.entries[..]))
            .chain(bat.cold.iter().map(|c| (c.address, bat.hot[c.hot_index].address, &c.entries[..])))
            .collect();
        for (which, extra, is_src) in probes {
            let (frag, func, entries) = fragments[which.index(fragments.len())];
            let key = entries.get(which.index(entries.len().max(1))).map_or(0, |e| u64::from(e.output_offset));
            let offset = key + extra;
            let address = frag.wrapping_add(offset);
            let t = table.translate_in(frag, address, is_src);
            if address < frag { prop_assert!(t.is_none()); continue; }
            let t = t.unwrap();
            prop_assert_eq!(t.function_address, func);
            prop_assert_eq!(t.fragment_address, frag);
            let governing = entries.iter().rposition(|e| u64::from(e.output_offset) <= offset);
            let expected = match governing {
                None => offset,
                Some(g) if is_src => u64::from(entries[g].input_offset),
                Some(g) => offset - u64::from(entries[g].output_offset) + u64::from(entries[g].input_offset),
            };
            prop_assert_eq!(t.input_offset, expected);
            let block = governing.and_then(|g| entries[..=g].iter().rev().find_map(|e| e.block()));
            prop_assert_eq!(t.block, block);
        }
    }

    /// `translate` picks the fragment with the greatest start <= address (a linear scan here).
    #[test]
    fn fragment_search_matches_linear_scan(bat in model(), probes in prop::collection::vec((any::<prop::sample::Index>(), any::<i16>(), any::<u64>()), 1..64)) {
        let table = BatTable::from_model(&bat).unwrap();
        let mut starts: Vec<u64> = bat.hot.iter().map(|h| h.address).chain(bat.cold.iter().map(|c| c.address)).collect();
        starts.sort_unstable();
        for (which, delta, random) in probes {
            for address in [starts[which.index(starts.len())].wrapping_add_signed(i64::from(delta)), random] {
                let expected = starts.iter().rev().find(|&&s| s <= address).copied();
                prop_assert_eq!(table.fragment_containing(address).map(|f| f.address), expected);
                let t = table.translate(address, false);
                prop_assert_eq!(t.map(|t| t.fragment_address), expected);
                if let Some(start) = expected {
                    prop_assert_eq!(t, table.translate_in(start, address, false));
                }
            }
        }
    }

    /// Arbitrary bytes never panic; whatever decodes re-encodes to a fixed point.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(bat) = Bat::decode(&bytes) {
            let again = bat.encode().unwrap();
            prop_assert_eq!(Bat::decode(&again).unwrap(), bat);
        }
        let _ = BatTable::parse_payload(&bytes);
        let _ = Bat::decode_note(&bytes);
    }

    /// Every strict prefix of a valid payload is an error that points inside the input.
    #[test]
    fn truncation_is_reported(bat in model(), step in 1usize..64) {
        let payload = bat.encode().unwrap();
        for len in (0..payload.len()).step_by(step) {
            let err = Bat::decode(&payload[..len]).unwrap_err();
            prop_assert!(err.offset <= len, "{err} for len {len}");
        }
    }
}

#[test]
fn errors_name_offset_and_field() {
    // NumFuncs = 1, Address = 0x10, FuncHash, NumBlocks = 0, NumSecEntryPoints = 0,
    // NumEntries = 1, EqualElems = 0, OutputOffset = 0, InputOffset = 0 (a block entry), then
    // only 2 of BBHash's 8 bytes.
    let bytes = [
        1, 0x10, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 1, 0, 0, 0, 0xaa, 0xbb,
    ];
    let err = Bat::decode(&bytes).unwrap_err();
    assert_eq!(
        (err.offset, err.field, err.kind.clone()),
        (16, Field::BBHash, DecodeErrorKind::UnexpectedEnd)
    );
    assert!(err.to_string().contains("offset 0x10"), "{err}");

    // NumFuncs too large for the input.
    let err = Bat::decode(&[0xff, 0xff, 0x03]).unwrap_err();
    assert_eq!(err.field, Field::NumFuncs);
    assert!(matches!(err.kind, DecodeErrorKind::CountTooLarge { .. }));

    // Wrong note type.
    let mut note = Bat::default().encode_note().unwrap();
    note[8] = 2;
    let err = Bat::decode_note(&note).unwrap_err();
    assert_eq!((err.offset, err.field), (8, Field::NoteHeader));

    // Trailing bytes after the cold table.
    let err = Bat::decode(&[0, 0, 0]).unwrap_err();
    assert_eq!((err.offset, err.field), (2, Field::TrailingBytes));

    // A cold fragment naming a hot function that does not exist.
    let bat = Bat {
        hot: vec![HotFunction {
            address: 0x1000,
            ..Default::default()
        }],
        cold: vec![ColdFragment {
            address: 0x2000,
            hot_index: 0,
            input_skew: 0,
            entries: vec![],
        }],
    };
    let mut payload = bat.encode().unwrap();
    let hot_index_at = payload.len() - 4; // HotIndex, ColdInputSkew, NumEntries, EqualElems
    payload[hot_index_at] = 1;
    let err = Bat::decode(&payload).unwrap_err();
    assert_eq!((err.offset, err.field), (hot_index_at, Field::HotIndex));
}

#[test]
fn empty_table_is_the_minimal_note() {
    let note = Bat::default().encode_note().unwrap();
    assert_eq!(
        note,
        [
            5, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, b'B', b'O', b'L', b'T', 0, 0, 0, 0, 0, 0, 0, 0
        ]
    );
    assert_eq!(Bat::decode_note(&note).unwrap(), Bat::default());
}
