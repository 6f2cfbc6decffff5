//! The bodies of pcmap's fuzz targets: one function a target, taking the fuzzer's bytes.
//!
//! `fuzz/fuzz_targets/<name>.rs` calls `pcmap_fuzz::<name>` under libFuzzer (`cargo +nightly fuzz
//! run <name>`), and `tests/corpus.rs` replays every committed input under `fuzz/corpus/<name>/`
//! through the same function in `cargo test`, so the stable toolchain guards the corpora on every
//! run. Each function must never panic on any input; assertions inside check round-trip
//! properties (whatever decodes re-encodes to the same model).
#![allow(clippy::missing_panics_doc)]

use pcmap_bat::{Bat, BatTable};
use pcmap_bbmap::decode::{DecodeOptions, Endian, LegacyMode, StoredAddress, decode_section};
use pcmap_bbmap::encode::{EncodeOptions, encode_section};
use pcmap_bbmap::index::BlockIndex;
use pcmap_binary::bolt::BoltFunctions;
use pcmap_btf::encoding::{compact::CompactBlob, rfc::RfcBlob};
use pcmap_btf::{Btf, BtfWriter, Format};
use pcmap_perf2bolt::{aggregate::Aggregator, block_hash};
use pcmap_profile::fdata;
use pcmap_profile::perfdata::{MmapTable, PerfFile, Record};
use pcmap_profile::preagg;
use pcmap_profile::yaml;
use pcmap_propeller::builder::{CfgBuilder, MapBlock, MapFunction};
use pcmap_trace::format::binary::PcmTrace;
use pcmap_trace::htr::streaming;
use pcmap_trace::htr::{BuildOptions, Htr};
use pcmap_trace::trace::Trace;

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// Every target: its name (as in `fuzz/Cargo.toml` and `fuzz/corpus/`) and its body.
pub const TARGETS: &[(&str, Target)] = &[
    ("bat_decode", bat_decode),
    ("bat_in_elf", bat_in_elf),
    ("bbmap_decode", bbmap_decode),
    ("bbmap_in_elf", bbmap_in_elf),
    ("binary_open", binary_open),
    ("btf_inline_decode", btf_inline_decode),
    ("btf_parse", btf_parse),
    ("events_perf_data", events_perf_data),
    ("inline_dwarf", inline_dwarf),
    ("inline_dwarf_sections", inline_dwarf_sections),
    ("perf2bolt_image", perf2bolt_image),
    ("perf2bolt_preagg", perf2bolt_preagg),
    ("profile_fdata", profile_fdata),
    ("profile_perfdata", profile_perfdata),
    ("profile_preagg", profile_preagg),
    ("profile_yaml", profile_yaml),
    ("propeller_cc_profile", propeller_cc_profile),
    ("propeller_pipeline", propeller_pipeline),
    ("scan_index", scan_index),
    ("trace_binary", trace_binary),
    ("trace_text", trace_text),
];

/// Decode arbitrary bytes as a BAT payload and as a `.note.bolt_bat` section: never a panic.
/// Whatever decodes must re-encode, decode to the same model (a fixed point), index, and
/// translate without panicking.
pub fn bat_decode(data: &[u8]) {
    for model in [Bat::decode(data), Bat::decode_note(data)]
        .into_iter()
        .flatten()
    {
        let bytes = model.encode().expect("a decoded model is valid");
        assert_eq!(
            Bat::decode(&bytes).expect("re-encoded model decodes"),
            model
        );
        let table = BatTable::from_model(&model).expect("a decoded model is valid");
        for h in &model.hot {
            for e in &h.entries {
                let a = h.address.wrapping_add(u64::from(e.output_offset));
                let _ = table.translate(a, true);
                let _ = table.translate_in(h.address, a, false);
            }
            let _ = table.block_at(h.address, 0);
            let _ = table.fragments_of(h.address).count();
        }
    }
    if let Ok(table) = BatTable::parse_payload(data) {
        let _ = table.translate(
            u64::from_le_bytes(
                data.get(..8)
                    .and_then(|b| b.try_into().ok())
                    .unwrap_or([0; 8]),
            ),
            false,
        );
    }
}

/// Fuzz the basic-block address map decoder (every layout and ELF shape) and the block index.
pub fn bbmap_decode(data: &[u8]) {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let options = DecodeOptions {
        endian: if mode & 1 == 0 {
            Endian::Little
        } else {
            Endian::Big
        },
        address_size: if mode & 2 == 0 { 8 } else { 4 },
        legacy: match (mode >> 2) & 3 {
            0 => LegacyMode::Strict,
            1 => LegacyMode::Versions0And1,
            2 => LegacyMode::Unversioned,
            _ => LegacyMode::BbInfoProposal,
        },
    };
    if let Ok(functions) = decode_section(body, options, &StoredAddress) {
        // Whatever decodes re-encodes to something that decodes to the same maps.
        let eo = EncodeOptions {
            endian: options.endian,
            address_size: options.address_size,
        };
        let (bytes, _) = encode_section(&functions, eo).expect("decoded maps are encodable");
        let again =
            decode_section(&bytes, options, &StoredAddress).expect("re-encoded maps decode");
        assert_eq!(again, functions);
        let index = BlockIndex::new(&functions);
        for pc in [0, 1, u64::MAX, 0x1000] {
            let _ = index.lookup(pc);
            let _ = index.lookup_branch_target(pc);
        }
    }
    // Whole ELF files too.
    let _ = pcmap_bbmap::elf::read_elf(
        body,
        pcmap_bbmap::elf::ReadOptions {
            legacy: mode & 16 != 0,
        },
    );
}

/// Open arbitrary bytes as an ELF binary, walk its sections, notes, symbols and functions, and
/// decode every function: must never panic, only return errors.
pub fn binary_open(data: &[u8]) {
    pcmap_binary::fuzz_walk(data);
}

/// `.BTF.inline` (RFC layout) and compact-encoding decoders on arbitrary bytes, with a base that
/// has a FUNC at id 3 so site records can resolve.
pub fn btf_inline_decode(data: &[u8]) {
    let mut w = BtfWriter::new_base();
    let int = w.add_int("int", 4, 1, 32).unwrap();
    let proto = w.add_func_proto(int, &[(Some("x"), int)], false).unwrap();
    w.add_func("f", proto, 0).unwrap();
    let base_bytes = w.finish();
    let base = Btf::parse(&base_bytes).unwrap();
    let _ = pcmap_btf::decode(Format::Rfc, data, None, &base);
    let _ = pcmap_btf::decode(Format::Compact, data, None, &base);
    if let Ok(b) = RfcBlob::parse(data) {
        for s in b.sites().take(10_000) {
            let Ok(s) = s else { break };
            for &o in &s.param_locations {
                let _ = b.location(o);
            }
        }
    }
    if let Ok(b) = CompactBlob::parse(data) {
        for i in 0..b.lists.len().min(10_000) {
            let _ = b.list(i as u32);
        }
    }
}

fn btf_exercise(btf: &Btf<'_>) {
    let mut out = String::new();
    let _ = pcmap_btf::raw::dump_raw(btf, &mut out);
    let _ = pcmap_btf::encoding::btf2026::decode_any(btf);
}

/// BTF reader: parse arbitrary bytes as base BTF and as split BTF over a small fixed base, then
/// touch every record and string the way the raw printer and the location decoders do.
pub fn btf_parse(data: &[u8]) {
    if let Ok(btf) = Btf::parse(data) {
        btf_exercise(&btf);
    }
    let mut w = BtfWriter::new_base();
    let int = w.add_int("int", 4, 1, 32).unwrap();
    let proto = w.add_func_proto(int, &[(Some("x"), int)], false).unwrap();
    w.add_func("f", proto, 0).unwrap();
    let base_bytes = w.finish();
    let base = Btf::parse(&base_bytes).unwrap();
    if let Ok(split) = Btf::parse_split(data, &base) {
        btf_exercise(&split);
    }
    let _ = pcmap_btf::decode(Format::Btf2026, data, None, &base);
}

/// Inline-site extraction, census and symbolization on arbitrary ELF bytes (seed the corpus with
/// the `fixtures/src/inline` binaries): must never panic or hang.
pub fn inline_dwarf(data: &[u8]) {
    let Ok(debug) = pcmap_inline::DebugData::load(data) else {
        return;
    };
    if let Ok(info) = pcmap_inline::extract_sites(&debug) {
        let census = pcmap_inline::census::Census::new(&info);
        let _ = census.sites;
        for site in info.sites.iter().take(64) {
            for p in &site.params {
                let _ = p.location.display_x86_64();
            }
        }
    }
    if let Ok(sym) = pcmap_inline::symbolize::Symbolizer::new(&debug) {
        use pcmap_inline::report::{TextStyle, write_symbolized_text};
        use pcmap_inline::symbolize::{FunctionNameKind, Options};
        let options = Options {
            inlines: false,
            names: FunctionNameKind::Short,
            gnu: true,
            basenames: true,
            demangle: true,
        };
        let style = TextStyle {
            verbose: true,
            ..TextStyle::default()
        };
        for s in debug.symbols.iter().take(16) {
            let _ = sym.frames(s.address, true);
            if let Ok(frames) = sym.lookup(s.address, &options) {
                let _ =
                    write_symbolized_text(&mut std::io::sink(), Some(s.address), &frames, &style);
            }
            let _ = sym.find_symbol(s.name, 4, &options);
        }
        let _ = sym.frames(u64::MAX, true);
    }
}

/// Function discovery (again with its padding verdicts given, and rebuilt from the model kept as
/// plain data: the same functions), CFG building
/// (C++ landing pads from each function's LSDA included), hashing and a trace walk of
/// `pcmap-perf2bolt` on arbitrary ELF bytes.
pub fn perf2bolt_image(data: &[u8]) {
    let Ok(binary) = pcmap_binary::Binary::parse(data) else {
        return;
    };
    let Ok(image) = BoltFunctions::discover(&binary) else {
        return;
    };
    // Discovery told its padding verdicts (as a scan cache keeps them) finds the same functions.
    let again = BoltFunctions::discover_knowing_paddings(&binary, image.rejected_paddings())
        .expect("discovery succeeded once");
    let shape = |i: &BoltFunctions<'_, '_>| -> Vec<(u64, u64, u64, bool)> {
        i.functions()
            .iter()
            .map(|f| {
                (
                    f.address,
                    f.size,
                    f.max_size,
                    i.has_invalid_padding(f.address),
                )
            })
            .collect()
    };
    assert_eq!(shape(&again), shape(&image));
    assert_eq!(again.rejected_paddings(), image.rejected_paddings());
    // The model kept as plain data (as a scan cache keeps it) rebuilds the same model.
    let kept = image.discovered();
    let rebuilt = BoltFunctions::from_discovered(&binary, kept.clone())
        .expect("a model kept from this binary fits it");
    assert_eq!(shape(&rebuilt), shape(&image));
    let names = |i: &BoltFunctions<'_, '_>| -> Vec<Vec<String>> {
        i.functions()
            .iter()
            .map(|f| f.names.iter().map(|n| n.to_string()).collect())
            .collect()
    };
    assert_eq!(names(&rebuilt), names(&image));
    assert_eq!(rebuilt.discovered(), kept);
    let agg = Aggregator::new(&image);
    let ctx = block_hash::Context::new(&image);
    for (i, f) in image.functions().iter().enumerate().take(64) {
        let _ = block_hash::function_hash(&ctx, f, agg.cfg(i));
    }
    if let Some(f) = image.functions().first() {
        let a = f.address;
        let text = format!(
            "T {a:x} {:x} {:x} 1\nB {:x} {a:x} 1 0\nF {a:x} {:x} 1\n",
            a + 1,
            a + 9,
            a + 3,
            a + 200
        );
        if let Ok(p) = pcmap_perf2bolt::preagg::parse(text.as_bytes(), &|_| {}) {
            let _ = agg.aggregate_traces(&p, &|_| {});
        }
    }
}

/// The parallel pre-aggregated reader of `pcmap-perf2bolt` on arbitrary bytes.
pub fn perf2bolt_preagg(data: &[u8]) {
    let _ = pcmap_perf2bolt::preagg::parse(data, &|_| {});
}

/// fdata: parse arbitrary bytes; whatever parses writes back and re-parses to the same profile.
pub fn profile_fdata(data: &[u8]) {
    if let Ok(p) = fdata::parse(data) {
        let mut out = Vec::new();
        fdata::write(&mut out, &p).unwrap();
        assert_eq!(fdata::parse(&out).unwrap(), p);
    }
}

/// A perf2bolt scan index (`--scan-cache`) from arbitrary bytes: never a panic; whatever
/// decodes re-encodes to an index that decodes to the same one, and answers lookups. The bytes
/// are also decoded with their last 8 replaced by the checksum of the rest, so that mutations
/// reach the fields behind the checksum.
pub fn scan_index(data: &[u8]) {
    use pcmap_perf2bolt::scan_index::ScanIndex;
    let mut fixed = data.to_vec();
    if let Some(body) = data.len().checked_sub(8) {
        let sum = xxhash_rust::xxh3::xxh3_64(&data[..body]);
        fixed[body..].copy_from_slice(&sum.to_le_bytes());
    }
    for bytes in [data, &fixed] {
        if let Ok(index) = ScanIndex::decode(bytes) {
            let again = ScanIndex::decode(&index.encode()).expect("a re-encoded index decodes");
            assert_eq!(again, index);
            for i in [0usize, 1, 7, usize::MAX] {
                let _ = index.has_tableless_indirect_jump(i);
            }
        }
    }
}

/// perf.data: header, attributes, feature sections and the record walker over arbitrary bytes.
pub fn profile_perfdata(data: &[u8]) {
    if let Ok(f) = PerfFile::parse(data) {
        let mut table = MmapTable::default();
        let _ = f.for_each_record(|r| {
            table.observe(r);
            if let Record::Sample(s) = r {
                if let Some(bs) = s.branch_stack {
                    let _ = bs.iter().map(|b| b.from ^ b.to).fold(0u64, |a, b| a ^ b);
                }
                let _ = s.callchain().count();
            }
            true
        });
        for i in 0..f.attrs.len() {
            let _ = f.event_name(i);
        }
    }
}

/// Pre-aggregated text: serial and parallel parsing must agree and never panic.
pub fn profile_preagg(data: &[u8]) {
    let serial = preagg::parse_all(data);
    let par = preagg::fold_parallel(
        data,
        Vec::new,
        |v, r| v.push(r),
        |mut a, b| {
            a.extend(b);
            a
        },
    );
    assert_eq!(serial, par);
    if let Ok(records) = serial {
        let mut out = Vec::new();
        preagg::write(&mut out, &records).unwrap();
        assert_eq!(preagg::parse_all(&out).unwrap(), records);
    }
}

/// BOLT YAML profile: parse arbitrary bytes; whatever parses writes back and re-parses to the same model.
pub fn profile_yaml(data: &[u8]) {
    if let Ok(p) = yaml::parse(data) {
        let mut out = Vec::new();
        yaml::write(&mut out, &p).unwrap();
        assert_eq!(yaml::parse(&out).unwrap(), p);
    }
}

/// The cc profile reader must not panic, and whatever it accepts must write back and read back equal.
pub fn propeller_cc_profile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(profile) = pcmap_propeller::read_cc_profile(text) {
        let mut out = Vec::new();
        if pcmap_propeller::write_cc_profile(&profile, &mut out).is_ok() {
            let again =
                pcmap_propeller::read_cc_profile(std::str::from_utf8(&out).unwrap()).unwrap();
            assert_eq!(again, profile);
        }
    }
}

/// Arbitrary pre-aggregated records folded into a small fixed map, then laid out and written:
/// nothing may panic (addresses, counts near u64::MAX, impossible fall-throughs).
pub fn propeller_pipeline(data: &[u8]) {
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
}

/// PCMTRACE: header, trailer index, records, and the streaming chunk-parallel pass.
pub fn trace_binary(data: &[u8]) {
    let mut bytes = b"PCMTRACE".to_vec();
    bytes.extend_from_slice(data);
    for input in [data, &bytes[..]] {
        if let Ok(pt) = PcmTrace::parse(input, "fuzz") {
            let _ = pt.read_all(&mut |_| Ok(()));
            let _ = streaming::summarize(&pt, 4);
        }
    }
}

/// Every text trace format (detection included) must reject bad input without panicking, and
/// the HTR passes must handle whatever it accepts.
pub fn trace_text(data: &[u8]) {
    if let Ok(trace) = Trace::read(data, "fuzz") {
        for t in trace.threads.iter().take(4) {
            if t.ids.len() <= 4096 {
                let _ = Htr::build(t, &BuildOptions::default());
            }
        }
    }
}

/// A little-endian ELF64 file of type `e_type` (1 relocatable, 2 executable) whose sections are
/// `sections` (name, `sh_type`, `sh_flags`, `sh_addr`, contents), for the structure-aware
/// targets: random bytes alone rarely get past the ELF header, so these put the fuzzer's bytes
/// where the parser under test reads them.
pub fn elf_with_sections(e_type: u16, sections: &[(&str, u32, u64, u64, &[u8])]) -> Vec<u8> {
    let mut names = vec![0u8];
    let mut name_offsets = Vec::new();
    for (name, ..) in sections {
        name_offsets.push(names.len() as u32);
        names.extend_from_slice(name.as_bytes());
        names.push(0);
    }
    let shstrtab_name = names.len() as u32;
    names.extend_from_slice(b".shstrtab\0");
    let mut f = Vec::new();
    f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    f.extend_from_slice(&e_type.to_le_bytes());
    f.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&[0; 16]); // e_entry, e_phoff
    let sh_off_at = f.len();
    f.extend_from_slice(&[0; 8]); // e_shoff, patched below
    f.extend_from_slice(&0u32.to_le_bytes());
    let count = sections.len() as u16 + 2;
    for v in [64u16, 0, 0, 64, count, count - 1] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    let mut placed = Vec::new();
    for (.., contents) in sections {
        placed.push((f.len() as u64, contents.len() as u64));
        f.extend_from_slice(contents);
    }
    let names_at = f.len() as u64;
    f.extend_from_slice(&names);
    while f.len() % 8 != 0 {
        f.push(0);
    }
    let sh_off = f.len() as u64;
    f[sh_off_at..sh_off_at + 8].copy_from_slice(&sh_off.to_le_bytes());
    let header =
        |f: &mut Vec<u8>, name: u32, ty: u32, flags: u64, addr: u64, off: u64, size: u64| {
            f.extend_from_slice(&name.to_le_bytes());
            f.extend_from_slice(&ty.to_le_bytes());
            f.extend_from_slice(&flags.to_le_bytes());
            f.extend_from_slice(&addr.to_le_bytes());
            f.extend_from_slice(&off.to_le_bytes());
            f.extend_from_slice(&size.to_le_bytes());
            f.extend_from_slice(&[0; 8]); // sh_link, sh_info
            f.extend_from_slice(&1u64.to_le_bytes());
            f.extend_from_slice(&0u64.to_le_bytes());
        };
    header(&mut f, 0, 0, 0, 0, 0, 0);
    for (i, (_, ty, flags, addr, _)) in sections.iter().enumerate() {
        let (off, size) = placed[i];
        header(&mut f, name_offsets[i], *ty, *flags, *addr, off, size);
    }
    header(&mut f, shstrtab_name, 3, 0, 0, names_at, names.len() as u64);
    f
}

/// Split `data` into `n` parts: the first `2 * (n - 1)` bytes are little-endian `u16` lengths of
/// the first `n - 1` parts (clamped to what is left); the last part is the rest.
pub fn split_parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    let header = 2 * (n - 1);
    let mut rest = data.get(header..).unwrap_or(&[]);
    let mut parts = Vec::with_capacity(n);
    for i in 0..n - 1 {
        let len = data
            .get(2 * i..2 * i + 2)
            .map_or(0, |b| usize::from(u16::from_le_bytes([b[0], b[1]])))
            .min(rest.len());
        let (part, tail) = rest.split_at(len);
        parts.push(part);
        rest = tail;
    }
    parts.push(rest);
    parts
}

/// DWARF sections (`.debug_abbrev`, `.debug_info`, `.debug_str`, `.debug_str_offsets`,
/// `.debug_addr`, `.debug_line_str`, `.debug_loclists`, `.debug_rnglists`, `.debug_line`, from
/// [`split_parts`]) in an otherwise valid ELF file: inline
/// sites and parameter locations are extracted, counted, symbolized and encoded as BTF in every
/// format. Nothing may panic.
pub fn inline_dwarf_sections(data: &[u8]) {
    let parts = split_parts(data, 9);
    let names = [
        ".debug_abbrev",
        ".debug_info",
        ".debug_str",
        ".debug_str_offsets",
        ".debug_addr",
        ".debug_line_str",
        ".debug_loclists",
        ".debug_rnglists",
        ".debug_line",
    ];
    let sections: Vec<(&str, u32, u64, u64, &[u8])> = names
        .iter()
        .zip(&parts)
        .map(|(name, part)| (*name, 1, 0, 0, *part))
        .collect();
    let elf = elf_with_sections(1, &sections);
    let Ok(binary) = pcmap_binary::Binary::parse(&elf) else {
        return;
    };
    let Ok(debug) = pcmap_inline::DebugData::from_binary(&binary) else {
        return;
    };
    if let Ok(info) = pcmap_inline::extract_sites(&debug) {
        let _ = pcmap_inline::census::Census::new(&info);
    }
    if let Ok(set) = pcmap_inline::btf::site_set(&binary, &debug) {
        let mut w = BtfWriter::new_base();
        let int = w.add_int("int", 4, 1, 32).unwrap();
        let proto = w.add_func_proto(int, &[(Some("x"), int)], false).unwrap();
        w.add_func("f", proto, 0).unwrap();
        let base_bytes = w.finish();
        let base = Btf::parse(&base_bytes).unwrap();
        for format in [
            Format::Rfc,
            Format::Btf2025,
            Format::Btf2026,
            Format::Compact,
        ] {
            let _ = pcmap_btf::encode(&set, &base, format);
        }
    }
}

/// A `.llvm_bb_addr_map` section (`SHT_LLVM_BB_ADDR_MAP`) of the fuzzer's bytes in an executable
/// with a code section: read through the ELF layer, indexed and looked up.
pub fn bbmap_in_elf(data: &[u8]) {
    let code = [0x90u8; 64];
    let elf = elf_with_sections(
        2,
        &[
            (".text", 1, 6, 0x1000, &code),
            (".llvm_bb_addr_map", 0x6fff_4c0a, 0, 0, data),
        ],
    );
    let Ok(binary) = pcmap_binary::Binary::parse(&elf) else {
        return;
    };
    for legacy in [false, true] {
        if let Ok(maps) =
            pcmap_bbmap::elf::read_binary(&binary, pcmap_bbmap::elf::ReadOptions { legacy })
        {
            for section in &maps.sections {
                let index = BlockIndex::new(&section.functions);
                for pc in [0x1000, 0x1010, 0x103f, u64::MAX] {
                    let _ = index.lookup(pc);
                    let _ = index.lookup_branch_source(pc);
                }
            }
        }
    }
}

/// A `.note.bolt_bat` section of the fuzzer's bytes in an executable with code: the path `pcmap
/// bat` and perf2bolt's BAT mode take (section lookup, BOLT's functions, table, translation).
pub fn bat_in_elf(data: &[u8]) {
    let code = [0xc3u8; 256];
    let elf = elf_with_sections(
        2,
        &[
            (".text", 1, 6, 0x40_0000, &code),
            (".note.bolt_bat", 7, 0, 0, data),
        ],
    );
    let Ok(binary) = pcmap_binary::Binary::parse(&elf) else {
        return;
    };
    let _ = BoltFunctions::discover(&binary);
    let Some(section) = binary.section_by_name(pcmap_bat::SECTION_NAME) else {
        return;
    };
    let Ok(bytes) = binary.section_data(section) else {
        return;
    };
    if let Ok(table) = BatTable::parse(&bytes) {
        for a in (0x40_0000..0x40_0100).step_by(7) {
            let _ = table.translate(a, true);
            let _ = table.translate(a, false);
        }
    }
}

/// perf.data bytes through the branch-event pipeline's perf.data producer (mmap tracking, pid
/// filter, PIE and fixed-address translation, basic and branch modes) into a counting sink.
pub fn events_perf_data(data: &[u8]) {
    use pcmap_profile::events::{self, BinaryDesc, Event, PerfOptions, Segment};
    struct Count(u64);
    impl events::Sink for Count {
        fn event(&mut self, event: &Event<'_>) {
            self.0 = self.0.wrapping_add(match event {
                Event::Sample(s) => s.count,
                Event::Trace(t) => t.count,
                Event::Name(_) => 0,
            });
        }
    }
    impl events::ParallelSink for Count {
        fn merge(self, later: Self) -> Self {
            Count(self.0.wrapping_add(later.0))
        }
    }
    let Ok(file) = PerfFile::parse(data) else {
        return;
    };
    let segments = vec![
        Segment {
            vaddr: 0,
            offset: 0,
            file_size: 0x1000,
            mem_size: 0x1000,
            align: 0x1000,
            executable: false,
        },
        Segment {
            vaddr: 0x401000,
            offset: 0x1000,
            file_size: 0x2000,
            mem_size: 0x2000,
            align: 0x1000,
            executable: true,
        },
    ];
    for fixed_address in [true, false] {
        let desc = BinaryDesc {
            build_id: None,
            file_name: b"prog",
            segments: segments.clone(),
            fixed_address,
        };
        for (basic, pid) in [(false, None), (true, None), (false, Some(1))] {
            let opts = PerfOptions {
                basic,
                pid,
                ignore_build_id: true,
                sample_ips: !basic,
                max_samples: None,
            };
            let mut seq = Count(0);
            let one = events::read_perf_data(&file, &desc, &opts, &mut seq);
            // The parallel reader must agree with the sequential one, error or not.
            let par = events::read_perf_data_parallel(&file, &desc, &opts, || Count(0), &|_| {});
            match (one, par) {
                (Ok(a), Ok((sink, b))) => assert!(a == b && seq.0 == sink.0),
                (Err(_), Err(_)) => {}
                (a, b) => panic!("sequential {a:?} vs parallel {:?}", b.map(|x| x.1)),
            }
        }
    }
}
