//! `pcmap explain`: everything pcmap knows about an address, one layer per room — the function
//! symbol and offset (`pcmap_binary`), the input location on a BOLTed binary
//! (`pcmap_perf2bolt::bat_origin`), the basic block (`pcmap_bbmap::BlockIndex`) with its profile
//! counts (`pcmap_bbmap::profile`), the inline frames and the parameter locations of the inline
//! sites around it (`pcmap_inline`).
//!
//! On a BOLTed binary whose DWARF and block map stay in the binary BOLT read, `--input-binary`
//! takes the block, frames and sites from that binary at the translated input address.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pcmap_bat::SECTION_NAME as BAT_SECTION;
use pcmap_bbmap::BlockIndex;
use pcmap_bbmap::elf::{ElfBbAddrMaps, ReadOptions, read_binary};
use pcmap_bbmap::model::FunctionMap;
use pcmap_bbmap::profile::BlockProfile;
use pcmap_binary::bolt::BoltFunctions;
use pcmap_binary::{Binary, MappedFile};
use pcmap_inline::report::{JsonSite, json_site};
use pcmap_inline::symbolize::{Frame, Symbolizer};
use pcmap_inline::{DebugData, InlineInfo, Location, ParamsAt};
use serde::Serialize;

/// Explain addresses: symbol+offset, BOLT input location, basic block and its profile counts,
/// inline frames, parameter locations
///
/// With no address arguments, addresses are read from standard input (whitespace-separated, any
/// number per line) and each line is answered at once (text, or one JSON object per address and
/// line with --json), so pcmap explain works in a pipeline or as a coprocess.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// ELF binary the addresses belong to (for example a BOLTed binary sampled in production)
    binary: PathBuf,
    /// Addresses (hexadecimal, with or without 0x); read from standard input when none are given
    addresses: Vec<String>,
    /// Print JSON (an array for address arguments; one object per line for standard input)
    #[arg(long)]
    json: bool,
    /// The binary BOLT read (with DWARF and the basic-block address map): blocks, frames and
    /// inline sites come from it, at the input address BAT translates each address to
    #[arg(long, value_name = "INPUT")]
    input_binary: Option<PathBuf>,
    /// Profile of the binary that carries the block map (perf.data, or pre-aggregated text with
    /// --pa): adds each block's sample and edge counts
    #[arg(short = 'p', long = "profile", value_name = "PROFILE")]
    profile: Option<PathBuf>,
    /// The profile is pre-aggregated text
    #[arg(long, requires = "profile")]
    pa: bool,
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
    /// Input function (BOLT keeps its name in the BOLTed binary).
    function: &'a str,
    /// The input function's hot fragment in the BOLTed binary.
    function_address: u64,
    /// Offset in the input function.
    offset: u64,
    /// False when BOLT did not rewrite the function (the offset needs no translation).
    translated: bool,
    /// `hot` or `cold` (a split-off fragment).
    fragment: &'static str,
    fragment_address: u64,
    /// BAT's `FuncHash` of the input function.
    function_hash: Option<u64>,
    /// The input block BAT records (`BBIdx`, `BBHash`).
    block_index: Option<u32>,
    block_hash: Option<u64>,
    /// The address in the `--input-binary`, when given.
    input_address: Option<u64>,
}

/// Where the address lies relative to its block's calls (maps with callsite end offsets).
#[derive(Serialize)]
struct CallsiteLayer {
    /// Calls of the block that end at or before the address (a return address equals an end).
    calls_before: u32,
    calls_in_block: u32,
    /// The address is a return address of one of the block's calls.
    at_callsite_end: bool,
}

/// Counts of a block in the `-p` profile.
#[derive(Serialize, Default, Clone, Copy)]
struct BlockCounts {
    /// Samples whose IP lies in the block.
    samples: u64,
    /// Taken branches entering the block at its start (branches within a function, calls to a
    /// function entry, jumps between functions).
    branches_in: u64,
    /// Taken branches leaving the block (calls, which come back into the block, excluded).
    branches_out: u64,
    fallthroughs_in: u64,
    fallthroughs_out: u64,
    /// Executions of the block: the larger of what enters and what leaves it.
    executions: u64,
}

#[derive(Serialize)]
struct BlockLayer<'a> {
    function: &'a str,
    range: u32,
    id: u32,
    index: u32,
    start: u64,
    end: u64,
    /// The block's hash (maps with the hash feature).
    hash: Option<u64>,
    callsites: Option<CallsiteLayer>,
    counts: Option<BlockCounts>,
}

/// A parameter of the innermost inlined call, located at the explained PC.
#[derive(Serialize)]
struct ParamAtPc<'a> {
    name: Option<&'a str>,
    /// `register`, `stack`, `constant`, ... (as `pcmap inline sites`).
    class: &'static str,
    /// The location in x86-64 register names.
    display: String,
    location: Location,
}

#[derive(Serialize)]
struct Explained<'a> {
    address: u64,
    symbol: Option<SymbolLayer<'a>>,
    bolt: Option<BoltLayer<'a>>,
    /// The address the block, frames and sites below are about: `address`, or its input address
    /// with `--input-binary`.
    code_address: Option<u64>,
    block: Option<BlockLayer<'a>>,
    frames: Vec<Frame>,
    sites: Vec<JsonSite<'a>>,
    /// The parameters of the innermost inlined call at this PC (the sites above give them at the
    /// site's entry).
    params_at_pc: Vec<ParamAtPc<'a>>,
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

fn open(path: &Path) -> Result<MappedFile> {
    MappedFile::open(path).with_context(|| format!("opening {}", path.display()))
}

/// What one binary says about code addresses: its block map, DWARF and inline sites.
struct CodeLayers<'b> {
    blocks: Option<BlockIndex>,
    functions: Vec<&'b FunctionMap>,
    names: Vec<String>,
    symbolizer: Option<Symbolizer<'b>>,
    info: Option<InlineInfo<'b>>,
    debug: Option<&'b DebugData<'b>>,
    params_at: Option<ParamsAt<'b>>,
    counts: Option<std::collections::HashMap<u32, BlockCounts>>,
}

impl CodeLayers<'_> {
    fn block(&self, a: u64) -> Option<BlockLayer<'_>> {
        let index = self.blocks.as_ref()?;
        let pos = index.lookup(a)?;
        let b = index.block(pos);
        let f = self.functions[b.handle.function as usize];
        let entry = f
            .ranges
            .get(b.handle.range as usize)
            .and_then(|r| r.entries.get(b.handle.index as usize));
        let callsites = f.features.callsite_end_offsets().then(|| {
            let p = index.callsite_position(pos, a);
            CallsiteLayer {
                calls_before: p.calls_before,
                calls_in_block: p.calls_in_block,
                at_callsite_end: p.at_callsite_end,
            }
        });
        Some(BlockLayer {
            function: &self.names[b.handle.function as usize],
            range: b.handle.range,
            id: b.id,
            index: b.handle.index,
            start: b.start,
            end: b.end,
            hash: f
                .features
                .bb_hash()
                .then(|| entry.map(|e| e.hash))
                .flatten(),
            callsites,
            counts: self
                .counts
                .as_ref()
                .map(|c| c.get(&(pos as u32)).copied().unwrap_or_default()),
        })
    }

    fn frames(&self, a: u64) -> Result<Vec<Frame>> {
        Ok(match &self.symbolizer {
            // llvm-symbolizer's default answer: every inline frame, linkage names demangled.
            Some(s) => s.lookup(
                a,
                &pcmap_inline::symbolize::Options {
                    inlines: true,
                    names: pcmap_inline::symbolize::FunctionNameKind::Linkage,
                    gnu: false,
                    basenames: false,
                    demangle: true,
                },
            )?,
            None => Vec::new(),
        })
    }

    fn params_at_pc(&self, a: u64) -> Result<Vec<ParamAtPc<'_>>> {
        let (Some(info), Some(at)) = (&self.info, &self.params_at) else {
            return Ok(Vec::new());
        };
        let Some(site) = info.sites_at(a).into_iter().next() else {
            return Ok(Vec::new());
        };
        let callee = &info.functions[site.callee as usize];
        Ok(at
            .params(info, site, a)?
            .into_iter()
            .zip(&callee.params)
            .map(|(p, d)| ParamAtPc {
                name: d.name.as_deref(),
                class: p.location.class().name(),
                display: p.location.display_x86_64(),
                location: p.location,
            })
            .collect())
    }

    fn sites(&self, a: u64) -> Vec<JsonSite<'_>> {
        match (&self.info, self.debug) {
            (Some(info), Some(debug)) => info
                .sites_at(a)
                .into_iter()
                .map(|s| json_site(info, debug, s))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Per-block counts from a block profile: samples, and edges in and out of each block.
fn block_counts(prof: &BlockProfile) -> std::collections::HashMap<u32, BlockCounts> {
    use pcmap_bbmap::profile::EdgeKind;
    let mut m: std::collections::HashMap<u32, BlockCounts> = std::collections::HashMap::new();
    for (&pos, &n) in &prof.block_samples {
        m.entry(pos).or_default().samples += n;
    }
    for ((from, to, kind), (n, _)) in prof.branch_edges() {
        // A call leaves its block in the middle and comes back to it; a return lands in the
        // middle of the calling block. Neither enters or leaves a block as a whole.
        if kind != EdgeKind::Call {
            let c = m.entry(from).or_default();
            c.branches_out = c.branches_out.saturating_add(n);
        }
        if kind != EdgeKind::Return {
            let c = m.entry(to).or_default();
            c.branches_in = c.branches_in.saturating_add(n);
        }
    }
    for (&(from, to), &n) in &prof.fallthrough_edges {
        let c = m.entry(from).or_default();
        c.fallthroughs_out = c.fallthroughs_out.saturating_add(n);
        let c = m.entry(to).or_default();
        c.fallthroughs_in = c.fallthroughs_in.saturating_add(n);
    }
    for c in m.values_mut() {
        c.executions = c
            .branches_in
            .saturating_add(c.fallthroughs_in)
            .max(c.branches_out.saturating_add(c.fallthroughs_out));
    }
    m
}

pub fn run(args: Args) -> Result<()> {
    let path: &Path = &args.binary;
    let addresses: Vec<u64> = args
        .addresses
        .iter()
        .map(|a| parse_address(a))
        .collect::<Result<_>>()?;
    let file = open(path)?;
    let bin = Binary::parse(file.bytes()).with_context(|| format!("parsing {}", path.display()))?;
    let input_file = args.input_binary.as_deref().map(open).transpose()?;
    let input_bin = match (&input_file, &args.input_binary) {
        (Some(f), Some(p)) => {
            Some(Binary::parse(f.bytes()).with_context(|| format!("parsing {}", p.display()))?)
        }
        _ => None,
    };

    // BOLT: only on binaries with a BAT section.
    let bat = match crate::inputs::bat_table(&bin, path)? {
        Some(table) => {
            let functions = BoltFunctions::discover(&bin)
                .with_context(|| format!("discovering the functions of {}", path.display()))?;
            Some((table, functions))
        }
        None => None,
    };
    if input_bin.is_some() && bat.is_none() {
        bail!(
            "{} has no {BAT_SECTION} section: --input-binary needs a binary BOLTed with \
             --enable-bat",
            path.display()
        );
    }

    // The binary the block, frame and site layers come from.
    let (code_bin, code_path) = match (&input_bin, &args.input_binary) {
        (Some(b), Some(p)) => (b, p.as_path()),
        _ => (&bin, path),
    };
    let maps: ElfBbAddrMaps =
        read_binary(code_bin, ReadOptions { legacy: false }).with_context(|| {
            format!(
                "reading the basic-block address map of {}",
                code_path.display()
            )
        })?;
    let (functions, names) = maps.functions_with_names();
    let blocks = (!functions.is_empty()).then(|| BlockIndex::new(functions.iter().copied()));
    let counts = match (&args.profile, &blocks) {
        (Some(p), Some(index)) => Some(block_counts(&crate::cmd::bbmap::read_block_profile(
            code_bin,
            code_path,
            index,
            std::slice::from_ref(p),
            args.pa,
        )?)),
        (Some(_), None) => bail!(
            "{} has no basic-block address map: -p needs one to count blocks \
             (build with -fbasic-block-address-map)",
            code_path.display()
        ),
        _ => None,
    };
    let debug = match DebugData::from_binary(code_bin) {
        Ok(d) => Some(d),
        Err(pcmap_inline::Error::NoDebugInfo) => None,
        Err(e) => {
            return Err(e).with_context(|| format!("reading the DWARF of {}", code_path.display()));
        }
    };
    let symbolizer = debug.as_ref().map(Symbolizer::new).transpose()?;
    let info: Option<InlineInfo<'_>> = debug
        .as_ref()
        .map(pcmap_inline::extract_sites)
        .transpose()?;
    let code = CodeLayers {
        blocks,
        functions,
        names,
        symbolizer,
        info,
        debug: debug.as_ref(),
        params_at: debug.as_ref().map(ParamsAt::new),
        counts,
    };

    let explain = |a: u64| -> Result<Explained<'_>> {
        let symbol = bin.function_at(a).map(|f| SymbolLayer {
            name: bin.function_name(f),
            address: f.address,
            size: f.size,
            offset: a - f.address,
        });
        let origin = bat.as_ref().and_then(|(table, functions)| {
            pcmap_perf2bolt::bat_origin::origin(&bin, functions, table, a, false)
        });
        let input_address = match (&origin, &input_bin) {
            (Some(o), Some(input)) => o.input_address(input),
            _ => None,
        };
        let bolt = origin.map(|o| BoltLayer {
            function: o.function,
            function_address: o.function_address,
            offset: o.offset,
            translated: o.translated,
            fragment: if o.cold { "cold" } else { "hot" },
            fragment_address: o.fragment_address,
            function_hash: o.function_hash,
            block_index: o.block.map(|b| b.index),
            block_hash: o.block.map(|b| b.hash),
            input_address,
        });
        let code_address = if input_bin.is_some() {
            input_address
        } else {
            Some(a)
        };
        let (block, frames, sites, params_at_pc) = match code_address {
            Some(c) => (
                code.block(c),
                code.frames(c)?,
                code.sites(c),
                code.params_at_pc(c)?,
            ),
            None => (None, Vec::new(), Vec::new(), Vec::new()),
        };
        Ok(Explained {
            address: a,
            symbol,
            bolt,
            code_address,
            block,
            frames,
            sites,
            params_at_pc,
        })
    };

    if !addresses.is_empty() {
        let out = addresses
            .iter()
            .map(|&a| explain(a))
            .collect::<Result<Vec<_>>>()?;
        return crate::output::write_atomic(Path::new("-"), |w| {
            if args.json {
                serde_json::to_writer_pretty(&mut *w, &out)?;
                writeln!(w)?;
                return Ok(());
            }
            for e in &out {
                write_text(w, e)?;
            }
            Ok(())
        });
    }

    // Standard input: answer each line at once (usable as a coprocess).
    let stdin = std::io::stdin();
    crate::output::write_atomic(Path::new("-"), |w| {
        for (n, line) in stdin.lock().lines().enumerate() {
            let line = line.context("reading standard input")?;
            for word in line.split_whitespace() {
                let a = parse_address(word)
                    .with_context(|| format!("standard input, line {}", n + 1))?;
                let e = explain(a)?;
                if args.json {
                    serde_json::to_writer(&mut *w, &e)?;
                    writeln!(w)?;
                } else {
                    write_text(w, &e)?;
                }
            }
            w.flush().context("writing to standard output")?;
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
        write!(w, "  input   {} + {:#x}", b.function, b.offset)?;
        if b.translated {
            write!(
                w,
                " (BAT, {} fragment {:#x}",
                b.fragment, b.fragment_address
            )?;
            if let (Some(i), Some(h)) = (b.block_index, b.block_hash) {
                write!(w, ", block {i} hash {h:#018x}")?;
            }
            write!(w, ")")?;
        } else {
            write!(w, " (not rewritten)")?;
        }
        match b.input_address {
            Some(a) => writeln!(w, " -> {a:#x} in the input binary")?,
            None => writeln!(w)?,
        }
    }
    if let Some(b) = &e.block {
        write!(
            w,
            "  block   {} range {} BB{} [{:#x}, {:#x}) index {}",
            b.function, b.range, b.id, b.start, b.end, b.index
        )?;
        if let Some(h) = b.hash {
            write!(w, " hash {h:#018x}")?;
        }
        if let Some(c) = &b.callsites {
            write!(
                w,
                " after {} of {} calls{}",
                c.calls_before,
                c.calls_in_block,
                if c.at_callsite_end {
                    " (return address)"
                } else {
                    ""
                }
            )?;
        }
        writeln!(w)?;
        if let Some(c) = &b.counts {
            writeln!(
                w,
                "  counts  {} executions, {} samples, branches in/out {}/{}, fall-throughs in/out {}/{}",
                c.executions,
                c.samples,
                c.branches_in,
                c.branches_out,
                c.fallthroughs_in,
                c.fallthroughs_out
            )?;
        }
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
    if !e.params_at_pc.is_empty() {
        writeln!(w, "  at this pc")?;
        for p in &e.params_at_pc {
            writeln!(w, "            {} = {}", p.name.unwrap_or("?"), p.display)?;
        }
    }
    writeln!(w)?;
    Ok(())
}
