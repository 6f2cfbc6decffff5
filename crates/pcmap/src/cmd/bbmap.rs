//! `pcmap bbmap`: basic-block address maps (`SHT_LLVM_BB_ADDR_MAP`, legacy `.bb_info`):
//! dump, PC -> block lookup, size statistics and block profiles.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pcmap_bbmap::elf::{ElfBbAddrMaps, ElfKind, ReadOptions, read_elf};
use pcmap_bbmap::index::BlockIndex;
use pcmap_bbmap::model::FunctionMap;
use pcmap_bbmap::profile::{EdgeKind, ProfileSink, binary_desc};
use pcmap_binary::MappedFile;
use pcmap_profile::events;
use pcmap_profile::perfdata::PerfFile;
use serde_json::{Value, json};

/// Basic-block address maps: dump, PC -> block lookup, size statistics, block profiles.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Print every function, range and block with all decoded fields.
    Dump {
        /// ELF file (executable, shared object or relocatable object).
        binary: PathBuf,
        /// Print JSON with llvm-readobj's field names and values
        /// (`llvm-readobj --elf-output-style=JSON --bb-addr-map`, duplicate keys merged).
        #[arg(long)]
        json: bool,
        /// Also decode legacy maps: versions 0/1, the unversioned LLVM 12 section and `.bb_info`.
        #[arg(long)]
        legacy: bool,
    },
    /// Map addresses to `function, range, block id, [start, end)`.
    Lookup {
        /// ELF file.
        binary: PathBuf,
        /// Addresses (hexadecimal, with or without `0x`).
        #[arg(required = true)]
        addrs: Vec<String>,
        /// Use the branch-target rule (first zero-sized block at the address; a block's end
        /// address belongs to it).
        #[arg(long)]
        target: bool,
        /// Also decode legacy maps.
        #[arg(long)]
        legacy: bool,
    },
    /// Size of the map against the text, and what per-block symbols would cost instead.
    Stats {
        /// ELF file.
        binary: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Attribute samples and branch records to blocks: block counts, branch and fall-through edges.
    Profile {
        /// ELF file the profile was recorded on.
        binary: PathBuf,
        /// Profile: perf.data, or pre-aggregated text with `--pa`.
        #[arg(short = 'p', long = "profile")]
        profile: PathBuf,
        /// The profile is pre-aggregated text (`S`, `B`, `T`/`R`, `F`/`f`/`r` records).
        #[arg(long)]
        pa: bool,
        /// Output JSON file (`-` for standard output).
        #[arg(short = 'o', long = "output", default_value = "-")]
        output: PathBuf,
    },
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Dump {
            binary,
            json,
            legacy,
        } => dump(&binary, json, legacy),
        Command::Lookup {
            binary,
            addrs,
            target,
            legacy,
        } => lookup(&binary, &addrs, target, legacy),
        Command::Stats { binary, json } => stats(&binary, json),
        Command::Profile {
            binary,
            profile,
            pa,
            output,
        } => run_profile(&binary, &profile, pa, &output),
    }
}

fn load(path: &Path, legacy: bool) -> Result<(MappedFile, ElfBbAddrMaps)> {
    let file = MappedFile::open(path).with_context(|| format!("opening {}", path.display()))?;
    let maps = read_elf(file.bytes(), ReadOptions { legacy })
        .with_context(|| format!("reading the basic-block address map of {}", path.display()))?;
    Ok((file, maps))
}

/// All functions of all map sections, with their names, in section order.
fn flatten(maps: &ElfBbAddrMaps) -> (Vec<&FunctionMap>, Vec<String>) {
    let mut fs = Vec::new();
    let mut names = Vec::new();
    for s in &maps.sections {
        for (f, n) in s.functions.iter().zip(&s.names) {
            fs.push(f);
            names.push(n.clone().unwrap_or_else(|| "<?>".to_string()));
        }
    }
    (fs, names)
}

fn dump(path: &Path, json: bool, legacy: bool) -> Result<()> {
    let (_file, maps) = load(path, legacy)?;
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    if json {
        let text = pcmap_bbmap::readobj::render_file(&path.display().to_string(), &maps);
        writeln!(w, "{text}")?;
        w.flush()?;
        return Ok(());
    }
    if maps.sections.is_empty() {
        writeln!(w, "{}: no basic-block address map", path.display())?;
    }
    let rel = maps.kind == ElfKind::Relocatable;
    for s in &maps.sections {
        writeln!(
            w,
            "section [{}] {} ({} bytes{}), {} functions{}",
            s.index,
            s.name,
            s.data_size,
            if s.compressed { ", compressed" } else { "" },
            s.functions.len(),
            if rel {
                format!(", addresses are offsets in section [{}]", s.link)
            } else {
                String::new()
            }
        )?;
        for (f, name) in s.functions.iter().zip(&s.names) {
            let layout = match f.layout {
                pcmap_bbmap::Layout::Versioned(v) => format!("version {v}"),
                pcmap_bbmap::Layout::Unversioned => "unversioned".to_string(),
                pcmap_bbmap::Layout::BbInfoProposal => ".bb_info".to_string(),
            };
            writeln!(
                w,
                "function {} at {:#x} ({layout}, features {:#x})",
                name.as_deref().unwrap_or("<?>"),
                f.function_address(),
                f.features.0
            )?;
            for (ri, r) in f.ranges.iter().enumerate() {
                writeln!(
                    w,
                    "  range {ri} at {:#x}: {} blocks",
                    r.base_address, r.num_blocks
                )?;
                for (bi, e) in r.entries.iter().enumerate() {
                    let start = r.base_address.wrapping_add(u64::from(e.offset));
                    let m = e.metadata;
                    let mut flags = Vec::new();
                    for (on, n) in [
                        (m.has_return(), "HasReturn"),
                        (m.has_tail_call(), "HasTailCall"),
                        (m.is_eh_pad(), "IsEHPad"),
                        (m.can_fall_through(), "CanFallThrough"),
                        (m.has_indirect_branch(), "HasIndirectBranch"),
                    ] {
                        if on {
                            flags.push(n);
                        }
                    }
                    write!(
                        w,
                        "    [{bi}] BB{} [{:#x}, {:#x}) offset {:#x} size {:#x}",
                        e.id,
                        start,
                        start + u64::from(e.size),
                        e.offset,
                        e.size
                    )?;
                    if !flags.is_empty() {
                        write!(w, " {}", flags.join(" "))?;
                    }
                    if !e.callsite_end_offsets.is_empty() {
                        write!(w, " callsite ends {:?}", e.callsite_end_offsets)?;
                    }
                    if f.features.bb_hash() {
                        write!(w, " hash {:#018x}", e.hash)?;
                    }
                    writeln!(w)?;
                }
            }
            if let Some(p) = &f.pgo {
                if f.features.func_entry_count() {
                    writeln!(w, "  entry count {}", p.func_entry_count)?;
                }
                let ids: Vec<u32> = f
                    .ranges
                    .iter()
                    .flat_map(|r| r.entries.iter().map(|e| e.id))
                    .collect();
                for (b, id) in p.bb_entries.iter().zip(ids) {
                    write!(w, "  BB{id}")?;
                    if f.features.bb_freq() {
                        write!(w, " frequency {}", b.frequency)?;
                    }
                    if f.features.post_link_cfg() {
                        write!(w, " post-link count {}", b.post_link_frequency)?;
                    }
                    if f.features.br_prob() {
                        let succ: Vec<String> = b
                            .successors
                            .iter()
                            .map(|s| {
                                let pct = f64::from(s.probability) / f64::from(1u32 << 31) * 100.0;
                                if f.features.post_link_cfg() {
                                    format!(
                                        "BB{} {pct:.2}% (count {})",
                                        s.id, s.post_link_frequency
                                    )
                                } else {
                                    format!("BB{} {pct:.2}%", s.id)
                                }
                            })
                            .collect();
                        write!(w, " -> {}", succ.join(", "))?;
                    }
                    writeln!(w)?;
                }
            }
        }
    }
    w.flush()?;
    Ok(())
}

fn parse_addr(s: &str) -> Result<u64> {
    let t = s.trim();
    let h = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(h, 16).with_context(|| format!("not a hexadecimal address: {s:?}"))
}

fn lookup(path: &Path, addrs: &[String], target: bool, legacy: bool) -> Result<()> {
    let (_file, maps) = load(path, legacy)?;
    if maps.kind == ElfKind::Relocatable && maps.sections.len() > 1 {
        eprintln!(
            "pcmap: warning: {} is a relocatable object: block addresses are offsets in their text sections and may overlap",
            path.display()
        );
    }
    let addrs: Vec<u64> = addrs.iter().map(|a| parse_addr(a)).collect::<Result<_>>()?;
    let (fs, names) = flatten(&maps);
    let index = BlockIndex::new(fs.iter().copied());
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    for a in addrs {
        let pos = if target {
            index.lookup_branch_target(a)
        } else {
            index.lookup(a)
        };
        match pos {
            Some(p) => {
                let b = index.block(p);
                write!(
                    w,
                    "{a:#x} -> {} range {} BB{} [{:#x}, {:#x}) index {}",
                    names[b.handle.function as usize],
                    b.handle.range,
                    b.id,
                    b.start,
                    b.end,
                    b.handle.index
                )?;
                let cs = index.callsite_position(p, a);
                if cs.calls_in_block > 0 {
                    write!(
                        w,
                        " after {} of {} calls{}",
                        cs.calls_before,
                        cs.calls_in_block,
                        if cs.at_callsite_end {
                            " (at a callsite end)"
                        } else {
                            ""
                        }
                    )?;
                }
                writeln!(w)?;
            }
            None => writeln!(w, "{a:#x} -> not in any block")?,
        }
    }
    w.flush()?;
    Ok(())
}

fn stats(path: &Path, json_out: bool) -> Result<()> {
    let (file, maps) = load(path, false)?;
    let file_size = file.bytes().len() as u64;
    let map_file_bytes: u64 = maps.sections.iter().map(|s| s.file_size).sum();
    let map_data_bytes: u64 = maps.sections.iter().map(|s| s.data_size).sum();
    let (fs, names) = flatten(&maps);
    let functions = fs.len() as u64;
    let ranges: u64 = fs.iter().map(|f| f.ranges.len() as u64).sum();
    let blocks: u64 = fs
        .iter()
        .flat_map(|f| f.ranges.iter())
        .map(|r| u64::from(r.num_blocks))
        .sum();
    // The proposal's alternative: one symbol per block except each range's first (which has a
    // function or `.cold`/`.__part` symbol already), named in the unary scheme
    // (`a.BB.f`, `ra.BB.f`, `rra.BB.f`, ...). With string-table tail merging only the longest
    // name of a function is stored: (blocks - 1) + len(".BB.") + len(name) + 1 bytes.
    let sym_size: u64 = if maps.address_size == 8 { 24 } else { 16 };
    let mut extra_symbols = 0u64;
    let mut strtab_bytes = 0u64;
    for (f, name) in fs.iter().zip(&names) {
        let n: u64 = f.ranges.iter().map(|r| u64::from(r.num_blocks)).sum();
        let labels = n.saturating_sub(f.ranges.len() as u64);
        extra_symbols += labels;
        if labels > 0 {
            strtab_bytes += labels + 4 + name.len() as u64 + 1;
        }
    }
    let symbol_bytes = extra_symbols * sym_size + strtab_bytes;
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            a as f64 * 100.0 / b as f64
        }
    };
    if json_out {
        let v = json!({
            "file": path.display().to_string(),
            "file_size": file_size,
            "text_size": maps.text_size,
            "map_sections": maps.sections.len(),
            "map_size": map_file_bytes,
            "map_size_decompressed": map_data_bytes,
            "functions": functions,
            "ranges": ranges,
            "blocks": blocks,
            "map_percent_of_text": pct(map_file_bytes, maps.text_size),
            "map_percent_of_file": pct(map_file_bytes, file_size),
            "block_symbols": extra_symbols,
            "block_symbol_bytes": symbol_bytes,
            "block_symbol_percent_of_file": pct(symbol_bytes, file_size),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "file                 {} ({file_size} bytes)",
        path.display()
    );
    println!("text                 {} bytes", maps.text_size);
    println!(
        "map                  {map_file_bytes} bytes in {} section(s){} = {:.1}% of text, {:.1}% of the file",
        maps.sections.len(),
        if map_data_bytes != map_file_bytes {
            format!(" ({map_data_bytes} decompressed)")
        } else {
            String::new()
        },
        pct(map_file_bytes, maps.text_size),
        pct(map_file_bytes, file_size)
    );
    println!("functions            {functions} ({ranges} ranges, {blocks} blocks)");
    println!(
        "as block symbols     {extra_symbols} symbols x {sym_size} bytes + {strtab_bytes} string bytes = {symbol_bytes} bytes = {:.1}% of the file ({:.1}x the map)",
        pct(symbol_bytes, file_size),
        if map_file_bytes == 0 {
            0.0
        } else {
            symbol_bytes as f64 / map_file_bytes as f64
        }
    );
    Ok(())
}

fn run_profile(binary: &Path, profile_path: &Path, pa: bool, output: &Path) -> Result<()> {
    let (elf_file, maps) = load(binary, false)?;
    if maps.kind == ElfKind::Relocatable {
        bail!(
            "{} is a relocatable object: profiles need a linked binary",
            binary.display()
        );
    }
    let (fs, names) = flatten(&maps);
    let index = BlockIndex::new(fs.iter().copied());
    let prof_file = MappedFile::open(profile_path)
        .with_context(|| format!("opening {}", profile_path.display()))?;
    let mut sink = ProfileSink::new(&index);
    if pa {
        events::read_preaggregated(prof_file.bytes(), &mut sink)
            .map_err(|e| anyhow::anyhow!("{}:{e}", profile_path.display()))?;
    } else {
        let bin = pcmap_binary::Binary::parse(elf_file.bytes())
            .with_context(|| format!("parsing {}", binary.display()))?;
        let desc = binary_desc(&bin, binary.as_os_str().as_encoded_bytes());
        let perf = PerfFile::parse(prof_file.bytes())
            .with_context(|| format!("reading {}", profile_path.display()))?;
        let opts = events::PerfOptions {
            basic: !events::has_branch_stacks(&perf),
            sample_ips: true,
            ignore_build_id: true,
            ..Default::default()
        };
        events::read_perf_data(&perf, &desc, &opts, &mut sink)
            .with_context(|| format!("reading {}", profile_path.display()))?;
    }
    let prof = sink.finish();
    let block_ref = |pos: u32| -> Value {
        let b = index.block(pos as usize);
        json!({
            "function": names[b.handle.function as usize],
            "function_index": b.handle.function,
            "range": b.handle.range,
            "index": b.handle.index,
            "id": b.id,
            "start": b.start,
            "end": b.end,
        })
    };
    let mut blocks: Vec<(u32, u64)> = prof.block_samples.iter().map(|(&k, &v)| (k, v)).collect();
    blocks.sort_unstable();
    let mut branches: Vec<_> = prof.branch_edges().collect();
    branches.sort_unstable_by_key(|&((f, t, k), _)| (f, t, k));
    let mut falls: Vec<_> = prof
        .fallthrough_edges
        .iter()
        .map(|(&k, &v)| (k, v))
        .collect();
    falls.sort_unstable();
    let kind_name = |k: EdgeKind| match k {
        EdgeKind::Branch => "branch",
        EdgeKind::Call => "call",
        EdgeKind::Return => "return",
        EdgeKind::InterFunction => "inter-function",
    };
    let doc = json!({
        "binary": binary.display().to_string(),
        "total_samples": prof.total_samples,
        "unmapped_samples": prof.unmapped_samples,
        "total_branches": prof.total_branches,
        "unmapped_branches": prof.unmapped_branches,
        "total_fallthroughs": prof.total_fallthroughs,
        "unmapped_fallthroughs": prof.unmapped_fallthroughs,
        "invalid_fallthroughs": prof.invalid_fallthroughs,
        "blocks": blocks.iter().map(|&(p, n)| {
            let mut v = block_ref(p);
            v["samples"] = json!(n);
            v
        }).collect::<Vec<_>>(),
        "branch_edges": branches.iter().map(|&((f, t, k), (n, m))| json!({
            "from": block_ref(f), "to": block_ref(t), "kind": kind_name(k), "count": n, "mispredicts": m,
        })).collect::<Vec<_>>(),
        "fallthrough_edges": falls.iter().map(|&((f, t), n)| json!({
            "from": block_ref(f), "to": block_ref(t), "count": n,
        })).collect::<Vec<_>>(),
    });
    crate::output::write_atomic(output, |w| {
        serde_json::to_writer_pretty(&mut *w, &doc)?;
        writeln!(w)?;
        Ok(())
    })
}
