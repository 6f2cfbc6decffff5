//! Write a synthetic PCMTRACE file: `cargo run --release -p pcmap-trace --example synthetic_trace -- OUT N_INSNS`.
use std::io::BufWriter;

use pcmap_trace::Record;
use pcmap_trace::format::binary::BinaryWriter;
use pcmap_trace::synthetic::SyntheticTrace;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let out = args.get(1).expect("usage: synthetic_trace OUT N_INSNS");
    let n: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let file = std::fs::File::create(out)?;
    let mut w = BinaryWriter::new(BufWriter::with_capacity(1 << 20, file), 62)?;
    let mut g = SyntheticTrace::new(5000, 42);
    for _ in 0..n {
        w.write(&Record::Insn {
            addr: g.next_addr(),
        })?;
    }
    w.finish()?;
    Ok(())
}
