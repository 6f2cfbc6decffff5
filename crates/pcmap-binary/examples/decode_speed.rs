//! Decode a binary's .text and report MB/s: `cargo run --release -p pcmap-binary --example
//! decode_speed -- /usr/lib/llvm-22/bin/llvm-bolt` (compares pcmap's iterator with a bare
//! iced-x86 loop, to see pcmap's own overhead).
use std::time::Instant;

use pcmap_binary::{Binary, BranchKind, MappedFile};

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/usr/lib/llvm-22/bin/llvm-bolt".into());
    let file = MappedFile::open(&path).expect("open");
    let t = Instant::now();
    let bin = Binary::parse(file.bytes()).expect("parse");
    println!(
        "open+index: {:?} ({} functions)",
        t.elapsed(),
        bin.functions().len()
    );
    let text = bin.section_by_name(".text").expect(".text");
    let mb = text.raw.len() as f64 / 1e6;
    for _ in 0..2 {
        let t = Instant::now();
        let n = bin
            .decode(text.raw, text.address)
            .unwrap()
            .filter(|i| i.kind() != BranchKind::Other)
            .count();
        let s = t.elapsed().as_secs_f64();
        println!("pcmap: {n} branches, {:.0} MB/s", mb / s);
        let t = Instant::now();
        let mut d =
            iced_x86::Decoder::with_ip(64, text.raw, text.address, iced_x86::DecoderOptions::NONE);
        let mut i = iced_x86::Instruction::default();
        let mut n = 0usize;
        while d.can_decode() {
            d.decode_out(&mut i);
            if i.flow_control() != iced_x86::FlowControl::Next {
                n += 1;
            }
        }
        let s = t.elapsed().as_secs_f64();
        println!("bare iced: {n} non-next, {:.0} MB/s", mb / s);
    }
}
