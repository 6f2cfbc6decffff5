//! `pcmap heatmap`: llvm-bolt-heatmap 22's code heatmaps (text maps at each block size, the CDF
//! and section-hotness CSVs, the same printed lines) plus an SVG picture of the map.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pcmap_binary::{Binary, MappedFile};
use pcmap_heatmap::{AnsiState, Heatmap, HeatmapBuilder, HeatmapOptions, Input};
use pcmap_profile::events::{self, PerfOptions};
use pcmap_profile::perfdata::PerfFile;

/// Draw a code heatmap of a profile (drop-in for llvm-bolt-heatmap 22, plus an SVG).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The binary the profile was collected on.
    pub binary: PathBuf,
    /// Profile: perf.data, or a pre-aggregated text file with --pa.
    #[arg(short = 'p', long = "perfdata", value_name = "PROFILE")]
    pub profile: PathBuf,
    /// Heatmap file (`-` = standard output, the default). Also written: FILE.csv (cumulative
    /// distribution), FILE-section-hotness.csv, `FILE-<size>` for each zoom-out block size, and
    /// FILE.svg.
    #[arg(short = 'o', value_name = "FILE", default_value = "-")]
    pub output: PathBuf,
    /// The profile is in perf2bolt's pre-aggregated format.
    #[arg(long = "pa")]
    pub pre_aggregated: bool,
    /// Count basic samples (perf.data without branch stacks).
    #[arg(long = "ba", visible_alias = "basic-events", alias = "nl")]
    pub basic_events: bool,
    /// Bucket size, then zoom-out sizes, each a multiple of the one before (K, M, G suffixes).
    #[arg(long = "block-size", value_name = "SIZES", default_value = "64,4K,256K",
          value_parser = parse_block_sizes)]
    pub block_size: BlockSizes,
    /// Buckets per line of the text map.
    #[arg(long = "line-size", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub line_size: u64,
    /// Highest address counted (decimal, 0x hex or 0 octal).
    #[arg(long = "max-address", default_value = "0xffffffff", value_parser = parse_llvm_integer)]
    pub max_address: u64,
    /// Lowest address counted.
    #[arg(long = "min-address", default_value = "0", value_parser = parse_llvm_integer)]
    pub min_address: u64,
    /// List the text sections and their letters in the legend.
    #[arg(long = "print-mappings")]
    pub print_mappings: bool,
    /// Where to write the SVG picture (default: FILE.svg; none when FILE is `-`).
    #[arg(long = "svg", value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// Do not check that the build-id in perf.data matches the binary.
    #[arg(long = "ignore-build-id")]
    pub ignore_build_id: bool,
    /// Only count samples of this process (perf.data input).
    #[arg(long = "pid")]
    pub pid: Option<u32>,
}

/// The parsed `--block-size` list (one option value).
#[derive(Clone, Debug)]
pub struct BlockSizes(Vec<u64>);

fn parse_block_sizes(s: &str) -> Result<BlockSizes, String> {
    pcmap_heatmap::parse_block_sizes(s)
        .map(BlockSizes)
        .map_err(|e| e.to_string())
}

/// An integer as LLVM's option parser reads one (radix from the prefix).
fn parse_llvm_integer(s: &str) -> Result<u64, String> {
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        u64::from_str_radix(b, 2)
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8)
    } else {
        s.parse()
    };
    r.map_err(|e| format!("'{s}': {e}"))
}

/// llvm-bolt-heatmap's long options, which LLVM's option parser also accepts with one dash.
const LLVM_LONG_OPTIONS: &[&str] = &[
    "pa",
    "ba",
    "nl",
    "basic-events",
    "perfdata",
    "block-size",
    "line-size",
    "max-address",
    "min-address",
    "print-mappings",
    "ignore-build-id",
    "pid",
];

/// Accept llvm-bolt-heatmap's single-dash long options (`-pa`, `-block-size=4K`).
pub fn normalize_llvm_options(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    super::perf2bolt::normalize_llvm_long_options(args, "heatmap", LLVM_LONG_OPTIONS)
}

/// Where the printed lines and the outputs go: files, or all of it in order on standard output.
struct Out {
    to_stdout: bool,
    stdout: std::io::BufWriter<std::io::StdoutLock<'static>>,
}

impl Out {
    fn say(&mut self, line: &str) -> Result<()> {
        writeln!(self.stdout, "{line}").context("writing to standard output")
    }

    /// Write one output: into the stdout stream, or atomically into `path`.
    fn write(
        &mut self,
        path: &Path,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        if self.to_stdout {
            fill(&mut self.stdout).context("writing to standard output")
        } else {
            self.stdout.flush().context("writing to standard output")?;
            crate::output::write_atomic(path, |w| Ok(fill(w)?))
        }
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

pub fn run(args: Args) -> Result<()> {
    let bin_file = MappedFile::open(&args.binary)
        .with_context(|| format!("opening {}", args.binary.display()))?;
    let binary = Binary::parse(bin_file.bytes())
        .with_context(|| format!("reading {}", args.binary.display()))?;
    let prof_file = MappedFile::open(&args.profile)
        .with_context(|| format!("opening {}", args.profile.display()))?;
    let data = prof_file.bytes();
    let opts = HeatmapOptions {
        block_sizes: args.block_size.0.clone(),
        min_address: args.min_address,
        max_address: args.max_address,
        line_size: args.line_size,
        print_mappings: args.print_mappings,
    };
    let mut out = Out {
        to_stdout: args.output.as_os_str() == "-",
        stdout: std::io::BufWriter::new(std::io::stdout().lock()),
    };

    let heatmap = read_profile(
        &binary,
        &ProfileInput {
            binary: &args.binary,
            profile: &args.profile,
            pre_aggregated: args.pre_aggregated,
            basic_events: args.basic_events,
            pid: args.pid,
            ignore_build_id: args.ignore_build_id,
        },
        data,
        opts,
        &mut out,
    )?;
    out.say("PERF2BOLT: parse branch events...")?;
    for line in building_lines(&heatmap.stats()) {
        out.say(&line)?;
    }
    out.stdout.flush().context("writing to standard output")?;
    let heatmap: Heatmap = heatmap
        .finish()
        .with_context(|| format!("reading {}", args.profile.display()))?;

    dump(&heatmap, &args.output, &mut out)?;
    let svg_path = args
        .svg
        .clone()
        .or_else(|| (!out.to_stdout).then(|| with_suffix(&args.output, ".svg")));
    if let Some(path) = svg_path {
        let svg = heatmap.svg(heatmap.block_sizes()[0]);
        crate::output::write_atomic(&path, |w| Ok(w.write_all(svg.as_bytes())?))?;
    }
    Ok(())
}

/// Write llvm-bolt-heatmap's outputs of `heatmap` to `output` (`-`: standard output): the text
/// map at the first block size, `.csv` (cumulative distribution), `-section-hotness.csv`, then
/// the map at each zoom-out size (`-<size>`), printing its `HEATMAP: dumping ...` lines. Also
/// what perf2bolt 22 writes for `--heatmap`.
/// The lines llvm-bolt-heatmap (and perf2bolt's `--heatmap`) prints before drawing the map.
pub(crate) fn building_lines(read: &pcmap_heatmap::Stats) -> Vec<String> {
    let mut lines = Vec::new();
    if read.samples != 0 {
        lines.push("HEATMAP: building heat map...".to_string());
        if read.invalid_traces > 0 {
            lines.push(format!("HEATMAP: invalid traces: {}", read.invalid_traces));
        }
    }
    lines
}

pub(crate) fn dump_heatmap(heatmap: &Heatmap, output: &Path) -> Result<()> {
    let mut out = Out {
        to_stdout: output.as_os_str() == "-",
        stdout: std::io::BufWriter::new(std::io::stdout().lock()),
    };
    dump(heatmap, output, &mut out)
}

fn dump(heatmap: &Heatmap, output: &Path, out: &mut Out) -> Result<()> {
    let sizes = heatmap.block_sizes().to_vec();
    let mut colors = AnsiState::default();
    let name = output.display().to_string();
    out.say(&format!(
        "HEATMAP: dumping heatmap with bucket size {} to {name}",
        sizes[0]
    ))?;
    out.write(output, |w| heatmap.write_text(w, sizes[0], &mut colors))?;
    out.write(&with_suffix(output, ".csv"), |w| heatmap.write_cdf(w))?;
    out.write(&with_suffix(output, "-section-hotness.csv"), |w| {
        heatmap.write_section_hotness(w)
    })?;
    for &size in &sizes[1..] {
        let path = if out.to_stdout {
            output.to_path_buf()
        } else {
            with_suffix(output, &format!("-{size}"))
        };
        out.say(&format!(
            "HEATMAP: dumping heatmap with bucket size {size} to {}",
            path.display()
        ))?;
        out.write(&path, |w| heatmap.write_text(w, size, &mut colors))?;
    }
    out.stdout.flush().context("writing to standard output")
}

/// Where a heatmap's profile comes from (the options `pcmap heatmap` and `pcmap report` share).
pub(crate) struct ProfileInput<'a> {
    pub binary: &'a Path,
    pub profile: &'a Path,
    pub pre_aggregated: bool,
    pub basic_events: bool,
    pub pid: Option<u32>,
    pub ignore_build_id: bool,
}

/// Where the lines llvm-bolt-heatmap prints go.
pub(crate) trait Say {
    /// One line of the tool's output.
    fn say(&mut self, line: &str) -> Result<()>;
    /// Flush what was said (before a warning on standard error).
    fn flush(&mut self) -> Result<()>;
}

impl Say for Out {
    fn say(&mut self, line: &str) -> Result<()> {
        Out::say(self, line)
    }
    fn flush(&mut self) -> Result<()> {
        self.stdout.flush().context("writing to standard output")
    }
}

/// Prints nothing (`pcmap report` embeds the map without the tool's lines).
pub(crate) struct Quiet;

impl Say for Quiet {
    fn say(&mut self, _: &str) -> Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Count the profile `data` of `binary` into a heatmap, printing llvm-bolt-heatmap's lines.
pub(crate) fn read_profile(
    binary: &Binary<'_>,
    input: &ProfileInput<'_>,
    data: &[u8],
    opts: HeatmapOptions,
    out: &mut dyn Say,
) -> Result<HeatmapBuilder> {
    let builder = if input.pre_aggregated {
        out.say("PERF2BOLT: parsing pre-aggregated profile...")?;
        let bar = crate::progress::bytes(data.len() as u64, "reading profile");
        let proto = HeatmapBuilder::new(binary, opts, Input::PreAggregated);
        let builder =
            events::read_preaggregated_parallel(data, || proto.empty_like(), &|n| bar.inc(n))
                .map_err(|p| {
                    anyhow::anyhow!(
                        "{}:{p} (pre-aggregated profile line {}, column {})",
                        input.profile.display(),
                        p.pos.line,
                        p.pos.column
                    )
                })?;
        bar.finish_and_clear();
        out.say(&format!(
            "PERF2BOLT: read {} aggregated brstack entries",
            builder.stats().entries
        ))?;
        builder
    } else {
        let file = PerfFile::parse(data)
            .with_context(|| format!("reading {}", input.profile.display()))?;
        let desc =
            pcmap_bbmap::profile::binary_desc(binary, input.binary.as_os_str().as_encoded_bytes());
        let popts = PerfOptions {
            basic: input.basic_events,
            pid: input.pid,
            ignore_build_id: input.ignore_build_id,
            sample_ips: false,
            max_samples: None,
        };
        let kind = if input.basic_events {
            Input::BasicSamples
        } else {
            Input::BranchStacks
        };
        let proto = HeatmapBuilder::new(binary, opts, kind);
        if input.basic_events {
            out.say("PERF2BOLT: parsing basic events (without brstack)...")?;
        } else {
            out.say("PERF2BOLT: parse branch events...")?;
        }
        // Pieces of the file are counted in parallel; the heat map's buckets add up.
        let (mut builder, stats) =
            events::read_perf_data_parallel(&file, &desc, &popts, || proto.empty_like(), &|_| {})
                .with_context(|| format!("reading {}", input.profile.display()))?;
        builder.set_samples(stats.total_samples);
        if input.basic_events {
            out.say(&format!(
                "PERF2BOLT: read {} basic samples",
                stats.total_samples
            ))?;
        } else {
            if stats.missing_mispred_bit {
                out.flush()?;
                super::perf2bolt::warn_missing_mispred_bit();
            }
            out.say(&format!(
                "PERF2BOLT: read {} samples and {} brstack entries",
                stats.samples, stats.entries
            ))?;
            if stats.total_samples > 0 {
                if stats.samples > 0 && stats.samples_without_branch_stack == stats.samples {
                    out.flush()?;
                    eprintln!(
                        "pcmap: warning: all recorded samples for this binary lack branch \
                         stacks: use --ba for a heatmap of basic samples"
                    );
                } else {
                    let ignored = stats.total_samples - stats.samples;
                    out.say(&format!(
                        "PERF2BOLT: ignored samples: {ignored}{}",
                        super::perf2bolt::pct(ignored, stats.total_samples)
                    ))?;
                }
            }
        }
        builder
    };
    Ok(builder)
}
