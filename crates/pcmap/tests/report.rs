//! `pcmap report` checked in a real browser and against the oracles: headless Chromium (Debian
//! package `chromium`) loads the page without console or script errors, its screenshot is not
//! blank, and its DOM lists the hottest functions expected from the fdata perf2bolt 22 writes for
//! the same profile; the JSON twin's per-function counts equal that fdata's (each record counted
//! under the function it is written for: its source, or its target for entries from unknown
//! code), its quality line equals the one llvm-bolt 22 prints reading that fdata, and on a binary
//! BOLTed with `--enable-bat` the names are the functions before BOLT.

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pcmap_testkit::{self as tk, bolt_with_instrumentation, build, run_ok, tool};
use serde_json::Value;

/// Headless Chromium; the test fails (it does not pass silently) when it is missing.
fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser"] {
        for dir in ["/usr/bin", "/usr/local/bin", "/snap/bin"] {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "headless Chromium is needed for the browser check of `pcmap report`: install the Debian \
         package `chromium` (scripts/install-test-deps does)"
    );
}

/// Run Chromium headless on `page` with a fresh profile directory, logging to stderr, bounded
/// by `timeout`; `mode` is `--dump-dom` or `--screenshot=...`.
fn run_chromium(page: &Path, dir: &Path, mode: &str) -> Output {
    let profile = dir.join(format!("chromium-profile-{}", mode.len()));
    let _ = std::fs::remove_dir_all(&profile);
    let mut cmd = Command::new("timeout");
    cmd.arg("180")
        .arg(chromium())
        .args([
            "--headless",
            "--disable-gpu",
            // Tests run as root in CI containers, where Chromium's sandbox cannot start.
            "--no-sandbox",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,1600",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(mode)
        .arg(format!("file://{}", page.display()));
    let out = tk::run(&mut cmd);
    tk::assert_success("chromium", &out);
    let _ = std::fs::remove_dir_all(&profile);
    out
}

/// Console messages and uncaught errors Chromium logged while loading the page.
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

/// Per-function counts of an fdata file: each record under the function it is written for (its
/// source function, or the target for `0 [unknown]` entries; a sample's function in `no_lbr`
/// files). Names are unescaped.
fn fdata_counts(fdata: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in fdata.lines() {
        if line == "boltedcollection" || line.starts_with("no_lbr") {
            continue;
        }
        // Split on unescaped spaces.
        let mut fields: Vec<String> = vec![String::new()];
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        fields.last_mut().unwrap().push(n);
                    }
                }
                ' ' => fields.push(String::new()),
                c => fields.last_mut().unwrap().push(c),
            }
        }
        // Basic samples: `1 name offset count`; branches: `from-loc to-loc mispreds count`.
        assert!(matches!(fields.len(), 4 | 8), "fdata line {line:?}");
        let name = if fields[0] == "0" {
            &fields[4]
        } else {
            &fields[1]
        };
        let count = fields.last().unwrap().parse::<u64>().unwrap();
        *out.entry(name.clone()).or_default() += count;
    }
    out
}

/// The hottest functions of `counts` (count, then name), at most `n`.
fn hottest(counts: &BTreeMap<String, u64>, n: usize) -> Vec<String> {
    let mut v: Vec<(&String, &u64)> = counts.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    v.into_iter().take(n).map(|(k, _)| k.clone()).collect()
}

/// The names in the page's hottest-function table, in order.
fn dom_hottest(dom: &str) -> Vec<String> {
    let section = dom
        .split("<section id=\"hottest\">")
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .expect("the page has a hottest-functions section");
    section
        .split("<td class=\"name\"><code>")
        .skip(1)
        .filter_map(|s| s.split("</code>").next())
        .map(|s| {
            s.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&")
        })
        .collect()
}

/// Decode a PNG screenshot and count its distinct colours.
fn distinct_colours(png_path: &Path) -> usize {
    let file = std::fs::File::open(png_path).expect("screenshot written");
    let decoder = png::Decoder::new(std::io::BufReader::new(file));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("PNG size")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let bytes = &buf[..info.buffer_size()];
    let step = info.color_type.samples() * usize::from(info.bit_depth as u8).div_ceil(8);
    let mut colours: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    for px in bytes.chunks_exact(step) {
        colours.insert(px);
    }
    colours.len()
}

/// Report on `bin` for the pre-aggregated `profile`; checks the page in Chromium and the JSON
/// against perf2bolt 22's fdata. Returns (the JSON, perf2bolt's fdata).
fn check(bin: &Path, tag: &str, profile: &str, extra: &[&str]) -> (Value, String) {
    let dir = tk::scratch_dir(&format!("cli-report-{tag}"));
    let prof = dir.join("prof.pa");
    std::fs::write(&prof, profile).unwrap();
    // The profile options (`--ba`) go to both tools.
    let p2b_extra: Vec<&str> = extra.iter().copied().filter(|a| *a == "--ba").collect();
    let (fdata, _) = support::perf2bolt(bin, &prof, &dir.join("p2b.fdata"), &p2b_extra);
    let expected = fdata_counts(&fdata);
    assert!(expected.len() >= 3, "perf2bolt profiled too few functions");

    let html = dir.join("report.html");
    let json_path = dir.join("report.json");
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_pcmap"))
            .arg("report")
            .arg(bin)
            .arg("-p")
            .arg(&prof)
            .arg("--pa")
            .arg("-o")
            .arg(&html)
            .arg("--json")
            .arg(&json_path)
            .args(extra),
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();

    // The JSON twin's numbers are the fdata's.
    let ours: BTreeMap<String, u64> = json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ours, expected, "per-function counts, see {}", dir.display());
    assert_eq!(
        json["total"].as_u64().unwrap(),
        expected.values().sum::<u64>()
    );

    // The browser: no console or script errors, the expected hottest functions in the DOM.
    let dom_run = run_chromium(&html, &dir, "--dump-dom");
    let stderr = String::from_utf8_lossy(&dom_run.stderr);
    assert_eq!(
        console_errors(&stderr),
        Vec::<&str>::new(),
        "console errors"
    );
    let dom = String::from_utf8_lossy(&dom_run.stdout);
    assert!(
        dom.contains("<pre id=\"script-errors\"></pre>"),
        "script errors recorded in the page: {}",
        dom.split("script-errors").nth(1).unwrap_or("")
    );
    // The heat map section (the map itself is checked against llvm-bolt-heatmap 22 in
    // tests/heatmap.rs): rendered in the page with its buckets.
    let heat = dom
        .split("Heat map (")
        .nth(1)
        .unwrap_or_else(|| panic!("no heat map section in {}", html.display()));
    assert!(
        heat.matches("<rect").count() > 10,
        "heat map without buckets in {}",
        html.display()
    );
    let want = hottest(&expected, 10);
    let shown = dom_hottest(&dom);
    assert_eq!(
        shown[..want.len()],
        want[..],
        "hottest functions in the DOM, see {}",
        html.display()
    );

    // The screenshot is not blank: a page of text, bars and heat colours has many colours.
    let shot = dir.join("report.png");
    let shot_run = run_chromium(&html, &dir, &format!("--screenshot={}", shot.display()));
    let stderr = String::from_utf8_lossy(&shot_run.stderr);
    assert_eq!(
        console_errors(&stderr),
        Vec::<&str>::new(),
        "console errors"
    );
    let colours = distinct_colours(&shot);
    assert!(
        colours > 20,
        "the screenshot has {colours} colours: blank? see {}",
        shot.display()
    );
    (json, fdata)
}

#[test]
fn report_of_generated_program_in_browser() {
    let src = tk::many_functions_source(150);
    let bin = build(
        "report-many",
        &[src.to_str().unwrap()],
        &["-O2", "-g", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let profile = support::control_flow_profile(&bin, 3000, 11);
    let (json, fdata) = check(&bin, "many", &profile, &[]);
    assert_eq!(json["bolted"], false);
    // BOLT's figures: the line llvm-bolt 22 prints for perf2bolt's fdata.
    let line = bolt_quality_line(&bin, &fdata, "many").expect("llvm-bolt printed quality figures");
    assert_eq!(json["quality"]["bolt_line"].as_str(), Some(line.as_str()));
    // Block heat was drawn for the hottest functions with a CFG.
    assert!(
        json["functions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["cfg"].is_object())
    );
}

/// The profile-quality line llvm-bolt 22 prints when it reads `fdata` with `bin`.
fn bolt_quality_line(bin: &Path, fdata: &str, tag: &str) -> Option<String> {
    let dir = tk::scratch_dir(&format!("cli-report-{tag}-bolt"));
    let fdata_path = dir.join("p2b.fdata");
    std::fs::write(&fdata_path, fdata).unwrap();
    support::bolt_quality_line(bin, &fdata_path, &dir)
}

const BOLT_FLAGS: &[&str] = &[
    "--enable-bat",
    "-reorder-blocks=ext-tsp",
    "-reorder-functions=cdsort",
    "-split-functions",
    "-split-all-cold",
];

#[test]
fn report_of_bolted_binary_names_functions_before_bolt() {
    // The BAT fixture of `bat.rs` and `perf2bolt_bat.rs` (same cache entries).
    let binary = build(
        "bat-loops",
        &["bat/loops.c"],
        &["-O2", "-g0", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let bolted = bolt_with_instrumentation(&binary, &["300000", "18"], BOLT_FLAGS);
    let funcs = support::disassemble(&bolted);
    let profile = support::generate(&funcs, 3000, 21, false);
    let (json, fdata) = check(&bolted, "bat", &profile, &[]);
    assert!(
        fdata.starts_with("boltedcollection\n"),
        "perf2bolt used BAT"
    );
    assert_eq!(json["bolted"], true);
    assert!(
        json["quality"].is_null(),
        "no figures without the input binary"
    );

    // With the input binary: block heat on its CFGs, and BOLT's figures equal to llvm-bolt's
    // reading the boltedcollection fdata with the input binary.
    let profile = support::control_flow_profile(&bolted, 3000, 22);
    let input = binary.to_str().unwrap();
    let (json, fdata) = check(&bolted, "bat-input", &profile, &["--input-binary", input]);
    let line = bolt_quality_line(&binary, &fdata, "bat-input");
    assert!(line.is_some(), "llvm-bolt printed no quality figures");
    assert_eq!(json["quality"]["bolt_line"].as_str(), line.as_deref());
    assert!(
        json["functions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["cfg"].is_object()),
        "block heat on the input binary's CFGs"
    );
}

#[test]
fn report_of_basic_samples_in_browser() {
    let src = tk::many_functions_source(150);
    let bin = build(
        "report-many",
        &[src.to_str().unwrap()],
        &["-O2", "-g", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let profile = support::generate(&support::disassemble(&bin), 4000, 12, true);
    let (json, fdata) = check(&bin, "samples", &profile, &["--ba"]);
    assert!(fdata.starts_with("no_lbr"), "perf2bolt read basic samples");
    assert_eq!(json["kind"], "samples");
    assert!(json["inline"].is_array(), "the binary has DWARF");
}

/// llvm-symbolizer 22's inline frames (`--inlining`, JSON) of `addresses` in `bin`: for each
/// address, the function names of every frame but the outermost (the inlined callees).
fn inlined_callees(bin: &Path, addresses: &[u64]) -> Vec<Vec<String>> {
    let mut cmd = Command::new(tool("llvm-symbolizer"));
    cmd.arg("--inlining")
        .arg("--output-style=JSON")
        .arg(format!("--obj={}", bin.display()));
    for a in addresses {
        cmd.arg(format!("{a:#x}"));
    }
    let out = run_ok(&mut cmd);
    let all: Value = serde_json::from_str(&out).expect("llvm-symbolizer JSON");
    all.as_array()
        .expect("one JSON array for the command-line addresses")
        .iter()
        .map(|v| {
            let frames = v["Symbol"].as_array().unwrap();
            frames[..frames.len().saturating_sub(1)]
                .iter()
                .map(|f| f["FunctionName"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn report_attributes_counts_to_inlined_callees_like_llvm_symbolizer() {
    let bin = build(
        "report-inline",
        &["inline/inline.c"],
        &["-O2", "-g", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let profile = support::control_flow_profile(&bin, 3000, 5);
    let dir = tk::scratch_dir("cli-report-inline");
    let prof = dir.join("prof.pa");
    std::fs::write(&prof, &profile).unwrap();
    let (fdata, _) = support::perf2bolt(&bin, &prof, &dir.join("p2b.fdata"), &[]);
    let json_path = dir.join("report.json");
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_pcmap"))
            .arg("report")
            .arg(&bin)
            .args(["--pa", "-p"])
            .arg(&prof)
            .arg("-o")
            .arg(dir.join("report.html"))
            .arg("--json")
            .arg(&json_path),
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    // Function addresses from llvm-nm (BOLT's `name/N` names local functions).
    let nm = run_ok(
        Command::new(tool("llvm-nm"))
            .arg("--defined-only")
            .arg(&bin),
    );
    let mut by_name: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for l in nm.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 3 && matches!(f[1], "t" | "T") {
            by_name
                .entry(f[2].to_string())
                .or_default()
                .push(u64::from_str_radix(f[0], 16).unwrap());
        }
    }
    // The counted addresses: the source of every fdata record (not entries from unknown code).
    let mut weighted: Vec<(u64, u64)> = Vec::new();
    for line in fdata.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() != 8 || f[0] != "1" {
            continue;
        }
        let base = f[1].split('/').next().unwrap();
        // PLT entries have no symbol (and no DWARF).
        let Some(addrs) = by_name.get(base) else {
            assert!(f[1].contains("PLT"), "no symbol for {}", f[1]);
            continue;
        };
        assert_eq!(addrs.len(), 1, "{base} is not unique in the fixture");
        weighted.push((
            addrs[0] + u64::from_str_radix(f[2], 16).unwrap(),
            f[7].parse().unwrap(),
        ));
    }
    let frames = inlined_callees(&bin, &weighted.iter().map(|w| w.0).collect::<Vec<_>>());
    assert_eq!(frames.len(), weighted.len());
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for ((_, count), callees) in weighted.iter().zip(&frames) {
        let mut seen: Vec<&String> = Vec::new();
        for c in callees {
            if !seen.contains(&c) {
                seen.push(c);
                *expected.entry(c.clone()).or_default() += count;
            }
        }
    }
    assert!(expected.len() >= 3, "too few inlined callees were hit");
    let ours: BTreeMap<String, u64> = json["inline"]
        .as_array()
        .expect("an inline section for a binary with DWARF")
        .iter()
        .map(|i| {
            (
                i["callee"].as_str().unwrap().to_string(),
                i["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ours, expected, "see {}", dir.display());
}

/// `(name, hash)` of every function of a perf2bolt YAML profile.
fn yaml_hashes(yaml: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut name: Option<String> = None;
    for l in yaml.lines() {
        let t = l.trim_start();
        if let Some(n) = t.strip_prefix("- name:") {
            name = Some(n.trim().trim_matches('\'').to_string());
        } else if let Some(h) = t.strip_prefix("hash:")
            && l.starts_with("    hash:")
            && let Some(n) = name.take()
        {
            out.insert(n, h.trim().to_string());
        }
    }
    out
}

#[test]
fn report_stale_share_follows_perf2bolt_function_hashes() {
    // v2 changes the code of f7 and f10 (other instructions) and drops f14 (renamed).
    let v1_src = tk::many_functions_source(30);
    let v1_text = std::fs::read_to_string(&v1_src).unwrap();
    let v2_text = v1_text
        .replace("a += k * 7;", "a += k / 7 + x;")
        .replace("a += k * 10;", "a += k / 10 + x;")
        .replace("f14", "g14");
    assert_ne!(v1_text, v2_text);
    let v2_src = tk::generated_source("report-stale-v2.c", &v2_text);
    let flags = &["-O2", "-g0", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];
    let v1 = build("report-stale-v1", &[v1_src.to_str().unwrap()], flags);
    let v2 = build("report-stale-v2", &[v2_src.to_str().unwrap()], flags);
    let dir = tk::scratch_dir("cli-report-stale");
    // The oracle: perf2bolt 22's YAML hashes of both builds (profiles touching every function).
    let prof1 = dir.join("v1.pa");
    std::fs::write(&prof1, support::control_flow_profile(&v1, 3000, 3)).unwrap();
    let (fdata, _) = support::perf2bolt(
        &v1,
        &prof1,
        &dir.join("v1.fdata"),
        &["-w", dir.join("v1.yaml").to_str().unwrap()],
    );
    let prof2 = dir.join("v2.pa");
    std::fs::write(
        &prof2,
        support::generate(&support::disassemble(&v2), 20000, 4, false),
    )
    .unwrap();
    support::perf2bolt(
        &v2,
        &prof2,
        &dir.join("v2.fdata"),
        &["-w", dir.join("v2.yaml").to_str().unwrap()],
    );
    let h1 = yaml_hashes(&std::fs::read_to_string(dir.join("v1.yaml")).unwrap());
    let h2 = yaml_hashes(&std::fs::read_to_string(dir.join("v2.yaml")).unwrap());
    let nm = run_ok(Command::new(tool("llvm-nm")).arg("--defined-only").arg(&v2));
    let v2_names: Vec<&str> = nm
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let counts = fdata_counts(&fdata);
    let mut expected: BTreeMap<String, (u64, &str)> = BTreeMap::new();
    for (name, hash) in &h1 {
        let Some(&count) = counts.get(name) else {
            continue;
        };
        match h2.get(name) {
            Some(h) if h != hash => {
                expected.insert(name.clone(), (count, "changed"));
            }
            Some(_) => {}
            None => {
                // BOLT names local functions `name/N`.
                let base = name.split('/').next().unwrap();
                assert!(!v2_names.contains(&base), "v2's profile misses {name}");
                expected.insert(name.clone(), (count, "missing"));
            }
        }
    }
    assert!(expected.values().any(|e| e.1 == "missing"), "{expected:?}");
    assert!(
        expected.values().filter(|e| e.1 == "changed").count() >= 2,
        "{expected:?}"
    );

    let json_path = dir.join("report.json");
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_pcmap"))
            .arg("report")
            .arg(&v1)
            .args(["--pa", "-p"])
            .arg(&prof1)
            .arg("-o")
            .arg(dir.join("report.html"))
            .arg("--json")
            .arg(&json_path)
            .arg("--new-binary")
            .arg(&v2),
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let stale = &json["stale"];
    let ours: BTreeMap<String, (u64, &str)> = stale["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                (f["count"].as_u64().unwrap(), f["status"].as_str().unwrap()),
            )
        })
        .collect();
    assert_eq!(ours, expected, "see {}", dir.display());
    let total: u64 = counts.values().sum();
    let stale_count: u64 = expected.values().map(|e| e.0).sum();
    assert_eq!(stale["total"].as_u64(), Some(total));
    let share = stale["stale_share"].as_f64().unwrap();
    assert!((share - stale_count as f64 / total as f64).abs() < 1e-12);
}

#[test]
fn report_rejects_a_malformed_profile_and_writes_nothing() {
    let dir = tk::scratch_dir("cli-report-bad");
    let prof = dir.join("bad.pa");
    std::fs::write(&prof, "B 401000 zz 1 0\n").unwrap();
    let html = dir.join("report.html");
    let out = tk::run(
        Command::new(env!("CARGO_BIN_EXE_pcmap"))
            .arg("report")
            .arg(tk::workspace_root().join("examples/prog"))
            .args(["--pa", "-p"])
            .arg(&prof)
            .arg("-o")
            .arg(&html),
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.pa") && stderr.contains("line 1"),
        "the error names the file and line: {stderr}"
    );
    assert!(!html.exists(), "no report is left behind");
}

/// The `(blocks, samples)` pairs of llvm-bolt 22's `inference found <kind> match for X% of basic
/// blocks (A out of B stale) responsible for Y% samples (C out of D stale)` lines, by kind
/// (`an exact`, `a call`, `a loose`), plus `stale` → (B, D).
fn inference_lines(stdout: &str) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for l in stdout.lines() {
        let Some(rest) = l.strip_prefix("BOLT-INFO: inference found ") else {
            continue;
        };
        let kind = rest.split(" match for ").next().unwrap().to_string();
        let nums: Vec<u64> = rest
            .split(['(', ')', ' '])
            .filter_map(|w| w.parse().ok())
            .collect();
        // A, B, C, D in order (the percentages do not parse as integers).
        assert_eq!(nums.len(), 4, "unexpected line: {l}");
        out.insert(kind, (nums[0], nums[2]));
        let stale = (nums[1], nums[3]);
        assert_eq!(*out.entry("stale".into()).or_insert(stale), stale, "{l}");
    }
    out
}

/// llvm-bolt 22 `--infer-stale-profile`, reading perf2bolt 22's YAML profile of `v1` (for a
/// control-flow profile of `records` records) into the new build `v2`, prints how many of the
/// stale functions' profiled blocks (and their `exec` samples) it matched exactly, by callees and
/// by opcodes; `pcmap report --new-binary` gives the same numbers, and its changed functions are
/// those llvm-bolt lists with `-report-stale`. Returns the numbers (stale, exact, call, loose).
fn assert_stale_matching_as_llvm_bolt(
    v1: &Path,
    v2: &Path,
    tag: &str,
    records: usize,
) -> [(u64, u64); 4] {
    let dir = tk::scratch_dir(&format!("cli-report-infer-{tag}"));
    let prof = dir.join("v1.pa");
    std::fs::write(&prof, support::control_flow_profile(v1, records, 5)).unwrap();
    let yaml = dir.join("v1.yaml");
    support::perf2bolt(
        v1,
        &prof,
        &dir.join("v1.fdata"),
        &["-w", yaml.to_str().unwrap()],
    );
    let llvm_bolt = |extra: &[&str]| {
        run_ok(
            Command::new(tool("llvm-bolt"))
                .arg(v2)
                .arg("-o")
                .arg(dir.join("v2.bolt"))
                .arg("--data")
                .arg(&yaml)
                .args(extra),
        )
    };
    let bolt_out = llvm_bolt(&["--infer-stale-profile", "-v=1"]);
    let oracle = inference_lines(&bolt_out);
    let get = |k: &str| {
        *oracle
            .get(k)
            .unwrap_or_else(|| panic!("no `{k}` line:\n{bolt_out}"))
    };
    let expected = [get("stale"), get("an exact"), get("a call"), get("a loose")];

    let json_path = dir.join("report.json");
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_pcmap"))
            .arg("report")
            .arg(v1)
            .args(["--pa", "-p"])
            .arg(&prof)
            .arg("-o")
            .arg(dir.join("report.html"))
            .arg("--json")
            .arg(&json_path)
            .arg("--new-binary")
            .arg(v2),
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let b = &json["stale"]["blocks"];
    let pair = |k: &str| {
        (
            b[k]["blocks"].as_u64().unwrap(),
            b[k]["samples"].as_u64().unwrap(),
        )
    };
    assert_eq!(
        [pair("stale"), pair("exact"), pair("call"), pair("loose")],
        expected,
        "(blocks, samples) stale, exact, call, loose: pcmap vs llvm-bolt; see {}",
        dir.display()
    );

    // The function level, against `-report-stale` (without inference), which prints a function
    // with several names as `name(*N)`.
    let report_out = llvm_bolt(&["-report-stale"]);
    let listed: std::collections::BTreeSet<&str> = report_out
        .lines()
        .skip_while(|l| !l.contains("Functions with stale profile:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let l = l.trim();
            match l.rfind("(*") {
                Some(i) if l.ends_with(')') => &l[..i],
                _ => l,
            }
        })
        .collect();
    let changed: std::collections::BTreeSet<&str> = json["stale"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] == "changed")
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(!listed.is_empty(), "{report_out}");
    assert_eq!(
        changed, listed,
        "pcmap's changed functions vs llvm-bolt -report-stale"
    );

    // The page states the block matching too.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let (stale, _, _, _) = (expected[0], 0, 0, 0);
    assert!(
        html.contains(&format!("list {} blocks with {} samples", stale.0, stale.1)),
        "the page states the block matching"
    );
    expected
}

/// Generated C: v2 changes a loop body (f7), one immediate of a switch case (f9) and the block
/// holding a call (f11). crtstuff's `deregister_tm_clones` is matched too though llvm-bolt does not
/// list it as stale: it reads perf2bolt's profile of it as stale (its `jmp *%rax` is no tail call
/// outside strict mode) but does not optimize the function.
#[test]
fn report_block_matching_equals_llvm_bolt_stale_inference() {
    let v1_src = tk::many_functions_source(30);
    let v1_text = std::fs::read_to_string(&v1_src).unwrap();
    let v2_text = v1_text
        .replace("a += k * 7;", "a += k / 7 + x;")
        .replace("case 1: return x + 9;", "case 1: return x + 999;")
        .replace("f10(x - 1) + 1", "f10(x - 3) + 5");
    assert_eq!(v2_text.matches("999").count(), 1);
    assert!(v2_text.contains("f10(x - 3) + 5"));
    let v2_src = tk::generated_source("report-infer-v2.c", &v2_text);
    let flags = &["-O2", "-g0", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];
    let v1 = build("report-infer-v1", &[v1_src.to_str().unwrap()], flags);
    let v2 = build("report-infer-v2", &[v2_src.to_str().unwrap()], flags);
    let [stale, exact, call, loose] =
        assert_stale_matching_as_llvm_bolt(&v1, &v2, "generated", 4000);
    assert!(
        stale.0 > 0 && exact.0 > 0 && call.0 > 0 && loose.0 > 0,
        "every kind of match occurs: {stale:?} {exact:?} {call:?} {loose:?}"
    );
}

/// Real C: zstd's library, rebuilt with `-fno-unroll-loops` (dozens of functions change).
#[test]
fn report_block_matching_equals_llvm_bolt_on_zstd() {
    let flags = ["-O2", "-g0", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];
    let v1 = tk::build_zstd("report-zstd-v1", &flags);
    let mut flags2 = flags.to_vec();
    flags2.push("-fno-unroll-loops");
    let v2 = tk::build_zstd("report-zstd-v2", &flags2);
    let [stale, exact, _, loose] = assert_stale_matching_as_llvm_bolt(&v1, &v2, "zstd", 30000);
    assert!(
        stale.0 >= 100 && exact.0 > 0 && loose.0 > 0,
        "{stale:?} {exact:?} {loose:?}"
    );
}
