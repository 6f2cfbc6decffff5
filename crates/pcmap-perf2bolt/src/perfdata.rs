//! perf.data input read directly (no `perf script` subprocess): samples of the processes that
//! mapped the binary become the same [`PreAggregated`] records the pre-aggregated reader makes,
//! with perf2bolt's rules — branch stacks turn into traces (each entry's fall-through ends at the
//! source of the next-newer entry; the newest entry has none), kernel entries are ignored, basic
//! samples count one per sample at its ip.
//!
//! Only binaries at fixed addresses (`ET_EXEC`, non-PIE) are supported: their sample addresses
//! are used as they are.

use pcmap_profile::perfdata::{MmapTable, PerfFile};

use crate::Error;
use crate::preagg::{BR_ONLY, PreAggregated, Trace, TraceCounts};

/// perf2bolt's `KernelBaseAddr`: branch entries at or above it are dropped.
const KERNEL_BASE: u64 = 0xffff_8000_0000_0000;

/// Counts perf2bolt prints while reading perf.data.
#[derive(Debug, Default, Clone, Copy)]
pub struct PerfStats {
    /// All samples in the file (branch mode) or samples of the binary's processes (basic mode).
    pub total_samples: u64,
    /// Samples of the binary's processes (branch mode).
    pub samples: u64,
    /// Branch-stack entries of those samples.
    pub entries: u64,
    /// Whether the build-id in the file matched the binary.
    pub build_id_matched: bool,
}

/// How to read a perf.data file.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerfOptions<'a> {
    /// Basic samples instead of branch stacks.
    pub basic: bool,
    /// Only this process.
    pub pid: Option<u32>,
    /// Accept a file whose build-ids do not include the binary's.
    pub ignore_build_id: bool,
    /// The binary's build-id (raw bytes).
    pub build_id: Option<&'a [u8]>,
    /// The binary's file name.
    pub binary_name: &'a [u8],
}

fn perf_error(e: impl std::fmt::Display) -> Error {
    Error::PerfData(e.to_string())
}

/// Read samples of the binary from perf.data bytes.
pub fn read(data: &[u8], opts: &PerfOptions<'_>) -> Result<(PreAggregated, PerfStats), Error> {
    let file = PerfFile::parse(data).map_err(perf_error)?;
    let mut stats = PerfStats::default();
    if let Some(id) = opts.build_id {
        stats.build_id_matched = file
            .build_ids
            .iter()
            .any(|e| e.build_id.starts_with(id) || id.starts_with(&e.build_id));
        if !stats.build_id_matched && !file.build_ids.is_empty() && !opts.ignore_build_id {
            return Err(Error::PerfData(
                "failed to match build-id from perf data: the binary is not the one that was profiled \
                 (use --ignore-build-id to override)"
                    .into(),
            ));
        }
    }
    let mmaps = MmapTable::from_file(&file).map_err(perf_error)?;
    let mut pids: Vec<u32> = mmaps
        .mappings_of(&file, opts.build_id, opts.binary_name)
        .iter()
        .map(|e| e.pid)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    if let Some(p) = opts.pid {
        if !pids.contains(&p) {
            return Err(Error::PerfData(format!(
                "could not find a profile matching PID {p} for the binary"
            )));
        }
        pids = vec![p];
    }
    if pids.is_empty() {
        return Err(Error::PerfData(
            "could not find a profile matching the binary in perf data".into(),
        ));
    }
    let mut out = PreAggregated::default();
    let mut traces: rustc_hash::FxHashMap<Trace, TraceCounts> = Default::default();
    file.for_each_sample(|s| {
        let ours = s.pid.is_some_and(|p| pids.binary_search(&p).is_ok());
        if opts.basic {
            let Some(ip) = s.ip.filter(|&ip| ip != 0) else {
                return;
            };
            if !ours {
                return;
            }
            stats.total_samples += 1;
            *out.samples.entry(ip).or_default() += 1;
            // perf script prints event names with a trailing colon, and perf2bolt keeps it.
            let name = format!("{}:", file.event_name(s.attr_index));
            if !out.events.contains(&name) {
                out.events.push(name);
            }
            return;
        }
        stats.total_samples += 1;
        if !ours {
            return;
        }
        stats.samples += 1;
        let Some(stack) = &s.branch_stack else { return };
        // Entries are newest first; the fall-through of an entry ends where the next-newer one
        // starts.
        let mut next_from = None;
        for i in 0..stack.len() {
            let Some(e) = stack.get(i) else { break };
            if e.from >= KERNEL_BASE || e.to >= KERNEL_BASE {
                continue;
            }
            stats.entries += 1;
            let to = next_from.unwrap_or(BR_ONLY);
            next_from = Some(e.from);
            let c = traces
                .entry(Trace {
                    branch: e.from,
                    from: e.to,
                    to,
                })
                .or_default();
            c.count += 1;
            c.mispreds += u64::from(e.mispredicted());
        }
    })
    .map_err(perf_error)?;
    out.traces = traces.into_iter().collect();
    out.traces
        .sort_unstable_by_key(|(t, _)| (t.from, t.branch, t.to));
    out.total_samples = stats.total_samples;
    out.entries = stats.samples;
    Ok((out, stats))
}
