//! `pcmap bat`: dump a BOLT address translation table and translate BOLTed addresses.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pcmap_bat::{Bat, BatTable, Entry, EntryKind, SECTION_NAME};
use pcmap_binary::bolt::BoltFunctions;
use pcmap_binary::{Binary, MappedFile};
use serde_json::{Value, json};

/// Dump or query the BOLT address translation table (.note.bolt_bat) of a BOLT-optimized binary.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: BatCommand,
}

/// `pcmap bat` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum BatCommand {
    /// Print every BAT function and entry (the layout of `llvm-bat-dump --dump-all`).
    Dump {
        /// The BOLT-optimized ELF file (built with `llvm-bolt --enable-bat`).
        binary: PathBuf,
        /// Print JSON (functions with names, entries, cold fragments) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Translate addresses of the BOLTed binary to input functions and offsets
    /// (`0x80009f -> work + 0x39`, the `llvm-bat-dump --translate` format), as perf2bolt does:
    /// addresses in cold fragments are named after their input (hot) function.
    Translate {
        /// The BOLT-optimized ELF file.
        binary: PathBuf,
        /// Addresses (`0x` hex or decimal); append `:1` for a branch source (`ADDR[:0|1]`).
        #[arg(required = true, value_name = "ADDR[:1]")]
        addresses: Vec<String>,
    },
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        BatCommand::Dump { binary, json } => dump(&binary, json),
        BatCommand::Translate { binary, addresses } => translate(&binary, &addresses),
    }
}

/// The BAT section's contents (note header included).
fn bat_section<'d>(bin: &Binary<'d>, path: &Path) -> Result<std::borrow::Cow<'d, [u8]>> {
    let section = bin.section_by_name(SECTION_NAME).with_context(|| {
        format!(
            "{}: no {SECTION_NAME} section (was it BOLTed with --enable-bat?)",
            path.display()
        )
    })?;
    bin.section_data(section)
        .with_context(|| format!("{}: reading section {SECTION_NAME}", path.display()))
}

fn open(path: &Path) -> Result<MappedFile> {
    MappedFile::open(path).with_context(|| format!("opening {}", path.display()))
}

fn dump(path: &Path, as_json: bool) -> Result<()> {
    let file = open(path)?;
    let bin = Binary::parse(file.bytes()).with_context(|| format!("parsing {}", path.display()))?;
    let data = bat_section(&bin, path)?;
    let bat = Bat::decode_note(&data)
        .with_context(|| format!("{}: section {SECTION_NAME}", path.display()))?;
    let text = if as_json {
        dump_json(&bat, &bin)?
    } else {
        dump_text(&bat)
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    out.write_all(text.as_bytes())
        .context("writing to standard output")?;
    out.flush().context("writing to standard output")?;
    Ok(())
}

/// `BoltAddressTranslation::dump`: all fragments in address order (hot ones with hash, block
/// count and secondary entry points), then the cold-to-hot links. All hex is lower case, as
/// upstream prints it (`Twine::utohexstr` goes through `raw_ostream::write_hex`; `formatv("{0:x}")`)
/// and as `bolt/test/X86/bolt-address-translation.test` checks.
fn dump_text(bat: &Bat) -> String {
    use std::fmt::Write as _;
    enum Frag<'a> {
        Hot(&'a pcmap_bat::HotFunction),
        Cold(&'a pcmap_bat::ColdFragment),
    }
    let mut fragments: Vec<(u64, Frag<'_>)> = bat
        .hot
        .iter()
        .map(|h| (h.address, Frag::Hot(h)))
        .chain(bat.cold.iter().map(|c| (c.address, Frag::Cold(c))))
        .collect();
    fragments.sort_by_key(|f| f.0);

    let mut s = String::with_capacity(64 * fragments.len());
    let _ = writeln!(s, "BAT tables for {} functions:", fragments.len());
    for (address, frag) in &fragments {
        let _ = write!(s, "Function Address: 0x{address:x}");
        let entries = match frag {
            Frag::Hot(h) => {
                let _ = write!(s, ", hash: {:#x}", h.hash);
                &h.entries
            }
            Frag::Cold(c) => &c.entries,
        };
        s.push_str("\nBB mappings:\n");
        for e in entries {
            let _ = write!(s, "0x{:x} -> 0x{:x}", e.output_offset, e.input_offset);
            match e.kind {
                EntryKind::Branch => s.push_str(" (branch)"),
                EntryKind::Block(b) => {
                    let _ = write!(s, " hash: {:#x}", b.hash);
                }
            }
            s.push('\n');
        }
        if let Frag::Hot(h) = frag {
            let _ = writeln!(s, "NumBlocks: {}", h.num_blocks);
            if !h.secondary_entry_points.is_empty() {
                let _ = writeln!(
                    s,
                    "{} secondary entry points:",
                    h.secondary_entry_points.len()
                );
                for p in &h.secondary_entry_points {
                    let _ = writeln!(s, "{p:#x}");
                }
            }
        }
        s.push('\n');
    }
    if !bat.cold.is_empty() {
        let _ = writeln!(s, "{} cold mappings:", bat.cold.len());
        for c in &bat.cold {
            let parent = bat.parent_of(c).map_or(0, |h| h.address);
            let _ = writeln!(s, "0x{:x} -> {parent:x}", c.address);
        }
        s.push('\n');
    }
    s
}

fn entries_json(entries: &[Entry]) -> Value {
    Value::Array(
        entries
            .iter()
            .map(|e| match e.kind {
                EntryKind::Branch => json!({
                    "output_offset": e.output_offset,
                    "input_offset": e.input_offset,
                    "kind": "branch",
                }),
                EntryKind::Block(b) => json!({
                    "output_offset": e.output_offset,
                    "input_offset": e.input_offset,
                    "kind": "block",
                    "block_index": b.index,
                    "block_hash": format!("{:#018x}", b.hash),
                }),
            })
            .collect(),
    )
}

fn dump_json(bat: &Bat, bin: &Binary<'_>) -> Result<String> {
    let name_at = |address: u64| -> Value {
        bin.function_table()
            .functions()
            .binary_search_by_key(&address, |f| f.address)
            .ok()
            .map(|i| Value::from(bin.function_name(&bin.functions()[i])))
            .unwrap_or(Value::Null)
    };
    let mut cold_of: Vec<Vec<u64>> = vec![Vec::new(); bat.hot.len()];
    for c in &bat.cold {
        if let Some(list) = cold_of.get_mut(c.hot_index) {
            list.push(c.address);
        }
    }
    let hot: Vec<Value> = bat
        .hot
        .iter()
        .zip(&cold_of)
        .map(|(h, cold)| {
            json!({
                "address": h.address,
                "name": name_at(h.address),
                "hash": format!("{:#018x}", h.hash),
                "num_blocks": h.num_blocks,
                "secondary_entry_points": h.secondary_entry_points,
                "cold_fragments": cold,
                "entries": entries_json(&h.entries),
            })
        })
        .collect();
    let cold: Vec<Value> = bat
        .cold
        .iter()
        .map(|c| {
            json!({
                "address": c.address,
                "name": name_at(c.address),
                "hot_address": bat.parent_of(c).map(|h| h.address),
                "input_skew": c.input_skew,
                "entries": entries_json(&c.entries),
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&json!({ "functions": hot, "cold_fragments": cold }))?;
    s.push('\n');
    Ok(s)
}

/// Parse `ADDR[:0|1]` (`0x` hex or decimal, as `llvm-bat-dump --translate`).
fn parse_spec(spec: &str) -> Result<(u64, bool)> {
    let (addr, src) = spec.split_once(':').unwrap_or((spec, ""));
    let address = match addr.strip_prefix("0x").or_else(|| addr.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => addr.parse(),
    }
    .with_context(|| format!("cannot parse address {addr:?} (use 0x-prefixed hex or decimal)"))?;
    let is_branch_src = match src {
        "" | "0" => false,
        "1" => true,
        other => bail!("cannot parse branch-source flag {other:?} in {spec:?}: use 0 or 1"),
    };
    Ok((address, is_branch_src))
}

fn translate(path: &Path, specs: &[String]) -> Result<()> {
    let queries = specs
        .iter()
        .map(|s| parse_spec(s))
        .collect::<Result<Vec<_>>>()?;
    let file = open(path)?;
    let bin = Binary::parse(file.bytes()).with_context(|| format!("parsing {}", path.display()))?;
    let data = bat_section(&bin, path)?;
    let table = BatTable::parse(&data)
        .with_context(|| format!("{}: section {SECTION_NAME}", path.display()))?;
    // BOLT's functions, with perf2bolt's lookup rule: an address belongs to the function whose
    // "max size" (up to the next function, padding included) covers it.
    let functions = BoltFunctions::discover(&bin)
        .with_context(|| format!("discovering the functions of {}", path.display()))?;
    let mut s = String::new();
    for (address, is_branch_src) in queries {
        use std::fmt::Write as _;
        match pcmap_perf2bolt::bat_origin::origin(&bin, &functions, &table, address, is_branch_src)
        {
            Some(o) => {
                let _ = writeln!(s, "0x{address:x} -> {} + 0x{:x}", o.function, o.offset);
            }
            None => {
                let _ = writeln!(s, "No function symbol found for 0x{address:x}");
            }
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    out.write_all(s.as_bytes())
        .context("writing to standard output")?;
    out.flush().context("writing to standard output")?;
    Ok(())
}
