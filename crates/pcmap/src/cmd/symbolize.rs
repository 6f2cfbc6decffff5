//! `pcmap symbolize`: function, inline frames and source locations of addresses (like
//! `llvm-symbolizer --inlining`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pcmap_inline::DebugData;
use pcmap_inline::report::{JsonAddress, write_frames_text};
use pcmap_inline::symbolize::Symbolizer;

/// Symbolize addresses: function, inline frames (innermost first), file:line:column
#[derive(clap::Args, Debug)]
pub struct Args {
    /// ELF binary with DWARF
    binary: PathBuf,
    /// Addresses (hexadecimal, with or without 0x)
    #[arg(required = true)]
    addresses: Vec<String>,
    /// Print every inline frame, innermost first (otherwise only the innermost function)
    #[arg(long)]
    inlines: bool,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

fn parse_address(s: &str) -> Result<u64> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(t, 16)
        .with_context(|| format!("invalid address {s:?} (expected hexadecimal)"))
}

pub fn run(args: Args) -> Result<()> {
    let addresses: Vec<u64> = args
        .addresses
        .iter()
        .map(|a| parse_address(a))
        .collect::<Result<_>>()?;
    if addresses.is_empty() {
        bail!("no address given");
    }
    let file = pcmap_binary::MappedFile::open(&args.binary)
        .with_context(|| format!("opening {}", args.binary.display()))?;
    let data = DebugData::load(file.bytes())
        .with_context(|| format!("reading {}", args.binary.display()))?;
    let symbolizer = Symbolizer::new(&data)?;
    let mut results = Vec::with_capacity(addresses.len());
    for &a in &addresses {
        results.push((a, symbolizer.frames(a, args.inlines)?));
    }
    crate::output::write_atomic(Path::new("-"), |w| {
        if args.json {
            let v: Vec<JsonAddress<'_>> = results
                .iter()
                .map(|(a, f)| JsonAddress {
                    address: *a,
                    frames: f,
                })
                .collect();
            serde_json::to_writer_pretty(&mut *w, &v)?;
            writeln!(w)?;
            return Ok(());
        }
        for (_, frames) in &results {
            write_frames_text(w, frames)?;
        }
        Ok(())
    })
}
