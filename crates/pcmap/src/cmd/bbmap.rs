//! `pcmap bbmap`: basic-block address maps (`SHT_LLVM_BB_ADDR_MAP`, legacy `.bb_info`):
//! dump, PC -> block lookup, size statistics and block profiles.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pcmap_bbmap::elf::{ElfBbAddrMaps, ElfKind, ReadOptions, read_elf};
use pcmap_bbmap::index::BlockIndex;
use pcmap_bbmap::model::FunctionMap;
use pcmap_bbmap::profile::{BlockProfile, EdgeKind, ProfileSink, binary_desc};
use pcmap_bbmap::report::SizeStats;
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

/// What `bbmap profile` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProfileOutput {
    /// Block counts and edges as JSON.
    Json,
    /// BOLT's fdata.
    Fdata,
    /// BOLT's YAML profile.
    Yaml,
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
        /// Profile: perf.data, or pre-aggregated text with `--pa`. Repeat the option or separate
        /// paths with commas to add up several profiles (all perf.data, or all pre-aggregated).
        #[arg(short = 'p', long = "profile", required = true, value_delimiter = ',',
              action = clap::ArgAction::Append)]
        profiles: Vec<PathBuf>,
        /// The profile is pre-aggregated text (`S`, `B`, `T`/`R`, `F`/`f`/`r` records).
        #[arg(long)]
        pa: bool,
        /// Output file (`-` for standard output).
        #[arg(short = 'o', long = "output", default_value = "-")]
        output: PathBuf,
        /// Output format: pcmap's JSON block profile, or a BOLT profile (fdata or YAML, with
        /// llvm-bolt's function and block hashes) written by the perf2bolt aggregator, so one
        /// collection feeds both Propeller and BOLT (`llvm-bolt BINARY -data OUT`; link the
        /// binary with `--emit-relocs` for llvm-bolt).
        #[arg(long, value_enum, default_value = "json")]
        format: ProfileOutput,
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
            profiles,
            pa,
            output,
            format,
        } => match format {
            ProfileOutput::Json => run_profile(&binary, &profiles, pa, &output),
            ProfileOutput::Fdata | ProfileOutput::Yaml => {
                // perf.data without branch stacks holds basic samples (`--ba` in perf2bolt); the
                // profiles must agree.
                let mut basic = None;
                for profile in profiles.iter().filter(|_| !pa) {
                    let file = MappedFile::open(profile)
                        .with_context(|| format!("opening {}", profile.display()))?;
                    let perf = PerfFile::parse(file.bytes())
                        .with_context(|| format!("reading {}", profile.display()))?;
                    let this = !events::has_branch_stacks(&perf);
                    if basic.is_some_and(|b| b != this) {
                        anyhow::bail!(
                            "{}: {} branch stacks, unlike {}: convert profiles of one kind at a time",
                            profile.display(),
                            if this { "has no" } else { "has" },
                            profiles[0].display()
                        );
                    }
                    basic = Some(this);
                }
                let basic_events = basic.unwrap_or(false);
                // The one aggregator and writer (perf2bolt's rules and hashes).
                crate::cmd::perf2bolt::run(crate::cmd::perf2bolt::Args {
                    binary,
                    profiles,
                    perfdata_jobs: 1,
                    output,
                    pre_aggregated: pa,
                    basic_events,
                    yaml: None,
                    profile_format: if format == ProfileOutput::Yaml {
                        crate::cmd::perf2bolt::ProfileFormat::Yaml
                    } else {
                        crate::cmd::perf2bolt::ProfileFormat::Fdata
                    },
                    ignore_build_id: true,
                    pid: None,
                    max_samples: None,
                    time_aggr: false,
                    spe: false,
                    itrace: None,
                    show_density: None,
                    density_cutoff_hot: 990_000,
                    density_threshold: 60.0,
                    profile_use_dfs: false,
                    impute_trace_fall_through: false,
                    ignore_interrupt_lbr: None,
                    aggregate_only: None,
                    parse_mem_profile: None,
                    filter_mem_profile: None,
                    bolt_info: None,
                    heatmap: None,
                    scan_cache: None,
                    verbosity: 0,
                })
            }
        },
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
    maps.functions_with_names()
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
    pcmap_bbmap::report::write_dump(&mut w, &path.display().to_string(), &maps)?;
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
        pcmap_bbmap::report::write_lookup(&mut w, &index, &names, a, target)?;
    }
    w.flush()?;
    Ok(())
}

fn stats(path: &Path, json_out: bool) -> Result<()> {
    let (file, maps) = load(path, false)?;
    let s = SizeStats::new(&maps, file.bytes().len() as u64);
    if json_out {
        let pct = SizeStats::percent;
        let v = json!({
            "file": path.display().to_string(),
            "file_size": s.file_size,
            "text_size": s.text_size,
            "map_sections": s.map_sections,
            "map_size": s.map_file_bytes,
            "map_size_decompressed": s.map_data_bytes,
            "functions": s.functions,
            "ranges": s.ranges,
            "blocks": s.blocks,
            "map_percent_of_text": pct(s.map_file_bytes, s.text_size),
            "map_percent_of_file": pct(s.map_file_bytes, s.file_size),
            "block_symbols": s.extra_symbols,
            "block_symbol_bytes": s.symbol_bytes,
            "block_symbol_percent_of_file": pct(s.symbol_bytes, s.file_size),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    s.write_text(&mut w, &path.display().to_string())?;
    w.flush()?;
    Ok(())
}

fn run_profile(binary: &Path, profile_paths: &[PathBuf], pa: bool, output: &Path) -> Result<()> {
    let (elf_file, maps) = load(binary, false)?;
    if maps.kind == ElfKind::Relocatable {
        bail!(
            "{} is a relocatable object: profiles need a linked binary",
            binary.display()
        );
    }
    let (fs, names) = flatten(&maps);
    let index = BlockIndex::new(fs.iter().copied());
    let bin = pcmap_binary::Binary::parse(elf_file.bytes())
        .with_context(|| format!("parsing {}", binary.display()))?;
    let prof = read_block_profile(&bin, binary, &index, profile_paths, pa)?;
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

/// The block profile of `bin` (at `binary_path`) from perf.data or (`pa`) pre-aggregated
/// profiles (their counts added up), through the one branch-event pipeline and block attributor.
pub(crate) fn read_block_profile(
    bin: &pcmap_binary::Binary<'_>,
    binary_path: &Path,
    index: &BlockIndex,
    profile_paths: &[PathBuf],
    pa: bool,
) -> Result<BlockProfile> {
    let mut sink = ProfileSink::new(index);
    for profile_path in profile_paths {
        read_into(bin, binary_path, profile_path, pa, &mut sink)?;
    }
    Ok(sink.finish())
}

/// One profile's events into `sink`.
fn read_into(
    bin: &pcmap_binary::Binary<'_>,
    binary_path: &Path,
    profile_path: &Path,
    pa: bool,
    sink: &mut ProfileSink<'_>,
) -> Result<()> {
    let prof_file = MappedFile::open(profile_path)
        .with_context(|| format!("opening {}", profile_path.display()))?;
    if pa {
        events::read_preaggregated(prof_file.bytes(), sink)
            .map_err(|e| anyhow::anyhow!("{}:{e}", profile_path.display()))?;
    } else {
        let desc = binary_desc(bin, binary_path.as_os_str().as_encoded_bytes());
        let perf = PerfFile::parse(prof_file.bytes())
            .with_context(|| format!("reading {}", profile_path.display()))?;
        let opts = events::PerfOptions {
            basic: !events::has_branch_stacks(&perf),
            sample_ips: true,
            ignore_build_id: true,
            ..Default::default()
        };
        events::read_perf_data(&perf, &desc, &opts, sink)
            .with_context(|| format!("reading {}", profile_path.display()))?;
    }
    Ok(())
}
