//! [`CodeInfo`] from a parsed ELF binary (`pcmap_binary`): function symbols and x86-64
//! instruction kinds. Behind the `binary` feature, so the trace formats stay usable without an
//! ELF reader.

use pcmap_binary::{Binary, BranchKind};
use rustc_hash::FxHashMap;

use crate::symbols::{CodeInfo, FunctionSym, InsnInfo, InsnKind};
use crate::trace::Trace;

/// Function symbols and decoded instruction kinds of one binary, for the trace passes.
pub struct BinaryCode {
    functions: Vec<(u64, u64, String)>,
    insns: FxHashMap<u64, InsnInfo>,
}

impl BinaryCode {
    /// The function symbols of `bin`, and the instruction at every distinct address `trace`
    /// executed.
    pub fn new(bin: &Binary<'_>, trace: &Trace) -> BinaryCode {
        let functions = bin
            .functions()
            .iter()
            .map(|f| (f.address, f.end(), bin.function_name(f).to_string()))
            .collect();
        let mut insns = FxHashMap::default();
        for t in trace.threads.iter() {
            for u in &t.units {
                let a = u.addr();
                if u.is_gap() || insns.contains_key(&a) {
                    continue;
                }
                if let Some(info) = decode_at(bin, a) {
                    insns.insert(a, info);
                }
            }
        }
        BinaryCode { functions, insns }
    }
}

fn decode_at(bin: &Binary<'_>, addr: u64) -> Option<InsnInfo> {
    let bytes = (1..=15u64).rev().find_map(|n| bin.bytes_at(addr, n))?;
    let insn = bin.decode(bytes, addr).ok()?.next()?;
    if insn.is_invalid() {
        return None;
    }
    let kind = match insn.kind() {
        BranchKind::Call | BranchKind::IndirectCall => InsnKind::Call,
        BranchKind::Return => InsnKind::Return,
        BranchKind::Jump | BranchKind::IndirectJump => InsnKind::Jump,
        BranchKind::ConditionalJump => InsnKind::CondJump,
        BranchKind::Other => InsnKind::Other,
    };
    Some(InsnInfo {
        len: insn.len() as u8,
        kind,
    })
}

impl CodeInfo for BinaryCode {
    fn function_at(&self, addr: u64) -> Option<FunctionSym<'_>> {
        let i = self.functions.partition_point(|f| f.0 <= addr);
        self.functions[..i]
            .iter()
            .rev()
            .take(8)
            .find(|f| addr < f.1.max(f.0.saturating_add(1)))
            .map(|f| FunctionSym {
                start: f.0,
                end: f.1,
                name: &f.2,
            })
    }

    fn instruction(&self, addr: u64) -> Option<InsnInfo> {
        self.insns.get(&addr).copied()
    }
}
