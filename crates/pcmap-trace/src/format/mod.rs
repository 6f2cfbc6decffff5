//! Trace file formats: detection and one reader per format.
//!
//! Every reader pushes [`Record`]s into a sink (`FnMut(Record) -> Result<(), String>`); a sink
//! error (for example a timestamp that goes backwards) is reported at the record's location.

pub mod binary;
pub mod lackey;
pub mod lines;
pub mod perf;
pub mod ptxed;
pub mod qemu;
pub mod text;

use crate::{Record, TraceError};

/// The sink every reader pushes records into. An `Err(message)` stops reading and is reported
/// with the location of the record that caused it.
pub type Sink<'a> = dyn FnMut(Record) -> Result<(), String> + 'a;

/// The formats pcmap reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// "pcmap-trace v1" text, which includes one bare address per line.
    Text,
    /// The compact binary format (magic `PCMTRACE`).
    Binary,
    /// qemu-user `-d exec` log (`Trace 0: 0x... [.../PC/...]`).
    QemuExec,
    /// valgrind `--tool=lackey --trace-mem=yes` output (`I  ADDR,SIZE`).
    Lackey,
    /// libipt `ptxed` instruction listing (`0x%016x  insn`).
    Ptxed,
    /// `perf script` instruction samples (an ip column per line).
    PerfInstructions,
    /// `perf script --itrace=b` branch samples (`SRC ... => DST ...`).
    PerfBranches,
}

impl Format {
    /// A short name for messages and `--json` output.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "pcmap-trace text",
            Format::Binary => "PCMTRACE binary",
            Format::QemuExec => "qemu -d exec log",
            Format::Lackey => "valgrind lackey",
            Format::Ptxed => "libipt ptxed",
            Format::PerfInstructions => "perf script instruction samples",
            Format::PerfBranches => "perf script branch samples",
        }
    }
}

/// How many meaningful lines detection looks at before giving up.
const DETECT_LINES: usize = 1000;

/// Recognise the format of `data` from its magic or its first meaningful line.
pub fn detect(data: &[u8], file: &str) -> Result<Format, TraceError> {
    if data.starts_with(binary::MAGIC) {
        return Ok(Format::Binary);
    }
    if data.is_empty() {
        return Ok(Format::Text);
    }
    let mut seen = 0;
    for line in lines::Lines::new(data, file) {
        let (lineno, line) = line?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with("==") || t.starts_with("--") {
            continue;
        }
        if qemu::is_exec_line(t) {
            return Ok(Format::QemuExec);
        }
        if lackey::is_insn_line(line) {
            return Ok(Format::Lackey);
        }
        if t.starts_with("SB ") {
            return Err(TraceError::text(
                file,
                lineno,
                1,
                "this is a lackey --trace-superblocks log: superblocks may exit early, so it cannot give \
                 instruction counts; record with `valgrind --tool=lackey --trace-mem=yes` instead",
            ));
        }
        if ptxed::is_insn_line(t) {
            return Ok(Format::Ptxed);
        }
        if t.contains("=>") {
            return Ok(Format::PerfBranches);
        }
        if text::is_text_line(t) {
            return Ok(Format::Text);
        }
        if perf::is_sample_line(t) {
            return Ok(Format::PerfInstructions);
        }
        seen += 1;
        if seen >= DETECT_LINES {
            break;
        }
    }
    if seen == 0 {
        // Only comments and blank lines: an empty text trace.
        return Ok(Format::Text);
    }
    Err(TraceError::Unrecognised {
        file: file.to_string(),
        message: "unrecognised trace format: expected pcmap-trace text, PCMTRACE binary, a qemu `-d exec` \
                  log, valgrind lackey `--trace-mem=yes` output, ptxed output or `perf script` samples"
            .into(),
    })
}

/// Detect the format of `data` and read all of it into `sink`. Returns the detected format.
pub fn read(data: &[u8], file: &str, sink: &mut Sink<'_>) -> Result<Format, TraceError> {
    let format = detect(data, file)?;
    read_as(format, data, file, sink)?;
    Ok(format)
}

/// Read `data` as `format` into `sink`.
pub fn read_as(
    format: Format,
    data: &[u8],
    file: &str,
    sink: &mut Sink<'_>,
) -> Result<(), TraceError> {
    match format {
        Format::Text => text::read(data, file, sink),
        Format::Binary => binary::PcmTrace::parse(data, file)?.read_all(sink),
        Format::QemuExec => qemu::read(data, file, sink),
        Format::Lackey => lackey::read(data, file, sink),
        Format::Ptxed => ptxed::read(data, file, sink),
        Format::PerfInstructions => perf::read_instructions(data, file, sink),
        Format::PerfBranches => perf::read_branches(data, file, sink),
    }
}

/// Parse a hexadecimal number with an optional `0x`/`0X` prefix; `None` if it is not one.
pub(crate) fn parse_hex(s: &str) -> Option<u64> {
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// Parse a decimal number; `None` if it is not one.
pub(crate) fn parse_dec(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The 1-based byte column of `part` (a subslice of `line`).
pub(crate) fn column_of(line: &str, part: &str) -> u64 {
    let off = (part.as_ptr() as usize).saturating_sub(line.as_ptr() as usize);
    off.min(line.len()) as u64 + 1
}
