//! Collect example encodings for `tools/gen-block-hash-tables.py`: up to four examples per
//! (iced-x86 code, operand form) pair from the functions of the given ELF binaries (plus, for
//! an immediate operand, a copy with its top bit set), each with iced-x86's view of its operands,
//! plus the list of iced-x86 registers.
//!
//! Output lines:
//! * `R <register index> <register name>` for every iced-x86 register;
//! * `E <code index> <form> <hex bytes> | <operand atoms>` (form: [`block_hash::form`]) where the atoms are `r<i>=<REG>`
//!   (register operand i), `i<i>=<u64>` (immediate operand i as iced-x86's `immediate`),
//!   `b<i>=<i64>` (branch operand i, relative to the next instruction), `mb=<REG> ms=<scale> mi=<REG> md=<i64> mg=<REG>` (memory operand:
//!   base, scale, index, displacement as encoded, segment prefix), `km=<REG>` (AVX-512 opmask).

use std::collections::BTreeMap;

use iced_x86::{Decoder, DecoderOptions, Instruction, OpKind, Register};
use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_perf2bolt::block_hash;

fn atoms(ins: &Instruction) -> String {
    let mut out = Vec::new();
    for i in 0..ins.op_count() {
        match ins.op_kind(i) {
            OpKind::Register => out.push(format!("r{i}={:?}", ins.op_register(i))),
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => {
                let rel = ins.near_branch_target().wrapping_sub(ins.next_ip()) as i64;
                out.push(format!("b{i}={rel}"))
            }
            OpKind::Memory => {
                let disp = if ins.is_ip_rel_memory_operand() {
                    ins.memory_displacement64().wrapping_sub(ins.next_ip()) as i64
                } else {
                    ins.memory_displacement64() as i64
                };
                let base = ins.memory_base();
                out.push(format!(
                    "mb={base:?} ms={} mi={:?} md={disp} mg={:?}",
                    ins.memory_index_scale(),
                    ins.memory_index(),
                    ins.segment_prefix()
                ));
            }
            k if format!("{k:?}").starts_with("Immediate") => {
                out.push(format!("i{i}={}", ins.immediate(i)))
            }
            k => out.push(format!("k{i}={k:?}")),
        }
    }
    if ins.op_mask() != Register::None {
        out.push(format!("km={:?}", ins.op_mask()));
    }
    out.join(" ")
}

fn main() {
    for r in Register::values() {
        println!("R {} {r:?}", r as usize);
    }
    // (code, memory operand?) -> examples (bytes, operand atoms).
    type Examples = BTreeMap<(u16, u8), Vec<(Vec<u8>, String)>>;
    let mut examples = Examples::new();
    for path in std::env::args().skip(1) {
        let Ok(data) = std::fs::read(&path) else {
            eprintln!("skipping unreadable {path}");
            continue;
        };
        let Ok(binary) = pcmap_binary::Binary::parse(&data) else {
            eprintln!("skipping non-ELF {path}");
            continue;
        };
        let Ok(image) = BoltFunctions::discover(&binary) else {
            eprintln!("skipping {path}: not x86");
            continue;
        };
        let agg = Aggregator::new(&image);
        agg.prepare(None);
        for (fi, f) in image.functions().iter().enumerate() {
            let c = agg.cfg(fi);
            for i in &c.insns {
                let addr = f.address + u64::from(i.offset);
                let Some(b) = image.binary().code_bytes(addr, u64::from(i.len())) else {
                    continue;
                };
                let mut d = Decoder::with_ip(64, b, addr, DecoderOptions::NONE);
                let ins = d.decode();
                let key = (i.code as u16, block_hash::form(i.has_mem(), &ins));
                let list = examples.entry(key).or_default();
                if list.len() >= 4 {
                    continue;
                }
                if list.iter().any(|e| e.0 == b) {
                    continue;
                }
                let offsets = d.get_constant_offsets(&ins);
                list.push((b.to_vec(), atoms(&ins)));
                // A variant with the immediate's top bit set tells sign- from zero-extension.
                if offsets.has_immediate() && !offsets.has_immediate2() {
                    let mut v = b.to_vec();
                    let (at, size) = (offsets.immediate_offset(), offsets.immediate_size());
                    for (j, byte) in v[at..at + size].iter_mut().enumerate() {
                        *byte = if j + 1 == size { 0x81 } else { 0x01 };
                    }
                    let mut d = Decoder::with_ip(64, &v, addr, DecoderOptions::NONE);
                    let var = d.decode();
                    if var.code() == ins.code() && !list.iter().any(|e| e.0 == v) {
                        list.push((v, atoms(&var)));
                    }
                }
            }
        }
    }
    for ((code, form), list) in examples {
        for (bytes, atoms) in list {
            let hex: Vec<String> = bytes.iter().map(|b| format!("0x{b:02x}")).collect();
            println!("E {code} {form} {} | {atoms}", hex.join(" "));
        }
    }
}
