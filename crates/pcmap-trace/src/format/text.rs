//! The native text format, "pcmap-trace v1" (one record per line):
//!
//! ```text
//! # pcmap-trace v1          optional first line; "# key=value" lines are metadata
//! 0x401136                  one executed instruction (hex, the 0x prefix is optional)
//! 0x401136 3                3 consecutive instructions starting at 0x401136
//! !decode error: overflow   a gap (never merged with anything)
//! @tid 4242                 the following records belong to thread 4242
//! @ts 123456789             time in ns of the next record (non-decreasing per thread)
//! ```
//!
//! A file of bare addresses, one per line (a ptrace single-stepper's output), is a valid trace.

use std::io::{self, Write};

use super::lines::Lines;
use super::{Sink, column_of, parse_dec, parse_hex};
use crate::{GapReason, Record, TraceError};

/// The optional first line.
pub const HEADER: &str = "# pcmap-trace v1";

/// Whether a (trimmed, non-comment) line looks like a text-format record.
pub(crate) fn is_text_line(t: &str) -> bool {
    if t.starts_with('!') || t.starts_with("@tid") || t.starts_with("@ts") {
        return true;
    }
    let mut parts = t.split_ascii_whitespace();
    let Some(first) = parts.next() else {
        return false;
    };
    if parse_hex(first).is_none() {
        return false;
    }
    match (parts.next(), parts.next()) {
        (None, _) => true,
        (Some(n), None) => parse_dec(n).is_some(),
        _ => false,
    }
}

/// Parse a gap line's text (after the `!`) into a reason and an optional message.
fn parse_gap(body: &str) -> (GapReason, Option<String>) {
    let body = body.trim();
    let known = [
        ("filtered", GapReason::Filtered),
        ("decode error", GapReason::DecodeError),
        ("lost data", GapReason::LostData),
        ("tracing disabled", GapReason::TracingDisabled),
    ];
    for (name, reason) in known {
        if let Some(rest) = body.strip_prefix(name) {
            let rest = rest.trim_start();
            if rest.is_empty() {
                return (reason, None);
            }
            if let Some(msg) = rest.strip_prefix(':') {
                return (reason, Some(msg.trim().to_string()));
            }
        }
    }
    if let Some(rest) = body.strip_prefix("gap reason ") {
        let (code, msg) = match rest.split_once(':') {
            Some((c, m)) => (c.trim(), Some(m.trim().to_string())),
            None => (rest.trim(), None),
        };
        if let Some(c) = parse_dec(code) {
            return (GapReason::from_code(c), msg);
        }
    }
    // Free text: a decode error with that message.
    let msg = if body.is_empty() {
        None
    } else {
        Some(body.to_string())
    };
    (GapReason::DecodeError, msg)
}

/// Read a text trace into `sink`.
pub fn read(data: &[u8], file: &str, sink: &mut Sink<'_>) -> Result<(), TraceError> {
    for line in Lines::new(data, file) {
        let (lineno, line) = line?;
        let t = line.trim();
        let col = |part: &str| column_of(line, part);
        let at = |part: &str, msg: String| TraceError::text(file, lineno, col(part), msg);
        let record = if t.is_empty() {
            continue;
        } else if let Some(c) = t.strip_prefix('#') {
            match c.trim().split_once('=') {
                Some((k, v)) if !k.trim().is_empty() && !k.contains(' ') => Record::Meta {
                    key: k.trim().to_string(),
                    value: v.trim().to_string(),
                },
                _ => continue,
            }
        } else if let Some(body) = t.strip_prefix('!') {
            let (reason, message) = parse_gap(body);
            Record::Gap { reason, message }
        } else if let Some(rest) = t.strip_prefix('@') {
            let mut parts = rest.split_ascii_whitespace();
            let key = parts.next().unwrap_or("");
            let Some(value) = parts.next() else {
                return Err(at(t, format!("expected a decimal number after `@{key}`")));
            };
            if let Some(extra) = parts.next() {
                return Err(at(
                    extra,
                    format!("unexpected `{extra}` after `@{key} {value}`"),
                ));
            }
            let Some(n) = parse_dec(value) else {
                return Err(at(
                    value,
                    format!("expected a decimal number, found `{value}`"),
                ));
            };
            match key {
                "tid" => Record::Thread { tid: n },
                "ts" => Record::Timestamp { ns: n },
                _ => {
                    return Err(at(
                        t,
                        format!("unknown directive `@{key}` (expected @tid or @ts)"),
                    ));
                }
            }
        } else {
            let mut parts = t.split_ascii_whitespace();
            let first = parts.next().unwrap_or("");
            let Some(addr) = parse_hex(first) else {
                return Err(at(
                    first,
                    format!(
                        "expected a hexadecimal instruction address, `!gap`, `@tid` or `@ts`, found `{first}`"
                    ),
                ));
            };
            match parts.next() {
                None => Record::Insn { addr },
                Some(n) => {
                    if let Some(extra) = parts.next() {
                        return Err(at(
                            extra,
                            format!("unexpected `{extra}` after the instruction count"),
                        ));
                    }
                    match parse_dec(n).and_then(|v| u32::try_from(v).ok()) {
                        Some(insns) if insns >= 1 => Record::Block { addr, insns },
                        _ => {
                            return Err(at(
                                n,
                                format!(
                                    "expected an instruction count between 1 and {}, found `{n}`",
                                    u32::MAX
                                ),
                            ));
                        }
                    }
                }
            }
        };
        sink(record).map_err(|m| TraceError::text(file, lineno, 1, m))?;
    }
    Ok(())
}

/// Writes records as "pcmap-trace v1" text.
pub struct TextWriter<W: Write> {
    out: W,
}

impl<W: Write> TextWriter<W> {
    /// Start a text trace on `out` (writes the header line).
    pub fn new(mut out: W) -> io::Result<Self> {
        writeln!(out, "{HEADER}")?;
        Ok(TextWriter { out })
    }

    /// Write one record.
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        match record {
            Record::Insn { addr } => writeln!(self.out, "{addr:#x}"),
            Record::Block { addr, insns } => writeln!(self.out, "{addr:#x} {insns}"),
            Record::Gap { reason, message } => match message {
                Some(m) => writeln!(
                    self.out,
                    "!{}: {}",
                    reason.name(),
                    m.replace(['\n', '\r'], " ")
                ),
                None => writeln!(self.out, "!{}", reason.name()),
            },
            Record::Thread { tid } => writeln!(self.out, "@tid {tid}"),
            Record::Timestamp { ns } => writeln!(self.out, "@ts {ns}"),
            Record::Meta { key, value } => {
                let key: String = key
                    .chars()
                    .filter(|c| !c.is_whitespace() && *c != '=')
                    .collect();
                writeln!(self.out, "# {key}={}", value.replace(['\n', '\r'], " "))
            }
        }
    }

    /// Flush and return the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
