//! Reading inputs several subcommands share: the BAT table of a BOLTed binary, and profiles
//! (pre-aggregated text or perf.data) read as perf2bolt reads them. Errors name the file.

use std::path::Path;

use anyhow::{Context, Result};
use pcmap_binary::{Binary, MappedFile};
use pcmap_perf2bolt::preagg;
use pcmap_profile::events::PerfOptions;

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
            "{}:{p} (pre-aggregated profile line {}, column {})",
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
