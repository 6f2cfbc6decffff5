//! The report of `pcmap trace summarize`: super-block, loop and function statistics of each
//! thread, from the streaming pass over a PCMTRACE file or from an in-memory [`Htr`], and their
//! text form.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use crate::htr::function::CallTree;
use crate::htr::streaming::{LoopStat, SuperBlockStat, ThreadSummary};
use crate::htr::{Htr, LayerKind};
use crate::symbols::{CodeInfo, NoCode};
use crate::trace::ThreadTrace;

/// One super block of the report.
#[derive(Debug, Clone, Serialize)]
pub struct BlockOut {
    /// Address of its first instruction (`0x…`).
    pub addr: String,
    /// `function+offset` of that address.
    pub symbol: String,
    /// Instructions per occurrence.
    pub insns: u64,
    /// Occurrences.
    pub occurrences: u64,
    /// Instructions over all occurrences.
    pub total_insns: u64,
    /// Share of the thread's instructions.
    pub percent: f64,
}

/// One loop of the report.
#[derive(Debug, Clone, Serialize)]
pub struct LoopOut {
    /// The body's super blocks, named.
    pub body: Vec<String>,
    /// Instructions per iteration.
    pub insns_per_iteration: u64,
    /// How many times the loop ran.
    pub occurrences: u64,
    /// Iterations over all runs.
    pub iterations: u64,
    /// The largest iteration count.
    pub max_iterations: u64,
    /// Instructions over all iterations.
    pub total_insns: u64,
}

/// One function of the report (function pass).
#[derive(Debug, Clone, Serialize)]
pub struct FunctionOut {
    /// Name.
    pub name: String,
    /// Entry address (`0x…`).
    pub addr: String,
    /// Calls.
    pub calls: u64,
    /// Instructions executed in the function itself.
    pub self_insns: u64,
}

/// The report of one thread.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadOut {
    /// Thread id.
    pub tid: Option<u64>,
    /// Instructions.
    pub insns: u64,
    /// Layer-0 units.
    pub units: u64,
    /// Distinct layer-0 units.
    pub distinct_units: u64,
    /// Gap units.
    pub gaps: u64,
    /// Units per layer, named (`L1 super blocks`).
    pub layer_units: Vec<(String, u64)>,
    /// Top super blocks by instructions.
    pub super_blocks: Vec<BlockOut>,
    /// Top loops by instructions.
    pub loops: Vec<LoopOut>,
    /// Top functions by self instructions (with code knowledge only).
    pub functions: Option<Vec<FunctionOut>>,
}

/// What `pcmap trace summarize` reports (printed as text or JSON).
#[derive(Debug, Clone, Serialize)]
pub struct SummaryOut {
    /// The trace's label (file name).
    pub trace: String,
    /// Its format's name.
    pub format: String,
    /// Instructions over all threads.
    pub insns: u64,
    /// Per-thread reports.
    pub threads: Vec<ThreadOut>,
}

/// The `top` super blocks by instructions, named through `code`.
pub fn block_outs(
    stats: &[SuperBlockStat],
    code: &dyn CodeInfo,
    total: u64,
    top: usize,
) -> Vec<BlockOut> {
    let mut v: Vec<&SuperBlockStat> = stats.iter().filter(|s| s.insns > 0).collect();
    v.sort_by(|a, b| {
        (b.insns * b.occurrences)
            .cmp(&(a.insns * a.occurrences))
            .then(a.first_addr.cmp(&b.first_addr))
    });
    v.into_iter()
        .take(top)
        .map(|s| BlockOut {
            addr: format!("{:#x}", s.first_addr),
            symbol: code.describe(s.first_addr),
            insns: s.insns,
            occurrences: s.occurrences,
            total_insns: s.insns * s.occurrences,
            percent: if total == 0 {
                0.0
            } else {
                (s.insns * s.occurrences) as f64 * 100.0 / total as f64
            },
        })
        .collect()
}

/// The `top` loops by instructions, named through `code`.
pub fn loop_outs(stats: &[LoopStat], code: &dyn CodeInfo, top: usize) -> Vec<LoopOut> {
    let mut v: Vec<&LoopStat> = stats.iter().collect();
    v.sort_by(|a, b| {
        (b.iterations * b.insns_per_iteration).cmp(&(a.iterations * a.insns_per_iteration))
    });
    v.into_iter()
        .take(top)
        .map(|s| LoopOut {
            body: s.body.iter().map(|&a| code.describe(a)).collect(),
            insns_per_iteration: s.insns_per_iteration,
            occurrences: s.occurrences,
            iterations: s.iterations,
            max_iterations: s.max_iterations,
            total_insns: s.iterations * s.insns_per_iteration,
        })
        .collect()
}

/// The `top` functions by self instructions.
pub fn function_outs(tree: &CallTree, top: usize) -> Vec<FunctionOut> {
    let mut idx: Vec<usize> = (0..tree.functions.len()).collect();
    idx.sort_by(|&a, &b| {
        tree.self_insns[b]
            .cmp(&tree.self_insns[a])
            .then(tree.functions[a].name.cmp(&tree.functions[b].name))
    });
    idx.into_iter()
        .take(top)
        .map(|i| FunctionOut {
            name: tree.functions[i].name.clone(),
            addr: format!("{:#x}", tree.functions[i].entry),
            calls: tree.call_counts[i],
            self_insns: tree.self_insns[i],
        })
        .collect()
}

/// Super-block and loop statistics from in-memory layers (layer 1 and the first loop layer),
/// the same statistics the streaming pass computes.
pub fn stats_from_htr(htr: &Htr) -> (Vec<SuperBlockStat>, Vec<LoopStat>) {
    let l1 = &htr.layers[1];
    let mut occ = vec![0u64; l1.defs.len()];
    for &u in &l1.units {
        occ[u as usize] += 1;
    }
    let sbs = l1
        .defs
        .iter()
        .zip(&occ)
        .map(|(d, &n)| SuperBlockStat {
            first_addr: d.first_addr,
            insns: d.insns,
            len: d.children.len() as u64,
            occurrences: n,
        })
        .collect();
    let mut loops: Vec<LoopStat> = Vec::new();
    if let Some(l2) = htr.layers.get(2).filter(|l| l.kind == LayerKind::Loops) {
        let mut by_body: BTreeMap<Vec<u32>, usize> = BTreeMap::new();
        let mut occ2 = vec![0u64; l2.defs.len()];
        for &u in &l2.units {
            occ2[u as usize] += 1;
        }
        for (d, &n) in l2.defs.iter().zip(&occ2) {
            if d.repeat < 2 || n == 0 {
                continue;
            }
            let k = loops.len();
            let i = *by_body.entry(d.children.clone()).or_insert(k);
            if i == k {
                loops.push(LoopStat {
                    body: d
                        .children
                        .iter()
                        .map(|&c| l1.defs[c as usize].first_addr)
                        .collect(),
                    insns_per_iteration: d
                        .children
                        .iter()
                        .map(|&c| l1.defs[c as usize].insns)
                        .sum(),
                    occurrences: 0,
                    iterations: 0,
                    max_iterations: 0,
                });
            }
            let s = &mut loops[i];
            s.occurrences += n;
            s.iterations += n * d.repeat as u64;
            s.max_iterations = s.max_iterations.max(d.repeat as u64);
        }
    }
    (sbs, loops)
}

impl ThreadOut {
    /// The report of one thread from the streaming pass (no code knowledge).
    pub fn from_streaming(t: &ThreadSummary, top: usize) -> ThreadOut {
        ThreadOut {
            tid: t.tid,
            insns: t.insns,
            units: t.units,
            distinct_units: t.distinct_units,
            gaps: t.gaps,
            layer_units: vec![
                ("L0 instructions".into(), t.units),
                ("L1 super blocks".into(), t.layer1_units),
                ("L2 loops".into(), t.layer2_units),
            ],
            super_blocks: block_outs(&t.super_blocks, &NoCode, t.insns, top),
            loops: loop_outs(&t.loops, &NoCode, top),
            functions: None,
        }
    }

    /// The report of one thread from its in-memory HTR; `functions` runs the function pass
    /// with `code`.
    pub fn from_htr(
        t: &ThreadTrace,
        htr: &Htr,
        code: &dyn CodeInfo,
        functions: bool,
        top: usize,
    ) -> ThreadOut {
        let (sbs, loops) = stats_from_htr(htr);
        let functions =
            functions.then(|| function_outs(&CallTree::build(&htr.layers[0], code), top));
        ThreadOut {
            tid: t.tid,
            insns: t.insns,
            units: t.ids.len() as u64,
            distinct_units: t.units.iter().filter(|u| !u.is_gap()).count() as u64,
            gaps: t
                .ids
                .iter()
                .filter(|&&i| t.units[i as usize].is_gap())
                .count() as u64,
            layer_units: htr
                .layers
                .iter()
                .enumerate()
                .map(|(i, l)| (format!("L{i} {}", l.kind.name()), l.units.len() as u64))
                .collect(),
            super_blocks: block_outs(&sbs, code, t.insns, top),
            loops: loop_outs(&loops, code, top),
            functions,
        }
    }
}

/// The text form of the report.
pub fn print_summary(w: &mut dyn Write, s: &SummaryOut) -> std::io::Result<()> {
    writeln!(
        w,
        "trace {} ({}): {} instructions, {} thread(s)",
        s.trace,
        s.format,
        s.insns,
        s.threads.len()
    )?;
    for t in &s.threads {
        let tid = t.tid.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
        writeln!(
            w,
            "\nthread {tid}: {} instructions, {} units ({} distinct addresses, {} gaps)",
            t.insns, t.units, t.distinct_units, t.gaps
        )?;
        let layers: Vec<String> = t
            .layer_units
            .iter()
            .map(|(n, u)| format!("{n} {u}"))
            .collect();
        writeln!(w, "  layers: {}", layers.join(", "))?;
        writeln!(w, "  top super blocks by instructions:")?;
        for b in &t.super_blocks {
            writeln!(
                w,
                "    {:6.2}%  {:>12} insns  x{:<9} size {:<5} {}",
                b.percent, b.total_insns, b.occurrences, b.insns, b.symbol
            )?;
        }
        if !t.loops.is_empty() {
            writeln!(w, "  loops:")?;
            for l in &t.loops {
                writeln!(
                    w,
                    "    {:>10} iterations in {} run(s) (max {}), {} insns/iteration: [{}]",
                    l.iterations,
                    l.occurrences,
                    l.max_iterations,
                    l.insns_per_iteration,
                    l.body.join(", ")
                )?;
            }
        }
        if let Some(fs) = &t.functions {
            writeln!(
                w,
                "  functions:   {:>10} {:>14}  name",
                "calls", "self insns"
            )?;
            for f in fs {
                writeln!(
                    w,
                    "               {:>10} {:>14}  {}",
                    f.calls, f.self_insns, f.name
                )?;
            }
        }
    }
    Ok(())
}
