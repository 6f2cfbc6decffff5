//! C++ exception tables (LSDAs) against `llvm-bolt --print-exceptions` (BOLT 22's own reading
//! of `.gcc_except_table`): the same LSDAs, and in each the same call sites (range, landing pad,
//! action), on C++ fixtures built non-PIE (absolute FDE pointers) and PIE (pc-relative).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use pcmap_binary::{Binary, Error, MappedFile};
use pcmap_testkit::{self as tk, run_ok, tool};

/// Call sites as BOLT prints them: (start, end, landing pad, action), absolute addresses.
type Sites = Vec<(u64, u64, u64, u64)>;

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).expect("hex number")
}

/// LSDA address -> call sites, from `llvm-bolt --print-exceptions`.
fn bolt_lsdas(bin: &Path) -> BTreeMap<u64, Sites> {
    let out = std::env::temp_dir().join(format!("pcmap-lsda-{}.bolt", std::process::id()));
    let text = run_ok(
        Command::new(tool("llvm-bolt"))
            .arg(bin)
            .arg("-o")
            .arg(&out)
            .arg("--print-exceptions"),
    );
    let _ = std::fs::remove_file(&out);
    let mut map: BTreeMap<u64, Sites> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("[LSDA at ") {
            let addr = hex(rest.split_whitespace().next().unwrap());
            map.entry(addr).or_default();
            current = Some(addr);
        } else if let Some(rest) = line.strip_prefix("Call Site: [") {
            // "0xS, 0xE); landing pad: 0xL; action entry: 0xA"
            let (range, rest) = rest.split_once(");").unwrap();
            let (s, e) = range.split_once(',').unwrap();
            let lp = rest
                .split("landing pad:")
                .nth(1)
                .unwrap()
                .split(';')
                .next()
                .unwrap();
            let action = rest.split("action entry:").nth(1).unwrap();
            map.get_mut(&current.expect("LSDA header first"))
                .unwrap()
                .push((hex(s), hex(e), hex(lp), hex(action)));
        }
    }
    map
}

fn ours(bin: &Path) -> BTreeMap<u64, Sites> {
    let file = MappedFile::open(bin).unwrap();
    let binary = Binary::parse(file.bytes()).unwrap();
    binary
        .fde_lsdas()
        .into_iter()
        .map(|(function, lsda)| {
            let l = binary.lsda(lsda, function).unwrap();
            assert_eq!(l.address, lsda);
            let sites = l
                .call_sites
                .iter()
                .map(|c| {
                    (
                        function + c.start,
                        function + c.start + c.length,
                        c.landing_pad,
                        c.action,
                    )
                })
                .collect();
            (lsda, sites)
        })
        .collect()
}

#[test]
fn lsdas_match_llvm_bolt() {
    for fixture @ (name, _) in tk::EH_FIXTURES {
        let bin = tk::build_eh(fixture);
        let (theirs, ours) = (bolt_lsdas(&bin), ours(&bin));
        assert!(theirs.len() >= 5, "{name}: too few LSDAs in BOLT's output");
        assert!(
            theirs.values().any(|s| s.iter().any(|c| c.2 != 0)),
            "{name}: no landing pad"
        );
        assert_eq!(ours, theirs, "{name}");
    }
}

#[test]
fn truncated_lsda_is_a_located_error() {
    let bin = tk::build_eh(tk::EH_FIXTURES[0]);
    let file = MappedFile::open(&bin).unwrap();
    let mut bytes = file.bytes().to_vec();
    let binary = Binary::parse(&bytes).unwrap();
    let table = binary.section_by_name(".gcc_except_table").unwrap().clone();
    let (function, lsda) = binary.fde_lsdas()[0];
    let at = (table.offset + (lsda - table.address)) as usize;
    // A call-site table longer than the section: an error naming the LSDA and the field.
    // (No landing-pad base, no type table, ULEB128 call sites, 65,535 bytes of them.)
    bytes[at..at + 6].copy_from_slice(&[0xff, 0xff, 0x01, 0xff, 0xff, 0x03]);
    let binary = Binary::parse(&bytes).unwrap();
    match binary.lsda(lsda, function) {
        Err(e @ Error::Lsda { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("call-site table length"), "{msg}");
            assert!(msg.contains(&format!("{lsda:#x}")), "{msg}");
        }
        other => panic!("expected an LSDA error, got {other:?}"),
    }
    // An encoding BOLT does not read either.
    bytes[at..at + 2].copy_from_slice(&[0x50, 0xff]);
    let binary = Binary::parse(&bytes).unwrap();
    assert!(matches!(
        binary.lsda(lsda, function),
        Err(Error::LsdaEncoding { encoding: 0x50, .. })
    ));
}

/// Every FDE of `.eh_frame` as `llvm-dwarfdump --eh-frame` lists it: (CIE offset, start,
/// length), in section order.
fn dwarfdump_fdes(bin: &Path) -> Vec<(u64, u64, u64)> {
    let out = run_ok(
        Command::new(tool("llvm-dwarfdump"))
            .arg("--eh-frame")
            .arg(bin),
    );
    out.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().skip(3);
            if words.next() != Some("FDE") {
                return None;
            }
            let cie = hex(words.next()?.strip_prefix("cie=")?);
            let (start, end) = words.next()?.strip_prefix("pc=")?.split_once("...")?;
            let (start, end) = (hex(start), hex(end));
            let len = end
                .checked_sub(start)
                .unwrap_or_else(|| panic!("llvm-dwarfdump: an FDE ends before it starts: {line}"));
            Some((cie, start, len))
        })
        .collect()
}

#[test]
fn fde_ranges_match_llvm_dwarfdump() {
    // C++ with exceptions: FDEs of several CIEs (with and without a personality), interleaved.
    for fixture @ (name, _) in tk::EH_FIXTURES {
        let bin = tk::build_eh(fixture);
        let theirs = dwarfdump_fdes(&bin);
        let cies: std::collections::BTreeSet<u64> = theirs.iter().map(|f| f.0).collect();
        assert!(cies.len() >= 2, "{name}: FDEs of only {cies:?}");
        let theirs: Vec<(u64, u64)> = theirs
            .iter()
            .filter(|f| f.2 > 0)
            .map(|&(_, start, len)| (start, len))
            .collect();
        let file = MappedFile::open(&bin).unwrap();
        let binary = Binary::parse(file.bytes()).unwrap();
        assert_eq!(binary.fde_ranges(), theirs, "{name}");
    }
}
