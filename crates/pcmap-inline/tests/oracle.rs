//! Library-level checks against the oracles (llvm-dwarfdump, perf probe, llvm-symbolizer) on the
//! `fixtures/src/inline` program built with clang-22 and gcc, DWARF 5 and DWARF 4.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_inline::{DebugData, Location, ParamLocation, ParamsAt, extract_sites};
use pcmap_testkit::{ProbeEvent, build_with, perf_probe, perf_x86_64_register, run_ok, tool};

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

fn dwarfdump_inlined(bin: &Path) -> u64 {
    let out = run_ok(
        Command::new(tool("llvm-dwarfdump"))
            .arg("--statistics")
            .arg(bin),
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("statistics JSON");
    v["#inlined functions"]
        .as_u64()
        .expect("#inlined functions")
}

#[test]
fn site_count_equals_llvm_dwarfdump_statistics() {
    for (name, bin) in fixtures() {
        let bytes = std::fs::read(&bin).unwrap();
        let data = DebugData::load(&bytes).unwrap();
        let info = extract_sites(&data).unwrap();
        assert_eq!(info.sites.len() as u64, dwarfdump_inlined(&bin), "{name}");
        assert!(
            info.sites.len() > 50,
            "{name}: fixture should have many sites"
        );
    }
}

/// perf's name for a DWARF register.
fn perf_reg(reg: u16) -> Option<&'static str> {
    perf_x86_64_register(u64::from(reg))
}

/// Our location in `perf probe` fetch-arg syntax, when perf can express it.
fn perf_form(loc: &Location) -> Option<String> {
    Some(match loc {
        Location::Register { reg } => format!("%{}", perf_reg(*reg)?),
        // perf ignores DW_OP_stack_value after DW_OP_bregN, so both print as a dereference.
        Location::Memory { reg, offset } | Location::RegisterOffsetValue { reg, offset } => {
            format!("{offset:+}(%{})", perf_reg(*reg)?)
        }
        Location::FrameBase {
            offset,
            base: Some(b),
        } => {
            format!("{:+}(%{})", b.offset + offset, perf_reg(b.reg)?)
        }
        _ => return None,
    })
}

/// Compare the sites of every inlined function with at most `max_sites` sites against perf probe.
/// Returns (sites compared, arguments compared, functions skipped).
///
/// With `strict`, every one of our (non-nested) sites must be a perf probe point; without it only
/// perf's points are checked against ours (perf silently drops sites it cannot map to a symbol,
/// e.g. in `.cold` parts of large functions).
fn compare_with_perf(
    list: &[(&str, PathBuf)],
    max_functions: usize,
    strict: bool,
) -> (usize, usize, usize) {
    let mut compared_sites = 0;
    let mut compared_args = 0;
    let mut skipped_functions = 0;
    let mut missed_by_perf = 0;
    for (name, bin) in list {
        let (name, bin) = (*name, bin.as_path());
        let bytes = std::fs::read(bin).unwrap();
        let data = DebugData::load(&bytes).unwrap();
        let info = extract_sites(&data).unwrap();
        let mut by_fn: BTreeMap<&str, Vec<&pcmap_inline::InlineSite>> = BTreeMap::new();
        for s in &info.sites {
            by_fn
                .entry(info.function_name(s.callee))
                .or_default()
                .push(s);
        }
        for (func, sites) in by_fn
            .into_iter()
            .filter(|(_, s)| s.len() <= 128)
            .take(max_functions)
        {
            let f = &info.functions[sites[0].callee as usize];
            let params: Vec<&str> = f.params.iter().filter_map(|p| p.name.as_deref()).collect();
            // perf aborts the whole probe when one argument is unsupported somewhere: fall back
            // to one argument at a time, then to no argument (addresses only).
            let mut runs: Vec<(Vec<&str>, Vec<ProbeEvent>)> = Vec::new();
            if let Some(ev) = perf_probe(bin, &format!("{func} {}", params.join(" "))) {
                runs.push((params.clone(), ev));
            } else {
                for p in &params {
                    if let Some(ev) = perf_probe(bin, &format!("{func} {p}")) {
                        runs.push((vec![*p], ev));
                    }
                }
                if runs.is_empty()
                    && let Some(ev) = perf_probe(bin, func)
                {
                    runs.push((vec![], ev));
                }
            }
            let Some((_, first)) = runs.first() else {
                // perf gives up on some functions ("Failed to find symbol at ..."): nothing to compare.
                skipped_functions += 1;
                continue;
            };
            // Addresses: every inline site is a perf probe point; perf's extra points are
            // out-of-line copies of the function.
            // perf does not descend into an instance of the function it is looking for: sites
            // nested in another site of the same function, or inside its own out-of-line copy
            // (recursion), are not perf probe points.
            let nested = |s: &pcmap_inline::InlineSite| {
                let mut p = s.parent;
                while let Some(i) = p {
                    let ps = &info.sites[i as usize];
                    if ps.callee == s.callee {
                        return true;
                    }
                    p = ps.parent;
                }
                s.caller == Some(s.callee)
            };
            let ours: BTreeSet<u64> = sites
                .iter()
                .filter(|s| !nested(s))
                .filter_map(|s| s.site_addr.and_then(|a| data.file_offset(a)))
                .collect();
            let perfs: BTreeSet<u64> = first.iter().map(|e| e.offset).collect();
            if perfs.is_disjoint(&ours) && sites.iter().all(|s| s.caller.is_some()) && f.out_of_line
            {
                // perf stops at the first matching DIE of a CU: when that is the out-of-line copy
                // (clang emits it before walking the abstract origin) it never sees the inline sites.
                skipped_functions += 1;
                continue;
            }
            for o in &ours {
                if !perfs.contains(o) {
                    assert!(
                        !strict,
                        "{name}: {func}: our site {o:#x} not in perf's {perfs:x?}"
                    );
                    missed_by_perf += 1;
                }
            }
            for p in perfs.difference(&ours) {
                let sym = data
                    .symbols
                    .iter()
                    .rfind(|s| data.file_offset(s.address).is_some_and(|so| so <= *p))
                    .map(|s| s.name);
                assert!(
                    sym.is_some_and(|s| s == func || s.starts_with(&format!("{func}."))),
                    "{name}: {func}: perf point {p:#x} is neither an inline site nor an out-of-line copy ({sym:?})"
                );
            }
            compared_sites += ours.len();
            // Registers.
            for (_, events) in &runs {
                for ev in events {
                    for site in sites.iter().filter(|s| {
                        s.site_addr.and_then(|a| data.file_offset(a)) == Some(ev.offset)
                    }) {
                        for (i, decl) in f.params.iter().enumerate() {
                            let Some(pname) = decl.name.as_deref() else {
                                continue;
                            };
                            let Some(perf_val) = ev.args.get(pname) else {
                                continue;
                            };
                            let loc = &site.params[i];
                            if loc.zero_length_view || matches!(loc.location, Location::NotCovered)
                            {
                                // perf skips zero-length entries and searches later addresses.
                                continue;
                            }
                            if perf_val == "\\deade12d" {
                                assert!(
                                    !loc.location.is_available(),
                                    "{name}: {func}@{:#x} {pname}: perf has none, we have {:?}",
                                    ev.offset,
                                    loc.location
                                );
                                compared_args += 1;
                            } else if let Some(c) = perf_val.strip_prefix('\\') {
                                let v: i64 = c.parse().unwrap();
                                match loc.location {
                                    Location::Constant { value } => assert!(
                                        value as i64 == v
                                            || value as u32 as i64 == v
                                            || value as i32 as i64 == v,
                                        "{name}: {func}@{:#x} {pname}: perf {v}, we {value}",
                                        ev.offset
                                    ),
                                    ref other => panic!(
                                        "{name}: {func}@{:#x} {pname}: perf const {v}, we {other:?}",
                                        ev.offset
                                    ),
                                }
                                compared_args += 1;
                            } else if let Some(ours) = perf_form(&loc.location) {
                                assert_eq!(
                                    &ours, perf_val,
                                    "{name}: {func}@{:#x} {pname} ({:?})",
                                    ev.offset, loc.location
                                );
                                compared_args += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "perf probe: {compared_sites} sites, {compared_args} argument locations compared; \
         {skipped_functions} functions skipped; {missed_by_perf} sites perf did not list"
    );
    (compared_sites, compared_args, skipped_functions)
}

#[test]
fn sites_and_registers_equal_perf_probe() {
    let (sites, args, _) = compare_with_perf(&fixtures(), usize::MAX, true);
    assert!(sites > 100 && args > 100);
}

/// The same comparison on a large external binary: `PCMAP_INLINE_EXTRA_BINARY=/path/libfoo.so
/// cargo test -p pcmap-inline --test oracle -- --ignored` (first 200 functions).
#[test]
#[ignore = "needs PCMAP_INLINE_EXTRA_BINARY"]
fn perf_probe_on_external_binary() {
    let path =
        std::env::var_os("PCMAP_INLINE_EXTRA_BINARY").expect("set PCMAP_INLINE_EXTRA_BINARY");
    let (sites, args, _) = compare_with_perf(&[("external", PathBuf::from(path))], 200, false);
    assert!(sites > 0 && args > 0);
}

/// Every third byte of every function symbol.
fn sample_addresses(data: &DebugData<'_>) -> Vec<u64> {
    let mut v: Vec<u64> = data
        .symbols
        .iter()
        .flat_map(|s| (s.address..s.address + s.size).step_by(3))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn symbolizer_equals_llvm_symbolizer() {
    for (name, bin) in fixtures() {
        let bytes = std::fs::read(&bin).unwrap();
        let data = DebugData::load(&bytes).unwrap();
        let sym = pcmap_inline::symbolize::Symbolizer::new(&data).unwrap();
        let addrs = sample_addresses(&data);
        assert!(
            addrs.len() >= 1000,
            "{name}: only {} addresses",
            addrs.len()
        );
        for inlines in [true, false] {
            let mut ours = String::new();
            for &a in &addrs {
                for f in sym.frames(a, inlines).unwrap() {
                    ours += &format!(
                        "{}\n{}:{}:{}\n",
                        f.function.as_deref().unwrap_or("??"),
                        f.file.as_deref().unwrap_or("??"),
                        f.line,
                        f.column
                    );
                }
                ours += "\n";
            }
            let input: String = addrs.iter().map(|a| format!("{a:#x}\n")).collect();
            let path = pcmap_testkit::scratch_dir(&format!("sym-{name}-{inlines}")).join("addrs");
            std::fs::write(&path, input).unwrap();
            let theirs = run_ok(Command::new("sh").arg("-c").arg(format!(
                "{} --obj={} {} < {}",
                tool("llvm-symbolizer").display(),
                bin.display(),
                if inlines {
                    "--inlining"
                } else {
                    "--no-inlines"
                },
                path.display()
            )));
            let (o, t): (Vec<&str>, Vec<&str>) =
                (ours.split("\n\n").collect(), theirs.split("\n\n").collect());
            let mut bad = 0;
            for (i, (x, y)) in o.iter().zip(&t).enumerate() {
                if x != y {
                    if bad < 5 {
                        eprintln!(
                            "{name} inlines={inlines} {:#x}:\n--ours--\n{x}\n--llvm--\n{y}",
                            addrs.get(i).copied().unwrap_or(0)
                        );
                    }
                    bad += 1;
                }
            }
            assert_eq!(
                bad,
                0,
                "{name} inlines={inlines}: {bad} of {} addresses differ",
                addrs.len()
            );
            assert_eq!(o.len(), t.len());
        }
    }
}

/// One DIE of `llvm-dwarfdump --debug-info` text.
struct DumpDie {
    offset: u64,
    tag: String,
    children: Vec<usize>,
    attrs: Vec<(String, String)>,
}

impl DumpDie {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn parse_dwarfdump(text: &str) -> Vec<DumpDie> {
    let mut dies: Vec<DumpDie> = Vec::new();
    let mut stack: Vec<(usize, usize)> = Vec::new(); // (indent, die index)
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = line.strip_prefix("0x")
            && let Some((off, tail)) = rest.split_once(':')
            && let Ok(offset) = u64::from_str_radix(off, 16)
        {
            let indent = tail.len() - tail.trim_start().len();
            let tag = tail.trim().to_string();
            while stack.last().is_some_and(|&(i, _)| i >= indent) {
                stack.pop();
            }
            if tag == "NULL" {
                continue;
            }
            let idx = dies.len();
            if let Some(&(_, parent)) = stack.last() {
                dies[parent].children.push(idx);
            }
            dies.push(DumpDie {
                offset,
                tag,
                children: Vec::new(),
                attrs: Vec::new(),
            });
            stack.push((indent, idx));
        } else if trimmed.starts_with("DW_AT_") {
            let (name, value) = trimmed
                .split_once(|c: char| c.is_whitespace())
                .unwrap_or((trimmed, ""));
            if let Some(d) = dies.last_mut() {
                d.attrs.push((name.to_string(), value.trim().to_string()));
            }
        } else if !trimmed.is_empty()
            && let Some(d) = dies.last_mut()
            && let Some(a) = d.attrs.last_mut()
        {
            a.1.push('\n');
            a.1.push_str(trimmed);
        }
    }
    dies
}

fn hex_prefix(s: &str) -> Option<u64> {
    let s = s.trim().trim_start_matches('(').trim_start_matches('[');
    let s = s.strip_prefix("0x")?;
    let end = s.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(s.len());
    u64::from_str_radix(&s[..end], 16).ok()
}

/// llvm-dwarfdump's operations without register names: `DW_OP_breg7 RSP+48` -> `breg7+48`.
fn normalize_ops(ops: &str) -> String {
    ops.split(", ")
        .map(|op| {
            let op = op.trim();
            if let Some(inner) = op
                .strip_prefix("DW_OP_entry_value(")
                .and_then(|s| s.strip_suffix(')'))
            {
                return format!("entry_value({})", normalize_ops(inner));
            }
            let mut w = op.split_whitespace();
            let first = w.next().unwrap_or("");
            if let Some(n) = first.strip_prefix("DW_OP_breg") {
                let second = w.next().unwrap_or("");
                let off = &second[second.find(['+', '-']).unwrap_or(second.len())..];
                return format!("breg{n}{off}");
            }
            if let Some(n) = first.strip_prefix("DW_OP_reg") {
                return format!("reg{n}");
            }
            op.to_string()
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The location operations llvm-dwarfdump shows for a parameter at `addr`: `Some(None)` = the
/// list does not cover it, `None` = no location attribute.
fn dump_location_at(die: &DumpDie, addr: u64) -> Option<Option<String>> {
    let v = die.attr("DW_AT_location")?;
    let inner = v
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(v);
    if !inner.contains('\n') {
        return Some(Some(normalize_ops(inner)));
    }
    let mut zero = None;
    for line in inner.lines().skip(1) {
        let Some((range, ops)) = line.split_once("): ") else {
            continue;
        };
        let (a, b) = range.trim_start_matches('[').split_once(", ").unwrap();
        let (a, b) = (hex_prefix(a).unwrap(), hex_prefix(b).unwrap());
        if a <= addr && addr < b {
            return Some(Some(normalize_ops(ops)));
        }
        if a == addr && b == addr && zero.is_none() {
            zero = Some(normalize_ops(ops));
        }
    }
    Some(zero)
}

#[test]
fn site_addresses_and_locations_equal_llvm_dwarfdump() {
    for (name, bin) in fixtures() {
        compare_with_dwarfdump(name, &bin);
    }
}

/// The same on a large external binary (`PCMAP_INLINE_EXTRA_BINARY`, see above).
#[test]
#[ignore = "needs PCMAP_INLINE_EXTRA_BINARY"]
fn llvm_dwarfdump_on_external_binary() {
    let path =
        std::env::var_os("PCMAP_INLINE_EXTRA_BINARY").expect("set PCMAP_INLINE_EXTRA_BINARY");
    compare_with_dwarfdump("external", Path::new(&path));
}

fn compare_with_dwarfdump(name: &str, bin: &Path) {
    {
        let bytes = std::fs::read(bin).unwrap();
        let data = DebugData::load(&bytes).unwrap();
        let info = extract_sites(&data).unwrap();
        let text = run_ok(
            Command::new(tool("llvm-dwarfdump"))
                .arg("--debug-info")
                .arg(bin),
        );
        let dies = parse_dwarfdump(&text);
        let by_offset: BTreeMap<u64, &DumpDie> = dies.iter().map(|d| (d.offset, d)).collect();
        let mut compared: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut at_pc: BTreeMap<&'static str, usize> = BTreeMap::new();
        let params_at = ParamsAt::new(&data);
        for site in &info.sites {
            let d = by_offset[&site.die];
            assert_eq!(d.tag, "DW_TAG_inlined_subroutine");
            // Site address: DW_AT_entry_pc, else DW_AT_low_pc, else the first non-empty range.
            let expected = d
                .attr("DW_AT_entry_pc")
                .and_then(hex_prefix)
                .or_else(|| d.attr("DW_AT_low_pc").and_then(hex_prefix))
                .or_else(|| {
                    d.attr("DW_AT_ranges")?.lines().skip(1).find_map(|l| {
                        let (a, b) = l.trim_start_matches('[').split_once(", ")?;
                        let (a, b) = (hex_prefix(a)?, hex_prefix(b)?);
                        (a < b).then_some(a)
                    })
                });
            assert_eq!(site.site_addr, expected, "{name}: site {:#x}", site.die);
            let addr = site.site_addr.unwrap();
            let callee = &info.functions[site.callee as usize];
            for (p, decl) in site.params.iter().zip(&callee.params) {
                let pname = decl.name.as_deref().unwrap();
                let ctx = format!("{name}: site {:#x}", site.die);
                check_param(&ctx, &dies, d, pname, p, addr, &mut compared);
            }
            // At PCs inside the site (start, middle and last byte of each range), as `pcmap
            // explain` reports the innermost call's parameters.
            for r in &site.ranges {
                if r.start >= r.end {
                    continue;
                }
                for pc in [r.start, r.start + (r.end - r.start) / 2, r.end - 1] {
                    let at = params_at.params(&info, site, pc).unwrap();
                    for (p, decl) in at.iter().zip(&callee.params) {
                        let pname = decl.name.as_deref().unwrap();
                        let ctx = format!("{name}: site {:#x} at pc {pc:#x}", site.die);
                        check_param(&ctx, &dies, d, pname, p, pc, &mut at_pc);
                    }
                }
            }
        }
        eprintln!("{name}: locations equal to llvm-dwarfdump: {compared:?}");
        eprintln!("{name}: locations at PCs inside sites equal to llvm-dwarfdump: {at_pc:?}");
        assert!(compared.values().sum::<usize>() > 100);
        assert!(at_pc.values().sum::<usize>() > 300);
        assert!(at_pc.get("reg").copied().unwrap_or(0) > 50, "{at_pc:?}");
    }
}

/// Compare one parameter location `p` of the site DIE `d` at `addr` with llvm-dwarfdump's
/// description of the parameter (found by name among `d`'s children), counting by class.
fn check_param(
    ctx: &str,
    dies: &[DumpDie],
    d: &DumpDie,
    pname: &str,
    p: &ParamLocation,
    addr: u64,
    compared: &mut BTreeMap<&'static str, usize>,
) {
    let child = d.children.iter().map(|&i| &dies[i]).find(|c| {
        c.tag == "DW_TAG_formal_parameter"
            && c.attr("DW_AT_abstract_origin")
                .is_some_and(|o| o.ends_with(&format!("\"{pname}\")")))
    });
    let ctx = format!("{ctx} {pname}: ours {:?}", p.location);
    let Some(child) = child else {
        assert_eq!(p.location, Location::Missing, "{ctx}");
        *compared.entry("missing").or_default() += 1;
        return;
    };
    if let Some(c) = child.attr("DW_AT_const_value") {
        let c = c.trim_matches(['(', ')']);
        let v: Option<i64> = match c.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok().map(|x| x as i64),
            None => c.parse().ok(),
        };
        match v {
            Some(v) => assert!(
                matches!(p.location, Location::Constant { value } if value as i64 == v || value == v as u32 as u64),
                "{ctx}"
            ),
            // A block: the bytes themselves.
            None => assert!(
                matches!(
                    p.location,
                    Location::Constant { .. } | Location::ConstantBytes { .. }
                ),
                "{ctx}"
            ),
        }
        *compared.entry("const_value").or_default() += 1;
        return;
    }
    let ops = match dump_location_at(child, addr) {
        None => {
            assert_eq!(p.location, Location::NoLocation, "{ctx}");
            *compared.entry("none").or_default() += 1;
            return;
        }
        Some(None) => {
            assert_eq!(p.location, Location::NotCovered, "{ctx}");
            *compared.entry("gap").or_default() += 1;
            return;
        }
        Some(Some(ops)) => ops,
    };
    let ctx = format!("{ctx}, llvm-dwarfdump `{ops}`");
    let expected = match &p.location {
        Location::Register { reg } => format!("reg{reg}"),
        Location::Memory { reg, offset } => format!("breg{reg}{offset:+}"),
        Location::RegisterOffsetValue { reg, offset } => {
            format!("breg{reg}{offset:+},DW_OP_stack_value")
        }
        Location::FrameBase { offset, .. } => format!("DW_OP_fbreg {offset:+}"),
        Location::FrameBaseValue { offset, .. } => {
            format!("DW_OP_fbreg {offset:+},DW_OP_stack_value")
        }
        Location::EntryValue { reg } => {
            format!("entry_value(reg{reg}),DW_OP_stack_value")
        }
        Location::Constant { value } => {
            assert!(!ops.contains("reg") && !ops.contains("fbreg"), "{ctx}");
            let simple = ops
                .strip_suffix(",DW_OP_stack_value")
                .and_then(|o| {
                    o.strip_prefix("DW_OP_lit").map(str::to_string).or_else(|| {
                        o.split_once(' ')
                            .filter(|(op, _)| op.starts_with("DW_OP_const"))
                            .map(|(_, v)| v.to_string())
                    })
                })
                .and_then(|v| {
                    if let Some(h) = v.strip_prefix("0x") {
                        u64::from_str_radix(h, 16).ok()
                    } else {
                        v.parse::<i64>().ok().map(|x| x as u64)
                    }
                });
            if let Some(s) = simple {
                assert_eq!(*value, s, "{ctx}");
            }
            *compared.entry("const").or_default() += 1;
            return;
        }
        Location::NoLocation => {
            assert!(ops.is_empty(), "{ctx}");
            return;
        }
        other => {
            let key = match other {
                Location::Pieces { .. } => "DW_OP_piece",
                Location::ImplicitPointer { .. } => "implicit_pointer",
                Location::ParameterRef { .. } => "parameter_ref",
                Location::Address { .. } | Location::AddressValue { .. } => "DW_OP_addr",
                _ => "",
            };
            // llvm-dwarfdump cannot decode DW_OP_GNU_parameter_ref (0xfa).
            let undecoded_param_ref =
                key == "parameter_ref" && ops.starts_with("<decoding error> fa ");
            assert!(ops.contains(key) || undecoded_param_ref, "{ctx}");
            assert!(
                !matches!(other, Location::Missing | Location::NotCovered),
                "{ctx}"
            );
            *compared.entry("other").or_default() += 1;
            return;
        }
    };
    assert_eq!(ops, expected, "{ctx}");
    *compared.entry(p.location.class().name()).or_default() += 1;
}

/// A release callback (what `pcmap inline encode` uses to drop read `.debug_info` pages) is told
/// about every byte of `.debug_info`, and extraction with one gives the same sites and locations.
#[test]
fn release_callback_covers_debug_info_and_changes_nothing() {
    use std::sync::Mutex;
    for (name, bin) in fixtures() {
        let bytes = std::fs::read(&bin).unwrap();
        let plain = DebugData::load(&bytes).unwrap();
        let expected = extract_sites(&plain).unwrap();
        let released: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
        let file = bytes.as_ptr() as usize;
        let spans = &released;
        let mut data = DebugData::load(&bytes).unwrap();
        data.set_release(move |b| {
            let start = b.as_ptr() as usize - file;
            spans.lock().unwrap().push((start, start + b.len()));
        });
        let info = extract_sites(&data).unwrap();
        assert_eq!(info.sites.len(), expected.sites.len(), "{name}");
        for (a, b) in info.sites.iter().zip(&expected.sites) {
            assert_eq!(
                (a.die, a.callee, a.site_addr, &a.ranges, &a.params),
                (b.die, b.callee, b.site_addr, &b.ranges, &b.params),
                "{name}"
            );
        }
        // Every byte of .debug_info was released (units, then the whole section).
        let mut spans = released.lock().unwrap().clone();
        spans.sort();
        let covered: usize = spans.iter().map(|(s, e)| e - s).max().unwrap_or(0);
        assert!(
            covered as u64 >= plain.debug_info_size,
            "{name}: largest released span {covered} < .debug_info {}",
            plain.debug_info_size
        );
        assert!(spans.len() > 1, "{name}: units are released one by one");
    }
}
