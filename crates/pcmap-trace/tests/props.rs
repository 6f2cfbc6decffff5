//! Property tests: HTR invariants on random traces, format round trips, and the streaming
//! chunk-parallel pass against the in-memory pass.

use std::io::Cursor;

use pcmap_trace::format::binary::{BinaryWriter, PcmTrace};
use pcmap_trace::format::text::TextWriter;
use pcmap_trace::htr::streaming;
use pcmap_trace::htr::superblock::super_block_pass;
use pcmap_trace::htr::{BuildOptions, Htr, LayerKind};
use pcmap_trace::trace::{Trace, TraceBuilder};
use pcmap_trace::{GapReason, Record};
use proptest::prelude::*;

/// Random traces over a small address alphabet, with loops (repeats), gaps and blocks.
fn trace_records() -> impl Strategy<Value = Vec<Record>> {
    let unit = prop_oneof![
        20 => (0u64..12).prop_map(|a| Record::Insn { addr: 0x400000 + a * 4 }),
        2 => (0u64..3, 2u32..4).prop_map(|(a, n)| Record::Block { addr: 0x500000 + a * 16, insns: n }),
        1 => (0u64..3).prop_map(|r| Record::Gap { reason: GapReason::from_code(r), message: None }),
    ];
    // Segments repeated a few times, so loops and recurring blocks appear.
    prop::collection::vec((prop::collection::vec(unit, 1..8), 1usize..5), 0..30).prop_map(|segs| {
        let mut out = Vec::new();
        for (seg, rep) in segs {
            for _ in 0..rep {
                out.extend(seg.iter().cloned());
            }
        }
        out
    })
}

fn build(records: &[Record]) -> Trace {
    let mut b = TraceBuilder::new();
    for r in records {
        b.push(r.clone()).unwrap();
    }
    b.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn htr_invariants(records in trace_records()) {
        let trace = build(&records);
        for t in &trace.threads {
            let htr = Htr::build(t, &BuildOptions { loop_max_period: 4, ..Default::default() });
            let l0 = &htr.layers[0];
            let n = t.insns;
            for (i, layer) in htr.layers.iter().enumerate() {
                // Durations tile [0, N): they sum to N, each unit's duration equals its expansion's.
                prop_assert_eq!(layer.insns(), n, "layer {} does not tile", i);
                for &u in &layer.units {
                    let mut e = Vec::new();
                    htr.expand_into(i, u, &mut e);
                    let sum: u64 = e.iter().map(|&d| l0.defs[d as usize].insns).sum();
                    prop_assert_eq!(sum, layer.defs[u as usize].insns);
                }
                // Expanding the layer reproduces layer 0.
                prop_assert_eq!(&htr.expand_layer(i), &l0.units, "layer {} does not expand to layer 0", i);
                if layer.kind == LayerKind::SuperBlocks {
                    // Every occurrence of a super block (named by its head) has the same content.
                    let mut heads = std::collections::HashMap::new();
                    for d in &layer.defs {
                        if let Some(prev) = heads.insert(d.children[0], &d.children) {
                            prop_assert_eq!(prev, &d.children);
                        }
                    }
                    prop_assert_eq!(heads.len(), layer.defs.len(), "two super blocks share a head");
                    // A second super-block pass changes nothing.
                    let again = super_block_pass(layer);
                    prop_assert_eq!(again.units.len(), layer.units.len());
                }
                // Gaps stay singleton units.
                for &u in &layer.units {
                    let d = &layer.defs[u as usize];
                    if d.gap.is_some() {
                        prop_assert_eq!(d.insns, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn text_round_trip(records in trace_records(), tid in prop::option::of(1u64..5)) {
        let mut recs = Vec::new();
        if let Some(t) = tid { recs.push(Record::Thread { tid: t }); }
        recs.push(Record::Timestamp { ns: 5 });
        recs.extend(records);
        let mut w = TextWriter::new(Vec::new()).unwrap();
        for r in &recs { w.write(r).unwrap(); }
        let text = w.finish().unwrap();
        let mut back = Vec::new();
        pcmap_trace::format::text::read(&text, "t", &mut |r| { back.push(r); Ok(()) }).unwrap();
        prop_assert_eq!(back, recs);
    }

    #[test]
    fn binary_round_trip(records in trace_records(), sync in 1u64..64) {
        let mut recs = vec![Record::Thread { tid: 7 }, Record::Timestamp { ns: 1000 }];
        recs.extend(records);
        recs.push(Record::Timestamp { ns: 2000 });
        recs.push(Record::Insn { addr: u64::MAX });
        recs.push(Record::Insn { addr: 0 });
        let mut w = BinaryWriter::new(Cursor::new(Vec::new()), 62).unwrap().with_sync_interval(sync);
        for r in &recs { w.write(r).unwrap(); }
        let bytes = w.finish().unwrap().into_inner();
        let pt = PcmTrace::parse(&bytes, "t").unwrap();
        let mut back = Vec::new();
        pt.read_all(&mut |r| { back.push(r); Ok(()) }).unwrap();
        let want: Vec<Record> = recs.into_iter().map(|r| match r {
            Record::Gap { reason, .. } => Record::Gap { reason, message: None },
            r => r,
        }).collect();
        prop_assert_eq!(back, want);
    }

    /// The streaming pass over PCMTRACE chunks decoded in parallel gives the in-memory layer 1.
    #[test]
    fn streaming_matches_in_memory(records in trace_records(), sync in 1u64..40, tids in prop::collection::vec(1u64..4, 1..4)) {
        // Interleave the same random trace over a few threads.
        let mut recs = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if i % 7 == 0 { recs.push(Record::Thread { tid: tids[i / 7 % tids.len()] }); }
            recs.push(r.clone());
        }
        let trace = build(&recs);
        let mut w = BinaryWriter::new(Cursor::new(Vec::new()), 62).unwrap().with_sync_interval(sync);
        for r in &recs { w.write(r).unwrap(); }
        let bytes = w.finish().unwrap().into_inner();
        let pt = PcmTrace::parse(&bytes, "t").unwrap();
        let sums = streaming::summarize(&pt, 4).unwrap();
        for t in &trace.threads {
            if t.ids.is_empty() { continue; }
            let s = sums.iter().find(|s| s.tid == t.tid).expect("thread summarised");
            let htr = Htr::build(t, &BuildOptions { loop_max_period: 4, max_layers: 2, ..Default::default() });
            let l1 = &htr.layers[1];
            prop_assert_eq!(s.insns, t.insns);
            prop_assert_eq!(s.layer1_units, l1.units.len() as u64);
            let mut mem: Vec<(u64, u64, u64)> = Vec::new();
            let mut occ = vec![0u64; l1.defs.len()];
            for &u in &l1.units { occ[u as usize] += 1; }
            for (d, n) in l1.defs.iter().zip(occ) { mem.push((d.first_addr, d.insns, n)); }
            let mut st: Vec<(u64, u64, u64)> = s.super_blocks.iter().filter(|b| b.occurrences > 0).map(|b| (b.first_addr, b.insns, b.occurrences)).collect();
            mem.sort(); st.sort();
            prop_assert_eq!(st, mem);
            let l2 = htr.layers.get(2).map(|l| l.units.len() as u64).unwrap_or(l1.units.len() as u64);
            prop_assert_eq!(s.layer2_units, l2);
        }
    }
}

#[test]
fn text_errors_name_file_line_column() {
    let err = Trace::read(b"0x10\n0x20 zz\n", "t.txt")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "t.txt:2:6: expected an instruction count between 1 and 4294967295, found `zz`"
    );
    let err = Trace::read(b"# pcmap-trace v1\n@ts 10\n0x1\n@ts 5\n0x2\n", "t.txt")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("t.txt:4:1: timestamp 5 ns goes back in time"),
        "{err}"
    );
}

#[test]
fn foreign_formats_are_detected_and_read() {
    let cases: &[(&str, &str, &[u64])] = &[
        (
            "qemu",
            "Trace 0: 0x7f1c4c000100 [0000000000000000/0000000000401050/1040c0b3/00000200] _start\nTrace 0: 0x7f1c4c000200 [0/401056/0] \n",
            &[0x401050, 0x401056],
        ),
        (
            "lackey",
            "==1== Lackey\nI  00401050,2\n S 1ffefffd08,8\nI  00401052,3\n",
            &[0x401050, 0x401052],
        ),
        (
            "ptxed",
            "[enabled]\n0x0000000000100000  mov rax, 0x0\n[disabled]\n0x0000000000100007  jmp 0x100000\n",
            &[0x100000, 0, 0x100007],
        ),
        (
            "perf insn",
            "13165  ffffffff815f3e1d do_mmap+0x5ad ([kernel.kallsyms])\n13165  ffffffff815f3e22 do_mmap+0x5b2 ([kernel.kallsyms])\n",
            &[0xffffffff815f3e1d, 0xffffffff815f3e22],
        ),
        (
            "perf branches",
            "25375/25375 4509191.343298468:   call     7f6fce0b71f4 __clock_gettime+0x24 =>     7ffd193838e0 __vdso_clock_gettime+0x0\n 25375/25375 4509191.343298470:   1   branches:uH:   return   7ffd193838f0 __vdso_clock_gettime+0x10 (foo.so) =>   7f6fce0b71f9 __clock_gettime+0x29 (foo.so)\n",
            &[0x7ffd193838e0, 0x7f6fce0b71f9],
        ),
        ("addresses", "401136\n0x40113a\n", &[0x401136, 0x40113a]),
    ];
    for (what, text, want) in cases {
        let t = Trace::read(text.as_bytes(), what).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&t.threads[0].addresses(), want, "{what}");
    }
    let perf = Trace::read(cases[4].1.as_bytes(), "p").unwrap();
    assert_eq!(perf.threads[0].tid, Some(25375));
    assert_eq!(perf.threads[0].timestamps[0], (0, 4509191343298468));
    let err = Trace::read(b"SB 0401ab70\n", "sb.log")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sb.log:1:1") && err.contains("--trace-mem=yes"),
        "{err}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic a reader (the fuzz targets run the same code longer).
    #[test]
    fn readers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200), text in "[0-9a-fx@!#TI =>\\[\\]/:,.\n -]{0,200}") {
        let _ = Trace::read(&bytes, "b");
        let _ = Trace::read(text.as_bytes(), "t");
        let mut b = b"PCMTRACE\x01\x00\x00\x00\x3e\x00\x20\x00".to_vec();
        b.extend_from_slice(&[0; 16]);
        b.extend_from_slice(&bytes);
        if let Ok(pt) = PcmTrace::parse(&b, "b") {
            let _ = pt.read_all(&mut |_| Ok(()));
            let _ = streaming::summarize(&pt, 4);
        }
    }
}
