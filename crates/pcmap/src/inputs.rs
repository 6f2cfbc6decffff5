//! Reading inputs several subcommands share: the BAT table of a BOLTed binary, and profiles
//! (pre-aggregated text or perf.data) read as perf2bolt reads them. Errors name the file.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pcmap_binary::Binary;
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

/// Read perf.data (`data`, from `path`) of `binary` (from `binary_path`) as perf2bolt does.
pub fn read_perf_data(
    binary: &Binary<'_>,
    binary_path: &Path,
    data: &[u8],
    path: &Path,
    opts: &PerfOptions,
) -> Result<(preagg::PreAggregated, pcmap_profile::events::PerfStats)> {
    let desc =
        pcmap_bbmap::profile::binary_desc(binary, binary_path.as_os_str().as_encoded_bytes());
    preagg::read_perf_data(data, &desc, opts).with_context(|| format!("reading {}", path.display()))
}

/// What a profile file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileKind {
    /// perf2bolt's pre-aggregated text.
    PreAggregated,
    /// perf.data.
    PerfData,
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
    let read_one = |path: &PathBuf| -> Result<(preagg::PreAggregated, Option<PerfStats>)> {
        let file = pcmap_binary::MappedFile::open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        match kind_of(path, file.bytes())? {
            ProfileKind::PreAggregated => Ok((read_preaggregated(file.bytes(), path)?, None)),
            ProfileKind::PerfData => {
                let (parsed, stats) =
                    read_perf_data(binary, binary_path, file.bytes(), path, opts)?;
                Ok((parsed, Some(stats)))
            }
        }
    };
    if paths.len() == 1 {
        return Ok(vec![read_one(&paths[0])?]);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .context("starting the --perfdata-jobs threads")?;
    pool.install(|| {
        use rayon::prelude::*;
        paths.par_iter().map(read_one).collect()
    })
}
