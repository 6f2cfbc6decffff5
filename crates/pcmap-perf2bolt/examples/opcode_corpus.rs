//! Collect one example encoding per (iced-x86 code, memory operand?) pair from the functions of
//! the given ELF binaries, as input for `tools/gen-opcode-table.py` (which asks llvm-mc for the
//! LLVM opcode name of each example). Output lines: `<code index> <0|1> <hex bytes>`.

use std::collections::BTreeMap;

use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::cfg;

fn main() {
    let mut examples: BTreeMap<(u16, bool), Vec<u8>> = BTreeMap::new();
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
        for f in image.functions() {
            let c = cfg::build(&image, f);
            for i in &c.insns {
                let key = (i.code as u16, i.has_mem);
                if examples.contains_key(&key) {
                    continue;
                }
                if let Some(b) = image
                    .binary()
                    .code_bytes(f.address + u64::from(i.offset), u64::from(i.len))
                {
                    examples.insert(key, b.to_vec());
                }
            }
        }
    }
    for ((code, mem), bytes) in examples {
        let hex: Vec<String> = bytes.iter().map(|b| format!("0x{b:02x}")).collect();
        println!("{code} {} {}", u8::from(mem), hex.join(" "));
    }
}
