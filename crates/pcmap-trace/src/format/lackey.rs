//! valgrind `--tool=lackey --trace-mem=yes` output: `I  00401050,2` is one executed instruction
//! (address, size); ` S`/` L`/` M` data accesses and `==pid==` messages are skipped.

use super::lines::Lines;
use super::{Sink, column_of, parse_dec, parse_hex};
use crate::{Record, TraceError};

/// Whether an untrimmed line is a lackey `I  ADDR,SIZE` line.
pub(crate) fn is_insn_line(line: &str) -> bool {
    parse_insn(line).is_some()
}

fn parse_insn(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("I ")?;
    let (addr, size) = rest.trim_start().split_once(',')?;
    parse_dec(size.trim())?;
    parse_hex(addr)
}

/// Read a lackey log into `sink`.
pub fn read(data: &[u8], file: &str, sink: &mut Sink<'_>) -> Result<(), TraceError> {
    for line in Lines::new(data, file) {
        let (lineno, line) = line?;
        if line.starts_with("I ") {
            let addr = parse_insn(line).ok_or_else(|| {
                TraceError::text(
                    file,
                    lineno,
                    column_of(line, line.trim_start_matches("I ")),
                    "expected `I  ADDR,SIZE`",
                )
            })?;
            sink(Record::Insn { addr }).map_err(|m| TraceError::text(file, lineno, 1, m))?;
        } else if line.starts_with("SB ") {
            return Err(TraceError::text(
                file,
                lineno,
                1,
                "lackey superblock lines cannot give instruction counts; record with --trace-mem=yes",
            ));
        }
    }
    Ok(())
}
