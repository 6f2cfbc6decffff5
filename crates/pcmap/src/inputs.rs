//! Reading inputs several subcommands share: the BAT table of a BOLTed binary, and profiles
//! (pre-aggregated text or perf.data) read as perf2bolt reads them. Errors name the file.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pcmap_binary::{Binary, MappedFile};
use pcmap_perf2bolt::preagg;
use pcmap_profile::events::{PerfOptions, PerfStats};

/// The BAT table of a BOLT-optimized binary (`.note.bolt_bat`), if it has one.
pub fn bat_table(binary: &Binary<'_>, path: &Path) -> Result<Option<pcmap_bat::BatTable>> {
    let Some(section) = binary.section_by_name(pcmap_bat::SECTION_NAME) else {
        return Ok(None);
    };
    let section = binary
        .section_data(section)
        .with_context(|| format!("reading .note.bolt_bat of {}", path.display()))?;
    let table = pcmap_bat::BatTable::parse(&section)
        .with_context(|| format!("decoding .note.bolt_bat of {}", path.display()))?;
    Ok(Some(table))
}

/// Parse a pre-aggregated profile (with a progress bar); errors name the file, line and column.
pub fn read_preaggregated(data: &[u8], path: &Path) -> Result<preagg::PreAggregated> {
    let bar = crate::progress::bytes(data.len() as u64, "reading profile");
    let parsed = preagg::parse(data, &|n| bar.inc(n)).map_err(|e| match e {
        pcmap_perf2bolt::Error::Preagg(p) => anyhow::anyhow!(
            "{}: {p} (pre-aggregated profile line {}, column {})",
            path.display(),
            p.pos.line,
            p.pos.column
        ),
        e => anyhow::Error::new(e).context(format!("reading {}", path.display())),
    })?;
    bar.finish_and_clear();
    Ok(parsed)
}

/// Read perf.data (`file`, from `path`) of `binary` (from `binary_path`) as perf2bolt does, in
/// parallel; the pages of the file are released as they are read (a file of gigabytes does not
/// stay resident).
pub fn read_perf_data(
    binary: &Binary<'_>,
    binary_path: &Path,
    file: &MappedFile,
    path: &Path,
    opts: &PerfOptions,
) -> Result<(preagg::PreAggregated, pcmap_profile::events::PerfStats)> {
    let desc =
        pcmap_bbmap::profile::binary_desc(binary, binary_path.as_os_str().as_encoded_bytes());
    file.advise_sequential();
    preagg::read_perf_data(file.bytes(), &desc, opts, &|r| file.release(r))
        .with_context(|| format!("reading {}", path.display()))
}

/// What a profile file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileKind {
    /// perf2bolt's pre-aggregated text.
    PreAggregated,
    /// perf.data.
    PerfData,
    /// BOLT's fdata (branch records by function name and offset).
    Fdata,
    /// BOLT's YAML profile.
    Yaml,
}

/// What a profile file is, from its first bytes: perf.data (magic), BOLT YAML (`---`), fdata
/// (a `boltedcollection`/`no_lbr` header or a record starting with a location kind digit), or
/// `None` for other text (pre-aggregated).
pub fn detect_profile(data: &[u8]) -> Option<ProfileKind> {
    if is_perf_data(data) {
        return Some(ProfileKind::PerfData);
    }
    let first = data
        .split(|&b| b == b'\n')
        .map(|l| l.trim_ascii())
        .find(|l| !l.is_empty())?;
    if first.starts_with(b"---") || first.starts_with(b"header:") {
        Some(ProfileKind::Yaml)
    } else if first.starts_with(b"boltedcollection")
        || first.starts_with(b"no_lbr")
        || first.first().is_some_and(u8::is_ascii_digit)
    {
        Some(ProfileKind::Fdata)
    } else {
        None
    }
}

/// Whether `data` is a perf.data file (its magic).
pub fn is_perf_data(data: &[u8]) -> bool {
    data.starts_with(b"PERFILE2")
}

/// Read several profiles of `binary` (at `binary_path`), `jobs` at a time (0 = one per hardware
/// thread), in the given order: the records of each, and for perf.data the counts perf2bolt
/// prints. `kind_of` says how to read each file (from its path and bytes). The callers merge the
/// results with `PreAggregated::merge`, so several profiles are one profile before aggregation
/// or layout.
pub fn read_profiles(
    binary: &Binary<'_>,
    binary_path: &Path,
    paths: &[PathBuf],
    jobs: usize,
    opts: &PerfOptions,
    kind_of: &(dyn Fn(&Path, &[u8]) -> Result<ProfileKind> + Sync),
) -> Result<Vec<(preagg::PreAggregated, Option<PerfStats>)>> {
    // BOLT profiles are read back onto BOLT's CFGs of the binary, made on first need.
    let image: std::sync::OnceLock<Option<pcmap_binary::bolt::BoltFunctions<'_, '_>>> =
        std::sync::OnceLock::new();
    let aggregator = std::sync::OnceLock::new();
    let agg = || -> Result<&pcmap_perf2bolt::aggregate::Aggregator<'_, '_>> {
        let image = image
            .get_or_init(|| pcmap_binary::bolt::BoltFunctions::discover(binary).ok())
            .as_ref()
            .with_context(|| format!("reading the functions of {}", binary_path.display()))?;
        // Hashing: YAML function hashes are checked against the binary's.
        Ok(aggregator
            .get_or_init(|| pcmap_perf2bolt::aggregate::Aggregator::new(image).with_hashing()))
    };
    let read_one = |path: &PathBuf| -> Result<(preagg::PreAggregated, Option<PerfStats>)> {
        let file = pcmap_binary::MappedFile::open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        match kind_of(path, file.bytes())? {
            kind @ (ProfileKind::Fdata | ProfileKind::Yaml) => {
                let agg = agg()?;
                // fdata names no events; YAML keeps the sampled events in its header.
                let (records, stats, events) = if kind == ProfileKind::Fdata {
                    let p = pcmap_profile::fdata::parse(file.bytes())
                        .with_context(|| format!("reading {}", path.display()))?;
                    let (records, stats) = pcmap_perf2bolt::reread::from_fdata(agg, &p)
                        .with_context(|| format!("reading {}", path.display()))?;
                    (records, stats, Vec::new())
                } else {
                    let p = pcmap_profile::yaml::parse(file.bytes())
                        .with_context(|| format!("reading {}", path.display()))?;
                    let (records, stats) = pcmap_perf2bolt::reread::from_yaml(agg, &p);
                    (records, stats, p.header.event_names())
                };
                if stats.unknown_functions + stats.stale_functions > 0 {
                    eprintln!(
                        "pcmap: warning: {}: {} records name functions {} does not have, {} functions are stale (block count or hash differs); left out",
                        path.display(),
                        stats.unknown_functions,
                        binary_path.display(),
                        stats.stale_functions
                    );
                }
                let mut sink = preagg::TraceSink::default();
                pcmap_perf2bolt::reread::replay(agg, &records, &mut sink);
                let mut replayed = sink.finish();
                replayed.events = events;
                Ok((replayed, None))
            }
            ProfileKind::PreAggregated => Ok((read_preaggregated(file.bytes(), path)?, None)),
            ProfileKind::PerfData => {
                let (parsed, stats) = read_perf_data(binary, binary_path, &file, path, opts)?;
                Ok((parsed, Some(stats)))
            }
        }
    };
    read_each(paths, jobs, read_one)
}

/// Read pre-aggregated profiles, `jobs` at a time, in the given order: [`read_profiles`] for
/// inputs known to be pre-aggregated (perf2bolt's `--pa`), which need nothing from the binary
/// and can be read while it is parsed.
pub fn read_preaggregated_files(
    paths: &[PathBuf],
    jobs: usize,
) -> Result<Vec<(preagg::PreAggregated, Option<PerfStats>)>> {
    read_each(paths, jobs, |path| {
        let file = pcmap_binary::MappedFile::open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok((read_preaggregated(file.bytes(), path)?, None))
    })
}

/// `read_one` of each path, `jobs` at a time (0 = one per hardware thread), results in the
/// paths' order; one path is read on the calling thread's pool.
fn read_each<T: Send>(
    paths: &[PathBuf],
    jobs: usize,
    read_one: impl Fn(&PathBuf) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    if paths.len() == 1 {
        return Ok(vec![read_one(&paths[0])?]);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .context("starting the --perfdata-jobs threads")?;
    pool.install(|| {
        use rayon::prelude::*;
        paths.par_iter().map(&read_one).collect()
    })
}
