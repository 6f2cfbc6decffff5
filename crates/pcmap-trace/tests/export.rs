//! Chrome export structure with real timestamps, and the function pass with a symbol table only
//! (no instruction kinds: calls are transfers to an entry, returns land just after a call site).

use pcmap_trace::export::{ChromeOptions, ThreadView, folded_stacks, write_chrome};
use pcmap_trace::htr::function::CallTree;
use pcmap_trace::htr::{BuildOptions, Htr, Layer};
use pcmap_trace::symbols::SymbolTable;
use pcmap_trace::trace::Trace;
use serde_json::Value;

/// main (0x100) calls f (0x200) twice in a loop; f calls g (0x300).
fn trace_text() -> String {
    let mut s = String::from("# pcmap-trace v1\n@tid 7\n");
    let mut ts = 1000u64;
    let mut emit = |a: u64, s: &mut String| {
        s.push_str(&format!("@ts {ts}\n{a:#x}\n"));
        ts += 3;
    };
    for a in [0x100, 0x104] {
        emit(a, &mut s);
    }
    for _ in 0..2 {
        emit(0x108, &mut s); // call f
        for a in [0x200, 0x204] {
            emit(a, &mut s); // 0x204: call g
        }
        for a in [0x300, 0x303] {
            emit(a, &mut s); // g, ret
        }
        emit(0x209, &mut s); // back in f, ret
        emit(0x10d, &mut s); // back in main
    }
    emit(0x110, &mut s);
    s
}

fn symbols() -> SymbolTable {
    SymbolTable::new([
        (0x100, 0x40, "main".to_string()),
        (0x200, 0x20, "f".to_string()),
        (0x300, 0x10, "g".to_string()),
    ])
}

#[test]
fn function_pass_with_symbols_only() {
    let trace = Trace::read(trace_text().as_bytes(), "t").unwrap();
    let t = &trace.threads[0];
    let tree = CallTree::build(&Layer::instructions(t), &symbols());
    let count = |n: &str| {
        tree.functions
            .iter()
            .position(|f| f.name == n)
            .map(|i| tree.call_counts[i])
    };
    assert_eq!(count("f"), Some(2));
    assert_eq!(count("g"), Some(2));
    assert_eq!(count("main"), Some(0));
    let folded = folded_stacks(&tree, None);
    assert_eq!(folded, vec!["main 7", "main;f 6", "main;f;g 4"]);
}

#[test]
fn chrome_with_timestamps_nests_and_names_tracks() {
    let trace = Trace::read(trace_text().as_bytes(), "t").unwrap();
    let t = &trace.threads[0];
    let htr = Htr::build(t, &BuildOptions::default());
    let code = symbols();
    let tree = CallTree::build(&htr.layers[0], &code);
    let view = ThreadView {
        thread: t,
        htr: &htr,
        calls: Some(&tree),
    };
    let mut out = Vec::new();
    let opts = ChromeOptions {
        pid: 42,
        process_name: "demo".into(),
        layers: Some(vec![0, 1]),
        functions: true,
    };
    write_chrome(&mut out, &[view], &code, &opts).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let mut tracks = std::collections::BTreeMap::<u64, Vec<(f64, f64)>>::new();
    let mut names = std::collections::BTreeMap::new();
    for e in events {
        for k in ["ph", "ts", "pid", "tid"] {
            assert!(e.get(k).is_some(), "{e}");
        }
        assert_eq!(e["pid"], 42);
        let tid = e["tid"].as_u64().unwrap();
        if e["name"] == "thread_name" {
            names.insert(tid, e["args"]["name"].as_str().unwrap().to_string());
        }
        if e["ph"] == "X" {
            let ts = e["ts"].as_f64().unwrap();
            tracks
                .entry(tid)
                .or_default()
                .push((ts, ts + e["dur"].as_f64().unwrap()));
        }
    }
    assert_eq!(
        names.values().cloned().collect::<Vec<_>>(),
        vec![
            "tid 7 · L0 instructions",
            "tid 7 · L1 super blocks",
            "tid 7 · functions"
        ]
    );
    // Real time: the first instruction is at 1000 ns = 1 µs, the 17th starts at 1000 + 3 * 16 ns.
    let l0 = &tracks[&1000];
    assert_eq!(l0.len(), 17);
    assert!((l0[0].0 - 1.0).abs() < 1e-9);
    assert!((l0[16].0 - 1.048).abs() < 1e-9);
    // Layer tracks tile; the function track nests.
    for (tid, v) in &tracks {
        let mut v = v.clone();
        v.sort_by(|a, b| {
            a.0.partial_cmp(&b.0)
                .unwrap()
                .then(b.1.partial_cmp(&a.1).unwrap())
        });
        let mut stack: Vec<f64> = Vec::new();
        for (s, e) in v {
            while stack.last().is_some_and(|&end| end <= s + 1e-9) {
                stack.pop();
            }
            if let Some(&end) = stack.last() {
                assert!(e <= end + 1e-9, "overlap on track {tid}");
            }
            stack.push(e);
        }
    }
}
