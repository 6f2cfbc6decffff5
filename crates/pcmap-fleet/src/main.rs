//! `pcmap-fleet`: fleet-scale profiles as Parquet shards, merged and queried with SQL on Apache
//! DataFusion (embedded) or an Apache DataFusion Ballista cluster. The heavy engine lives in
//! this binary so that `cargo build --release` of pcmap itself stays fast.

#[path = "../../pcmap/src/output.rs"]
#[allow(dead_code)]
mod output;

#[path = "../../pcmap/src/input_paths.rs"]
mod input_paths;

// The profile readers `pcmap perf2bolt` uses (perf.data, pre-aggregated, fdata, YAML), shared
// as the atomic writer is, so a shard holds what pcmap's fdata would.
#[path = "../../pcmap/src/inputs.rs"]
#[allow(dead_code)]
mod inputs;

#[path = "../../pcmap/src/progress.rs"]
#[allow(dead_code)]
mod progress;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use pcmap_binary::bolt::BoltFunctions;
use pcmap_binary::{Binary, MappedFile};
use pcmap_fleet::engine::{self, Engine, Filter};
use pcmap_fleet::shard::{self, Origin};
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_perf2bolt::preagg::PreAggregated;
use pcmap_profile::events::PerfOptions;
use pcmap_profile::fdata;

/// Fleet-scale BOLT profiles: Parquet shards, merged and queried with SQL on Apache DataFusion
/// (embedded) or Apache DataFusion Ballista (many machines).
#[derive(Parser, Debug)]
#[command(name = "pcmap-fleet", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Aggregate a profile against a binary like perf2bolt and write it as a shard.
    Perf2bolt(Perf2boltArgs),
    /// Convert an fdata or pre-aggregated profile to a shard.
    Convert(ConvertArgs),
    /// Merge shards with merge-fdata's rules into fdata, YAML or a shard.
    Merge(MergeArgs),
    /// Run SQL over shards (table `shards`).
    Query(QueryArgs),
    /// Run a Ballista scheduler.
    Scheduler(SchedulerArgs),
    /// Run a Ballista executor.
    Executor(ExecutorArgs),
}

/// Where a shard's profile comes from.
#[derive(clap::Args, Debug)]
struct OriginArgs {
    /// Host the profile was collected on (default: this host's name).
    #[arg(long)]
    host: Option<String>,
    /// Collection time: Unix seconds or RFC 3339 (`2026-11-24T17:00:00Z`); default: now.
    #[arg(long = "collected-at", value_name = "TIME")]
    collected_at: Option<String>,
    /// Shared object the profile is of (omit for an executable).
    #[arg(long)]
    dso: Option<String>,
    /// Build-id (hex) to record when the binary is not given or has none.
    #[arg(long = "build-id")]
    build_id: Option<String>,
}

#[derive(clap::Args, Debug)]
struct Perf2boltArgs {
    /// The binary the profile was collected on.
    binary: PathBuf,
    /// Profile: perf.data or BOLT fdata (recognised by content), or pre-aggregated text with
    /// --pa.
    #[arg(short = 'p', long = "perfdata", value_name = "PROFILE")]
    profile: PathBuf,
    /// The profile is in perf2bolt's pre-aggregated format.
    #[arg(long = "pa")]
    pre_aggregated: bool,
    /// Aggregate basic samples (no branch stacks).
    #[arg(long = "ba", visible_alias = "nl")]
    basic_events: bool,
    /// Do not check that the build-id in perf.data matches the binary.
    #[arg(long = "ignore-build-id")]
    ignore_build_id: bool,
    /// The shard to write.
    #[arg(short = 'o', value_name = "SHARD")]
    output: PathBuf,
    #[command(flatten)]
    origin: OriginArgs,
}

#[derive(clap::Args, Debug)]
struct ConvertArgs {
    /// Profile: BOLT fdata (perf2bolt's or merge-fdata's output), BOLT YAML (needs --binary: its
    /// blocks are read back onto the binary's CFGs), or with --pa pre-aggregated text (needs
    /// --binary).
    input: PathBuf,
    /// The binary the profile is of: fills the build-id, binary name and address columns.
    #[arg(long)]
    binary: Option<PathBuf>,
    /// The input is in perf2bolt's pre-aggregated format.
    #[arg(long = "pa")]
    pre_aggregated: bool,
    /// The shard to write.
    #[arg(short = 'o', value_name = "SHARD")]
    output: PathBuf,
    /// Sampled event names to record (repeatable).
    #[arg(long = "event")]
    events: Vec<String>,
    #[command(flatten)]
    origin: OriginArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum EngineKind {
    /// DataFusion in this process.
    Embedded,
    /// A Ballista cluster (`--scheduler`).
    Ballista,
}

#[derive(clap::Args, Debug)]
struct EngineArgs {
    /// Where the plan runs.
    #[arg(long, value_enum, default_value_t = EngineKind::Embedded)]
    engine: EngineKind,
    /// Ballista scheduler `HOST:PORT` (with `--engine ballista`).
    #[arg(long, value_name = "HOST:PORT")]
    scheduler: Option<String>,
    /// DataFusion partitions (0 = one per core; embedded engine).
    #[arg(long, default_value_t = 0)]
    partitions: usize,
    /// Memory the embedded engine's grouping and sorting may hold (bytes, or with a K, M, G or T
    /// suffix, powers of 1024); past it they spill to temporary files (in $TMPDIR), so a merge
    /// of any number of shards runs in bounded memory. `0` = no limit. The process's peak
    /// resident memory is this plus the batches in flight and the output's own needs.
    #[arg(long = "memory-limit", value_name = "SIZE", default_value = "2G", value_parser = parse_size)]
    memory_limit: usize,
}

/// A size in bytes: digits with an optional K, M, G or T suffix (powers of 1024; `KB`, `KiB`
/// spellings too).
fn parse_size(s: &str) -> std::result::Result<usize, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(format!("{s:?}: expected a size such as 512M or 4G")),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1usize << shift))
        .ok_or_else(|| format!("{s:?}: expected a size such as 512M or 4G"))
}

impl EngineArgs {
    fn engine(&self) -> Result<Engine> {
        Ok(match self.engine {
            EngineKind::Embedded => Engine::Embedded {
                partitions: self.partitions,
                memory_limit: (self.memory_limit > 0).then_some(self.memory_limit),
            },
            EngineKind::Ballista => Engine::Ballista {
                scheduler: self
                    .scheduler
                    .clone()
                    .context("--engine ballista needs --scheduler HOST:PORT")?,
            },
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum MergeFormat {
    Fdata,
    Yaml,
    /// perf2bolt's pre-aggregated text (`--pa` input): `B`/`S` records at the binary's addresses.
    Preagg,
    Parquet,
}

#[derive(clap::Args, Debug)]
struct MergeArgs {
    /// Shards, or directories (searched recursively for `*.parquet`).
    #[arg(required_unless_present = "print_sql")]
    inputs: Vec<PathBuf>,
    /// The merged profile (`-` = standard output).
    #[arg(short = 'o', value_name = "OUT", required_unless_present = "print_sql")]
    output: Option<PathBuf>,
    /// Print the merge's SQL (with the filters) and exit: run it with `pcmap-fleet query`
    /// (`EXPLAIN ANALYZE ...` shows where the time goes), DuckDB or Spark.
    #[arg(long = "print-sql")]
    print_sql: bool,
    /// Format of OUT.
    #[arg(long = "format", value_enum, default_value_t = MergeFormat::Fdata)]
    format: MergeFormat,
    /// The profiled binary (required for YAML and pre-aggregated output).
    #[arg(long)]
    binary: Option<PathBuf>,
    /// Only shards of this build-id (required when the shards are of several builds).
    #[arg(long = "build-id")]
    build_id: Option<String>,
    /// Only shards of this host (repeatable).
    #[arg(long = "host")]
    hosts: Vec<String>,
    /// Only collections at or after TIME (Unix seconds or RFC 3339).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only collections before TIME (Unix seconds or RFC 3339).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum QueryFormat {
    Table,
    Csv,
    Json,
}

#[derive(clap::Args, Debug)]
struct QueryArgs {
    /// SQL over the table `shards`.
    sql: String,
    /// Shards, or directories (searched recursively for `*.parquet`).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Output format (on standard output).
    #[arg(long = "format", value_enum, default_value_t = QueryFormat::Table)]
    format: QueryFormat,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(clap::Args, Debug)]
struct SchedulerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Port to listen on.
    #[arg(long, default_value_t = 50050)]
    port: u16,
}

#[derive(clap::Args, Debug)]
struct ExecutorArgs {
    /// Address to listen on (and to advertise to the scheduler).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Arrow Flight port (shuffle data).
    #[arg(long, default_value_t = 50051)]
    port: u16,
    /// gRPC port.
    #[arg(long = "grpc-port", default_value_t = 50052)]
    grpc_port: u16,
    /// Scheduler `HOST:PORT`.
    #[arg(long, default_value = "127.0.0.1:50050")]
    scheduler: String,
    /// Concurrent tasks (0 = one per core).
    #[arg(long, default_value_t = 0)]
    vcores: usize,
    /// Directory for shuffle files (default: a temporary directory).
    #[arg(long = "work-dir")]
    work_dir: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pcmap-fleet: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 * 1024 * 1024)
        .build()
        .context("starting the async runtime")
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Perf2bolt(a) => perf2bolt(a),
        Cmd::Convert(a) => convert(a),
        Cmd::Merge(a) => merge(a),
        Cmd::Query(a) => query(a),
        Cmd::Scheduler(a) => runtime()?.block_on(scheduler(a)),
        Cmd::Executor(a) => runtime()?.block_on(executor(a)),
    }
}

/// Parse Unix seconds or an RFC 3339 time into microseconds since the epoch.
fn parse_time(s: &str) -> Result<i64> {
    if let Ok(secs) = s.parse::<i64>() {
        return secs
            .checked_mul(1_000_000)
            .with_context(|| format!("time {s} is out of range"));
    }
    let ns = datafusion::arrow::compute::kernels::cast_utils::string_to_timestamp_nanos(s)
        .map_err(|e| anyhow::anyhow!("time {s:?}: {e}"))?;
    Ok(ns / 1000)
}

fn origin(
    a: &OriginArgs,
    binary: Option<(&Binary<'_>, &Path)>,
    events: Vec<String>,
) -> Result<Origin> {
    let host = match &a.host {
        Some(h) => h.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default(),
    };
    let collected_at_us = match &a.collected_at {
        Some(t) => parse_time(t)?,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0),
    };
    let build_id = match (&a.build_id, binary) {
        (Some(id), _) => id.to_ascii_lowercase(),
        (None, Some((b, _))) => b.build_id_hex().unwrap_or_default(),
        (None, None) => String::new(),
    };
    Ok(Origin {
        build_id,
        binary: binary
            .map(|(_, p)| p.display().to_string())
            .unwrap_or_default(),
        dso: a.dso.clone(),
        host,
        collected_at_us,
        events,
    })
}

/// Addresses of fdata locations: the function's address in `image` plus the offset (not in BAT
/// mode, where offsets are in the input binary's layout).
fn resolver<'i>(
    image: &'i BoltFunctions<'_, '_>,
    bolted: bool,
) -> impl Fn(&fdata::Location<'_>) -> Option<u64> + 'i {
    let mut by_name = std::collections::HashMap::new();
    if !bolted {
        for f in image.functions() {
            by_name.entry(f.name().to_string()).or_insert(f.address);
        }
    }
    move |l| {
        if !l.kind.is_symbol() {
            return None;
        }
        by_name
            .get(l.unescaped_name().as_ref())
            .map(|a| a.wrapping_add(l.offset))
    }
}

fn write_shard(
    path: &Path,
    profile: &fdata::Profile<'_>,
    origin: &Origin,
    address: &dyn Fn(&fdata::Location<'_>) -> Option<u64>,
) -> Result<u64> {
    // The Parquet writer wants an owned, `Send` sink: encode in memory, then write atomically.
    let mut buf = Vec::new();
    let rows = shard::write(&mut buf, profile, origin, address)?;
    output::write_atomic(path, |w| Ok(w.write_all(&buf)?))?;
    Ok(rows)
}

fn open_binary(path: &Path) -> Result<MappedFile> {
    MappedFile::open(path).with_context(|| format!("opening {}", path.display()))
}

fn perf2bolt(a: Perf2boltArgs) -> Result<()> {
    let opts = PerfOptions {
        basic: a.basic_events,
        pid: None,
        ignore_build_id: a.ignore_build_id,
        sample_ips: false,
        max_samples: None,
    };
    aggregate_to_shard(
        &a.binary,
        &a.profile,
        a.pre_aggregated,
        &opts,
        &a.origin,
        &a.output,
    )
}

/// Read `profile_path` as `pcmap perf2bolt` reads it (perf.data, fdata and YAML by content,
/// pre-aggregated text when `pre_aggregated`), aggregate it against the binary like perf2bolt
/// (BAT-translated on a BOLTed binary) and write the records as a shard.
fn aggregate_to_shard(
    binary_path: &Path,
    profile_path: &Path,
    pre_aggregated: bool,
    opts: &PerfOptions,
    origin_args: &OriginArgs,
    output: &Path,
) -> Result<()> {
    {
        // YAML keeps block counts, not traces: its records are read back directly.
        let profile = open_binary(profile_path)?;
        if inputs::detect_profile(profile.bytes()) == Some(inputs::ProfileKind::Yaml) {
            return yaml_to_shard(
                binary_path,
                profile_path,
                profile.bytes(),
                origin_args,
                output,
            );
        }
    }
    let file = open_binary(binary_path)?;
    let binary = Binary::parse(file.bytes())
        .with_context(|| format!("reading {}", binary_path.display()))?;
    let image = BoltFunctions::discover(&binary)
        .with_context(|| format!("reading {}", binary_path.display()))?;
    let bat = inputs::bat_table(&binary, binary_path)?;
    let bolted = bat.is_some();
    let kind_of = |path: &Path, data: &[u8]| -> Result<inputs::ProfileKind> {
        match inputs::detect_profile(data) {
            Some(kind) => Ok(kind),
            None if pre_aggregated => Ok(inputs::ProfileKind::PreAggregated),
            None => bail!(
                "{}: not perf.data, fdata or YAML (add --pa for a pre-aggregated profile)",
                path.display()
            ),
        }
    };
    let mut read = inputs::read_profiles(
        &binary,
        binary_path,
        &[profile_path.to_path_buf()],
        1,
        opts,
        &kind_of,
    )?;
    let parsed: PreAggregated = read.pop().map(|(p, _)| p).unwrap_or_default();
    let agg = Aggregator::new(&image);
    let agg = match &bat {
        Some(t) => agg.with_bat(t),
        None => agg,
    };
    // perf2bolt's fdata writer, read back as records.
    let mut text = Vec::new();
    if opts.basic {
        let samples = agg.aggregate_samples(&parsed);
        pcmap_perf2bolt::fdata::write_samples(&mut text, &image, &samples, &parsed.events, bolted)?;
    } else {
        let profile = agg.aggregate_traces(&parsed, &|_: u64| {});
        pcmap_perf2bolt::fdata::write_branches(&mut text, &image, &profile, bolted)?;
    }
    let profile = fdata::parse(&text).context("reading back the aggregated profile")?;
    let origin = origin(
        origin_args,
        Some((&binary, binary_path)),
        parsed.events.clone(),
    )?;
    let rows = write_shard(output, &profile, &origin, &resolver(&image, bolted))?;
    println!("pcmap-fleet: wrote {rows} records to {}", output.display());
    Ok(())
}

fn convert(a: ConvertArgs) -> Result<()> {
    let input = open_binary(&a.input)?;
    let kind = inputs::detect_profile(input.bytes());
    if kind == Some(inputs::ProfileKind::Yaml) {
        let Some(binary) = &a.binary else {
            bail!(
                "{}: converting a YAML profile needs --binary (its blocks are numbered in the \
                 binary's CFGs)",
                a.input.display()
            );
        };
        return yaml_to_shard(binary, &a.input, input.bytes(), &a.origin, &a.output);
    }
    if kind != Some(inputs::ProfileKind::Fdata) {
        // Pre-aggregated records need the binary's functions: aggregate them as perf2bolt does.
        let Some(binary) = &a.binary else {
            bail!(
                "{}: converting a pre-aggregated profile needs --binary",
                a.input.display()
            );
        };
        let opts = PerfOptions {
            basic: false,
            pid: None,
            ignore_build_id: false,
            sample_ips: false,
            max_samples: None,
        };
        return aggregate_to_shard(
            binary,
            &a.input,
            a.pre_aggregated,
            &opts,
            &a.origin,
            &a.output,
        );
    }
    let profile =
        fdata::parse(input.bytes()).map_err(|e| anyhow::anyhow!("{}:{e}", a.input.display()))?;
    let rows = match &a.binary {
        Some(path) => {
            let file = open_binary(path)?;
            let binary = Binary::parse(file.bytes())
                .with_context(|| format!("reading {}", path.display()))?;
            let image = BoltFunctions::discover(&binary)
                .with_context(|| format!("reading {}", path.display()))?;
            let origin = origin(&a.origin, Some((&binary, path)), a.events.clone())?;
            write_shard(
                &a.output,
                &profile,
                &origin,
                &resolver(&image, profile.bolted_collection),
            )?
        }
        None => {
            let origin = origin(&a.origin, None, a.events.clone())?;
            write_shard(&a.output, &profile, &origin, &|_| None)?
        }
    };
    println!(
        "pcmap-fleet: wrote {rows} records to {}",
        a.output.display()
    );
    Ok(())
}

/// A YAML profile of `binary_path` as a shard: its blocks, edges and call sites read back onto
/// BOLT's CFGs of the binary (the one reader, `pcmap_perf2bolt::reread::from_yaml`, with
/// llvm-bolt's staleness check), written as the fdata records they stand for. A YAML profile
/// keeps block counts, not each trace, so a merge of such shards gives the YAML back, and fdata
/// with the records those counts imply.
fn yaml_to_shard(
    binary_path: &Path,
    yaml_path: &Path,
    text: &[u8],
    origin_args: &OriginArgs,
    output: &Path,
) -> Result<()> {
    let profile = pcmap_profile::yaml::parse(text)
        .with_context(|| format!("reading {}", yaml_path.display()))?;
    let file = open_binary(binary_path)?;
    let binary = Binary::parse(file.bytes())
        .with_context(|| format!("reading {}", binary_path.display()))?;
    if inputs::bat_table(&binary, binary_path)?.is_some() {
        bail!(
            "{}: YAML profiles of a BOLT-optimized binary ({}) are not converted: they name the \
             input binary's blocks; convert the fdata of the same profile",
            yaml_path.display(),
            binary_path.display()
        );
    }
    let image = BoltFunctions::discover(&binary)
        .with_context(|| format!("reading {}", binary_path.display()))?;
    let agg = Aggregator::new(&image).with_hashing();
    let (branches, stats) = pcmap_perf2bolt::reread::from_yaml(&agg, &profile);
    if stats.unknown_functions + stats.stale_functions > 0 {
        eprintln!(
            "pcmap-fleet: warning: {}: {} functions are not in {}, {} are stale (block count or \
             hash differs); left out",
            yaml_path.display(),
            stats.unknown_functions,
            binary_path.display(),
            stats.stale_functions
        );
    }
    let mut text = Vec::new();
    pcmap_perf2bolt::fdata::write_branches(&mut text, &image, &branches, false)?;
    let records = fdata::parse(&text).context("reading back the converted profile")?;
    let origin = origin(
        origin_args,
        Some((&binary, binary_path)),
        profile.header.event_names(),
    )?;
    let rows = write_shard(output, &records, &origin, &resolver(&image, false))?;
    println!("pcmap-fleet: wrote {rows} records to {}", output.display());
    Ok(())
}

/// Shard paths: files as given, directories searched recursively for `*.parquet` (sorted).
fn expand(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    input_paths::expand(
        inputs,
        &|p| p.extension().is_some_and(|e| e == "parquet"),
        "no shards",
    )
}

fn merge(a: MergeArgs) -> Result<()> {
    let engine = a.engine.engine()?;
    let filter = Filter {
        build_id: a.build_id.as_ref().map(|s| s.to_ascii_lowercase()),
        hosts: a.hosts.clone(),
        since_us: a.since.as_deref().map(parse_time).transpose()?,
        until_us: a.until.as_deref().map(parse_time).transpose()?,
    };
    if a.print_sql {
        println!("{}", engine::merge_sql(&filter));
        return Ok(());
    }
    let output = a.output.clone().context("merge needs -o OUT")?;
    let paths = expand(&a.inputs)?;
    if matches!(a.format, MergeFormat::Yaml | MergeFormat::Preagg) && a.binary.is_none() {
        bail!("{:?} output needs --binary", a.format);
    }
    let rt = runtime()?;
    let (shards, records) = match a.format {
        MergeFormat::Fdata => {
            // Streamed: the engine sorts into fdata's record order, each batch is written as it
            // arrives.
            let mut stream = rt.block_on(engine::merge_stream(&engine, &paths, &filter))?;
            let mut records = 0;
            output::write_atomic(&output, |w| {
                stream.header.write_fdata_header(w)?;
                records = rt.block_on(stream.for_each_line(|l| -> Result<()> {
                    fdata::write_line(w, l)?;
                    Ok(())
                }))?;
                Ok(())
            })?;
            (stream.header.shards.len(), records)
        }
        MergeFormat::Parquet => {
            let mut stream = rt.block_on(engine::merge_stream(&engine, &paths, &filter))?;
            let first = &stream.header.shards[0];
            let origin = Origin {
                build_id: first.build_id.clone(),
                binary: a
                    .binary
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                dso: None,
                host: a.hosts.join(","),
                collected_at_us: filter.until_us.unwrap_or_else(|| {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_micros() as i64)
                        .unwrap_or(0)
                }),
                events: stream.header.events.clone(),
            };
            let records = if output.as_os_str() == "-" {
                stream_shard(&rt, &mut stream, std::io::stdout(), &origin)?
            } else {
                let out = output::AtomicFile::create(&output)?;
                let records = stream_shard(
                    &rt,
                    &mut stream,
                    std::io::BufWriter::with_capacity(1 << 20, out.file()),
                    &origin,
                )
                .with_context(|| format!("writing {}", output.display()))?;
                out.commit()?;
                records
            };
            (stream.header.shards.len(), records)
        }
        MergeFormat::Preagg | MergeFormat::Yaml => {
            // Both go back onto the binary's functions, which needs every record at once
            // (memory grows with the distinct records, not with the shards).
            let merged = rt.block_on(engine::merge(&engine, &paths, &filter))?;
            let path = a
                .binary
                .as_ref()
                .context("this output format needs --binary")?;
            let file = open_binary(path)?;
            let binary = Binary::parse(file.bytes())
                .with_context(|| format!("reading {}", path.display()))?;
            let image = BoltFunctions::discover(&binary)
                .with_context(|| format!("reading {}", path.display()))?;
            let unknown = |n: u64| -> Result<()> {
                if n > 0 {
                    bail!(
                        "{n} records of the merged profile name functions {} does not have",
                        path.display()
                    );
                }
                Ok(())
            };
            if a.format == MergeFormat::Preagg {
                let agg = Aggregator::new(&image);
                let (records, stats) =
                    pcmap_perf2bolt::reread::to_preaggregated(&agg, &merged.profile).with_context(
                        || format!("the merged profile against {}", path.display()),
                    )?;
                unknown(stats.unknown_functions)?;
                output::write_atomic(&output, |w| {
                    records.write(w)?;
                    Ok(())
                })?;
            } else {
                write_merged_yaml(&output, &binary, &image, path, &merged, &unknown)?;
            }
            (merged.shards.len(), merged.profile.lines.len())
        }
    };
    eprintln!("pcmap-fleet: merged {shards} shards ({records} records)");
    Ok(())
}

/// Write the merged records of `stream` as a shard on `out`; returns the number of records.
fn stream_shard<W: std::io::Write + Send>(
    rt: &tokio::runtime::Runtime,
    stream: &mut engine::MergeStream,
    out: W,
    origin: &Origin,
) -> Result<usize> {
    let h = &stream.header;
    let mut w = shard::ShardWriter::new(out, origin, h.bolted_collection, h.no_lbr)?;
    let records = rt.block_on(stream.for_each_line(|l| -> Result<()> {
        w.push(l, &|_| None)?;
        Ok(())
    }))?;
    w.finish()?;
    Ok(records)
}

/// The merged records as perf2bolt's YAML profile of `binary`.
fn write_merged_yaml(
    out: &Path,
    binary: &Binary<'_>,
    image: &BoltFunctions<'_, '_>,
    path: &Path,
    merged: &engine::Merged,
    unknown: &dyn Fn(u64) -> Result<()>,
) -> Result<()> {
    let bat = inputs::bat_table(binary, path)?;
    if merged.profile.is_no_lbr() {
        bail!("YAML output of basic-sample (no_lbr) shards is not supported; use fdata");
    }
    let agg = Aggregator::new(image).with_hashing();
    let agg = match &bat {
        Some(t) => agg.with_bat(t),
        None => agg,
    };
    // The merged records back on the binary's functions: the one fdata reader of
    // pcmap-perf2bolt (perf2bolt's record order).
    let (branches, stats) = pcmap_perf2bolt::reread::from_fdata(&agg, &merged.profile)
        .with_context(|| format!("the merged profile against {}", path.display()))?;
    unknown(stats.unknown_functions)?;
    let y = pcmap_perf2bolt::yaml::branch_profile(
        &agg,
        &branches,
        &path.display().to_string(),
        &merged.events,
    );
    output::write_atomic(out, |w| Ok(pcmap_profile::yaml::write(w, &y)?))
}

fn query(a: QueryArgs) -> Result<()> {
    use futures::StreamExt;
    use std::io::Write;
    let engine = a.engine.engine()?;
    let paths = expand(&a.inputs)?;
    engine::inspect_all(&paths)?;
    let rt = runtime()?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if a.format == QueryFormat::Table {
        // A table sizes its columns from every row.
        let batches = rt.block_on(engine::query(&engine, &paths, &a.sql))?;
        let table = datafusion::arrow::util::pretty::pretty_format_batches(&batches)?;
        writeln!(out, "{table}")?;
        out.flush()?;
        return Ok(());
    }
    // CSV and JSON rows are written batch by batch as the engine produces them.
    let mut batches = rt.block_on(engine::query_stream(&engine, &paths, &a.sql))?;
    let mut next = || rt.block_on(batches.next()).transpose();
    if a.format == QueryFormat::Csv {
        let mut w = datafusion::arrow::csv::Writer::new(&mut out);
        while let Some(b) = next()? {
            w.write(&b)?;
        }
    } else {
        let mut w = datafusion::arrow::json::ArrayWriter::new(&mut out);
        while let Some(b) = next()? {
            w.write(&b)?;
        }
        w.finish()?;
        drop(w);
        writeln!(out)?;
    }
    out.flush()?;
    Ok(())
}

async fn scheduler(a: SchedulerArgs) -> Result<()> {
    use ballista_scheduler::cluster::BallistaCluster;
    use ballista_scheduler::config::SchedulerConfig;
    let config = SchedulerConfig {
        bind_host: a.bind.clone(),
        bind_port: a.port,
        external_host: a.bind.clone(),
        ..SchedulerConfig::default()
    };
    let addr = format!("{}:{}", a.bind, a.port)
        .parse()
        .with_context(|| format!("bad address {}:{}", a.bind, a.port))?;
    let cluster = BallistaCluster::new_from_config(&config).await?;
    ballista_scheduler::scheduler_process::start_server(cluster, addr, Arc::new(config)).await?;
    Ok(())
}

async fn executor(a: ExecutorArgs) -> Result<()> {
    use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
    let (host, port) = a
        .scheduler
        .rsplit_once(':')
        .with_context(|| format!("--scheduler {}: expected HOST:PORT", a.scheduler))?;
    let config = ExecutorProcessConfig {
        bind_host: a.bind.clone(),
        external_host: Some(a.bind.clone()),
        port: a.port,
        grpc_port: a.grpc_port,
        scheduler_host: host.to_string(),
        scheduler_port: port
            .parse()
            .with_context(|| format!("--scheduler {}: bad port", a.scheduler))?,
        vcores: if a.vcores == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            a.vcores
        },
        work_dir: a.work_dir.as_ref().map(|p| p.display().to_string()),
        ..ExecutorProcessConfig::default()
    };
    start_executor_process(Arc::new(config)).await?;
    Ok(())
}
