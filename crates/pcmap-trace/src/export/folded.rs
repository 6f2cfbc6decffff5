//! Collapsed stacks (`main;fib;fib 42`, weighted by self instructions) from the function pass,
//! and flame-graph SVGs drawn from them by the `inferno` crate.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::htr::function::{CallTree, Frame};

/// Each frame's parent index (in the given order) and self instructions, for frames sorted by
/// start then depth.
pub(crate) fn parents_and_self(frames: &[Frame]) -> (Vec<Option<usize>>, Vec<u64>) {
    let mut parent = vec![None; frames.len()];
    let mut self_insns: Vec<u64> = frames.iter().map(|f| f.end - f.start).collect();
    let mut stack: Vec<usize> = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        while let Some(&top) = stack.last() {
            // Depths are exact nesting depths, so the parent is the latest open frame one level up.
            if frames[top].depth >= f.depth {
                stack.pop();
            } else {
                break;
            }
        }
        if let Some(&top) = stack.last() {
            parent[i] = Some(top);
            self_insns[top] = self_insns[top].saturating_sub(f.end - f.start);
        }
        stack.push(i);
    }
    (parent, self_insns)
}

/// Collapsed stacks of one call tree, sorted; `prefix` (e.g. a thread name) becomes the root.
pub fn folded_stacks(tree: &CallTree, prefix: Option<&str>) -> Vec<String> {
    let frames = tree.frames_by_start();
    let (parent, self_insns) = parents_and_self(&frames);
    let mut paths: Vec<String> = Vec::with_capacity(frames.len());
    let mut agg: BTreeMap<String, u64> = BTreeMap::new();
    for (i, f) in frames.iter().enumerate() {
        let name = tree.functions[f.function as usize]
            .name
            .replace([';', ' '], "_");
        let path = match parent[i] {
            Some(p) => format!("{};{}", paths[p], name),
            None => match prefix {
                Some(pre) => format!("{pre};{name}"),
                None => name,
            },
        };
        if self_insns[i] > 0 {
            *agg.entry(path.clone()).or_default() += self_insns[i];
        }
        paths.push(path);
    }
    agg.into_iter().map(|(k, v)| format!("{k} {v}")).collect()
}

/// Draw a flame graph of folded-stack `lines` as SVG.
pub fn write_flamegraph(lines: &[String], title: &str, out: &mut dyn Write) -> io::Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "instructions".to_string();
    let mut w = io::BufWriter::new(out);
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut w)
        .map_err(io::Error::other)?;
    w.flush()
}
