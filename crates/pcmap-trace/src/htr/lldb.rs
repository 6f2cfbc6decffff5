//! An exact model of lldb's `TraceHTR` (lldb/source/Plugins/TraceExporter/common/TraceHTR.cpp),
//! for `--format lldb` output that is byte-compatible with `thread trace export ctf`.
//!
//! Kept as lldb does it, on purpose:
//! * the instruction layer holds load addresses, errors as address 0;
//! * a call instruction's metadata names the function of the *next* instruction, and the first
//!   name recorded for a call site is kept for every later execution (`emplace` semantics);
//! * `BasicSuperBlockMerge`: heads have more than one distinct predecessor, tails more than one
//!   distinct successor, address 0 is neither, the last unit's id is a tail everywhere, the
//!   first unit has no START sentinel, and a repeated head reuses its first definition;
//! * `ExecutePasses` repeats the pass until the unit count stops changing, and its reference
//!   bug copy-assigns each new layer into the first block layer, so with three or more layers the
//!   first exported block layer is a copy of the last one.
//!
//! Where lldb's output is not deterministic pcmap picks one order: the function list of a block is
//! sorted by name (lldb iterates a `DenseMap`), and the most-called function is the first in name
//! order among those with the highest count.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};

/// lldb's `HTRBlockMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// `m_first_instruction_load_address`.
    pub first_addr: u64,
    /// `m_num_instructions`.
    pub insns: u64,
    /// `m_func_calls` (sorted here).
    pub calls: BTreeMap<String, u64>,
}

impl Metadata {
    fn merge(&mut self, other: &Metadata) {
        self.insns += other.insns;
        for (k, v) in &other.calls {
            *self.calls.entry(k.clone()).or_default() += v;
        }
    }

    /// `GetMostFrequentlyCalledFunction` with a deterministic tie-break.
    pub fn most_called(&self) -> Option<&str> {
        let mut best: Option<(&str, u64)> = None;
        for (k, &v) in &self.calls {
            if v > best.map(|b| b.1).unwrap_or(0) {
                best = Some((k, v));
            }
        }
        best.map(|b| b.0)
    }
}

/// A block layer (`HTRBlockLayer`).
#[derive(Debug, Clone)]
pub struct BlockLayer {
    /// `m_layer_id`.
    pub id: usize,
    /// `m_block_defs`: head id -> metadata of the first occurrence.
    pub defs: FxHashMap<u64, Metadata>,
    /// `m_block_id_trace`.
    pub trace: Vec<u64>,
}

/// The instruction layer (`HTRInstructionLayer`).
#[derive(Debug, Clone, Default)]
pub struct InstructionLayer {
    /// Load addresses, 0 for errors.
    pub addrs: Vec<u64>,
    /// Instructions per unit (1 for lldb's own traces; pcmap block records may hold more).
    pub insns: Vec<u64>,
    /// Call sites: address -> the first callee name recorded.
    pub call_names: FxHashMap<u64, Option<String>>,
}

impl InstructionLayer {
    /// The instruction layer of one thread, with every call instruction's callee named (through
    /// `code`) after the unit that follows it, as lldb's exporter records them.
    pub fn from_thread(t: &crate::trace::ThreadTrace, code: &dyn crate::symbols::CodeInfo) -> Self {
        let mut layer = InstructionLayer::default();
        for (i, &id) in t.ids.iter().enumerate() {
            let u = &t.units[id as usize];
            layer.addrs.push(u.addr());
            layer.insns.push(u.insns().max(1));
            if u.is_gap() {
                continue;
            }
            if code
                .instruction(u.addr())
                .is_some_and(|k| k.kind == crate::symbols::InsnKind::Call)
            {
                let next = t.ids.get(i + 1).map(|&n| &t.units[n as usize]);
                let callee = match next {
                    Some(n) if !n.is_gap() => {
                        code.function_at(n.addr()).map(|f| f.name.to_string())
                    }
                    _ => None,
                };
                layer.add_call(u.addr(), callee);
            }
        }
        layer
    }

    /// Record a call instruction's callee the way lldb does (first name wins).
    pub fn add_call(&mut self, site: u64, callee: Option<String>) {
        self.call_names.entry(site).or_insert(callee);
    }

    fn metadata(&self, i: usize) -> Metadata {
        let addr = self.addrs[i];
        let mut calls = BTreeMap::new();
        if let Some(Some(name)) = self.call_names.get(&addr) {
            calls.insert(name.clone(), 1);
        }
        Metadata {
            first_addr: addr,
            insns: self.insns[i],
            calls,
        }
    }
}

trait LayerView {
    fn len(&self) -> usize;
    fn id_at(&self, i: usize) -> u64;
    fn metadata(&self, i: usize) -> Metadata;
    fn layer_id(&self) -> usize;
}

impl LayerView for InstructionLayer {
    fn len(&self) -> usize {
        self.addrs.len()
    }
    fn id_at(&self, i: usize) -> u64 {
        self.addrs[i]
    }
    fn metadata(&self, i: usize) -> Metadata {
        InstructionLayer::metadata(self, i)
    }
    fn layer_id(&self) -> usize {
        0
    }
}

impl LayerView for BlockLayer {
    fn len(&self) -> usize {
        self.trace.len()
    }
    fn id_at(&self, i: usize) -> u64 {
        self.defs[&self.trace[i]].first_addr
    }
    fn metadata(&self, i: usize) -> Metadata {
        self.defs[&self.trace[i]].clone()
    }
    fn layer_id(&self) -> usize {
        self.id
    }
}

fn merge_units(layer: &dyn LayerView, start: usize, n: usize) -> Metadata {
    let mut m = layer.metadata(start);
    for i in start + 1..start + n {
        m.merge(&layer.metadata(i));
    }
    m
}

fn basic_super_block_merge(layer: &dyn LayerView) -> BlockLayer {
    let mut out = BlockLayer {
        id: layer.layer_id() + 1,
        defs: FxHashMap::default(),
        trace: Vec::new(),
    };
    let n = layer.len();
    if n == 0 {
        return out;
    }
    let ids: Vec<u64> = (0..n).map(|i| layer.id_at(i)).collect();
    let mut preds: FxHashMap<u64, FxHashSet<u64>> = FxHashMap::default();
    let mut succs: FxHashMap<u64, FxHashSet<u64>> = FxHashMap::default();
    for w in ids.windows(2) {
        preds.entry(w[1]).or_default().insert(w[0]);
        succs.entry(w[0]).or_default().insert(w[1]);
    }
    let heads: FxHashSet<u64> = preds
        .iter()
        .filter(|(id, s)| **id != 0 && s.len() > 1)
        .map(|(&id, _)| id)
        .collect();
    let mut tails: FxHashSet<u64> = succs
        .iter()
        .filter(|(id, s)| **id != 0 && s.len() > 1)
        .map(|(&id, _)| id)
        .collect();
    tails.insert(ids[n - 1]);

    let mut size = 0usize;
    let mut head: Option<u64> = None;
    let emit = |out: &mut BlockLayer, head: Option<u64>, start: usize, len: usize| {
        let Some(h) = head else { return };
        out.defs
            .entry(h)
            .or_insert_with(|| merge_units(layer, start, len));
        out.trace.push(h);
    };
    for (i, &u) in ids.iter().enumerate() {
        let is_head = heads.contains(&u);
        let is_tail = tails.contains(&u);
        if is_head && is_tail {
            if size > 0 {
                emit(&mut out, head, i - size, size);
            }
            head = Some(u);
            emit(&mut out, head, i, 1);
            head = None;
            size = 0;
        } else if is_head {
            if size > 0 {
                emit(&mut out, head, i - size, size);
            }
            head = Some(u);
            size = 1;
        } else if is_tail {
            if head.is_none() {
                head = Some(u);
            }
            size += 1;
            emit(&mut out, head, i + 1 - size, size);
            head = None;
            size = 0;
        } else {
            if head.is_none() {
                head = Some(u);
            }
            size += 1;
        }
    }
    out
}

/// lldb's `TraceHTR` after `ExecutePasses`.
#[derive(Debug, Clone)]
pub struct LldbHtr {
    /// Layer 0.
    pub instructions: InstructionLayer,
    /// Block layers as lldb's exporter would see them (including the copy-assignment bug).
    pub block_layers: Vec<BlockLayer>,
}

impl LldbHtr {
    /// Run lldb's `ExecutePasses` over `instructions`.
    pub fn build(instructions: InstructionLayer) -> LldbHtr {
        let mut layers: Vec<BlockLayer> = Vec::new();
        let first = basic_super_block_merge(&instructions);
        if first.trace.len() != instructions.len() {
            layers.push(first);
            loop {
                let new = basic_super_block_merge(&layers[0]);
                if new.trace.len() == layers[0].trace.len() {
                    break;
                }
                // `current_block_layer = *new_block_layer_up;` writes into the first block layer.
                layers[0] = new.clone();
                layers.push(new);
            }
        }
        LldbHtr {
            instructions,
            block_layers: layers,
        }
    }

    /// Write lldb's JSON (compact, keys sorted, one array) to `out`.
    pub fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        out.write_all(b"[")?;
        let mut first = true;
        let mut sep = |out: &mut dyn std::io::Write| -> std::io::Result<()> {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            Ok(())
        };
        let mut ts: u64 = 0;
        for (i, &a) in self.instructions.addrs.iter().enumerate() {
            sep(out)?;
            let dur = self.instructions.insns[i];
            write!(out, "{{\"dur\":{dur},\"name\":")?;
            write_llvm_string(out, &format!("{a:#x}"))?;
            write!(out, ",\"ph\":\"X\",\"pid\":0,\"ts\":{ts}}}")?;
            ts += dur;
        }
        for layer in &self.block_layers {
            let mut ts: u64 = 0;
            for id in &layer.trace {
                sep(out)?;
                let m = &layer.defs[id];
                let name = match m.most_called() {
                    Some(f) => format!("{:#x}: {f}", m.first_addr),
                    None => format!("{:#x}", m.first_addr),
                };
                out.write_all(b"{\"args\":{\"Metadata\":{\"Functions\":[")?;
                for (j, (f, n)) in m.calls.iter().enumerate() {
                    if j > 0 {
                        out.write_all(b",")?;
                    }
                    write_llvm_string(out, &format!("({f}: {n})"))?;
                }
                write!(
                    out,
                    "],\"Number of Instructions\":{}}}}},\"dur\":{},\"name\":",
                    m.insns, m.insns
                )?;
                write_llvm_string(out, &name)?;
                write!(out, ",\"ph\":\"X\",\"pid\":{},\"ts\":{ts}}}", layer.id)?;
                ts += m.insns;
            }
        }
        out.write_all(b"]")
    }
}

/// Quote a string the way `llvm::json` does (`\"`, `\\`, `\t`, `\n`, `\r`, other controls as `\u00XX`).
fn write_llvm_string(out: &mut dyn std::io::Write, s: &str) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(s.len() + 2);
    buf.push(b'"');
    for &c in s.as_bytes() {
        match c {
            b'"' | b'\\' => {
                buf.push(b'\\');
                buf.push(c);
            }
            b'\t' => buf.extend_from_slice(b"\\t"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            c if c < 0x20 => buf.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => buf.push(c),
        }
    }
    buf.push(b'"');
    out.write_all(&buf)
}
