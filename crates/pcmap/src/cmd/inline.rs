//! `pcmap inline`: inline sites of a binary's DWARF, with parameter locations, census and BTF encodings.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pcmap_inline::census::Census;
use pcmap_inline::report::{JsonSite, json_site, write_census, write_site_text};
use pcmap_inline::{DebugData, InlineSite};

/// Inlined call sites for tracers: census, sites with parameter locations, BTF encodings
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Census of inline sites and parameter locations (location classes, coverage, dedup, sizes)
    Stats(StatsArgs),
    /// List inline sites with their address and the location of each parameter
    Sites(SitesArgs),
    /// Encode inline sites as BTF (rfc | btf-2025 | btf-2026)
    Encode(super::inline_btf::EncodeArgs),
    /// Decode an inline-site BTF blob and print it in bpftool's raw style
    Decode(super::inline_btf::DecodeArgs),
}

#[derive(clap::Args, Debug)]
struct StatsArgs {
    /// ELF binary with DWARF
    binary: PathBuf,
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct SitesArgs {
    /// ELF binary with DWARF
    binary: PathBuf,
    /// Only sites whose inlined function has this name
    #[arg(long)]
    function: Option<String>,
    /// Print JSON instead of text
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Stats(a) => stats(a),
        Command::Sites(a) => sites(a),
        Command::Encode(a) => super::inline_btf::run_encode(a),
        Command::Decode(a) => super::inline_btf::run_decode(a),
    }
}

fn load(path: &Path) -> Result<pcmap_binary::MappedFile> {
    pcmap_binary::MappedFile::open(path).with_context(|| format!("opening {}", path.display()))
}

fn stats(args: StatsArgs) -> Result<()> {
    let file = load(&args.binary)?;
    let data = DebugData::load(file.bytes())
        .with_context(|| format!("reading {}", args.binary.display()))?;
    let info = pcmap_inline::extract_sites(&data)
        .with_context(|| format!("extracting inline sites of {}", args.binary.display()))?;
    let census = Census::new(&info);
    crate::output::write_atomic(Path::new("-"), |w| {
        if args.json {
            serde_json::to_writer_pretty(&mut *w, &census)?;
            writeln!(w)?;
        } else {
            write_census(w, &census, data.debug_info_size)?;
        }
        Ok(())
    })
}

fn sites(args: SitesArgs) -> Result<()> {
    let file = load(&args.binary)?;
    let data = DebugData::load(file.bytes())
        .with_context(|| format!("reading {}", args.binary.display()))?;
    let info = pcmap_inline::extract_sites(&data)
        .with_context(|| format!("extracting inline sites of {}", args.binary.display()))?;
    let selected: Vec<&InlineSite> = info
        .sites
        .iter()
        .filter(|s| {
            args.function
                .as_deref()
                .is_none_or(|f| info.function_name(s.callee) == f)
        })
        .collect();
    crate::output::write_atomic(Path::new("-"), |w| {
        if args.json {
            let v: Vec<JsonSite<'_>> = selected
                .iter()
                .map(|s| json_site(&info, &data, s))
                .collect();
            serde_json::to_writer_pretty(&mut *w, &v)?;
            writeln!(w)?;
            return Ok(());
        }
        for s in &selected {
            write_site_text(w, &info, s)?;
        }
        Ok(())
    })
}
