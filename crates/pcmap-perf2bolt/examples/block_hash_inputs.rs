//! Print what BOLT's block hash is computed from, for one block of one function, to compare
//! with `llvm-bolt --print-cfg --print-only=FUNCTION`:
//! `cargo run -p pcmap-perf2bolt --example block_hash_inputs -- BINARY FUNCTION BLOCK-INDEX`.
//! Prints the block's range and successors, the InstrHash string (escaped) and the OpcodeHash
//! string.

use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_perf2bolt::block_hash;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, bin, name, index] = args.as_slice() else {
        eprintln!("usage: block_hash_inputs BINARY FUNCTION BLOCK-INDEX");
        std::process::exit(2);
    };
    let data = std::fs::read(bin).expect("read the binary");
    let binary = pcmap_binary::Binary::parse(&data).expect("parse the binary");
    let image = BoltFunctions::discover(&binary).expect("discover functions");
    let ctx = block_hash::Context::new(&image);
    let Some(fi) = image
        .functions()
        .iter()
        .position(|f| f.names.iter().any(|n| n == name))
    else {
        eprintln!("no function {name}");
        std::process::exit(1);
    };
    let f = &image.functions()[fi];
    let agg = Aggregator::new(&image);
    let c = agg.cfg(fi);
    let bi: usize = index.parse().expect("block index");
    let mut stats = block_hash::Stats::default();
    let inputs = block_hash::hash_inputs(&ctx, f, c, &mut stats);
    let (Some(b), Some((instr, loose))) = (c.blocks.get(bi), inputs.get(bi)) else {
        eprintln!("no block {bi} ({} blocks)", c.blocks.len());
        std::process::exit(1);
    };
    println!(
        "block {bi} offset {:#x}..{:#x} succs {:?}",
        b.offset, b.end, b.succs
    );
    println!("{}", instr.escape_ascii());
    println!("{loose}");
    if let Some(u) = stats.first_unknown {
        println!("unknown instruction form {u:?}");
    }
}
