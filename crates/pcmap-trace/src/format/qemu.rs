//! qemu-user `-d exec` logs: `Trace 0: 0x7f..b0580 [0000000000000000/0000000000401050/1040c0b3/00000200] _start`.
//!
//! The guest PC is the second `/`-separated field inside the brackets in every qemu version
//! (5.x `[cs_base/pc/flags]`, 7.x `[cs_base/pc/flags/cflags]`, 8.1+ without zero padding). With
//! `-singlestep` (8.1+: `-one-insn-per-tb`) each line is one instruction; without it each line is
//! one translation block whose instruction count the log does not give, and it is read as one unit.
//! The number after `Trace` is the CPU index, which qemu-user assigns per guest thread, so it is
//! kept as the thread id. `-d page` lines `start_code`/`end_code` become metadata; everything
//! else (`Linking TBs`, `Chain`, page tables) is skipped.

use super::lines::Lines;
use super::{Sink, column_of, parse_dec, parse_hex};
use crate::{Record, TraceError};

/// Whether a trimmed line is a `Trace N: HOST [..` exec line.
pub(crate) fn is_exec_line(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("Trace ") else {
        return false;
    };
    let Some((n, rest)) = rest.split_once(':') else {
        return false;
    };
    parse_dec(n).is_some()
        && rest
            .trim_start()
            .split_once(' ')
            .is_some_and(|(_, r)| r.trim_start().starts_with('['))
}

/// Read a qemu exec log into `sink`.
pub fn read(data: &[u8], file: &str, sink: &mut Sink<'_>) -> Result<(), TraceError> {
    let mut cpu: Option<u64> = None;
    for line in Lines::new(data, file) {
        let (lineno, line) = line?;
        let t = line.trim();
        let Some(rest) = t.strip_prefix("Trace ") else {
            for key in ["start_code", "end_code", "start_data", "entry"] {
                if let Some(v) = t.strip_prefix(key)
                    && v.starts_with(char::is_whitespace)
                {
                    sink(Record::Meta {
                        key: key.to_string(),
                        value: v.trim().to_string(),
                    })
                    .map_err(|m| TraceError::text(file, lineno, 1, m))?;
                }
            }
            continue;
        };
        let err = |part: &str, m: &str| {
            TraceError::text(file, lineno, column_of(line, part), m.to_string())
        };
        let (n, rest) = rest
            .split_once(':')
            .ok_or_else(|| err(rest, "expected `Trace N:`"))?;
        let n = parse_dec(n.trim()).ok_or_else(|| err(n, "expected a CPU index after `Trace`"))?;
        let open = rest
            .find('[')
            .ok_or_else(|| err(rest, "expected `[cs_base/pc/...]`"))?;
        let inner = &rest[open + 1..];
        let close = inner
            .find(']')
            .ok_or_else(|| err(inner, "expected `]` closing `[cs_base/pc/...`"))?;
        let inner = &inner[..close];
        let mut fields = inner.split('/');
        let _cs_base = fields.next();
        let pc = fields
            .next()
            .ok_or_else(|| err(inner, "expected a second `/` field (the guest pc)"))?;
        let addr =
            parse_hex(pc.trim()).ok_or_else(|| err(pc, "expected a hexadecimal guest pc"))?;
        if cpu != Some(n) {
            cpu = Some(n);
            sink(Record::Thread { tid: n }).map_err(|m| TraceError::text(file, lineno, 1, m))?;
        }
        sink(Record::Insn { addr }).map_err(|m| TraceError::text(file, lineno, 1, m))?;
    }
    Ok(())
}
