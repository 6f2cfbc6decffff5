//! `pcmap perf2bolt`: aggregate a profile against a binary into BOLT's fdata, with perf2bolt 22's
//! options, semantics and printed statistics.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::ValueEnum;
use pcmap_binary::bolt::{BoltFunctions, DataReferences};
use pcmap_binary::{Binary, MappedFile};
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_perf2bolt::preagg::PreAggregated;
use pcmap_perf2bolt::{fdata, yaml};
use pcmap_profile::events::{PerfOptions, PerfStats};

/// Output format of `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProfileFormat {
    /// BOLT's fdata text format.
    Fdata,
    /// BOLT's YAML profile.
    Yaml,
    /// perf2bolt's pre-aggregated text (`T`/`B`/`F`/`f`/`r`/`R`/`S`/`E` records): the profile
    /// before it is aggregated against the binary, to store, merge or convert again with `--pa`.
    Preagg,
    /// A fleet profile shard (Parquet, docs/fleet-shards.md), written by `pcmap-fleet
    /// perf2bolt`: pcmap runs that binary (next to pcmap, on PATH, or $PCMAP_FLEET).
    Parquet,
}

/// Convert a perf profile into a BOLT profile (drop-in for perf2bolt 22).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The binary the profile was collected on.
    pub binary: PathBuf,
    /// Profile: perf.data, or a pre-aggregated text file with --pa. Repeat the option or
    /// separate paths with commas to convert several profiles in one run (their records are
    /// merged before aggregation).
    #[arg(short = 'p', long = "perfdata", value_name = "PROFILE", required = true,
          value_delimiter = ',', action = clap::ArgAction::Append)]
    pub profiles: Vec<PathBuf>,
    /// Number of profiles read in parallel (0 = one per hardware thread).
    #[arg(
        long = "perfdata-jobs",
        visible_alias = "pj",
        value_name = "N",
        default_value_t = 4
    )]
    pub perfdata_jobs: usize,
    /// Output profile (`-` = standard output).
    #[arg(short = 'o', value_name = "OUT")]
    pub output: PathBuf,
    /// The profile is in perf2bolt's pre-aggregated format.
    #[arg(long = "pa")]
    pub pre_aggregated: bool,
    /// Aggregate basic samples (no branch stacks).
    #[arg(long = "ba", visible_alias = "basic-events", alias = "nl")]
    pub basic_events: bool,
    /// Also write a YAML profile here.
    #[arg(short = 'w', value_name = "YAML")]
    pub yaml: Option<PathBuf>,
    /// Format of `-o`.
    #[arg(long = "profile-format", value_enum, default_value = "fdata")]
    pub profile_format: ProfileFormat,
    /// Do not check that the build-id in perf.data matches the binary.
    #[arg(long = "ignore-build-id")]
    pub ignore_build_id: bool,
    /// Only aggregate samples of this process (perf.data input).
    #[arg(long = "pid")]
    pub pid: Option<u32>,
    /// Print how long reading and processing the profile took (perf2bolt's `Aggregator` timer
    /// table, wall time).
    #[arg(long = "time-aggr")]
    pub time_aggr: bool,
    /// Arm SPE branch events: refused on x86-64, as by perf2bolt.
    #[arg(long = "spe", hide = true)]
    pub spe: bool,
    /// perf2bolt's `perf script --itrace=...` for processor traces: refused (pcmap reads perf.data
    /// itself and does not decode processor traces; see the error for `perf inject`).
    #[arg(long = "itrace", value_name = "STRING", hide = true)]
    pub itrace: Option<String>,
    /// Read at most this many samples of a perf.data file with branch stacks, counting the
    /// samples of every process, in file order (as perf2bolt's `--max-samples`).
    #[arg(long = "max-samples", value_name = "N")]
    pub max_samples: Option<u64>,
    /// Show the profile density line (perf2bolt always does; accepted for compatibility).
    #[arg(long = "show-density", value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = llvm_bool)]
    pub show_density: Option<bool>,
    /// Share of the samples (parts per million) the density line covers, densest functions
    /// first.
    #[arg(
        long = "profile-density-cutoff-hot",
        value_name = "N",
        default_value_t = 990_000,
        allow_negative_numbers = true
    )]
    pub density_cutoff_hot: i32,
    /// Density under which perf2bolt warns that the profile is sparse.
    #[arg(
        long = "profile-density-threshold",
        value_name = "X",
        default_value_t = 60.0,
        allow_negative_numbers = true
    )]
    pub density_threshold: f64,
    /// Write YAML blocks in BOLT's depth-first order (block ids and the function hash follow
    /// that order; the header says `dfs-order: true`).
    #[arg(long = "profile-use-dfs", value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = llvm_bool)]
    pub profile_use_dfs: bool,
    /// Give traces recorded without their fall-through (pre-aggregated `B` records, the newest
    /// branch-stack entry) the average fall-through length of the traces with the same branch,
    /// as perf2bolt does.
    #[arg(long = "impute-trace-fall-through", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", default_value = "false",
          value_parser = llvm_bool)]
    pub impute_trace_fall_through: bool,
    /// Drop branch-stack entries from or to kernel addresses (perf2bolt's default; only `true`
    /// is supported).
    #[arg(long = "ignore-interrupt-lbr", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = llvm_bool)]
    pub ignore_interrupt_lbr: Option<bool>,
    /// No effect: perf2bolt always exits after writing the profile.
    #[arg(long = "aggregate-only", value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = llvm_bool)]
    pub aggregate_only: Option<bool>,
    /// No effect: memory profiles are not read (`0 memory objects`).
    #[arg(long = "parse-mem-profile", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = llvm_bool)]
    pub parse_mem_profile: Option<bool>,
    /// No effect: memory profiles are not read.
    #[arg(long = "filter-mem-profile", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = llvm_bool)]
    pub filter_mem_profile: Option<bool>,
    /// Also draw the profile's code heatmap into FILE, as llvm-bolt-heatmap does (FILE.csv,
    /// FILE-section-hotness.csv and `FILE-<size>` at the zoom-out sizes too), before converting.
    #[arg(long = "heatmap", value_name = "FILE")]
    pub heatmap: Option<PathBuf>,
    /// Keep what the decoding pass over every function finds in DIR (created if needed), keyed
    /// by the binary and this pcmap build: by the binary's identity (device, inode, size,
    /// modification and change times) once it has been left unchanged for 2 seconds, else by
    /// its bytes. BOLT's secondary entry points and jump-table
    /// bounds come from references anywhere in the binary, so every function is decoded once;
    /// later runs on the same binary take the findings from DIR and decode only the profiled
    /// code. Kept beside them: the model function discovery made (so later runs skip it), the
    /// code addresses the binary's data refers to (read from every relocation) and the
    /// functions whose padding BOLT rejects (read from the code after every function). The
    /// profile written is the same either way. DIR keeps at most 1 GiB of these files:
    /// writing one removes those used least recently beyond that.
    #[arg(long = "scan-cache", value_name = "DIR")]
    pub scan_cache: Option<PathBuf>,
    /// LLVM's verbosity level (`-v=1`). Accepted so scripts run unchanged; the lines it adds
    /// to perf2bolt's output describe BOLT's rewriting of the binary (RELRO marking, function
    /// fragments, functions skipped) and are not printed. The profile and the statistics do not
    /// depend on it, in perf2bolt either. At 1 or more, pcmap says on standard error which
    /// `--scan-cache` file it read or wrote.
    #[arg(long = "v", value_name = "N", default_value_t = 0)]
    pub verbosity: u32,
    /// No effect: perf2bolt writes no binary.
    #[arg(long = "bolt-info", value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = llvm_bool)]
    pub bolt_info: Option<bool>,
}

/// A boolean as LLVM's option parser reads one (`--opt`, `--opt=true`, `--opt=0`, ...).
fn llvm_bool(s: &str) -> Result<bool, String> {
    match s {
        "" | "true" | "TRUE" | "True" | "1" => Ok(true),
        "false" | "FALSE" | "False" | "0" => Ok(false),
        _ => Err(format!(
            "'{s}' is invalid value for boolean argument! Try 0 or 1"
        )),
    }
}

/// perf2bolt's warning when most of a profile does not match the binary.
const MISMATCH_WARNING: &str = "\n !! WARNING !! This high mismatch ratio indicates the input binary is \
     probably not the same binary used during profiling collection. The generated data may be \
     ineffective for improving performance\n";

/// perf2bolt's " (12.3%)" after a count (nothing when the total is 0).
pub fn pct(num: u64, den: u64) -> String {
    if den == 0 {
        return String::new();
    }
    // perf2bolt computes in single precision and prints with "%.1f".
    let p = num as f32 * 100.0f32 / den as f32;
    format!(" ({:.1}%)", f64::from(p))
}

/// Write `-o` (fdata or YAML) and `-w` (YAML); returns the number of fdata records or YAML
/// functions written to `-o`.
fn write_outputs(
    args: &Args,
    write_yaml: impl Fn(&mut dyn std::io::Write) -> std::io::Result<u64>,
    write_fdata: impl Fn(&mut dyn std::io::Write) -> std::io::Result<u64>,
) -> Result<u64> {
    let mut n = 0;
    if args.profile_format == ProfileFormat::Yaml {
        crate::output::write_atomic(&args.output, |w| {
            n = write_yaml(w)?;
            Ok(())
        })?;
    } else if args.profile_format == ProfileFormat::Fdata {
        crate::output::write_atomic(&args.output, |w| {
            n = write_fdata(w)?;
            Ok(())
        })?;
    }
    if let Some(path) = &args.yaml {
        crate::output::write_atomic(path, |w| {
            write_yaml(w)?;
            Ok(())
        })?;
    }
    Ok(n)
}

/// `--profile-format parquet`: the shard writer lives in `pcmap-fleet`, a separate binary
/// (Parquet, Arrow and DataFusion are kept out of pcmap's build), so pcmap hands the job to
/// `pcmap-fleet perf2bolt`, as git and cargo run their external subcommands.
fn write_shard(args: &Args) -> Result<()> {
    let [profile] = &args.profiles[..] else {
        anyhow::bail!(
            "--profile-format parquet writes the shard of one profile (-p); merge shards with \
             `pcmap-fleet merge`"
        );
    };
    if args.yaml.is_some() || args.pid.is_some() || args.max_samples.is_some() {
        anyhow::bail!("--profile-format parquet does not take -w, --pid or --max-samples");
    }
    let fleet = fleet_binary()?;
    let mut cmd = std::process::Command::new(&fleet);
    cmd.arg("perf2bolt")
        .arg(&args.binary)
        .arg("-p")
        .arg(profile)
        .arg("-o")
        .arg(&args.output);
    for (on, flag) in [
        (args.pre_aggregated, "--pa"),
        (args.basic_events, "--ba"),
        (args.ignore_build_id, "--ignore-build-id"),
    ] {
        if on {
            cmd.arg(flag);
        }
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {}", fleet.display()))?;
    if !status.success() {
        // pcmap-fleet has said why on standard error.
        anyhow::bail!("{} perf2bolt failed ({status})", fleet.display());
    }
    Ok(())
}

/// `pcmap-fleet`: $PCMAP_FLEET, else next to this executable, else on PATH.
fn fleet_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("PCMAP_FLEET") {
        let p = PathBuf::from(p);
        anyhow::ensure!(
            p.is_file(),
            "PCMAP_FLEET={}: no such file (it should name the pcmap-fleet binary)",
            p.display()
        );
        return Ok(p);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("pcmap-fleet")));
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("pcmap-fleet"));
    beside
        .into_iter()
        .chain(on_path)
        .find(|p| p.is_file())
        .context(
            "--profile-format parquet needs pcmap-fleet, the fleet binary (left out of pcmap's \
             build for its size): build it with `cargo build --release -p pcmap-fleet` and put \
             it next to pcmap or on PATH, or set PCMAP_FLEET to it",
        )
}

pub fn run(args: Args) -> Result<()> {
    if args.profile_format == ProfileFormat::Parquet {
        return write_shard(&args);
    }
    if args.spe {
        anyhow::bail!("-spe is available only on AArch64.");
    }
    if let Some(itrace) = &args.itrace {
        anyhow::bail!(
            "--itrace={itrace}: pcmap reads perf.data itself and does not decode processor \
             traces; let perf synthesize branch stacks from them first, `perf inject -i IN \
             --itrace={itrace} -o OUT`, and convert OUT"
        );
    }
    if args.ignore_interrupt_lbr == Some(false) {
        anyhow::bail!(
            "--ignore-interrupt-lbr=false is not supported: branch-stack entries from or to \
             kernel addresses are always dropped"
        );
    }
    // The binary is parsed once; everything below borrows this model.
    let bin_file = MappedFile::open(&args.binary)
        .with_context(|| format!("opening {}", args.binary.display()))?;
    // Passes over the whole binary (discovery, data references, decoding every function) drop
    // the pages they are done with: a large binary's text and relocations need not stay
    // resident when only the profiled code is read again.
    let release = |bytes: &[u8]| bin_file.release_bytes(bytes);
    // The parse runs on one thread. Beside it: the scan cache's key, which hashes the whole
    // file, or else pre-aggregated profiles, which need nothing from the binary (perf.data does:
    // its mappings are matched against the binary). With a scan cache the profiles are read
    // beside function discovery instead: the key and the index balance the parse, and discovery
    // (mostly one thread, and needing the index) would otherwise leave the other core idle.
    let timed_read = |read: &dyn Fn() -> Result<_>| {
        let started = std::time::Instant::now();
        let inputs = read();
        (inputs, started.elapsed())
    };
    let (binary, (cache_key, early_read)) = rayon::join(
        || Binary::parse(bin_file.bytes()),
        || {
            rayon::join(
                || {
                    // With the index an earlier run kept for these bytes, if there is one.
                    args.scan_cache.as_ref().map(|dir| {
                        crate::scan_cache::key(&bin_file, args.verbosity > 0)
                            .map(|key| (key, crate::scan_cache::load(dir, key, args.verbosity > 0)))
                    })
                },
                || {
                    (args.pre_aggregated && args.scan_cache.is_none()).then(|| {
                        timed_read(&|| {
                            crate::inputs::read_preaggregated_files(
                                &args.profiles,
                                args.perfdata_jobs,
                            )
                        })
                    })
                },
            )
        },
    );
    let mut binary = binary.with_context(|| format!("reading {}", args.binary.display()))?;
    let (scan_cache, mut cached) = match (&args.scan_cache, cache_key) {
        (Some(dir), Some(keyed)) => {
            let (key, cached) = keyed?;
            (Some((dir.as_path(), key)), cached)
        }
        _ => (None, None),
    };
    binary.set_release(&release);
    // The functions are discovered while the profiles and the data references into code (the
    // relocations every CFG build needs) are read: they are independent, and discovery runs on
    // one thread. An index kept by an earlier run on the same bytes holds the model discovery
    // made, the data references and the verdicts of discovery's padding checks. They are moved
    // out of it, not copied: the aggregator takes the rest, and an index written again is made
    // anew from the image.
    let known_model = cached.as_mut().and_then(|index| index.discovered.take());
    let (known_refs, known_paddings) = cached
        .as_mut()
        .map(|index| {
            (
                std::mem::take(&mut index.data_references),
                std::mem::take(&mut index.rejected_paddings),
            )
        })
        .unzip();
    let (image, (read, data_refs)) = rayon::join(
        || {
            if let (Some(model), Some(index)) = (known_model, &cached) {
                // A rebuilt model must be the one the index was made on (the same functions,
                // extents and kinds): anything else is a damaged cache, and discovery runs.
                match BoltFunctions::from_discovered(&binary, model) {
                    Ok(image) if index.fits(&image) => return Ok(image),
                    Ok(_) => crate::scan_cache::warn_model(
                        &args.binary,
                        "its functions differ from those the index was made on",
                    ),
                    Err(e) => crate::scan_cache::warn_model(&args.binary, &e.to_string()),
                }
            }
            match &known_paddings {
                Some(rejected) => BoltFunctions::discover_knowing_paddings(&binary, rejected),
                None => BoltFunctions::discover(&binary),
            }
        },
        || {
            rayon::join(
                || early_read.unwrap_or_else(|| timed_read(&|| read_profiles(&args, &binary))),
                || match known_refs {
                    Some(refs) => DataReferences::known(&binary, refs),
                    None => DataReferences::read(&binary),
                },
            )
        },
    );
    let image = image.with_context(|| format!("reading {}", args.binary.display()))?;
    image.take_data_references(data_refs);
    for f in image.functions() {
        if image.has_symbol_inside(f.address) {
            eprintln!(
                "BOLT-ERROR: symbol seen in the middle of the function {}. Skipping.",
                f.name()
            );
        }
        if image.has_invalid_padding(f.address) {
            eprintln!(
                "BOLT-WARNING: function {} has invalid padding. Ignoring the function",
                f.name()
            );
        }
    }
    // A BOLT-optimized binary: profiles are translated through its BAT table (perf2bolt's BAT
    // mode: `boltedcollection` fdata, BAT YAML).
    let bat = crate::inputs::bat_table(&binary, &args.binary)?;
    let bolted = bat.is_some();
    if bolted && args.profile_use_dfs {
        anyhow::bail!(
            "{}: --profile-use-dfs is not supported for a BOLT-optimized binary (BAT profiles)",
            args.binary.display()
        );
    }

    // Statistics go to stdout like perf2bolt's, or to stderr when the profile goes to stdout.
    let to_stdout = args.output.as_os_str() != "-";
    let say = |s: String| {
        if to_stdout {
            println!("{s}");
        } else {
            eprintln!("{s}");
        }
    };
    let (inputs, read_time) = read;
    let inputs = inputs?;
    if args.pre_aggregated {
        let entries: u64 = inputs.iter().map(|(p, _)| p.entries).sum();
        say(format!(
            "PERF2BOLT: read {entries} aggregated brstack entries"
        ));
    } else {
        let sum = |f: fn(&PerfStats) -> u64| -> u64 {
            inputs.iter().filter_map(|(_, s)| s.as_ref()).map(f).sum()
        };
        let total_samples = sum(|s| s.total_samples);
        if args.basic_events {
            say(format!("PERF2BOLT: read {total_samples} basic samples"));
        } else {
            if inputs
                .iter()
                .any(|(_, s)| s.as_ref().is_some_and(|s| s.missing_mispred_bit))
            {
                warn_missing_mispred_bit();
            }
            say(format!(
                "PERF2BOLT: read {} samples and {} brstack entries",
                sum(|s| s.samples),
                sum(|s| s.entries)
            ));
            if total_samples > 0 {
                let ignored = total_samples - sum(|s| s.samples);
                say(format!(
                    "PERF2BOLT: ignored samples: {ignored}{}",
                    pct(ignored, total_samples)
                ));
            }
        }
    }
    let parsed = PreAggregated::merge(inputs.into_iter().map(|(p, _)| p));
    if let Some(path) = &args.heatmap {
        // perf2bolt's optional heatmap: every fall-through range and basic sample of the
        // profile, drawn before aggregation.
        say("PERF2BOLT: parse branch events...".to_string());
        let builder = if let ([profile], true) = (&args.profiles[..], args.pre_aggregated) {
            // One pre-aggregated file: its records one by one, as perf2bolt counts them
            // (invalid ranges per record, not per distinct trace).
            let file = MappedFile::open(profile)
                .with_context(|| format!("opening {}", profile.display()))?;
            crate::cmd::heatmap::read_profile(
                &binary,
                &crate::cmd::heatmap::ProfileInput {
                    binary: &args.binary,
                    profile,
                    pre_aggregated: true,
                    basic_events: args.basic_events,
                    pid: args.pid,
                    ignore_build_id: args.ignore_build_id,
                },
                file.bytes(),
                pcmap_heatmap::HeatmapOptions::default(),
                &mut crate::cmd::heatmap::Quiet,
            )?
        } else {
            // perf.data: the distinct traces, as perf2bolt keeps them.
            let mut builder = pcmap_heatmap::HeatmapBuilder::new(
                &binary,
                pcmap_heatmap::HeatmapOptions::default(),
                pcmap_heatmap::Input::PreAggregated,
            );
            parsed.replay(&mut builder);
            builder.set_samples(parsed.total_samples);
            builder
        };
        for line in crate::cmd::heatmap::building_lines(&builder.stats()) {
            say(line);
        }
        let heatmap = builder
            .finish()
            .with_context(|| format!("drawing the heatmap of {}", args.binary.display()))?;
        crate::cmd::heatmap::dump_heatmap(&heatmap, path)?;
    }
    if args.profile_format == ProfileFormat::Preagg {
        let mut n = 0;
        crate::output::write_atomic(&args.output, |w| {
            n = parsed.write(w)?;
            Ok(())
        })?;
        say(format!(
            "PERF2BOLT: wrote {n} pre-aggregated records to {}",
            args.output.display()
        ));
        if args.yaml.is_none() {
            return Ok(());
        }
    }

    let agg = Aggregator::new(&image);
    let mut parsed = parsed;
    if args.impute_trace_fall_through && !args.basic_events {
        agg.impute_fall_throughs(&mut parsed);
    }
    // YAML profiles hash blocks: each CFG is hashed as it is built.
    let yaml_output = args.yaml.is_some() || args.profile_format == ProfileFormat::Yaml;
    let agg = match (yaml_output, args.profile_use_dfs) {
        (true, true) => agg.with_hashing().with_dfs_function_hashes(),
        (true, false) => agg.with_hashing(),
        (false, _) => agg,
    };
    let mut agg = match &bat {
        Some(table) => agg.with_bat(table),
        None => agg,
    };
    let cache_hit = match cached {
        Some(index) => {
            let taken = agg.take_scan_index(index);
            if !taken && let Some((dir, _)) = scan_cache {
                eprintln!(
                    "pcmap: warning: scan cache {}: the index for {} was made on another model \
                     of the binary; decoding every function again",
                    dir.display(),
                    args.binary.display()
                );
            }
            taken
        }
        None => false,
    };
    // perf2bolt writes the binary path as given on its command line.
    let binary_name = args.binary.display().to_string();
    let num_functions = image.functions().len();
    let yaml_opts = yaml::YamlOptions {
        dfs_order: args.profile_use_dfs,
    };
    let function_stats;
    let density;
    let started = std::time::Instant::now();
    let written = if args.basic_events {
        let samples = agg.aggregate_samples(&parsed);
        let profiled = samples.profiled_functions(num_functions);
        function_stats = agg.function_stats(&profiled);
        density = agg.density(&profiled, &samples.executed_bytes, &samples.sample_counts());
        say(format!(
            "PERF2BOLT: out of range samples recorded in unknown regions: {}{}",
            samples.out_of_range,
            pct(samples.out_of_range, parsed.total_samples)
        ));
        let total = parsed.total_samples;
        if total > 0 && samples.out_of_range as f32 * 100.0 / total as f32 > 80.0 {
            say(MISMATCH_WARNING.to_string());
        }
        let write_yaml = |w: &mut dyn std::io::Write| {
            let y =
                yaml::sample_profile_with(&agg, &samples, &binary_name, &parsed.events, yaml_opts);
            pcmap_profile::yaml::write(w, &y)?;
            Ok(y.functions.len() as u64)
        };
        write_outputs(&args, write_yaml, |w| {
            fdata::write_samples(w, &image, &samples, &parsed.events, bolted)
        })?
    } else {
        let bar = crate::progress::items(parsed.traces.len() as u64, "aggregating traces");
        let profile = agg.aggregate_traces(&parsed, &|n| bar.inc(n));
        bar.finish_and_clear();
        let profiled = profile.profiled_functions(num_functions);
        function_stats = agg.function_stats(&profiled);
        density = agg.density(&profiled, &profile.executed_bytes, &profile.sample_counts());
        let s = profile.stats;
        say(format!(
            "PERF2BOLT: traces mismatching disassembled function contents: {}{}",
            s.mismatching,
            pct(s.mismatching, s.traces)
        ));
        if s.traces > 0 && s.mismatching as f32 * 100.0 / s.traces as f32 > 10.0 {
            say(MISMATCH_WARNING.to_string());
        }
        say(format!(
            "PERF2BOLT: out of range traces involving unknown regions: {}{}",
            s.out_of_range,
            pct(s.out_of_range, s.traces)
        ));
        let write_yaml = |w: &mut dyn std::io::Write| {
            yaml::write_branch_profile(w, &agg, &profile, &binary_name, &parsed.events, yaml_opts)
        };
        let written = write_outputs(&args, write_yaml, |w| {
            fdata::write_branches(w, &image, &profile, bolted)
        })?;
        // The process ends next: freeing the records one by one would only delay the exit.
        std::mem::forget(profile);
        written
    };
    if let (Some((dir, key)), false, Some(index)) = (scan_cache, cache_hit, agg.scan_index()) {
        crate::scan_cache::store(dir, key, index, &image, args.verbosity > 0);
    }
    // perf2bolt's fdata writer prints this line; its YAML writer prints nothing.
    if args.profile_format == ProfileFormat::Fdata {
        say(format!(
            "PERF2BOLT: wrote {written} objects and 0 memory objects to {}",
            args.output.display()
        ));
    }
    for line in function_stats.report_lines() {
        say(line);
    }
    // BOLT's density line. Not for basic samples of a BOLT-optimized binary: how BOLT sizes
    // the sampled blocks of its non-simple BAT functions is not reproduced, and a wrong line is
    // worse than none.
    if !(args.basic_events && bolted) {
        let report = density.report(args.density_cutoff_hot, args.density_threshold);
        if let Some(w) = report.warning {
            eprintln!("{w}");
        }
        say(report.info);
    }
    if args.time_aggr {
        let (parsing, processing) = if args.basic_events {
            ("Parsing basic events", "Processing basic events")
        } else if args.pre_aggregated {
            (
                "Parsing aggregated branch events",
                "Processing branch events",
            )
        } else {
            ("Parsing branch events", "Processing branch events")
        };
        for line in timer_table(&[
            (parsing.to_string(), read_time),
            (processing.to_string(), started.elapsed()),
        ]) {
            say(line);
        }
    }
    // As above: the CFGs and traces, and the function and symbol tables (hundreds of
    // thousands of names in a large binary), are left for the operating system to reclaim at
    // exit.
    std::mem::forget(agg);
    std::mem::forget(parsed);
    std::mem::forget(image);
    std::mem::forget(binary);
    Ok(())
}

/// LLVM's timer report for the `Aggregator` group, as perf2bolt prints it with `--time-aggr`,
/// with wall times only (the phases slowest first, then the total).
fn timer_table(phases: &[(String, std::time::Duration)]) -> Vec<String> {
    let rule = format!("==={}===", "-".repeat(73));
    let total: f64 = phases.iter().map(|(_, d)| d.as_secs_f64()).sum();
    let mut sorted: Vec<&(String, std::time::Duration)> = phases.iter().collect();
    sorted.sort_by_key(|p| std::cmp::Reverse(p.1));
    let row = |secs: f64, name: &str| {
        let share = if total > 0.0 {
            secs * 100.0 / total
        } else {
            0.0
        };
        format!("   {secs:.4} ({share:5.1}%)  {name}")
    };
    let mut out = vec![
        rule.clone(),
        format!("{:>45}", "Aggregator"),
        rule,
        format!("  Total Execution Time: {total:.4} seconds ({total:.4} wall clock)"),
        String::new(),
        "   ---Wall Time---  --- Name ---".to_string(),
    ];
    out.extend(sorted.iter().map(|(n, d)| row(d.as_secs_f64(), n)));
    out.push(row(total, "Total"));
    out.push(String::new());
    out
}

/// perf2bolt's warning (standard error) for a perf.data whose branch entries lack the
/// prediction flags ([`PerfStats::missing_mispred_bit`]).
pub(crate) fn warn_missing_mispred_bit() {
    eprintln!("PERF2BOLT-WARNING: misprediction bit is missing in profile");
}

/// Read every `-p` input (`--perfdata-jobs` at a time), in command-line order: the records of
/// each, and for perf.data the counts perf2bolt prints.
fn read_profiles(
    args: &Args,
    binary: &Binary<'_>,
) -> Result<Vec<(PreAggregated, Option<PerfStats>)>> {
    let opts = PerfOptions {
        basic: args.basic_events,
        pid: args.pid,
        ignore_build_id: args.ignore_build_id,
        sample_ips: false,
        max_samples: args.max_samples,
    };
    let kind = if args.pre_aggregated {
        crate::inputs::ProfileKind::PreAggregated
    } else {
        crate::inputs::ProfileKind::PerfData
    };
    crate::inputs::read_profiles(
        binary,
        &args.binary,
        &args.profiles,
        args.perfdata_jobs,
        &opts,
        &|_, _| Ok(kind),
    )
}

/// perf2bolt's long options, which LLVM's option parser also accepts with a single dash.
const LLVM_LONG_OPTIONS: &[&str] = &[
    "pa",
    "ba",
    "nl",
    "basic-events",
    "perfdata",
    "profile-format",
    "ignore-build-id",
    "pid",
    "max-samples",
    "time-aggr",
    "spe",
    "itrace",
    "perfdata-jobs",
    "pj",
    "show-density",
    "profile-density-cutoff-hot",
    "profile-density-threshold",
    "profile-use-dfs",
    "impute-trace-fall-through",
    "ignore-interrupt-lbr",
    "aggregate-only",
    "parse-mem-profile",
    "filter-mem-profile",
    "bolt-info",
    "heatmap",
    "v",
];

/// Let `pcmap perf2bolt` replace `perf2bolt` in scripts: LLVM's command line takes long options
/// with one dash (`-pa`, `-nl`, `-profile-format=yaml`), which clap would read as clusters of
/// short options (`-pa` as `-p a`). Rewrite those to their `--` form; everything else, including
/// the real short options `-p`, `-o`, `-w`, is left alone, and nothing after `--` is touched.
pub fn normalize_llvm_options(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    normalize_llvm_long_options(args, "perf2bolt", LLVM_LONG_OPTIONS)
}

/// [`normalize_llvm_options`] for subcommand `subcommand` whose LLVM long options are `names`
/// (other subcommands that replace an LLVM tool share it).
pub fn normalize_llvm_long_options(
    args: Vec<std::ffi::OsString>,
    subcommand: &str,
    names: &[&str],
) -> Vec<std::ffi::OsString> {
    if args.get(1).and_then(|a| a.to_str()) != Some(subcommand) {
        return args;
    }
    let mut out = Vec::with_capacity(args.len());
    let mut rest = false;
    for (i, arg) in args.into_iter().enumerate() {
        let rewritten = match arg.to_str() {
            Some("--") => {
                rest = true;
                None
            }
            Some(s) if i > 1 && !rest && s.starts_with('-') && !s.starts_with("--") => {
                let name = s[1..].split('=').next().unwrap_or("");
                names.contains(&name).then(|| format!("-{s}").into())
            }
            _ => None,
        };
        out.push(rewritten.unwrap_or(arg));
    }
    out
}

#[cfg(test)]
mod llvm_option_tests {
    use super::normalize_llvm_options;

    fn norm(args: &[&str]) -> Vec<String> {
        normalize_llvm_options(args.iter().map(Into::into).collect())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn single_dash_long_options_become_double_dash() {
        assert_eq!(
            norm(&[
                "pcmap",
                "perf2bolt",
                "bin",
                "-pa",
                "-p",
                "f",
                "-o",
                "x",
                "-nl",
                "-profile-format=yaml",
                "-pid=7"
            ]),
            [
                "pcmap",
                "perf2bolt",
                "bin",
                "--pa",
                "-p",
                "f",
                "-o",
                "x",
                "--nl",
                "--profile-format=yaml",
                "--pid=7"
            ]
        );
        assert_eq!(
            norm(&["pcmap", "perf2bolt", "bin", "-pj", "2", "-perfdata-jobs=0"]),
            [
                "pcmap",
                "perf2bolt",
                "bin",
                "--pj",
                "2",
                "--perfdata-jobs=0"
            ]
        );
        // Other subcommands and values after `--` are untouched.
        assert_eq!(norm(&["pcmap", "info", "-pa"]), ["pcmap", "info", "-pa"]);
        assert_eq!(
            norm(&["pcmap", "perf2bolt", "--", "-pa"]),
            ["pcmap", "perf2bolt", "--", "-pa"]
        );
        assert_eq!(
            norm(&["pcmap", "perf2bolt", "-pf"]),
            ["pcmap", "perf2bolt", "-pf"]
        );
    }
}
