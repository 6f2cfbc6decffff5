//! `pcmap bat` and the `pcmap-bat` codec against the real oracles: llvm-bolt 22 writes the BAT
//! sections (fixtures under `fixtures/src/bat/`, profiles from BOLT instrumentation),
//! llvm-objcopy extracts their bytes, perf2bolt 22 translates pre-aggregated records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_bat::{Bat, BatTable};
use pcmap_binary::Binary;
use pcmap_testkit::{bolt_with_instrumentation, build, derive, derived, run_ok, scratch_dir, tool};

const CFLAGS: &[&str] = &["-O2", "-g0", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];
const BOLT_FLAGS: &[&str] = &[
    "--enable-bat",
    "-reorder-blocks=ext-tsp",
    "-reorder-functions=cdsort",
    "-split-functions",
    "-split-all-cold",
];

/// The `.note.bolt_bat` section bytes as llvm-objcopy extracts them (the byte oracle).
fn objcopy_section(bolted: &Path) -> Vec<u8> {
    let section = derive(&derived(bolted, "bat-section"), |tmp| {
        let discard = tmp.with_extension("objcopy-out");
        run_ok(
            Command::new(tool("llvm-objcopy"))
                .arg(format!("--dump-section=.note.bolt_bat={}", tmp.display()))
                .arg(bolted)
                .arg(&discard),
        );
        let _ = std::fs::remove_file(discard);
    });
    std::fs::read(section).expect("objcopy wrote the section")
}

fn pcmap(args: &[&str]) -> String {
    run_ok(Command::new(env!("CARGO_BIN_EXE_pcmap")).args(args))
}

struct Fixture {
    bolted: PathBuf,
    section: Vec<u8>,
    bat: Bat,
}

fn fixture(name: &str, sources: &[&str], run_args: &[&str], flags: &[&str]) -> Fixture {
    let binary = build(name, sources, CFLAGS);
    let bolted = bolt_with_instrumentation(&binary, run_args, flags);
    let section = objcopy_section(&bolted);
    let bat = Bat::decode_note(&section).unwrap_or_else(|e| panic!("{}: {e}", bolted.display()));
    Fixture {
        bolted,
        section,
        bat,
    }
}

fn loops() -> Fixture {
    fixture("bat-loops", &["bat/loops.c"], &["300000", "18"], BOLT_FLAGS)
}

fn secentry() -> Fixture {
    fixture("bat-secentry", &["bat/secentry.s"], &[], BOLT_FLAGS)
}

/// A generated program with thousands of small functions (some with jump tables), all of them
/// rewritten (`-lite=0`) so BAT covers every one.
fn many() -> Fixture {
    let src = pcmap_testkit::many_functions_source(2500);
    let mut flags = BOLT_FLAGS.to_vec();
    flags.push("-lite=0");
    fixture("bat-many", &[src.to_str().unwrap()], &["20000"], &flags)
}

/// decode -> encode gives the section llvm-objcopy extracted, byte for byte.
fn assert_round_trip(f: &Fixture) {
    let again = f.bat.encode_note().expect("decoded model is valid");
    assert!(
        again == f.section,
        "{}: re-encoded BAT differs from the section",
        f.bolted.display()
    );
    // The lookup index decodes the same bytes.
    let table = BatTable::parse(&f.section).unwrap();
    assert_eq!(table.num_fragments(), f.bat.hot.len() + f.bat.cold.len());
}

#[test]
fn round_trip_split_reordered_jump_table() {
    let f = loops();
    assert_round_trip(&f);
    // The fixture must really exercise cold fragments and reordering.
    assert!(!f.bat.cold.is_empty(), "no cold fragments");
    let file = std::fs::read(&f.bolted).unwrap();
    let bin = Binary::parse(&file).unwrap();
    // Deleted or empty input blocks: several entries sharing an output offset, or an entry keyed
    // at the function's end.
    let mut shared_or_end = 0;
    for h in &f.bat.hot {
        let size = bin.function_at(h.address).map(|f| f.size).unwrap_or(0);
        for w in h.entries.windows(2) {
            shared_or_end += usize::from(w[0].output_offset == w[1].output_offset);
        }
        shared_or_end += h
            .entries
            .iter()
            .filter(|e| u64::from(e.output_offset) == size)
            .count();
    }
    assert!(
        shared_or_end > 0,
        "no deleted/empty block entries in {}",
        f.bolted.display()
    );
}

#[test]
fn round_trip_secondary_entry_point() {
    let f = secentry();
    assert_round_trip(&f);
    let file = std::fs::read(&f.bolted).unwrap();
    let bin = Binary::parse(&file).unwrap();
    let twoway = bin
        .function_table()
        .by_name("twoway")
        .map(|f| f.address)
        .find(|&a| f.bat.hot.iter().any(|h| h.address == a));
    let twoway = twoway.expect("twoway is a BAT function");
    let h = f.bat.hot.iter().find(|h| h.address == twoway).unwrap();
    // `twoway_alt` is 16 bytes into `twoway` in the input (see secentry.s).
    assert_eq!(h.secondary_entry_points, vec![0x10]);
}

#[test]
fn round_trip_thousands_of_functions() {
    let f = many();
    assert_round_trip(&f);
    assert!(
        f.bat.hot.len() >= 2500,
        "only {} BAT functions",
        f.bat.hot.len()
    );
}

/// Pre-aggregated branch records on the BOLTed binary: perf2bolt's `boltedcollection` fdata
/// against `pcmap bat translate` of the same addresses.
fn assert_translation_agrees_with_perf2bolt(f: &Fixture, max_fragments: usize) {
    let file = std::fs::read(&f.bolted).unwrap();
    let bin = Binary::parse(&file).unwrap();
    let table = BatTable::parse(&f.section).unwrap();

    // Addresses: every entry's output address, the bytes around it, and the middle of gaps, in
    // every fragment (hot and cold), as both branch sources and targets.
    // Sources: every instruction (llvm-objdump's boundaries) of the chosen fragments except
    // returns: perf2bolt drops taken branches whose source disassembles to a return
    // (aggregation, not translation), and LBR sources are instruction addresses.
    // Targets: every entry's output address, the bytes around it and the middle of gaps,
    // instruction boundaries or not.
    let instructions = instruction_addresses(&f.bolted);
    let mut sources = Vec::new();
    let mut candidates = Vec::new();
    let fragments: Vec<(u64, Vec<u32>)> = f
        .bat
        .hot
        .iter()
        .map(|h| {
            (
                h.address,
                h.entries.iter().map(|e| e.output_offset).collect(),
            )
        })
        .chain(f.bat.cold.iter().map(|c| {
            (
                c.address,
                c.entries.iter().map(|e| e.output_offset).collect(),
            )
        }))
        .collect();
    let step = fragments.len().div_ceil(max_fragments).max(1);
    for (address, keys) in fragments.iter().step_by(step) {
        let Some(function) = bin.function_at(*address) else {
            continue;
        };
        let end = function.end();
        sources.extend(
            instructions
                .range(*address..end)
                .filter(|(_, is_ret)| !**is_ret)
                .map(|(a, _)| *a),
        );
        let mut offsets: Vec<u64> = Vec::new();
        for w in keys.windows(2) {
            offsets.push((u64::from(w[0]) + u64::from(w[1])) / 2);
        }
        for &k in keys {
            let k = u64::from(k);
            offsets.extend([k, k + 1, k.saturating_sub(1)]);
        }
        offsets.retain(|&o| o < function.size);
        offsets.sort_unstable();
        offsets.dedup();
        candidates.extend(offsets.iter().map(|o| address + o));
    }
    assert!(!sources.is_empty() && !candidates.is_empty());
    // Pair sources with targets spread over all fragments, so records cross functions too.
    let targets: Vec<u64> = (0..sources.len().max(candidates.len()))
        .map(|i| candidates[(i * 7919) % candidates.len()])
        .collect();
    let sources: Vec<u64> = (0..targets.len())
        .map(|i| sources[i % sources.len()])
        .collect();

    let dir = scratch_dir(&format!(
        "bat-perf2bolt-{}",
        f.bolted.file_name().unwrap().to_string_lossy()
    ));
    let mut preagg = String::new();
    for (i, (s, t)) in sources.iter().zip(&targets).enumerate() {
        // Distinct counts make merged records checkable by their sums.
        preagg += &format!("B {s:x} {t:x} {} 0\n", i + 1);
    }
    let pa = dir.join("records.pa");
    std::fs::write(&pa, &preagg).unwrap();
    let out = dir.join("out.fdata");
    let yaml = dir.join("out.yaml");
    let log = run_ok(
        Command::new(tool("perf2bolt"))
            .arg("--pa")
            .arg("-p")
            .arg(&pa)
            .arg("-o")
            .arg(&out)
            .arg("-w")
            .arg(&yaml)
            .arg(&f.bolted),
    );
    let fdata = std::fs::read_to_string(&out).unwrap();
    let mut lines = fdata.lines();
    assert_eq!(
        lines.next(),
        Some("boltedcollection"),
        "perf2bolt did not use BAT"
    );
    // perf2bolt names local functions `name/file/N`; resolve every name (theirs and ours) to the
    // address of the BOLTed binary's function it names.
    let mut by_name: std::collections::HashMap<&str, Option<u64>> =
        std::collections::HashMap::new();
    for function in bin.functions() {
        for sym in bin.function_table().names_of(function) {
            for n in [
                Some(sym.name),
                Some(&*sym.bolt_name),
                sym.bolt_file_name.as_deref(),
            ]
            .into_iter()
            .flatten()
            {
                let slot = by_name.entry(n).or_insert(Some(function.address));
                if *slot != Some(function.address) {
                    *slot = None; // ambiguous
                }
            }
        }
    }
    let address_of = |name: &str| -> u64 {
        by_name
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("no function named {name:?}"))
            .unwrap_or_else(|| panic!("ambiguous function name {name:?}"))
    };
    let mut oracle: BTreeMap<(u64, u64, u64, u64), u64> = BTreeMap::new();
    for line in lines {
        let w: Vec<&str> = line.split(' ').collect();
        assert_eq!(w.len(), 8, "unexpected fdata line {line:?}");
        let key = (
            address_of(w[1]),
            pcmap_testkit::hex(w[2]),
            address_of(w[4]),
            pcmap_testkit::hex(w[5]),
        );
        *oracle.entry(key).or_default() += w[7].parse::<u64>().unwrap();
    }

    // pcmap: translate every address through the CLI (sources with `:1`).
    let mut args: Vec<String> = vec![
        "bat".into(),
        "translate".into(),
        f.bolted.display().to_string(),
    ];
    args.extend(sources.iter().map(|a| format!("{a:#x}:1")));
    args.extend(targets.iter().map(|a| format!("{a:#x}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let printed = pcmap(&args);
    let translated: Vec<(String, u64)> = printed
        .lines()
        .map(|l| {
            // `0x80009f -> work + 0x39`
            let (_, rest) = l
                .split_once(" -> ")
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            let (name, off) = rest.rsplit_once(" + ").unwrap();
            (name.to_string(), pcmap_testkit::hex(off))
        })
        .collect();
    assert_eq!(translated.len(), sources.len() + targets.len());
    let (from, to) = translated.split_at(sources.len());
    let mut ours: BTreeMap<(u64, u64, u64, u64), u64> = BTreeMap::new();
    for (i, (s, t)) in from.iter().zip(to).enumerate() {
        *ours
            .entry((address_of(&s.0), s.1, address_of(&t.0), t.1))
            .or_default() += i as u64 + 1;
    }

    // Also through the library: same answers as the CLI.
    for (a, (name, off)) in sources.iter().zip(from) {
        let function = bin.function_at(*a).unwrap();
        let t = table.translate_in(function.address, *a, true).unwrap();
        assert_eq!(
            (
                bin.function_name(bin.function_at(t.function_address).unwrap()),
                t.input_offset
            ),
            (name.as_str(), *off)
        );
    }

    let missing: Vec<_> = ours
        .iter()
        .filter(|(k, v)| oracle.get(*k) != Some(v))
        .take(10)
        .collect();
    let extra: Vec<_> = oracle
        .iter()
        .filter(|(k, v)| ours.get(*k) != Some(v))
        .take(10)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{}: {} records; pcmap-only (function, offset, function, offset): {missing:x?}\nperf2bolt-only: {extra:x?}",
        f.bolted.display(),
        sources.len()
    );
    eprintln!(
        "{}: {} records, {} fdata records agree with perf2bolt",
        f.bolted.display(),
        sources.len(),
        oracle.len()
    );

    assert_dump_agrees_with_perf2bolt(
        f,
        &bin,
        &log,
        &std::fs::read_to_string(&yaml).unwrap(),
        &address_of,
    );
}

/// `pcmap bat dump` against what perf2bolt read from the same section: the number of BAT maps
/// it parsed, and for every profiled function the hash, block count and block hashes/indices it
/// wrote to its YAML profile (which it takes from BAT); cold mappings against symbol names.
fn assert_dump_agrees_with_perf2bolt(
    f: &Fixture,
    bin: &Binary<'_>,
    log: &str,
    yaml: &str,
    address_of: &dyn Fn(&str) -> u64,
) {
    let dump = pcmap(&["bat", "dump", f.bolted.to_str().unwrap()]);
    let parsed: usize = log
        .lines()
        .find_map(|l| {
            l.strip_prefix("BOLT-INFO: Parsed ")?
                .strip_suffix(" BAT entries")?
                .parse()
                .ok()
        })
        .expect("perf2bolt reports the BAT maps it parsed");
    assert!(
        dump.starts_with(&format!("BAT tables for {parsed} functions:\n")),
        "{}",
        &dump[..dump.len().min(200)]
    );

    // The dump, split per function: address -> (header line, lines).
    let mut functions: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    let mut current = None;
    for line in dump.lines() {
        if let Some(rest) = line.strip_prefix("Function Address: 0x") {
            let address = pcmap_testkit::hex(rest.split(',').next().unwrap());
            current = Some(address);
            functions.entry(address).or_default().push(line);
        } else if let Some(a) = current {
            if line.is_empty() {
                current = None;
            } else {
                functions.get_mut(&a).unwrap().push(line);
            }
        }
    }
    assert_eq!(functions.len(), parsed);

    // perf2bolt's YAML: function name, hash, nblocks, and (bid, hash) per block.
    let mut cold_of: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for c in &f.bat.cold {
        cold_of
            .entry(f.bat.hot[c.hot_index].address)
            .or_default()
            .push(c.address);
    }
    let mut checked_blocks = 0;
    let mut name = String::new();
    let mut address = 0;
    let mut lines_of: Option<&Vec<&str>> = None;
    let mut bid = None;
    for line in yaml.lines() {
        let t = line.trim_start();
        let field = |key: &str| t.strip_prefix(key).map(|v| v.trim().trim_matches('\''));
        if let Some(v) = field("- name:") {
            name = v.to_string();
            bid = None;
            address = address_of(&name);
            lines_of = functions.get(&address);
            assert!(
                lines_of.is_some(),
                "profiled function {name} is not in the dump"
            );
        } else if let Some(v) = field("- bid:") {
            bid = Some(v.parse::<u32>().unwrap());
        } else if let (Some(v), Some(lines)) = (field("hash:"), lines_of) {
            let hash = pcmap_testkit::hex(v);
            if let Some(b) = bid {
                // A block: some BB entry of this function (hot or cold part) carries its hash;
                // the JSON dump gives its index.
                let _ = b;
                let suffix = format!(" hash: {hash:#x}");
                let in_hot = lines
                    .iter()
                    .any(|l| l.starts_with("0x") && l.ends_with(&suffix));
                let in_cold = cold_of.get(&address).is_some_and(|cold| {
                    cold.iter()
                        .any(|c| functions[c].iter().any(|l| l.ends_with(&suffix)))
                });
                assert!(
                    in_hot || in_cold,
                    "{name}: block {b} hash {hash:#x} not in the dump"
                );
                checked_blocks += 1;
            } else {
                assert!(
                    lines[0].ends_with(&format!(", hash: {hash:#x}")),
                    "{name}: {} vs hash {hash:#x}",
                    lines[0]
                );
            }
        } else if let (Some(v), Some(lines)) = (field("nblocks:"), lines_of) {
            assert!(
                lines.contains(&format!("NumBlocks: {v}").as_str()),
                "{name}: NumBlocks {v}"
            );
        }
    }
    assert!(checked_blocks > 0, "the YAML profile named no blocks");

    // JSON: block indices of the blocks perf2bolt named agree with the text dump's hashes, and
    // every cold fragment's symbol is `<hot symbol>.cold.N`.
    let json: serde_json::Value = serde_json::from_str(&pcmap(&[
        "bat",
        "dump",
        "--json",
        f.bolted.to_str().unwrap(),
    ]))
    .unwrap();
    for c in json["cold_fragments"].as_array().unwrap() {
        let cold_name = c["name"].as_str().unwrap();
        let hot = bin.function_at(c["hot_address"].as_u64().unwrap()).unwrap();
        let hot_names: Vec<&str> = bin
            .function_table()
            .names_of(hot)
            .iter()
            .map(|s| s.name)
            .collect();
        assert!(
            hot_names
                .iter()
                .any(|h| cold_name.starts_with(&format!("{h}.cold."))),
            "cold fragment {cold_name} is not a part of {hot_names:?}"
        );
        let line = format!(
            "0x{:x} -> {:x}",
            c["address"].as_u64().unwrap(),
            hot.address
        );
        assert!(
            dump.lines().any(|l| l == line),
            "missing cold mapping {line}"
        );
    }
    assert_eq!(
        json["functions"].as_array().unwrap().len()
            + json["cold_fragments"].as_array().unwrap().len(),
        parsed
    );
}

/// Traces (`T branch target fall-through-end`) inside BAT fragments: perf2bolt records the branch
/// and the fall-throughs BAT lists between target and end; pcmap-bat's `translate_in` and
/// `fallthroughs_in_trace` must predict exactly those fdata records.
fn assert_traces_agree_with_perf2bolt(f: &Fixture, max_fragments: usize) {
    let file = std::fs::read(&f.bolted).unwrap();
    let bin = Binary::parse(&file).unwrap();
    let table = BatTable::parse(&f.section).unwrap();
    let instructions = instruction_addresses(&f.bolted);
    let fragments: Vec<u64> = f
        .bat
        .hot
        .iter()
        .map(|h| h.address)
        .chain(f.bat.cold.iter().map(|c| c.address))
        .collect();
    let step = fragments.len().div_ceil(max_fragments).max(1);
    // (branch, target, fall-through end)
    let mut traces = Vec::new();
    let all_sources: Vec<u64> = fragments
        .iter()
        .step_by(step)
        .filter_map(|&a| bin.function_at(a))
        .flat_map(|function| instructions.range(function.address..function.end()))
        .filter(|(_, is_ret)| !**is_ret)
        .map(|(a, _)| *a)
        .collect();
    for (n, &fragment) in fragments.iter().step_by(step).enumerate() {
        let Some(function) = bin.function_at(fragment) else {
            continue;
        };
        let insns: Vec<u64> = instructions
            .range(fragment..function.end())
            .map(|(a, _)| *a)
            .collect();
        for (i, &target) in insns.iter().enumerate() {
            for k in [0usize, 1, 3, 7, 20] {
                let Some(&end) = insns.get(i + k) else {
                    continue;
                };
                let branch = all_sources[(n * 131 + i * 17 + k) % all_sources.len()];
                traces.push((branch, target, end));
            }
        }
    }
    assert!(!traces.is_empty());

    let mut preagg = String::new();
    let mut predicted: BTreeMap<(u64, u64, u64, u64), u64> = BTreeMap::new();
    let mut fall_throughs = 0;
    for (i, &(branch, target, end)) in traces.iter().enumerate() {
        let count = i as u64 + 1;
        preagg += &format!("T {branch:x} {target:x} {end:x} {count}\n");
        let locate = |a: u64, is_src: bool| -> (u64, u64, u64) {
            let function = bin.function_at(a).unwrap();
            match table.translate_in(function.address, a, is_src) {
                Some(t) => (function.address, t.function_address, t.input_offset),
                None => (function.address, function.address, a - function.address),
            }
        };
        let (_, from_function, from_offset) = locate(branch, true);
        let (fragment, to_function, to_offset) = locate(target, false);
        *predicted
            .entry((from_function, from_offset, to_function, to_offset))
            .or_default() += count;
        for (src, dst) in table
            .fallthroughs_in_trace(fragment, target, end)
            .expect("a BAT fragment")
        {
            fall_throughs += 1;
            *predicted
                .entry((to_function, u64::from(src), to_function, u64::from(dst)))
                .or_default() += count;
        }
    }
    let dir = scratch_dir(&format!(
        "bat-traces-{}",
        f.bolted.file_name().unwrap().to_string_lossy()
    ));
    let pa = dir.join("traces.pa");
    std::fs::write(&pa, &preagg).unwrap();
    let out = dir.join("out.fdata");
    run_ok(
        Command::new(tool("perf2bolt"))
            .arg("--pa")
            .arg("-p")
            .arg(&pa)
            .arg("-o")
            .arg(&out)
            .arg(&f.bolted),
    );
    let by_name = names(&bin);
    let fdata = std::fs::read_to_string(&out).unwrap();
    let mut oracle: BTreeMap<(u64, u64, u64, u64), u64> = BTreeMap::new();
    for line in fdata.lines().skip(1) {
        let w: Vec<&str> = line.split(' ').collect();
        let key = (
            by_name(w[1]),
            pcmap_testkit::hex(w[2]),
            by_name(w[4]),
            pcmap_testkit::hex(w[5]),
        );
        *oracle.entry(key).or_default() += w[7].parse::<u64>().unwrap();
    }
    let missing: Vec<_> = predicted
        .iter()
        .filter(|(k, v)| oracle.get(*k) != Some(v))
        .take(10)
        .collect();
    let extra: Vec<_> = oracle
        .iter()
        .filter(|(k, v)| predicted.get(*k) != Some(v))
        .take(10)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{}: {} traces; pcmap-only: {missing:x?}\nperf2bolt-only: {extra:x?}",
        f.bolted.display(),
        traces.len()
    );
    assert!(
        fall_throughs > traces.len() / 4,
        "too few fall-throughs exercised: {fall_throughs}"
    );
    eprintln!(
        "{}: {} traces ({fall_throughs} fall-throughs), {} fdata records agree with perf2bolt",
        f.bolted.display(),
        traces.len(),
        oracle.len()
    );
}

/// Resolve perf2bolt's function names (`name`, `name/N`, `name/file/N`) to addresses.
fn names<'a>(bin: &'a Binary<'_>) -> impl Fn(&str) -> u64 + 'a {
    let mut by_name: std::collections::HashMap<String, Option<u64>> =
        std::collections::HashMap::new();
    for function in bin.functions() {
        for sym in bin.function_table().names_of(function) {
            for n in [
                Some(sym.name),
                Some(&*sym.bolt_name),
                sym.bolt_file_name.as_deref(),
            ]
            .into_iter()
            .flatten()
            {
                let slot = by_name
                    .entry(n.to_string())
                    .or_insert(Some(function.address));
                if *slot != Some(function.address) {
                    *slot = None;
                }
            }
        }
    }
    move |name: &str| {
        by_name
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("no function named {name:?}"))
            .unwrap_or_else(|| panic!("ambiguous function name {name:?}"))
    }
}

#[test]
fn traces_agree_with_perf2bolt_split_reordered() {
    assert_traces_agree_with_perf2bolt(&loops(), usize::MAX);
}

#[test]
fn traces_agree_with_perf2bolt_many_functions() {
    assert_traces_agree_with_perf2bolt(&many(), 150);
}

/// Every instruction address of the text, from llvm-objdump's disassembly, and whether it is a
/// return.
fn instruction_addresses(binary: &Path) -> BTreeMap<u64, bool> {
    let text = run_ok(
        Command::new(tool("llvm-objdump"))
            .args(["-d", "--no-show-raw-insn"])
            .arg(binary),
    );
    text.lines()
        .filter_map(|l| {
            let (addr, insn) = l.split_once(':')?;
            let address = u64::from_str_radix(addr.trim(), 16).ok()?;
            let mnemonic = insn.split_whitespace().find(|w| !w.starts_with("rep"))?;
            Some((address, mnemonic.starts_with("ret")))
        })
        .collect()
}

#[test]
fn translation_agrees_with_perf2bolt_split_reordered() {
    assert_translation_agrees_with_perf2bolt(&loops(), usize::MAX);
}

#[test]
fn translation_agrees_with_perf2bolt_secondary_entry() {
    assert_translation_agrees_with_perf2bolt(&secentry(), usize::MAX);
}

#[test]
fn translation_agrees_with_perf2bolt_many_functions() {
    assert_translation_agrees_with_perf2bolt(&many(), 400);
}

/// Malformed input: a clear error naming the byte offset and field, exit status 1, no panic.
#[test]
fn malformed_sections_are_reported() {
    let f = loops();
    let mut file = std::fs::read(&f.bolted).unwrap();
    let section_offset = {
        let bin = Binary::parse(&file).unwrap();
        bin.section_by_name(".note.bolt_bat").unwrap().offset as usize
    };
    // NumFuncs (payload byte 0, section byte 0x14) = 127: more functions than the bytes can hold.
    file[section_offset + 0x14] = 0x7f;
    let dir = scratch_dir("bat-malformed");
    let bad = dir.join("bad.bolt");
    std::fs::write(&bad, &file).unwrap();
    for args in [
        vec!["bat", "dump", bad.to_str().unwrap()],
        vec!["bat", "translate", bad.to_str().unwrap(), "0x800000"],
    ] {
        let out = pcmap_testkit::run(Command::new(env!("CARGO_BIN_EXE_pcmap")).args(&args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "partial output: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(stderr.contains("byte offset 0x14 (NumFuncs)"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }

    // Truncated payload: n_descsz larger than the section.
    file[section_offset + 4] = 0xff;
    file[section_offset + 5] = 0xff;
    std::fs::write(&bad, &file).unwrap();
    let out = pcmap_testkit::run(Command::new(env!("CARGO_BIN_EXE_pcmap")).args([
        "bat",
        "dump",
        bad.to_str().unwrap(),
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // pcmap-binary skips the broken note; the BAT decoder reports where the payload ends.
    assert!(
        stderr.contains(".note.bolt_bat") && stderr.contains("byte offset"),
        "{stderr}"
    );

    // A binary without BAT.
    let plain = build("bat-loops", &["bat/loops.c"], CFLAGS);
    let out = pcmap_testkit::run(Command::new(env!("CARGO_BIN_EXE_pcmap")).args([
        "bat",
        "dump",
        plain.to_str().unwrap(),
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no .note.bolt_bat section"));

    // A bad address spec.
    let out = pcmap_testkit::run(Command::new(env!("CARGO_BIN_EXE_pcmap")).args([
        "bat",
        "translate",
        f.bolted.to_str().unwrap(),
        "0x800000:2",
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("use 0 or 1"));
}

/// Addresses in the padding after functions of a BOLTed binary (between a function's size and
/// the next function: perf2bolt's "max size"), as branch sources and targets (`B` records) and as
/// basic samples (`S` records): `pcmap bat translate` names and offsets them as perf2bolt 22
/// writes them into its fdata.
fn assert_padding_translation_agrees_with_perf2bolt(f: &Fixture) {
    /// A function (by address; `u64::MAX` for unknown code) and an offset.
    type Place = (u64, u64);
    let file = std::fs::read(&f.bolted).unwrap();
    let bin = Binary::parse(&file).unwrap();
    let functions = pcmap_binary::bolt::BoltFunctions::discover(&bin).unwrap();
    let table = BatTable::parse(&f.section).unwrap();
    // Padding after functions that start at a function symbol (the names `names` resolves);
    // samples only in hot fragments' padding (perf2bolt translates a sample through the owner's
    // hot fragment, see `pcmap perf2bolt`).
    let mut padding = Vec::new();
    let mut hot_padding = Vec::new();
    for bf in functions.functions() {
        let symbol = bin
            .function_at(bf.address)
            .is_some_and(|g| g.address == bf.address);
        if bf.max_size <= bf.size || !symbol {
            continue;
        }
        let (start, end) = (bf.address + bf.size, bf.address + bf.max_size);
        let here = [start, (start + end) / 2, end - 1];
        padding.extend(here);
        if table.parent_of(bf.address).is_none_or(|p| p == bf.address) {
            hot_padding.extend(here);
        }
    }
    padding.sort_unstable();
    padding.dedup();
    hot_padding.sort_unstable();
    hot_padding.dedup();
    let in_bat = padding
        .iter()
        .filter(|&&a| {
            functions
                .function_containing(a)
                .is_some_and(|i| table.is_bat_function(functions.functions()[i].address))
        })
        .count();
    assert!(
        padding.len() >= 10 && in_bat >= 5,
        "{}: only {} padding addresses ({in_bat} in BAT functions)",
        f.bolted.display(),
        padding.len()
    );
    let sources = padding.clone();
    let targets: Vec<u64> = (0..sources.len())
        .map(|i| padding[(i + padding.len() / 2) % padding.len()])
        .collect();
    let address_of = names(&bin);
    let key = |name: &str, off: u64| match name {
        "[unknown]" => (u64::MAX, 0),
        n => (address_of(n), off),
    };

    // perf2bolt: branches (LBR mode) and samples (`--ba`).
    let dir = scratch_dir(&format!(
        "bat-padding-{}",
        f.bolted.file_name().unwrap().to_string_lossy()
    ));
    let mut branches = String::new();
    for (i, (s, t)) in sources.iter().zip(&targets).enumerate() {
        branches += &format!("B {s:x} {t:x} {} 0\n", i + 1);
    }
    let mut samples = String::new();
    for (i, a) in hot_padding.iter().enumerate() {
        samples += &format!("S {a:x} {}\n", i + 1);
    }
    let perf2bolt = |name: &str, text: &str, basic: bool| -> Vec<String> {
        let pa = dir.join(format!("{name}.pa"));
        std::fs::write(&pa, text).unwrap();
        let out = dir.join(format!("{name}.fdata"));
        let mut cmd = Command::new(tool("perf2bolt"));
        cmd.arg("--pa").arg("-p").arg(&pa).arg("-o").arg(&out);
        if basic {
            cmd.arg("--ba");
        }
        run_ok(cmd.arg(&f.bolted));
        let fdata = std::fs::read_to_string(&out).unwrap();
        let mut lines = fdata.lines();
        assert_eq!(
            lines.next(),
            Some("boltedcollection"),
            "perf2bolt did not use BAT"
        );
        if basic {
            assert!(lines.next().unwrap().starts_with("no_lbr"));
        }
        lines.map(str::to_string).collect()
    };
    let mut oracle: BTreeMap<(Place, Place), u64> = BTreeMap::new();
    for line in perf2bolt("branches", &branches, false) {
        let w: Vec<&str> = line.split(' ').collect();
        assert_eq!(w.len(), 8, "unexpected fdata line {line:?}");
        let k = (
            key(w[1], pcmap_testkit::hex(w[2])),
            key(w[4], pcmap_testkit::hex(w[5])),
        );
        *oracle.entry(k).or_default() += w[7].parse::<u64>().unwrap();
    }
    let mut oracle_samples: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for line in perf2bolt("samples", &samples, true) {
        let w: Vec<&str> = line.split(' ').collect();
        assert_eq!(w.len(), 4, "unexpected fdata line {line:?}");
        *oracle_samples
            .entry(key(w[1], pcmap_testkit::hex(w[2])))
            .or_default() += w[3].parse::<u64>().unwrap();
    }

    // pcmap: every address through `pcmap bat translate` (sources with `:1`).
    let mut args: Vec<String> = vec![
        "bat".into(),
        "translate".into(),
        f.bolted.display().to_string(),
    ];
    args.extend(sources.iter().map(|a| format!("{a:#x}:1")));
    args.extend(targets.iter().map(|a| format!("{a:#x}")));
    args.extend(hot_padding.iter().map(|a| format!("{a:#x}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let printed = pcmap(&args);
    let translated: Vec<(u64, u64)> = printed
        .lines()
        .map(|l| match l.split_once(" -> ") {
            Some((_, rest)) => {
                let (name, off) = rest.rsplit_once(" + ").unwrap();
                key(name, pcmap_testkit::hex(off))
            }
            None => (u64::MAX, 0),
        })
        .collect();
    assert_eq!(
        translated.len(),
        sources.len() + targets.len() + hot_padding.len()
    );
    let (from, rest) = translated.split_at(sources.len());
    let (to, sampled) = rest.split_at(targets.len());
    let mut ours: BTreeMap<(Place, Place), u64> = BTreeMap::new();
    for (i, (s, t)) in from.iter().zip(to).enumerate() {
        // perf2bolt records nothing for a branch between two unknown locations.
        if *s == (u64::MAX, 0) && *t == (u64::MAX, 0) {
            continue;
        }
        *ours.entry((*s, *t)).or_default() += i as u64 + 1;
    }
    let mut ours_samples: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for (i, k) in sampled.iter().enumerate() {
        *ours_samples.entry(*k).or_default() += i as u64 + 1;
    }
    assert_eq!(
        ours,
        oracle,
        "{}: branch records with padding ends differ",
        f.bolted.display()
    );
    assert_eq!(
        ours_samples,
        oracle_samples,
        "{}: samples in padding differ",
        f.bolted.display()
    );
    eprintln!(
        "{}: {} padding addresses ({in_bat} in BAT functions), {} branch records and {} samples agree with perf2bolt",
        f.bolted.display(),
        padding.len(),
        oracle.len(),
        oracle_samples.len()
    );
}

#[test]
fn padding_translation_agrees_with_perf2bolt_split_reordered() {
    assert_padding_translation_agrees_with_perf2bolt(&loops());
}

#[test]
fn padding_translation_agrees_with_perf2bolt_many_functions() {
    assert_padding_translation_agrees_with_perf2bolt(&many());
}
