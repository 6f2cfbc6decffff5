//! `pcmap inline stats|sites` and `pcmap symbolize` against the oracles: llvm-dwarfdump-22
//! `--statistics` (site count), `perf probe -n -v` (site addresses and parameter registers) and
//! llvm-symbolizer-22 (inline frames), on `fixtures/src/inline` built with clang-22 and gcc,
//! DWARF 5 and DWARF 4.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_testkit::{
    ProbeEvent, build_with, perf_probe, perf_x86_64_register, run, run_ok, scratch_dir, tool,
};
use serde_json::Value;

fn fixtures() -> Vec<(&'static str, PathBuf)> {
    let src = &["inline/inline.c"];
    vec![
        (
            "clang5",
            build_with("clang", "inline-clang-d5", src, &["-O2", "-g", "-gdwarf-5"]),
        ),
        (
            "clang4",
            build_with("clang", "inline-clang-d4", src, &["-O2", "-g", "-gdwarf-4"]),
        ),
        (
            "gcc5",
            build_with("gcc", "inline-gcc-d5", src, &["-O2", "-g", "-gdwarf-5"]),
        ),
        (
            "gcc4",
            build_with("gcc", "inline-gcc-d4", src, &["-O2", "-g", "-gdwarf-4"]),
        ),
    ]
}

fn pcmap(args: &[&str]) -> String {
    run_ok(Command::new(env!("CARGO_BIN_EXE_pcmap")).args(args))
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&pcmap(args)).expect("pcmap JSON output")
}

#[test]
fn stats_site_count_equals_llvm_dwarfdump() {
    for (name, bin) in fixtures() {
        let b = bin.to_str().unwrap();
        let stats = json(&["inline", "stats", b, "--json"]);
        let dd: Value = serde_json::from_str(&run_ok(
            Command::new(tool("llvm-dwarfdump"))
                .arg("--statistics")
                .arg(&bin),
        ))
        .unwrap();
        assert_eq!(stats["sites"], dd["#inlined functions"], "{name}");
        // The text table is produced too.
        let table = pcmap(&["inline", "stats", b]);
        assert!(table.contains(&format!(
            "inline sites                      {}",
            stats["sites"]
        )));
    }
}

fn perf_reg(reg: u64) -> Option<&'static str> {
    perf_x86_64_register(reg)
}

/// A location from `pcmap inline sites --json` in perf's fetch-arg syntax, when perf can express it.
fn perf_form(loc: &Value) -> Option<String> {
    let reg = || perf_reg(loc["reg"].as_u64()?);
    Some(match loc["kind"].as_str()? {
        "register" => format!("%{}", reg()?),
        // perf ignores DW_OP_stack_value after DW_OP_bregN: both print as a dereference.
        "memory" | "register_offset_value" => {
            format!("{:+}(%{})", loc["offset"].as_i64()?, reg()?)
        }
        "frame_base" => {
            let base = &loc["base"];
            format!(
                "{:+}(%{})",
                base["offset"].as_i64()? + loc["offset"].as_i64()?,
                perf_reg(base["reg"].as_u64()?)?
            )
        }
        _ => return None,
    })
}

/// Function symbols (start, size, name) from llvm-nm.
fn nm(bin: &Path) -> Vec<(u64, u64, String)> {
    let out = run_ok(
        Command::new(tool("llvm-nm"))
            .args(["-S", "--defined-only"])
            .arg(bin),
    );
    let mut v: Vec<(u64, u64, String)> = out
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && matches!(f[2], "t" | "T")).then(|| {
                (
                    u64::from_str_radix(f[0], 16).unwrap(),
                    u64::from_str_radix(f[1], 16).unwrap(),
                    f[3].to_string(),
                )
            })
        })
        .collect();
    v.sort();
    v
}

/// File offset of an address (PT_LOAD mapping), from llvm-readelf.
fn file_offset_map(bin: &Path) -> Vec<(u64, u64, u64)> {
    let out = run_ok(Command::new(tool("llvm-readelf")).args(["-lW"]).arg(bin));
    out.lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let h = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            (h(f[2]), h(f[1]), h(f[4]))
        })
        .collect()
}

#[test]
fn sites_and_parameter_registers_equal_perf_probe() {
    let (mut sites_compared, mut args_compared, mut skipped) = (0, 0, 0);
    for (name, bin) in fixtures() {
        let b = bin.to_str().unwrap();
        let sites = json(&["inline", "sites", b, "--json"]);
        let syms = nm(&bin);
        let loads = file_offset_map(&bin);
        let to_off = |a: u64| {
            loads
                .iter()
                .find(|l| a >= l.0 && a - l.0 < l.2)
                .map(|l| a - l.0 + l.1)
        };
        let by_die: BTreeMap<u64, &Value> = sites
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["die"].as_u64().unwrap(), s))
            .collect();
        let mut by_fn: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        for s in sites.as_array().unwrap() {
            by_fn
                .entry(s["function"].as_str().unwrap().to_string())
                .or_default()
                .push(s);
        }
        for (func, fsites) in &by_fn {
            if fsites.len() > 128 {
                continue;
            }
            // Every site must report the same file offset as the ELF program headers give.
            for s in fsites {
                assert_eq!(
                    s["file_offset"].as_u64(),
                    s["address"].as_u64().and_then(to_off)
                );
            }
            let params: Vec<&str> = fsites[0]["params"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["name"].as_str())
                .collect();
            let mut runs: Vec<Vec<ProbeEvent>> = Vec::new();
            if let Some(ev) = perf_probe(&bin, &format!("{func} {}", params.join(" "))) {
                runs.push(ev);
            } else {
                // perf aborts a probe when any argument is unsupported at any site.
                runs.extend(
                    params
                        .iter()
                        .filter_map(|p| perf_probe(&bin, &format!("{func} {p}"))),
                );
                if runs.is_empty() {
                    runs.extend(perf_probe(&bin, func));
                }
            }
            let first = runs
                .first()
                .unwrap_or_else(|| panic!("{name}: perf finds nothing for {func}"));
            // perf does not descend into an instance of the function it is looking for: sites
            // nested in another site of the same function, or inside its own out-of-line copy
            // (recursion), are not perf probe points.
            let nested = |s: &Value| {
                let mut p = s["parent_die"].as_u64();
                while let Some(d) = p {
                    let Some(ps) = by_die.get(&d) else { break };
                    if ps["function"] == s["function"] {
                        return true;
                    }
                    p = ps["parent_die"].as_u64();
                }
                s["caller"] == s["function"]
            };
            let ours: BTreeSet<u64> = fsites
                .iter()
                .filter(|s| !nested(s))
                .filter_map(|s| s["file_offset"].as_u64())
                .collect();
            let perfs: BTreeSet<u64> = first.iter().map(|e| e.offset).collect();
            let out_of_line = |off: u64| {
                syms.iter()
                    .filter(|s| to_off(s.0).is_some_and(|o| o <= off && off < o + s.1.max(1)))
                    .any(|s| s.2 == *func || s.2.starts_with(&format!("{func}.")))
            };
            if perfs.is_disjoint(&ours) && perfs.iter().all(|&p| out_of_line(p)) {
                // perf stops at the first matching DIE of a CU; when that is the out-of-line copy
                // (clang's order) it never walks the inline instances.
                skipped += 1;
                continue;
            }
            assert!(
                ours.is_subset(&perfs),
                "{name}: {func}: ours {ours:x?} perf {perfs:x?}"
            );
            for &p in perfs.difference(&ours) {
                assert!(
                    out_of_line(p),
                    "{name}: {func}: perf point {p:#x} unknown to us"
                );
            }
            sites_compared += ours.len();
            for ev in runs.iter().flatten() {
                for s in fsites
                    .iter()
                    .filter(|s| s["file_offset"].as_u64() == Some(ev.offset))
                {
                    for p in s["params"].as_array().unwrap() {
                        let Some(pname) = p["name"].as_str() else {
                            continue;
                        };
                        let Some(theirs) = ev.args.get(pname) else {
                            continue;
                        };
                        let loc = &p["location"];
                        let kind = loc["kind"].as_str().unwrap();
                        if p["zero_length_view"] == true || kind == "not_covered" {
                            continue; // perf ignores zero-length entries and searches later addresses
                        }
                        let ctx = format!(
                            "{name}: {func}@{:#x} {pname}: perf {theirs}, ours {loc}",
                            ev.offset
                        );
                        if theirs == "\\deade12d" {
                            assert!(matches!(kind, "missing" | "no_location"), "{ctx}");
                        } else if let Some(c) = theirs.strip_prefix('\\') {
                            let v: i64 = c.parse().unwrap();
                            let ours = loc["value"].as_u64().expect(&ctx);
                            assert!(
                                ours as i64 == v
                                    || ours as i32 as i64 == v
                                    || ours as u32 as i64 == v,
                                "{ctx}"
                            );
                        } else if let Some(f) = perf_form(loc) {
                            assert_eq!(&f, theirs, "{ctx}");
                        } else {
                            continue;
                        }
                        args_compared += 1;
                    }
                }
            }
        }
    }
    eprintln!(
        "perf probe: {sites_compared} sites and {args_compared} arguments agree; {skipped} functions skipped"
    );
    assert!(sites_compared >= 300 && args_compared >= 300);
}

#[test]
fn symbolize_equals_llvm_symbolizer() {
    for (name, bin) in fixtures() {
        let b = bin.to_str().unwrap();
        let mut addrs: Vec<u64> = nm(&bin)
            .iter()
            .flat_map(|s| (s.0..s.0 + s.1).step_by(3))
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        assert!(addrs.len() >= 1000, "{name}: {} addresses", addrs.len());
        let hex: Vec<String> = addrs.iter().map(|a| format!("{a:#x}")).collect();
        let list = scratch_dir(&format!("symbolize-{name}")).join("addrs");
        std::fs::write(&list, hex.join("\n")).unwrap();
        for (ours_flag, llvm_flag) in [("--inlines", "--inlining"), ("", "--no-inlines")] {
            let mut args = vec!["symbolize", b];
            if !ours_flag.is_empty() {
                args.push(ours_flag);
            }
            args.extend(hex.iter().map(String::as_str));
            let ours = pcmap(&args);
            let theirs = run_ok(Command::new("sh").arg("-c").arg(format!(
                "{} --obj={} {llvm_flag} < {}",
                tool("llvm-symbolizer").display(),
                b,
                list.display()
            )));
            let (o, t): (Vec<&str>, Vec<&str>) =
                (ours.split("\n\n").collect(), theirs.split("\n\n").collect());
            assert_eq!(o.len(), t.len(), "{name} {llvm_flag}");
            let bad: Vec<String> = o
                .iter()
                .zip(&t)
                .zip(&hex)
                .filter(|((x, y), _)| x != y)
                .map(|((x, y), a)| format!("{a}:\n{x}\n-- llvm --\n{y}"))
                .collect();
            assert!(
                bad.is_empty(),
                "{name} {llvm_flag}: {} of {} differ, e.g.\n{}",
                bad.len(),
                hex.len(),
                bad[0]
            );
            eprintln!(
                "{name} {llvm_flag}: {} addresses identical to llvm-symbolizer",
                hex.len()
            );
        }
        // JSON output carries the same frames.
        let j = json(&["symbolize", b, "--inlines", "--json", &hex[hex.len() / 2]]);
        assert!(!j[0]["frames"].as_array().unwrap().is_empty());
    }
}

#[test]
fn sites_filter_and_bad_input() {
    let (_, bin) = &fixtures()[2];
    let b = bin.to_str().unwrap();
    let all = json(&["inline", "sites", b, "--json"]);
    let clamp = json(&["inline", "sites", b, "--json", "--function", "clamp"]);
    let n = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["function"] == "clamp")
        .count();
    assert!(n > 0);
    assert_eq!(clamp.as_array().unwrap().len(), n);
    let text = pcmap(&["inline", "sites", b, "--function", "clamp"]);
    assert!(
        text.lines()
            .filter(|l| !l.starts_with(' '))
            .all(|l| l.contains(" clamp in "))
    );

    // Not an ELF file / no DWARF: exit status 1 with a message, no panic.
    let dir = scratch_dir("inline-bad");
    let junk = dir.join("junk");
    std::fs::write(&junk, b"definitely not an ELF file").unwrap();
    for args in [
        vec!["inline", "stats", junk.to_str().unwrap()],
        vec!["symbolize", junk.to_str().unwrap(), "0x10"],
        vec!["symbolize", b, "zz"],
    ] {
        let out = run(Command::new(env!("CARGO_BIN_EXE_pcmap")).args(&args));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
    let stripped = dir.join("stripped");
    run_ok(
        Command::new(tool("llvm-objcopy"))
            .arg("--strip-debug")
            .arg(bin)
            .arg(&stripped),
    );
    let out = run(Command::new(env!("CARGO_BIN_EXE_pcmap")).args([
        "inline",
        "stats",
        stripped.to_str().unwrap(),
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no DWARF"));
}
