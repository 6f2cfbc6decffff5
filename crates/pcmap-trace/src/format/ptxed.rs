//! libipt `ptxed` output: `0x0000000000100000  mov rax, 0x0` per instruction, and status lines
//! in brackets. `[disabled]`/`[paused]` become tracing-disabled gaps, `[overflow]` a lost-data gap,
//! any bracketed line mentioning an error a decode-error gap; other status lines are skipped.

use super::lines::Lines;
use super::{Sink, parse_hex};
use crate::{GapReason, Record, TraceError};

/// Whether a trimmed line is a ptxed instruction line.
pub(crate) fn is_insn_line(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() >= 20
        && t.starts_with("0x")
        && b[2..18].iter().all(u8::is_ascii_hexdigit)
        && (b.len() == 18 || b[18] == b' ')
}

/// Read ptxed output into `sink`.
pub fn read(data: &[u8], file: &str, sink: &mut Sink<'_>) -> Result<(), TraceError> {
    for line in Lines::new(data, file) {
        let (lineno, line) = line?;
        let t = line.trim();
        let record = if let Some(status) = t.strip_prefix('[') {
            let status = status.trim_end_matches(']');
            let lower = status.to_ascii_lowercase();
            let reason = if lower.starts_with("disabled") || lower.starts_with("paused") {
                GapReason::TracingDisabled
            } else if lower.starts_with("overflow") {
                GapReason::LostData
            } else if lower.contains("error") {
                GapReason::DecodeError
            } else {
                continue;
            };
            Record::Gap {
                reason,
                message: Some(status.to_string()),
            }
        } else if t.starts_with("0x") {
            let word = t.split_ascii_whitespace().next().unwrap_or("");
            let addr = parse_hex(word).ok_or_else(|| {
                TraceError::text(
                    file,
                    lineno,
                    1,
                    format!("expected an instruction address, found `{word}`"),
                )
            })?;
            Record::Insn { addr }
        } else {
            continue;
        };
        sink(record).map_err(|m| TraceError::text(file, lineno, 1, m))?;
    }
    Ok(())
}
