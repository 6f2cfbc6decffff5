//! `pcmap inline`: inline sites of a binary's DWARF, with parameter locations, census and BTF encodings.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pcmap_inline::census::Census;
use pcmap_inline::{DebugData, InlineInfo, InlineSite};
use serde::Serialize;

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

fn write_census(w: &mut dyn Write, c: &Census, debug_info: u64) -> Result<()> {
    writeln!(w, "compilation units                 {}", c.units)?;
    writeln!(w, ".debug_info bytes                 {debug_info}")?;
    writeln!(w, "inline sites                      {}", c.sites)?;
    writeln!(
        w,
        "  without code address            {}",
        c.sites_without_address
    )?;
    writeln!(w, "args (from abstract origin)       {}", c.args)?;
    writeln!(
        w,
        "distinct inlined functions        {} ({} with no out-of-line copy)",
        c.inlined_functions, c.inlined_functions_without_out_of_line
    )?;
    let list = |shares: &[pcmap_inline::census::Share]| {
        shares
            .iter()
            .map(|s| format!("{} {} ({:.1}%)", s.name, s.count, s.percent))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(
        w,
        "site address from                 {}",
        list(&c.site_addr_sources)
    )?;
    writeln!(
        w,
        "sites with DW_AT_ranges           {} ({:.1}%); entry_pc not the first range: {}",
        c.sites_with_range_list,
        if c.sites == 0 {
            0.0
        } else {
            c.sites_with_range_list as f64 * 100.0 / c.sites as f64
        },
        c.entry_pc_not_first_range
    )?;
    writeln!(
        w,
        "ranges per site                   {}",
        list(&c.range_counts)
    )?;
    writeln!(
        w,
        "nesting depth                     {} (max {})",
        list(&c.depths),
        c.max_depth
    )?;
    writeln!(w, "location classes (% of args):")?;
    for s in &c.classes {
        writeln!(w, "  {:<14} {:>9} {:>6.1}%", s.name, s.count, s.percent)?;
    }
    writeln!(w, "location forms                    {}", list(&c.forms))?;
    writeln!(
        w,
        "  resolved only via zero-length view entries: {}",
        c.via_zero_length_view
    )?;
    writeln!(
        w,
        "sites: args located               {}",
        list(&c.site_coverage)
    )?;
    writeln!(w, "cumulative coverage (RFC categories):")?;
    for s in &c.cumulative {
        writeln!(w, "  {:<18} {:>9} {:>6.1}%", s.name, s.count, s.percent)?;
    }
    writeln!(
        w,
        "reg+const share of located args   {:.1}%",
        c.reg_const_share_of_located
    )?;
    writeln!(
        w,
        "distinct locations / location lists after dedup: {} / {}",
        c.distinct_locations, c.distinct_location_lists
    )?;
    writeln!(w, "encoding size estimates (bytes):")?;
    for e in &c.encoding_estimates {
        writeln!(w, "  {:<40} {:>10}", e.layout, e.bytes)?;
    }
    Ok(())
}

#[derive(Serialize)]
struct JsonParam<'a> {
    name: Option<&'a str>,
    byte_size: Option<u64>,
    class: &'static str,
    location: &'a pcmap_inline::Location,
    display: String,
    source: pcmap_inline::LocationSource,
    zero_length_view: bool,
}

#[derive(Serialize)]
struct JsonSite<'a> {
    die: u64,
    function: &'a str,
    caller: Option<&'a str>,
    depth: u32,
    parent_die: Option<u64>,
    address: Option<u64>,
    file_offset: Option<u64>,
    address_source: pcmap_inline::SiteAddrSource,
    ranges: Vec<[u64; 2]>,
    call_file: &'a str,
    call_line: u32,
    call_column: u32,
    params: Vec<JsonParam<'a>>,
}

fn json_site<'a>(
    info: &'a InlineInfo<'_>,
    data: &DebugData<'_>,
    site: &'a InlineSite,
) -> JsonSite<'a> {
    let callee = &info.functions[site.callee as usize];
    JsonSite {
        die: site.die,
        function: info.function_name(site.callee),
        caller: site.caller.map(|c| info.function_name(c)),
        depth: site.depth,
        parent_die: site
            .parent
            .and_then(|p| info.sites.get(p as usize))
            .map(|p| p.die),
        address: site.site_addr,
        file_offset: site.site_addr.and_then(|a| data.file_offset(a)),
        address_source: site.site_addr_source,
        ranges: site.ranges.iter().map(|r| [r.start, r.end]).collect(),
        call_file: info.file_name(site.call_file),
        call_line: site.call_line,
        call_column: site.call_column,
        params: site
            .params
            .iter()
            .zip(&callee.params)
            .map(|(p, d)| JsonParam {
                name: d.name.as_deref(),
                byte_size: d.byte_size,
                class: p.location.class().name(),
                location: &p.location,
                display: p.location.display_x86_64(),
                source: p.source,
                zero_length_view: p.zero_length_view,
            })
            .collect(),
    }
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
            let callee = &info.functions[s.callee as usize];
            let addr = s.site_addr.map_or("-".to_string(), |a| format!("{a:#x}"));
            writeln!(
                w,
                "{addr} {} in {} depth {} at {}:{}:{}",
                info.function_name(s.callee),
                s.caller.map_or("??", |c| info.function_name(c)),
                s.depth,
                info.file_name(s.call_file),
                s.call_line,
                s.call_column
            )?;
            for (p, d) in s.params.iter().zip(&callee.params) {
                writeln!(
                    w,
                    "    {} = {}{}",
                    d.name.as_deref().unwrap_or("?"),
                    p.location.display_x86_64(),
                    if p.zero_length_view {
                        " (zero-length view entry)"
                    } else {
                        ""
                    }
                )?;
            }
        }
        Ok(())
    })
}
