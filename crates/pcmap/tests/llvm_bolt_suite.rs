//! LLVM's own perf2bolt tests as a suite: the cases of `fixtures/llvm-bolt-test/cases.txt`
//! (inputs from llvm-project's `bolt/test/X86`, which pcmap does not redistribute: point
//! `PCMAP_LLVM_BOLT_TEST_DIR` at a copy of llvm-project's `bolt/test` and run
//! `cargo test -p pcmap --test llvm_bolt_suite -- --ignored`; see that directory's README.md) are
//! rebuilt with their LLVM RUN steps, then every `perf2bolt` line runs through perf2bolt 22 and
//! `pcmap perf2bolt`. Compared: exit status, fdata as a set of lines, YAML byte for byte, the
//! statistics lines, and every line pcmap prints must be one perf2bolt prints. All differences of
//! all cases are collected and reported together, each with its commands.

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pcmap_testkit as tk;

/// `%cflags` of LLVM's lit configuration: bolt/test/lit.local.cfg's linker flags and
/// bolt/test/X86/lit.local.cfg's target and `-nostdlib`.
const CFLAGS: &str = "-fuse-ld=lld -Wl,--unresolved-symbols=ignore-all -Wl,--build-id=none \
                      --target=x86_64-unknown-linux-gnu -nostdlib";

#[derive(Debug)]
enum Step {
    /// A build step.
    Run(Vec<String>),
    /// A perf2bolt run, with the reason it is known to differ (`differs` directive).
    Perf2bolt(Vec<String>, Option<String>),
}

#[derive(Debug, Default)]
struct Case {
    name: String,
    source: String,
    /// Build steps and perf2bolt runs in file order.
    steps: Vec<Step>,
    needs: Vec<String>,
    known: Vec<String>,
}

/// `cases.txt` (ours).
fn suite_dir() -> PathBuf {
    tk::fixtures_dir().join("llvm-bolt-test")
}

/// LLVM's `bolt/test` directory (its `X86/` inputs), from `PCMAP_LLVM_BOLT_TEST_DIR`.
fn llvm_test_dir() -> PathBuf {
    let dir = std::env::var_os("PCMAP_LLVM_BOLT_TEST_DIR")
        .map(PathBuf::from)
        .expect(
            "PCMAP_LLVM_BOLT_TEST_DIR must name a copy of llvm-project's bolt/test directory \
             (LLVM's test inputs are not part of pcmap)",
        );
    assert!(
        dir.join("X86").is_dir(),
        "{}: no X86/ directory (expected llvm-project's bolt/test)",
        dir.display()
    );
    dir
}

fn parse_cases(text: &str) -> (Vec<Case>, Vec<String>) {
    let mut cases: Vec<Case> = Vec::new();
    let mut excluded = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        if word == "case" {
            let mut it = rest.split_whitespace();
            cases.push(Case {
                name: it.next().expect("case name").to_string(),
                source: it.next().expect("case source").to_string(),
                ..Case::default()
            });
            continue;
        }
        if word == "excluded" {
            excluded.push(rest.to_string());
            continue;
        }
        let case = cases
            .last_mut()
            .unwrap_or_else(|| panic!("cases.txt line {}: directive before a case", n + 1));
        let args = rest.split_whitespace().map(str::to_string).collect();
        match word {
            "run" => case.steps.push(Step::Run(args)),
            "perf2bolt" => case.steps.push(Step::Perf2bolt(args, None)),
            "differs" => match case.steps.last_mut() {
                Some(Step::Perf2bolt(_, why @ None)) => *why = Some(rest.to_string()),
                _ => panic!(
                    "cases.txt line {}: `differs` not after a perf2bolt run",
                    n + 1
                ),
            },
            "needs" => case.needs.push(rest.to_string()),
            "known" => case.known.push(rest.to_string()),
            _ => panic!("cases.txt line {}: unknown directive `{word}`", n + 1),
        }
    }
    (cases, excluded)
}

/// Expand lit substitutions in one argument (`%cflags` expands to several, done by the caller).
fn substitute(arg: &str, case: &Case, t: &Path) -> String {
    let x86 = llvm_test_dir().join("X86");
    arg.replace("%s", llvm_test_dir().join(&case.source).to_str().unwrap())
        .replace("%p", x86.to_str().unwrap())
        .replace("%S", x86.to_str().unwrap())
        .replace("%t", t.to_str().unwrap())
}

fn expand(args: &[String], case: &Case, t: &Path) -> Vec<String> {
    args.iter()
        .flat_map(|a| {
            if a == "%cflags" {
                CFLAGS
                    .split_whitespace()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            } else {
                vec![substitute(a, case, t)]
            }
        })
        .collect()
}

/// `nm --defined-only` of a binary: name -> value as nm prints it (16 hex digits); the last
/// definition of a name wins, as in link_fdata (the first with `no_redefine`).
fn symbols(obj: &Path, no_redefine: bool) -> HashMap<String, String> {
    let out = tk::run_ok(
        Command::new(tk::tool("llvm-nm"))
            .arg("--defined-only")
            .arg(obj),
    );
    let mut map = HashMap::new();
    for l in out.lines() {
        let mut it = l.splitn(3, ' ');
        let (Some(v), Some(_), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if no_redefine && map.contains_key(name) {
            continue;
        }
        map.insert(name.to_string(), v.to_string());
    }
    map
}

/// bolt/test/link_fdata.py's rules: the lines `# PREFIX: ...` of the source become a profile,
/// `#sym#` replaced by the symbol's value (pre-aggregated records) or, in fdata records
/// (`<0|1> anchor #sym# <0|1> anchor #sym# a b`), by its offset from the anchor symbol (its
/// value when the first field is 0).
fn link_fdata(source: &Path, obj: &Path, out: &Path, prefix: &str, no_redefine: bool) {
    let text = std::fs::read_to_string(source).unwrap();
    let syms = symbols(obj, no_redefine);
    let value = |name: &str| -> &str {
        syms.get(name)
            .unwrap_or_else(|| panic!("link_fdata: symbol {name} not defined in {}", obj.display()))
    };
    let marker = format!("# {prefix}: ");
    let mut profile = String::new();
    for line in text.lines() {
        let Some(rec) = line.strip_prefix(&marker) else {
            continue;
        };
        let fields: Vec<&str> = rec.split(' ').collect();
        if rec.starts_with(['0', '1']) && fields.len() == 8 {
            let loc = |is_sym: &str, anchor: &str, off: &str| -> String {
                let Some(name) = off.strip_prefix('#').and_then(|o| o.strip_suffix('#')) else {
                    return format!("{is_sym} {anchor} {off}");
                };
                if is_sym == "0" {
                    return format!("{is_sym} {anchor} {}", value(name));
                }
                let v = tk::hex(value(name)) - tk::hex(value(anchor));
                format!("{is_sym} {anchor} {v:x}")
            };
            writeln!(
                profile,
                "{} {} {} {}",
                loc(fields[0], fields[1], fields[2]),
                loc(fields[3], fields[4], fields[5]),
                fields[6],
                fields[7]
            )
            .unwrap();
        } else {
            let mut s = String::new();
            let mut rest = rec;
            while let Some(i) = rest.find('#') {
                s.push_str(&rest[..i]);
                let after = &rest[i + 1..];
                let j = after
                    .find('#')
                    .unwrap_or_else(|| panic!("link_fdata: unterminated #symbol# in `{rec}`"));
                s.push_str(value(&after[..j]));
                rest = &after[j + 1..];
            }
            s.push_str(rest);
            writeln!(profile, "{s}").unwrap();
        }
    }
    std::fs::write(out, profile).unwrap();
}

fn describe(cmd: &Command, out: &Output) -> String {
    format!(
        "{cmd:?}\n  exit: {}\n  stdout:\n{}\n  stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn build_step(args: &[String], case: &Case) {
    let (tool, rest) = args.split_first().expect("empty run step");
    if tool == "link_fdata" {
        let no_redefine = rest.first().is_some_and(|a| a == "--no-redefine");
        let rest = &rest[usize::from(no_redefine)..];
        let [src, obj, out, prefix @ ..] = rest else {
            panic!("link_fdata needs [--no-redefine] SOURCE OBJECT OUTPUT [PREFIX]")
        };
        let prefix = prefix.first().map_or("FDATA", String::as_str);
        link_fdata(
            Path::new(src),
            Path::new(obj),
            Path::new(out),
            prefix,
            no_redefine,
        );
        return;
    }
    let mut cmd = Command::new(tk::tool(tool));
    cmd.args(rest);
    let out = tk::run(&mut cmd);
    tk::assert_success(&format!("case {}: build step {cmd:?}", case.name), &out);
}

/// The outputs a perf2bolt argument list names: (index of the path argument, is YAML).
fn outputs(args: &[String]) -> Vec<(usize, bool)> {
    let yaml_format = args.iter().any(|a| a == "--profile-format=yaml");
    let mut outs = Vec::new();
    for (i, a) in args.iter().enumerate() {
        match a.as_str() {
            "-o" => outs.push((i + 1, yaml_format)),
            "-w" => outs.push((i + 1, true)),
            _ => {}
        }
    }
    outs
}

/// One perf2bolt line through both tools; returns the differences found (empty: agreement) and
/// whether the run is pending an option pcmap does not have on this branch.
fn compare_run(case: &Case, args: &[String], k: usize) -> (Vec<String>, bool) {
    let outs = outputs(args);
    let with_outputs = |suffix: &str| -> Vec<String> {
        let mut a = args.to_vec();
        for &(i, _) in &outs {
            a[i] = format!("{}.{suffix}", a[i]);
        }
        a
    };
    let p2b_args = with_outputs("p2b");
    let ours_args = with_outputs("pcmap");
    let mut p2b_cmd = Command::new(tk::tool("perf2bolt"));
    p2b_cmd.args(&p2b_args);
    let p2b = tk::run(&mut p2b_cmd);
    let mut ours_cmd = Command::new(env!("CARGO_BIN_EXE_pcmap"));
    ours_cmd.arg("perf2bolt").args(&ours_args);
    let ours = tk::run(&mut ours_cmd);
    let ours_err = String::from_utf8_lossy(&ours.stderr);
    let header = format!(
        "case {} run {k}:\n--- perf2bolt ---\n{}\n--- pcmap ---\n{}",
        case.name,
        describe(&p2b_cmd, &p2b),
        describe(&ours_cmd, &ours)
    );
    if !ours.status.success() && case.needs.iter().any(|o| ours_err.contains(o.as_str())) {
        return (vec![header], true);
    }
    let mut diffs = Vec::new();
    if p2b.status.success() != ours.status.success() {
        diffs.push("exit status differs".to_string());
    }
    if p2b.status.success() && ours.status.success() {
        for &(i, yaml) in &outs {
            let read = |a: &[String]| std::fs::read(&a[i]).unwrap_or_default();
            let (theirs, mine) = (read(&p2b_args), read(&ours_args));
            if yaml {
                if theirs != mine {
                    diffs.push(format!(
                        "YAML {} differs from {} (byte for byte)",
                        ours_args[i], p2b_args[i]
                    ));
                }
            } else {
                let lines = |b: &[u8]| -> BTreeSet<String> {
                    String::from_utf8_lossy(b)
                        .lines()
                        .map(str::to_string)
                        .collect()
                };
                let (a, b) = (lines(&theirs), lines(&mine));
                if a != b {
                    diffs.push(format!(
                        "fdata differs: only perf2bolt {:?}, only pcmap {:?}",
                        a.difference(&b).collect::<Vec<_>>(),
                        b.difference(&a).collect::<Vec<_>>()
                    ));
                }
            }
        }
        let p2b_out = String::from_utf8_lossy(&p2b.stdout);
        let ours_out = String::from_utf8_lossy(&ours.stdout);
        let is_known = |l: &String| case.known.iter().any(|k| l.contains(k.as_str()));
        let (a, b) = (
            support::stat_lines(&p2b_out),
            support::stat_lines(&ours_out),
        );
        let (a_cmp, b_cmp): (Vec<_>, Vec<_>) = (
            a.iter().filter(|l| !is_known(l)).collect(),
            b.iter().filter(|l| !is_known(l)).collect(),
        );
        if a_cmp != b_cmp {
            diffs.push(format!(
                "statistics lines differ:\n  perf2bolt {a:?}\n  pcmap     {b:?}"
            ));
        } else if a != b {
            eprintln!(
                "case {} run {k}: known difference ({:?}):\n  perf2bolt {a:?}\n  pcmap     {b:?}",
                case.name, case.known
            );
        }
        // Every line pcmap prints is one perf2bolt prints (the `wrote` line names its own
        // output file).
        let theirs: BTreeSet<&str> = p2b_out.lines().collect();
        for l in ours_out.lines() {
            let l_p2b = l.replace(".pcmap", ".p2b");
            if !theirs.contains(l_p2b.as_str()) && !is_known(&l.to_string()) {
                diffs.push(format!("pcmap prints a line perf2bolt does not: {l:?}"));
            }
        }
    }
    if diffs.is_empty() {
        (diffs, false)
    } else {
        diffs.insert(0, header);
        (diffs, false)
    }
}

#[test]
#[ignore = "needs LLVM's bolt/test inputs: set PCMAP_LLVM_BOLT_TEST_DIR (see fixtures/llvm-bolt-test/README.md)"]
fn llvm_bolt_perf2bolt_tests_agree() {
    let text = std::fs::read_to_string(suite_dir().join("cases.txt")).unwrap();
    let (cases, excluded) = parse_cases(&text);
    assert!(!cases.is_empty(), "no case in cases.txt");
    let scratch = tk::scratch_dir("llvm-bolt-suite");
    let (mut runs, mut agreed, mut pending, mut known) = (0, 0, Vec::new(), Vec::new());
    let mut report = String::new();
    for case in &cases {
        let dir = scratch.join(&case.name);
        std::fs::create_dir_all(&dir).unwrap();
        let t = dir.join("t");
        let mut k = 0;
        for step in &case.steps {
            let (args, differs) = match step {
                Step::Run(args) => {
                    build_step(&expand(args, case, &t), case);
                    continue;
                }
                Step::Perf2bolt(args, differs) => (expand(args, case, &t), differs),
            };
            k += 1;
            runs += 1;
            let (diffs, is_pending) = compare_run(case, &args, k);
            if is_pending {
                pending.push(diffs.join("\n"));
            } else if diffs.is_empty() {
                agreed += 1;
                if let Some(why) = differs {
                    eprintln!(
                        "case {} run {k} now agrees: remove its `differs {why}` from cases.txt",
                        case.name
                    );
                }
            } else if let Some(why) = differs {
                known.push(format!("known to differ ({why}):\n{}", diffs.join("\n")));
            } else {
                writeln!(report, "{}\n", diffs.join("\n")).unwrap();
            }
        }
    }
    eprintln!(
        "LLVM BOLT perf2bolt tests: {agreed} of {runs} runs agree, {} known to differ, {} \
         pending an option of another branch, {} excluded:",
        known.len(),
        pending.len(),
        excluded.len()
    );
    for d in &known {
        eprintln!("  {d}");
    }
    for e in &excluded {
        eprintln!("  excluded: {e}");
    }
    for p in &pending {
        eprintln!("  pending:\n{p}");
    }
    assert!(
        report.is_empty(),
        "{} of {runs} runs differ from perf2bolt 22:\n{report}",
        runs - agreed - pending.len() - known.len()
    );
    assert!(agreed > 0, "no run was compared");
}
