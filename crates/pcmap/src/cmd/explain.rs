//! `pcmap explain`: everything pcmap knows about an address, one layer per room — the function
//! symbol and offset (`pcmap_binary`), the input location on a BOLTed binary
//! (`pcmap_perf2bolt::bat_origin`), the basic block (`pcmap_bbmap::BlockIndex`), the inline frames
//! and the parameter locations of the inline sites around it (`pcmap_inline`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pcmap_bbmap::BlockIndex;
use pcmap_bbmap::elf::{ReadOptions, read_binary};
use pcmap_binary::Binary;
use pcmap_binary::bolt::BoltFunctions;
use pcmap_inline::report::{JsonSite, json_site};
use pcmap_inline::symbolize::{Frame, Symbolizer};
use pcmap_inline::{DebugData, InlineInfo};
use serde::Serialize;

/// Explain addresses: symbol+offset, BOLT input location, basic block, inline frames, parameters
#[derive(clap::Args, Debug)]
pub struct Args {
    /// ELF binary
    binary: PathBuf,
    /// Addresses (hexadecimal, with or without 0x)
    #[arg(required = true)]
    addresses: Vec<String>,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct SymbolLayer<'a> {
    name: &'a str,
    address: u64,
    size: u64,
    offset: u64,
}

#[derive(Serialize)]
struct BoltLayer<'a> {
    function: &'a str,
    function_address: u64,
    offset: u64,
    translated: bool,
}

#[derive(Serialize)]
struct BlockLayer<'a> {
    function: &'a str,
    range: u32,
    id: u32,
    index: u32,
    start: u64,
    end: u64,
}

#[derive(Serialize)]
struct Explained<'a> {
    address: u64,
    symbol: Option<SymbolLayer<'a>>,
    bolt: Option<BoltLayer<'a>>,
    block: Option<BlockLayer<'a>>,
    frames: Vec<Frame>,
    sites: Vec<JsonSite<'a>>,
}

fn parse_address(s: &str) -> Result<u64> {
    let t = s.trim();
    let h = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(h, 16)
        .with_context(|| format!("invalid address {s:?} (expected hexadecimal)"))
}

pub fn run(args: Args) -> Result<()> {
    let path: &Path = &args.binary;
    let addresses: Vec<u64> = args
        .addresses
        .iter()
        .map(|a| parse_address(a))
        .collect::<Result<_>>()?;
    let file = pcmap_binary::MappedFile::open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let bin = Binary::parse(file.bytes()).with_context(|| format!("parsing {}", path.display()))?;

    // BOLT: only on binaries with a BAT section.
    let bat = match crate::inputs::bat_table(&bin, path)? {
        Some(table) => {
            let functions = BoltFunctions::discover(&bin)
                .with_context(|| format!("discovering the functions of {}", path.display()))?;
            Some((table, functions))
        }
        None => None,
    };
    // Basic blocks: only with bb-addr-map sections.
    let maps = read_binary(&bin, ReadOptions { legacy: false })
        .with_context(|| format!("reading the basic-block address map of {}", path.display()))?;
    let (block_functions, block_names) = maps.functions_with_names();
    let blocks =
        (!block_functions.is_empty()).then(|| BlockIndex::new(block_functions.iter().copied()));
    // DWARF: only with debug information.
    let debug = match DebugData::from_binary(&bin) {
        Ok(d) => Some(d),
        Err(pcmap_inline::Error::NoDebugInfo) => None,
        Err(e) => {
            return Err(e).with_context(|| format!("reading the DWARF of {}", path.display()));
        }
    };
    let symbolizer = debug.as_ref().map(Symbolizer::new).transpose()?;
    let info: Option<InlineInfo<'_>> = debug
        .as_ref()
        .map(pcmap_inline::extract_sites)
        .transpose()?;

    let mut out = Vec::with_capacity(addresses.len());
    for &a in &addresses {
        let symbol = bin.function_at(a).map(|f| SymbolLayer {
            name: bin.function_name(f),
            address: f.address,
            size: f.size,
            offset: a - f.address,
        });
        let bolt = bat.as_ref().and_then(|(table, functions)| {
            pcmap_perf2bolt::bat_origin::origin(&bin, functions, table, a, false).map(|o| {
                BoltLayer {
                    function: o.function,
                    function_address: o.function_address,
                    offset: o.offset,
                    translated: o.translated,
                }
            })
        });
        let block = blocks.as_ref().and_then(|index| {
            let b = index.block(index.lookup(a)?);
            Some(BlockLayer {
                function: &block_names[b.handle.function as usize],
                range: b.handle.range,
                id: b.id,
                index: b.handle.index,
                start: b.start,
                end: b.end,
            })
        });
        let frames = match &symbolizer {
            Some(s) => s.frames(a, true)?,
            None => Vec::new(),
        };
        let mut sites: Vec<JsonSite<'_>> = Vec::new();
        if let (Some(info), Some(debug)) = (&info, &debug) {
            sites = info
                .sites_at(a)
                .into_iter()
                .map(|s| json_site(info, debug, s))
                .collect();
        }
        out.push(Explained {
            address: a,
            symbol,
            bolt,
            block,
            frames,
            sites,
        });
    }

    crate::output::write_atomic(Path::new("-"), |w| {
        if args.json {
            serde_json::to_writer_pretty(&mut *w, &out)?;
            writeln!(w)?;
            return Ok(());
        }
        for e in &out {
            write_text(w, e)?;
        }
        Ok(())
    })
}

fn write_text(w: &mut dyn Write, e: &Explained<'_>) -> Result<()> {
    writeln!(w, "{:#x}", e.address)?;
    match &e.symbol {
        Some(s) => writeln!(
            w,
            "  symbol  {} + {:#x}  [{:#x}, {:#x})",
            s.name,
            s.offset,
            s.address,
            s.address + s.size
        )?,
        None => writeln!(w, "  symbol  ??")?,
    }
    if let Some(b) = &e.bolt {
        writeln!(
            w,
            "  input   {} + {:#x}{}",
            b.function,
            b.offset,
            if b.translated {
                " (BAT)"
            } else {
                " (not rewritten)"
            }
        )?;
    }
    if let Some(b) = &e.block {
        writeln!(
            w,
            "  block   {} range {} BB{} [{:#x}, {:#x}) index {}",
            b.function, b.range, b.id, b.start, b.end, b.index
        )?;
    }
    for (i, f) in e.frames.iter().enumerate() {
        writeln!(
            w,
            "  {}  {} at {}:{}:{}",
            if i == 0 { "frame " } else { "      " },
            f.function.as_deref().unwrap_or("??"),
            f.file.as_deref().unwrap_or("??"),
            f.line,
            f.column
        )?;
    }
    for s in &e.sites {
        let site = s.address.map_or("-".to_string(), |a| format!("{a:#x}"));
        writeln!(
            w,
            "  inline  {} (site {site}, depth {})",
            s.function, s.depth
        )?;
        for p in &s.params {
            writeln!(w, "            {} = {}", p.name.unwrap_or("?"), p.display)?;
        }
    }
    writeln!(w)?;
    Ok(())
}
