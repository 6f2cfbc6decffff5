//! Chrome Trace Event JSON in the *object* format, which Perfetto UI and chrome://tracing load:
//! `{"traceEvents":[...],"displayTimeUnit":"ns","otherData":{...}}`.
//!
//! * `pid` is the traced process; every (thread, layer) pair is its own track (`tid`), named by
//!   `M` `thread_name` events and ordered by `thread_sort_index`; the process is named by a
//!   `process_name` event.
//! * Each layer's units are `X` slices that tile the trace; the function track holds one slice
//!   per call, nested by call depth (outer slices first when they start together).
//! * `ts`/`dur` are real time (µs, from the trace's timestamps, interpolated per instruction)
//!   when the trace has timestamps, otherwise instruction indices (1 instruction = 1 µs).
//! * `args`: `addr`, `symbol`, `insns`, `occurrence` (1-based, per block), `calls` (per
//!   callee, sorted by name), and `iterations` for loops.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::htr::function::CallTree;
use crate::htr::{Htr, LayerKind};
use crate::symbols::CodeInfo;
use crate::trace::ThreadTrace;

/// What to export.
#[derive(Debug, Clone)]
pub struct ChromeOptions {
    /// The traced process id (`pid` of every event).
    pub pid: u64,
    /// The process track's name.
    pub process_name: String,
    /// Layers to export (0 = instructions); `None` = every block layer.
    pub layers: Option<Vec<usize>>,
    /// Export the function track when a call tree is given.
    pub functions: bool,
}

/// One thread to export.
pub struct ThreadView<'a> {
    /// The thread's instruction layer (for timestamps and its id).
    pub thread: &'a ThreadTrace,
    /// Its layers.
    pub htr: &'a Htr,
    /// Its call tree, if the function pass ran.
    pub calls: Option<&'a CallTree>,
}

/// Maps instruction indices to time: real nanoseconds when the thread has timestamps.
struct Clock {
    points: Vec<(u64, u64)>,
    rate: f64,
}

impl Clock {
    fn new(thread: &ThreadTrace, starts: &[u64]) -> Option<Clock> {
        if thread.timestamps.is_empty() {
            return None;
        }
        let points: Vec<(u64, u64)> = thread
            .timestamps
            .iter()
            .map(|&(unit, ns)| {
                (
                    starts
                        .get(unit as usize)
                        .copied()
                        .unwrap_or(*starts.last().unwrap_or(&0)),
                    ns,
                )
            })
            .collect();
        let (f, l) = (points[0], points[points.len() - 1]);
        let rate = if l.0 > f.0 {
            (l.1 - f.1) as f64 / (l.0 - f.0) as f64
        } else {
            1.0
        };
        Some(Clock { points, rate })
    }

    fn ns(&self, i: u64) -> u64 {
        let k = self.points.partition_point(|p| p.0 <= i);
        if k == 0 {
            return self.points[0].1;
        }
        let (i0, t0) = self.points[k - 1];
        match self.points.get(k) {
            Some(&(i1, t1)) if i1 > i0 => {
                t0 + ((t1 - t0) as u128 * (i - i0) as u128 / (i1 - i0) as u128) as u64
            }
            _ => t0 + ((i - i0) as f64 * self.rate) as u64,
        }
    }
}

#[derive(Serialize)]
struct XEvent<'a> {
    name: &'a str,
    cat: &'a str,
    ph: &'static str,
    pid: u64,
    tid: u64,
    ts: Value,
    dur: Value,
    args: Value,
}

fn time(clock: &Option<Clock>, i: u64) -> u64 {
    match clock {
        Some(c) => c.ns(i),
        None => i,
    }
}

fn to_json_time(clock: &Option<Clock>, v: u64) -> Value {
    match clock {
        // Nanoseconds as microseconds with three decimals.
        Some(_) => json!(v as f64 / 1000.0),
        None => json!(v),
    }
}

struct Out<'w> {
    w: &'w mut dyn Write,
    first: bool,
}

impl Out<'_> {
    fn event(&mut self, v: &impl Serialize) -> io::Result<()> {
        if !self.first {
            self.w.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut *self.w, v).map_err(io::Error::other)
    }
}

/// Write the Chrome JSON object for `threads`.
pub fn write_chrome(
    out: &mut dyn Write,
    threads: &[ThreadView<'_>],
    code: &dyn CodeInfo,
    opts: &ChromeOptions,
) -> io::Result<()> {
    out.write_all(b"{\"traceEvents\":[\n")?;
    let mut o = Out {
        w: out,
        first: true,
    };
    let pid = opts.pid;
    o.event(&json!({"name":"process_name","ph":"M","pid":pid,"tid":0,"ts":0,"args":{"name":opts.process_name}}))?;
    for (k, view) in threads.iter().enumerate() {
        let base = (k as u64 + 1) * 1000;
        let tname = match view.thread.tid {
            Some(t) => format!("tid {t}"),
            None => format!("thread {}", k + 1),
        };
        let starts0 = view.htr.layers[0].starts();
        let clock = Clock::new(view.thread, &starts0);
        let layers: Vec<usize> = match &opts.layers {
            Some(l) => l
                .iter()
                .copied()
                .filter(|&n| n < view.htr.layers.len())
                .collect(),
            None => (1..view.htr.layers.len()).collect(),
        };
        for &n in &layers {
            let layer = &view.htr.layers[n];
            let tid = base + n as u64;
            let track = format!("{tname} · L{n} {}", layer.kind.name());
            o.event(&json!({"name":"thread_name","ph":"M","pid":pid,"tid":tid,"ts":0,"args":{"name":track}}))?;
            o.event(&json!({"name":"thread_sort_index","ph":"M","pid":pid,"tid":tid,"ts":0,"args":{"sort_index":tid}}))?;
            let cat = format!("L{n}");
            let mut occurrence = vec![0u64; layer.defs.len()];
            let mut t = 0u64;
            for &u in &layer.units {
                let d = &layer.defs[u as usize];
                occurrence[u as usize] += 1;
                let sym = if d.gap.is_some() {
                    String::new()
                } else {
                    code.describe(d.first_addr)
                };
                let name = match (d.gap, layer.kind) {
                    (Some(r), _) => format!("gap: {}", r.name()),
                    (None, LayerKind::Loops) if d.repeat > 1 => format!("loop ×{} {sym}", d.repeat),
                    _ => sym.clone(),
                };
                let mut args = Map::new();
                args.insert("addr".into(), json!(format!("{:#x}", d.first_addr)));
                args.insert("symbol".into(), json!(sym));
                args.insert("insns".into(), json!(d.insns));
                args.insert("occurrence".into(), json!(occurrence[u as usize]));
                if d.repeat > 1 {
                    args.insert("iterations".into(), json!(d.repeat));
                    args.insert("body_units".into(), json!(d.children.len()));
                }
                if let Some(tree) = view.calls {
                    let calls: BTreeMap<String, u64> =
                        tree.calls_in(t, t + d.insns).into_iter().collect();
                    args.insert("calls".into(), json!(calls));
                }
                let (s, e) = (time(&clock, t), time(&clock, t + d.insns));
                o.event(&XEvent {
                    name: &name,
                    cat: &cat,
                    ph: "X",
                    pid,
                    tid,
                    ts: to_json_time(&clock, s),
                    dur: to_json_time(&clock, e - s),
                    args: Value::Object(args),
                })?;
                t += d.insns;
            }
        }
        if let (true, Some(tree)) = (opts.functions, view.calls) {
            let tid = base + 999;
            o.event(&json!({"name":"thread_name","ph":"M","pid":pid,"tid":tid,"ts":0,"args":{"name":format!("{tname} · functions")}}))?;
            o.event(&json!({"name":"thread_sort_index","ph":"M","pid":pid,"tid":tid,"ts":0,"args":{"sort_index":tid}}))?;
            let frames = tree.frames_by_start();
            let (parent, self_insns) = super::folded::parents_and_self(&frames);
            let mut callees: Vec<BTreeMap<&str, u64>> = vec![BTreeMap::new(); frames.len()];
            for (i, f) in frames.iter().enumerate() {
                if let (Some(p), true) = (parent[i], f.called) {
                    *callees[p]
                        .entry(tree.functions[f.function as usize].name.as_str())
                        .or_default() += 1;
                }
            }
            for (i, f) in frames.iter().enumerate() {
                let func = &tree.functions[f.function as usize];
                let (s, e) = (time(&clock, f.start), time(&clock, f.end));
                o.event(&XEvent {
                    name: &func.name,
                    cat: "functions",
                    ph: "X",
                    pid,
                    tid,
                    ts: to_json_time(&clock, s),
                    dur: to_json_time(&clock, e - s),
                    args: json!({
                        "addr": format!("{:#x}", func.entry),
                        "insns": f.end - f.start,
                        "self_insns": self_insns[i],
                        "depth": f.depth,
                        "calls": callees[i],
                    }),
                })?;
            }
        }
    }
    let out = o.w;
    out.write_all(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"pcmap trace export\",\"time\":")?;
    let has_time = threads.iter().any(|v| !v.thread.timestamps.is_empty());
    out.write_all(if has_time {
        b"\"ns from trace timestamps\""
    } else {
        b"\"instruction index\""
    })?;
    out.write_all(b"}}\n")
}
