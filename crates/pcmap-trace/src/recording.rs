//! Turning a tracer's log (qemu-user's `-d exec`, valgrind lackey) into the records of a trace
//! file, as `pcmap trace record` writes them.

use crate::format::{self, Format};
use crate::{Record, TraceError};

/// The records of one recorded run.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// The records to write, metadata first.
    pub records: Vec<Record>,
    /// Instructions kept.
    pub insns: u64,
}

/// Read the log `data` (in `format`, named `label` in errors) of a tracer: `meta` comes first,
/// instructions at addresses `keep` rejects and the log's own metadata are dropped, and thread
/// records are dropped when the run had at most one thread (qemu names threads by CPU index).
pub fn from_tracer_log(
    format: Format,
    data: &[u8],
    label: &str,
    meta: Vec<Record>,
    keep: &dyn Fn(u64) -> bool,
) -> Result<Recording, TraceError> {
    let mut records = meta;
    let mut insns = 0u64;
    format::read_as(format, data, label, &mut |r| {
        match &r {
            Record::Insn { addr } if !keep(*addr) => return Ok(()),
            Record::Insn { .. } => insns += 1,
            Record::Meta { .. } => return Ok(()),
            _ => {}
        }
        records.push(r);
        Ok(())
    })?;
    let mut tids: Vec<u64> = records
        .iter()
        .filter_map(|r| match r {
            Record::Thread { tid } => Some(*tid),
            _ => None,
        })
        .collect();
    tids.sort_unstable();
    tids.dedup();
    if tids.len() <= 1 {
        records.retain(|r| !matches!(r, Record::Thread { .. }));
    }
    Ok(Recording { records, insns })
}
