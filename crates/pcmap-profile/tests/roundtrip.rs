//! Property tests: every writer/reader pair round-trips, and readers never panic on arbitrary bytes.

use proptest::prelude::*;

use pcmap_profile::perfdata::{BranchEntry, PerfFile, writer};
use pcmap_profile::{fdata, preagg, yaml};

fn loc() -> impl Strategy<Value = (Option<&'static [u8]>, u64)> {
    (
        prop_oneof![
            Just(None),
            Just(Some(b"X".as_slice())),
            Just(Some(b"a931e5b17ec9".as_slice()))
        ],
        any::<u64>(),
    )
}

fn record() -> impl Strategy<Value = preagg::Record<'static>> {
    use preagg::{FallThroughKind as F, Location as L, Record as R, TraceKind as T};
    let l = || {
        loc().prop_map(|(b, o)| L {
            build_id: b,
            offset: o,
        })
    };
    prop_oneof![
        prop_oneof![
            Just(b"cycles".as_slice()),
            Just(b"br_inst_retired.near_taken".as_slice())
        ]
        .prop_map(|name| R::Event { name }),
        (l(), any::<u64>()).prop_map(|(addr, count)| R::Sample { addr, count }),
        (any::<bool>(), l(), l(), l(), any::<u64>()).prop_map(
            |(r, branch, ft_start, ft_end, count)| R::Trace {
                kind: if r { T::Return } else { T::Branch },
                branch,
                ft_start,
                ft_end,
                count
            }
        ),
        (l(), l(), any::<u64>(), any::<u64>()).prop_map(|(from, to, count, mispreds)| R::Branch {
            from,
            to,
            count,
            mispreds
        }),
        (0..3u8, l(), l(), any::<u64>()).prop_map(|(k, from, to, count)| R::FallThrough {
            kind: [F::Internal, F::ExternalOrigin, F::ExternalReturn][k as usize],
            from,
            to,
            count
        }),
    ]
}

fn symbol_name() -> impl Strategy<Value = String> {
    // Any printable text without line breaks (fdata escapes spaces and backslashes only).
    "[^\n\r]{1,24}".prop_filter("no blank-only names", |s| !s.trim().is_empty())
}

fn fdata_location() -> impl Strategy<Value = fdata::Location<'static>> {
    (symbol_name(), any::<u64>(), 0..3u8).prop_map(|(n, off, k)| {
        let mut l = fdata::Location::symbol(&n, off).into_owned();
        l.kind = [
            fdata::LocationKind::Dso,
            fdata::LocationKind::Symbol,
            fdata::LocationKind::LocalSymbol,
        ][k as usize];
        l
    })
}

fn fdata_profile() -> impl Strategy<Value = fdata::Profile<'static>> {
    let lbr = prop::collection::vec(
        (
            fdata_location(),
            fdata_location(),
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(from, to, mispreds, count)| {
                fdata::Line::Branch(fdata::BranchRecord {
                    from,
                    to,
                    mispreds,
                    count,
                })
            }),
        0..20,
    );
    let samples = prop::collection::vec(
        (fdata_location(), any::<u64>())
            .prop_map(|(at, count)| fdata::Line::Sample(fdata::SampleRecord { at, count })),
        0..20,
    );
    let mem = prop::collection::vec(
        (fdata_location(), fdata_location(), any::<u64>())
            .prop_map(|(pc, addr, count)| fdata::Line::Mem(fdata::MemRecord { pc, addr, count })),
        0..5,
    );
    (
        any::<bool>(),
        prop::option::of(prop::collection::vec("[a-z:._-]{1,12}", 0..3)),
        lbr,
        samples,
        mem,
    )
        .prop_map(|(bolted, events, lbr, samples, mem)| {
            let mut lines = if events.is_some() { samples } else { lbr };
            lines.extend(mem);
            fdata::Profile {
                bolted_collection: bolted,
                no_lbr: events.map(|v| v.into_iter().map(Into::into).collect()),
                lines,
            }
        })
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,20}",
        ".{0,12}",
        Just("0x1F".to_string()),
        Just("true".to_string()),
        Just(" lead".to_string()),
        Just("a: b #c".to_string())
    ]
}

fn yaml_profile() -> impl Strategy<Value = yaml::Profile> {
    let call = (any::<u32>(), any::<u32>(), 0..3u32, any::<u64>(), 0..3u64).prop_map(
        |(offset, dest_id, d, count, mispreds)| yaml::CallSite {
            offset,
            dest_id,
            entry_discriminator: d,
            count,
            mispreds,
            ..Default::default()
        },
    );
    let succ = (any::<u32>(), any::<u64>(), 0..3u64).prop_map(|(index, count, mispreds)| {
        yaml::Successor {
            index,
            count,
            mispreds,
        }
    });
    let block = (
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        0..5u64,
        0..3u64,
        prop::collection::vec(call, 0..3),
        prop::collection::vec(succ, 0..4),
    )
        .prop_map(
            |(index, num_instructions, hash, exec_count, event_count, calls, successors)| {
                yaml::Block {
                    index,
                    num_instructions,
                    hash,
                    exec_count,
                    event_count,
                    calls,
                    successors,
                    ..Default::default()
                }
            },
        );
    let func = (
        any_text(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        0..3u64,
        any::<u32>(),
        prop::collection::vec(block, 0..4),
    )
        .prop_map(
            |(name, id, hash, exec_count, extern_entry_count, num_basic_blocks, blocks)| {
                yaml::Function {
                    name,
                    id,
                    hash,
                    exec_count,
                    extern_entry_count,
                    num_basic_blocks,
                    blocks,
                    ..Default::default()
                }
            },
        );
    (
        any_text(),
        any_text(),
        0..8u16,
        any_text(),
        any_text(),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(func, 0..5),
    )
        .prop_map(
            |(binary_name, build_id, flags, origin, events, dfs_order, xxh3, functions)| {
                yaml::Profile {
                    header: yaml::Header {
                        version: 1,
                        binary_name,
                        build_id,
                        flags,
                        origin,
                        events,
                        dfs_order,
                        hash_func: if xxh3 {
                            yaml::HashFunction::Xxh3
                        } else {
                            yaml::HashFunction::StdHash
                        },
                    },
                    functions,
                    pseudo_probe_desc: Default::default(),
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn preagg_roundtrip(records in prop::collection::vec(record(), 0..40)) {
        let mut out = Vec::new();
        preagg::write(&mut out, &records).unwrap();
        prop_assert_eq!(preagg::parse_all(&out).unwrap(), records.clone());
        let par = preagg::fold_parallel(&out, Vec::new, |v, r| v.push(r), |mut a, b| { a.extend(b); a }).unwrap();
        prop_assert_eq!(par, records);
    }

    #[test]
    fn fdata_roundtrip(p in fdata_profile()) {
        let mut out = Vec::new();
        fdata::write(&mut out, &p).unwrap();
        let back = fdata::parse(&out).unwrap();
        prop_assert_eq!(&back, &p);
        let mut again = Vec::new();
        fdata::write(&mut again, &back).unwrap();
        prop_assert_eq!(again, out);
    }

    #[test]
    fn fdata_name_escapes_roundtrip(name in symbol_name()) {
        let l = fdata::Location::symbol(&name, 0);
        prop_assert_eq!(l.unescaped_name(), name.as_str());
    }

    #[test]
    fn yaml_roundtrip(p in yaml_profile()) {
        let mut out = Vec::new();
        yaml::write(&mut out, &p).unwrap();
        let back = yaml::parse(&out).unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&out)));
        prop_assert_eq!(back, p);
    }

    #[test]
    fn perfdata_writer_roundtrip(stacks in prop::collection::vec((any::<u64>(), prop::collection::vec((any::<u64>(), any::<u64>(), any::<u64>()), 0..40)), 0..20), hw_idx in any::<bool>()) {
        let mut w = writer::Writer::new(writer::Options { hw_idx, ..Default::default() });
        w.comm(1, 1, b"x", 0);
        w.mmap2(1, 1, 0x1000, 0x1000, 0, b"/bin/x", 0);
        for (i, (ip, br)) in stacks.iter().enumerate() {
            let branches = br.iter().map(|&(from, to, flags)| BranchEntry { from, to, flags }).collect();
            w.sample(&writer::SampleSpec { ip: *ip, pid: 1, tid: 2, time: i as u64, period: 1, branches, hw_idx: i as u64 });
        }
        let data = w.finish();
        let f = PerfFile::parse(&data).unwrap();
        let mut got = Vec::new();
        f.for_each_sample(|s| {
            let bs = s.branch_stack.unwrap();
            got.push((s.ip.unwrap(), bs.iter().map(|b| (b.from, b.to, b.flags)).collect::<Vec<_>>()));
        }).unwrap();
        prop_assert_eq!(got, stacks);
    }

    #[test]
    fn readers_never_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = preagg::parse_all(&data);
        let _ = fdata::parse(&data);
        let _ = yaml::parse(&data);
        if let Ok(f) = PerfFile::parse(&data) {
            let _ = f.for_each_record(|_| true);
        }
    }

    #[test]
    fn perfdata_reader_survives_corruption(pos in 0usize..4096, byte in any::<u8>(), cut in 0usize..4096) {
        let mut w = writer::Writer::new(writer::Options { hw_idx: true, ..Default::default() });
        w.comm(1, 1, b"x", 0);
        w.mmap2(1, 1, 0x1000, 0x1000, 0, b"/bin/x", 0);
        w.build_id(1, &[1; 20], b"/bin/x");
        for i in 0..10 {
            w.sample(&writer::SampleSpec { ip: i, pid: 1, tid: 1, time: i, period: 1, branches: vec![BranchEntry { from: 1, to: 2, flags: 3 }; 3], hw_idx: 0 });
        }
        let mut data = w.finish();
        let n = data.len();
        data[pos % n] = byte;
        data.truncate(n - cut % n);
        if let Ok(f) = PerfFile::parse(&data) {
            let _ = f.for_each_record(|_| true);
        }
    }
}

const YAML_DOC: &str = "---\nheader:\n  profile-version: 1\n  binary-name:     'bin/p1'\n  binary-build-id: abc\n  profile-flags:   [ lbr ]\n  profile-origin:  perf data aggregator\n  profile-events:  ''\n  dfs-order:       false\n  hash-func:       xxh3\nfunctions:\n  - name:            work\n    fid:             10\n    hash:            0x73A693C61F5BC7CA\n    exec:            45\n    nblocks:         2\n    blocks:\n      - bid:             0\n        insns:           7\n        hash:            0xF6D913D24D490020\n        calls:           [ { off: 0x2, fid: 9, cnt: 45 }, { off: 0xB, fid: 11, disc: 1, cnt: 45, mis: 2 } ]\n        succ:            [ { bid: 1, cnt: 0 }, { bid: 5, cnt: 100, mis: 5 } ]\n  - { name: \"g\\x41\", fid: 2, hash: 1, exec: 0, nblocks: 0 }\n...\n";
const FDATA_DOC: &str = "boltedcollection\nno_lbr cpu-clock:\n1 a\\ b 23 13\n1 classify/p1.c/1 0 5\n4 f 10 3 [heap] 20 7\n";
const PREAGG_DOC: &str = "E cycles\nS 41be50 3\nT 4b196f 4b19e0 4b19ef 2\nR 0 10 20 1\nB X:7f00 401190 1 0\nF 1 2 3\nf ab:1 2 3\nr 1 2 3\n";

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Mutated valid documents (byte flips, insertions, truncation) never panic any reader.
    #[test]
    fn mutated_documents_never_panic(edits in prop::collection::vec((any::<usize>(), any::<u8>(), 0..3u8), 1..6), cut in any::<usize>()) {
        for doc in [YAML_DOC, FDATA_DOC, PREAGG_DOC] {
            let mut d = doc.as_bytes().to_vec();
            for &(pos, byte, op) in &edits {
                let p = pos % (d.len() + 1);
                match op {
                    0 if p < d.len() => d[p] = byte,
                    1 => d.insert(p, byte),
                    _ if p < d.len() => { d.remove(p); }
                    _ => {}
                }
            }
            d.truncate(d.len() - cut % (d.len() + 1) / 4);
            let _ = yaml::parse(&d);
            let _ = fdata::parse(&d);
            let _ = preagg::parse_all(&d);
        }
    }
}
