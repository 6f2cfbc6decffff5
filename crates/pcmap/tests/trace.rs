//! `pcmap trace` against its oracles: qemu-user and valgrind recordings of the same program must
//! agree, the function pass must count the calls `uftrace report` counts on a `-pg` build, the
//! lldb-format export must equal lldb's own expected JSON (TestTraceExport.py), and the Chrome
//! JSON must be structurally valid for Perfetto (every event has ph/ts/pid/tid, slices on one
//! track nest or are disjoint, tracks are named).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_testkit::{build, build_with, run, run_ok, scratch_dir, tool};
use serde_json::Value;

fn pcmap() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcmap"))
}

fn fixture() -> PathBuf {
    build(
        "trace-recursion",
        &["trace/recursion.c"],
        &["-O1", "-g", "-fno-pie", "-no-pie"],
    )
}

fn record(method: &str, program: &Path, out: &Path) {
    tool(if method == "qemu" {
        "qemu-x86_64"
    } else {
        "valgrind"
    });
    run_ok(
        pcmap()
            .args(["trace", "record", "--method", method, "-o"])
            .arg(out)
            .arg("--")
            .arg(program)
            // Recorded programs may write files (a -pg build writes gmon.out): keep them out of the tree.
            .current_dir(out.parent().unwrap()),
    );
}

/// The addresses of a pcmap text trace.
fn addresses(path: &Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('@') && !l.is_empty())
        .map(pcmap_testkit::hex)
        .collect()
}

#[test]
fn qemu_and_valgrind_traces_agree() {
    let prog = fixture();
    let dir = scratch_dir("trace-agree");
    let (q, v) = (dir.join("q.txt"), dir.join("v.txt"));
    record("qemu", &prog, &q);
    record("valgrind", &prog, &v);
    let (qa, va) = (addresses(&q), addresses(&v));
    assert!(qa.len() > 5000, "too few instructions: {}", qa.len());
    assert_eq!(qa.len(), va.len(), "instruction counts differ");
    assert!(qa == va, "qemu and valgrind traces differ");
    // Both formats summarise to the same super blocks; the binary one goes through the
    // streaming chunk-parallel pass, the text one through the in-memory pass.
    let b = dir.join("q.pcmtrace");
    run_ok(pcmap().args(["trace", "convert"]).arg(&q).arg("-o").arg(&b));
    let s_text: Value = serde_json::from_str(&run_ok(
        pcmap()
            .args(["trace", "summarize", "--json", "--top", "100000"])
            .arg(&v),
    ))
    .unwrap();
    let s_bin: Value = serde_json::from_str(&run_ok(
        pcmap()
            .args(["trace", "summarize", "--json", "--top", "100000"])
            .arg(&b),
    ))
    .unwrap();
    assert_eq!(s_text["insns"], s_bin["insns"]);
    assert_eq!(
        s_text["threads"][0]["super_blocks"],
        s_bin["threads"][0]["super_blocks"]
    );
}

/// `uftrace report` call counts per function.
fn uftrace_calls(program: &Path, dir: &Path) -> HashMap<String, u64> {
    let uftrace = tool("uftrace");
    let data = dir.join("uftrace.data");
    run_ok(
        Command::new(&uftrace)
            .arg("record")
            .arg("-d")
            .arg(&data)
            .arg(program)
            .current_dir(dir),
    );
    let report = run_ok(
        Command::new(&uftrace)
            .args(["report", "-d"])
            .arg(&data)
            .current_dir(dir),
    );
    let mut calls = HashMap::new();
    for line in report.lines() {
        // "   24.557 us   24.557 us         177  fib"
        let toks: Vec<&str> = line.split_whitespace().collect();
        // Time columns carry a unit (us, ms, s); the Calls column is the 5th token.
        if toks.len() == 6
            && toks[1].ends_with('s')
            && let Ok(n) = toks[4].parse::<u64>()
        {
            calls.insert(toks[5].to_string(), n);
        }
    }
    calls
}

#[test]
fn function_pass_call_counts_equal_uftrace() {
    let prog = build_with(
        "gcc",
        "trace-recursion-pg",
        &["trace/recursion.c"],
        &["-O1", "-pg", "-fno-pie", "-no-pie"],
    );
    let dir = scratch_dir("trace-uftrace");
    let want = uftrace_calls(&prog, &dir);
    assert_eq!(want.get("fib"), Some(&177), "uftrace report: {want:?}");
    // pcmap traces the same source built without -pg: a -pg program runs a SIGPROF timer, and a
    // signal that lands inside `fib` makes the handler's return look like one more entry into it,
    // nondeterministically. Call counts are a property of the program, not of the instrumentation.
    let plain = build_with(
        "gcc",
        "trace-recursion",
        &["trace/recursion.c"],
        &["-O1", "-fno-pie", "-no-pie"],
    );
    let t = dir.join("plain.txt");
    record("qemu", &plain, &t);
    let s: Value = serde_json::from_str(&run_ok(
        pcmap()
            .args([
                "trace",
                "summarize",
                "--json",
                "--top",
                "100000",
                "--binary",
            ])
            .arg(&plain)
            .arg(&t),
    ))
    .unwrap();
    let got: HashMap<String, u64> = s["threads"][0]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    for f in ["main", "fib", "is_even", "is_odd", "is_prime"] {
        assert_eq!(
            got.get(f),
            want.get(f),
            "calls of {f}: pcmap {got:?} vs uftrace {want:?}"
        );
    }
}

/// Check the Chrome JSON structure Perfetto needs.
fn check_chrome(json: &Value) -> BTreeMap<(u64, u64), usize> {
    let events = json["traceEvents"].as_array().expect("traceEvents array");
    assert_eq!(json["displayTimeUnit"], "ns");
    let mut named: HashMap<(u64, u64), String> = HashMap::new();
    let mut process_named = false;
    let mut slices: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    for e in events {
        for k in ["ph", "ts", "pid", "tid"] {
            assert!(e.get(k).is_some(), "event without {k}: {e}");
        }
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        match e["ph"].as_str().unwrap() {
            "M" if e["name"] == "thread_name" => {
                named.insert(key, e["args"]["name"].as_str().unwrap().to_string());
            }
            "M" if e["name"] == "process_name" => process_named = true,
            "M" => {}
            "X" => {
                let ts = e["ts"].as_f64().unwrap();
                let dur = e["dur"].as_f64().unwrap();
                assert!(dur >= 0.0);
                slices.entry(key).or_default().push((ts, ts + dur));
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    assert!(process_named, "no process_name event");
    let mut counts = BTreeMap::new();
    for (key, mut v) in slices {
        assert!(named.contains_key(&key), "track {key:?} has no thread_name");
        // Nest or disjoint: sort by start (outer first) and keep a stack of open ends.
        v.sort_by(|a, b| {
            a.0.partial_cmp(&b.0)
                .unwrap()
                .then(b.1.partial_cmp(&a.1).unwrap())
        });
        let mut stack: Vec<f64> = Vec::new();
        for (s, e) in &v {
            while stack.last().is_some_and(|&end| end <= *s) {
                stack.pop();
            }
            if let Some(&end) = stack.last() {
                assert!(
                    *e <= end,
                    "slices overlap on track {key:?}: [{s}, {e}) crosses end {end}"
                );
            }
            stack.push(*e);
        }
        counts.insert(key, v.len());
    }
    counts
}

#[test]
fn chrome_folded_and_flamegraph_exports() {
    let prog = fixture();
    let dir = scratch_dir("trace-export");
    let t = dir.join("q.txt");
    record("qemu", &prog, &t);
    let (json, folded, svg) = (
        dir.join("out.json"),
        dir.join("out.folded"),
        dir.join("out.svg"),
    );
    run_ok(
        pcmap()
            .args(["trace", "export"])
            .arg(&t)
            .arg("--chrome")
            .arg(&json)
            .arg("--folded")
            .arg(&folded)
            .arg("--flamegraph")
            .arg(&svg)
            .arg("--binary")
            .arg(&prog),
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let counts = check_chrome(&v);
    // Layer tracks plus the function track.
    assert!(counts.len() >= 3, "tracks: {counts:?}");
    let names: Vec<String> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("L1 super blocks")),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n.ends_with("functions")), "{names:?}");
    // One X event per unit on every layer track, as many as the summary's layer sizes.
    let summary: Value = serde_json::from_str(&run_ok(
        pcmap().args(["trace", "summarize", "--json"]).arg(&t),
    ))
    .unwrap();
    let layer_units = summary["threads"][0]["layer_units"].as_array().unwrap();
    let by_tid: HashMap<u64, String> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for ((_, tid), n) in &counts {
        let name = &by_tid[tid];
        if let Some(layer) = layer_units
            .iter()
            .find(|l| name.ends_with(l[0].as_str().unwrap()))
        {
            assert_eq!(*n as u64, layer[1].as_u64().unwrap(), "events on {name}");
        }
    }
    assert!(layer_units.len() >= 3, "{layer_units:?}");
    // Folded stacks weigh every instruction once.
    let n = addresses(&t).len() as u64;
    let text = std::fs::read_to_string(&folded).unwrap();
    let total: u64 = text
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, n);
    assert!(
        text.lines().any(|l| l.ends_with(&format!(
            "main;fib;fib;fib {}",
            l.rsplit_once(' ').unwrap().1
        ))),
        "{text}"
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("fib"));
}

fn lldb_trace_text() -> String {
    let mut t = vec![0x400511u64, 0x400518, 0x40051f];
    for _ in 0..4 {
        t.extend([0x400529, 0x40052d, 0x400521, 0x400525]);
    }
    t.extend([0x400529, 0x40052d]);
    t.iter().map(|a| format!("{a:#x}\n")).collect()
}

/// lldb's TestTraceExport.py expectations, checked field by field against the lldb-format export
/// (the library test checks the bytes).
#[test]
fn lldb_format_export_matches_lldb_test() {
    let dir = scratch_dir("trace-lldb");
    let t = dir.join("lldb.txt");
    std::fs::write(&t, lldb_trace_text()).unwrap();
    let out = dir.join("ctf.json");
    run_ok(
        pcmap()
            .args(["trace", "export"])
            .arg(&t)
            .arg("--chrome")
            .arg(&out)
            .args(["--format", "lldb"]),
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let ev = v.as_array().unwrap();
    assert_eq!(ev.len(), 31);
    let layer1: Vec<(String, u64, u64)> = ev[21..]
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["ts"].as_u64().unwrap(),
                e["dur"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut want = vec![("0x400511".to_string(), 0, 3)];
    for i in 0..9u64 {
        want.push((
            if i % 2 == 0 { "0x400529" } else { "0x400521" }.to_string(),
            3 + 2 * i,
            2,
        ));
    }
    assert_eq!(layer1, want);
    assert_eq!(ev[21]["args"]["Metadata"]["Number of Instructions"], 3);
    assert_eq!(
        ev[0],
        serde_json::json!({"dur":1,"name":"0x400511","ph":"X","pid":0,"ts":0})
    );
}

#[test]
fn bad_input_fails_with_location_and_no_output() {
    let dir = scratch_dir("trace-bad");
    let t = dir.join("bad.txt");
    std::fs::write(&t, "0x10\n0x20\nnot-an-address\n").unwrap();
    let out = dir.join("out.json");
    let r = run(pcmap()
        .args(["trace", "export"])
        .arg(&t)
        .arg("--chrome")
        .arg(&out));
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("bad.txt:3:1:"), "{err}");
    assert!(!out.exists());
    let r = run(pcmap()
        .args(["trace", "summarize"])
        .arg(dir.join("missing.txt")));
    assert_eq!(r.status.code(), Some(1));
}
