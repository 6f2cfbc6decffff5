//! BOLT's function hash (YAML `hash`, `hash-func: xxh3`): xxh3-64 of the concatenated LLVM MC
//! opcode names of the function's instructions in input layout order, skipping direct
//! unconditional jumps inside the function, with conditional jumps as `JCC_1` and tail calls in
//! BOLT's tail-call forms (`JMP_4`, `JMP32m`, `JMP32r`).
//!
//! Opcode names come from a table generated once with llvm-mc (`tools/gen-opcode-table.py`),
//! keyed by iced-x86's instruction code and whether an operand is in memory.

use std::sync::OnceLock;

use iced_x86::Code;

use crate::cfg::{Cfg, Flow, Insn};
use crate::opcode_table::OPCODE_NAMES;

fn table() -> &'static Vec<[Option<&'static str>; 2]> {
    static T: OnceLock<Vec<[Option<&'static str>; 2]>> = OnceLock::new();
    T.get_or_init(|| {
        let len = OPCODE_NAMES
            .iter()
            .map(|e| usize::from(e.0) + 1)
            .max()
            .unwrap_or(0);
        let mut v = vec![[None, None]; len];
        for &(code, mem, name) in OPCODE_NAMES {
            if let Some(slot) = v.get_mut(usize::from(code)) {
                slot[usize::from(mem)] = Some(name);
            }
        }
        v
    })
}

/// The LLVM opcode name(s) of an instruction as BOLT sees it in the hash, `None` when the
/// instruction is skipped, or `Err` when the table has no name for it.
pub fn opcode_name(insn: &Insn) -> Result<Option<&'static str>, Code> {
    match insn.flow {
        Flow::CondJump => return Ok(Some("JCC_1")),
        Flow::Jump if !insn.tail_call => return Ok(None),
        Flow::Jump => return Ok(Some("JMP_4")),
        Flow::IndirectJump if insn.tail_call => {
            return Ok(Some(if insn.has_mem { "JMP32m" } else { "JMP32r" }));
        }
        _ => {}
    }
    let slot = table().get(insn.code as usize).ok_or(insn.code)?;
    slot[usize::from(insn.has_mem)]
        .or(slot[usize::from(!insn.has_mem)])
        .map(Some)
        .ok_or(insn.code)
}

/// The function hash, and how many instructions had no known opcode name (0 = exact).
pub fn function_hash(cfg: &Cfg) -> (u64, usize) {
    let mut s = String::with_capacity(cfg.insns.len() * 8);
    let mut unknown = 0;
    for i in &cfg.insns {
        match opcode_name(i) {
            Ok(Some(name)) => s.extend(name.split(' ')),
            Ok(None) => {}
            Err(code) => {
                unknown += 1;
                s.push_str(&format!("{code:?}"));
            }
        }
    }
    (xxhash_rust::xxh3::xxh3_64(s.as_bytes()), unknown)
}
