//! `pcmap report`: one self-contained HTML page (and its JSON twin) about a profile — the
//! hottest functions (before BOLT on a BOLTed binary), block heat on BOLT's CFGs, BOLT's
//! profile-quality figures, samples in inlined callees, the stale share for a new build. The
//! data comes from `pcmap_perf2bolt` (aggregation, CFGs, quality) and `pcmap_report` (the model
//! and the page).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pcmap_binary::bolt::BoltFunctions;
use pcmap_binary::{Binary, MappedFile};
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_profile::events::PerfOptions;

use crate::inputs::{bat_table, read_perf_data, read_preaggregated};

/// Write an HTML report of a profile: hot functions, block heat, profile quality, inlined callees
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The binary the profile was collected on.
    pub binary: PathBuf,
    /// Profile: perf.data, or a pre-aggregated text file with --pa.
    #[arg(short = 'p', long = "perfdata", value_name = "PROFILE")]
    pub profile: PathBuf,
    /// The HTML report (`-` = standard output).
    #[arg(short = 'o', value_name = "HTML")]
    pub output: PathBuf,
    /// Also write the report's data as JSON here (`-` = standard output).
    #[arg(long = "json", value_name = "JSON")]
    pub json: Option<PathBuf>,
    /// The profile is in perf2bolt's pre-aggregated format.
    #[arg(long = "pa")]
    pub pre_aggregated: bool,
    /// Read basic samples (no branch stacks).
    #[arg(long = "ba", visible_alias = "basic-events")]
    pub basic_events: bool,
    /// For a BOLT-optimized binary: the input binary BOLT read, whose CFGs the profile belongs to
    /// (block heat and BOLT's quality figures).
    #[arg(long = "input-binary", value_name = "INPUT")]
    pub input_binary: Option<PathBuf>,
    /// A new build of the binary: report how much of the profile is stale for it.
    #[arg(long = "new-binary", value_name = "NEW")]
    pub new_binary: Option<PathBuf>,
    /// How many of the hottest functions get their CFG drawn.
    #[arg(long = "cfgs", default_value_t = pcmap_report::DEFAULT_CFG_FUNCTIONS)]
    pub cfgs: usize,
    /// Do not check that the build-id in perf.data matches the binary.
    #[arg(long = "ignore-build-id")]
    pub ignore_build_id: bool,
    /// Only read samples of this process (perf.data input).
    #[arg(long = "pid")]
    pub pid: Option<u32>,
}

fn open(path: &Path) -> Result<MappedFile> {
    MappedFile::open(path).with_context(|| format!("opening {}", path.display()))
}

pub fn run(args: Args) -> Result<()> {
    let bin_file = open(&args.binary)?;
    let binary = Binary::parse(bin_file.bytes())
        .with_context(|| format!("reading {}", args.binary.display()))?;
    let image = BoltFunctions::discover(&binary)
        .with_context(|| format!("reading {}", args.binary.display()))?;
    let bat = bat_table(&binary, &args.binary)?;

    let input_file = args.input_binary.as_deref().map(open).transpose()?;
    let input_binary = match (&input_file, &args.input_binary) {
        (Some(f), Some(path)) => {
            Some(Binary::parse(f.bytes()).with_context(|| format!("reading {}", path.display()))?)
        }
        _ => None,
    };
    let input_image = match (&input_binary, &args.input_binary) {
        (Some(b), Some(path)) => Some(
            BoltFunctions::discover(b).with_context(|| format!("reading {}", path.display()))?,
        ),
        _ => None,
    };
    if input_image.is_some() && bat.is_none() {
        eprintln!(
            "pcmap: note: {} is not BOLT-optimized (no .note.bolt_bat): --input-binary is not used",
            args.binary.display()
        );
    }

    let prof_file = open(&args.profile)?;
    let parsed = if args.pre_aggregated {
        read_preaggregated(prof_file.bytes(), &args.profile)?
    } else {
        let opts = PerfOptions {
            basic: args.basic_events,
            pid: args.pid,
            ignore_build_id: args.ignore_build_id,
            sample_ips: false,
            max_samples: None,
        };
        read_perf_data(&binary, &args.binary, &prof_file, &args.profile, &opts)?.0
    };

    let agg = Aggregator::new(&image);
    let agg = if args.new_binary.is_some() {
        agg.with_hashing()
    } else {
        agg
    };
    let agg = match &bat {
        Some(table) => agg.with_bat(table),
        None => agg,
    };
    let binary_name = args.binary.display().to_string();
    let profile_name = args.profile.display().to_string();
    // With --new-binary, a branch profile's YAML (block hashes) for llvm-bolt's block matching.
    let mut old_yaml = None;
    let (mut report, addresses) = if args.basic_events {
        let samples = agg.aggregate_samples(&parsed);
        (
            pcmap_report::sample_report(&agg, &samples, &binary_name, &profile_name, args.cfgs),
            pcmap_report::sample_addresses(&agg, &samples),
        )
    } else {
        let bar = crate::progress::items(parsed.traces.len() as u64, "aggregating traces");
        let profile = agg.aggregate_traces(&parsed, &|n| bar.inc(n));
        bar.finish_and_clear();
        let report = match &input_image {
            Some(input_image) if bat.is_some() => {
                let input_agg = Aggregator::new(input_image);
                pcmap_report::branch_report(
                    &agg,
                    &profile,
                    Some(&input_agg),
                    &binary_name,
                    &profile_name,
                    args.cfgs,
                )
            }
            _ => pcmap_report::branch_report(
                &agg,
                &profile,
                None,
                &binary_name,
                &profile_name,
                args.cfgs,
            ),
        };
        if args.new_binary.is_some() && bat.is_none() {
            old_yaml = Some(pcmap_perf2bolt::yaml::branch_profile(
                &agg,
                &profile,
                &binary_name,
                &[],
            ));
        }
        (report, pcmap_report::branch_addresses(&agg, &profile))
    };

    // Inline frames: only with DWARF.
    if !addresses.is_empty() {
        match pcmap_inline::DebugData::from_binary(&binary) {
            Ok(debug) => {
                let symbolizer = pcmap_inline::symbolize::Symbolizer::new(&debug)
                    .with_context(|| format!("reading the DWARF of {}", args.binary.display()))?;
                report.inline = Some(
                    pcmap_report::inline_hotness(&symbolizer, &addresses).with_context(|| {
                        format!("reading the DWARF of {}", args.binary.display())
                    })?,
                );
            }
            Err(pcmap_inline::Error::NoDebugInfo) => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("reading the DWARF of {}", args.binary.display()));
            }
        }
    }

    if let Some(new_path) = &args.new_binary {
        let new_file = open(new_path)?;
        let new_binary = Binary::parse(new_file.bytes())
            .with_context(|| format!("reading {}", new_path.display()))?;
        let new_image = BoltFunctions::discover(&new_binary)
            .with_context(|| format!("reading {}", new_path.display()))?;
        // Hashed as llvm-bolt does when it reads the profile for the new build.
        let new_agg = Aggregator::new(&new_image).with_llvm_bolt_hashing();
        new_agg.prepare(None);
        report.stale = pcmap_report::staleness(
            &report,
            &agg,
            &new_agg,
            &new_path.display().to_string(),
            old_yaml.as_ref(),
        );
        if report.stale.is_none() {
            eprintln!(
                "pcmap: note: no stale share for a BOLT-optimized binary (its profile belongs to \
                 the input binary)"
            );
        }
    }

    // The heat map of the same profile over the binary's code, with buckets sized for about 64
    // lines of 256 buckets.
    let span = binary
        .code_sections()
        .map(|s| (s.address, s.address.saturating_add(s.size)))
        .fold(None, |acc: Option<(u64, u64)>, (a, b)| {
            Some(acc.map_or((a, b), |(x, y)| (x.min(a), y.max(b))))
        })
        .map_or(0, |(a, b)| b - a);
    let block = (span / (256 * 64)).max(64).next_power_of_two();
    let heatmap = super::heatmap::read_profile(
        &binary,
        &super::heatmap::ProfileInput {
            binary: &args.binary,
            profile: &args.profile,
            pre_aggregated: args.pre_aggregated,
            basic_events: args.basic_events,
            pid: args.pid,
            ignore_build_id: args.ignore_build_id,
        },
        prof_file.bytes(),
        pcmap_heatmap::HeatmapOptions {
            block_sizes: vec![block],
            max_address: u64::MAX,
            ..Default::default()
        },
        &mut super::heatmap::Quiet,
    )?
    .finish();
    let extra: Vec<pcmap_report::html::Section> = match heatmap {
        Ok(h) => vec![pcmap_report::html::Section {
            title: format!("Heat map ({block}-byte buckets, as llvm-bolt-heatmap counts them)"),
            svg: h.svg_element(block),
        }],
        Err(e) => {
            eprintln!("pcmap: note: no heat map in the report: {e}");
            Vec::new()
        }
    };
    crate::output::write_atomic(&args.output, |w| {
        pcmap_report::html::write(w, &report, &extra)?;
        Ok(())
    })?;
    if let Some(path) = &args.json {
        crate::output::write_atomic(path, |w| {
            serde_json::to_writer_pretty(&mut *w, &report)?;
            writeln!(w)?;
            Ok(())
        })?;
    }
    Ok(())
}
