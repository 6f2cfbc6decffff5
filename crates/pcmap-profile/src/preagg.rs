//! Pre-aggregated profile text, the input of `perf2bolt --pa`.
//!
//! One record per line, fields separated by blanks:
//! ```text
//! E <event>                               event name for the records that follow
//! S <addr> <count>                        basic sample
//! T <branch> <ft_start> <ft_end> <count>  taken branch branch->ft_start, then fall-through ft_start..ft_end
//! R <branch> <ft_start> <ft_end> <count>  like T, the branch is a return (branch 0 = external return)
//! B <from> <to> <count> <mispreds>        branch only
//! F <from> <to> <count>                   fall-through only
//! f <from> <to> <count>                   fall-through with an external origin
//! r <from> <to> <count>                   fall-through starting at an external return
//! ```
//! A location is `[<id>:]<hex>` (hex without `0x`, at most 16 digits); `X:<addr>` marks an external
//! address. perf2bolt 22 parses the `<id>:` prefix and then ignores it; [`Location`] keeps it so callers
//! can decide. An empty `<id>` (`:401000`) is rejected, as perf2bolt does ("malformed field").
//!
//! The dialect is exactly perf2bolt 22's (checked by running it): fields are separated by one or more
//! spaces (tabs are not separators), leading spaces are skipped, one space may follow the last field,
//! every line ends in `\n` (no `\r\n`, no missing final newline, no blank lines), counts are signed
//! 64-bit decimal numbers and negative counts wrap to unsigned values as perf2bolt's casts do (the
//! writer prints counts above `i64::MAX` as negative numbers, so they read back unchanged). Every error
//! names the 1-based line and column of the offending field and what was expected.
//!
//! Large inputs: [`fold_parallel`] splits the bytes (typically a memory map) into newline-aligned chunks
//! and folds each chunk on the rayon pool; memory stays proportional to what the fold keeps. The
//! [`events`](crate::events) pipeline reads this format through the same functions.

use std::fmt;
use std::io::{self, Write};

use rayon::prelude::*;

use crate::TextPos;
use crate::text::{parse_hex, show};

/// An address in a pre-aggregated record: an optional object identifier and a hexadecimal offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location<'a> {
    /// The `<id>` before the `:`, if any (`X` = external, or a build-id). Never empty when present.
    pub build_id: Option<&'a [u8]>,
    /// The address or offset after the optional prefix.
    pub offset: u64,
}

impl<'a> Location<'a> {
    /// A bare address (no prefix).
    pub const fn addr(offset: u64) -> Self {
        Location {
            build_id: None,
            offset,
        }
    }

    /// An external address `X:<addr>`.
    pub const fn external(offset: u64) -> Self {
        Location {
            build_id: Some(b"X"),
            offset,
        }
    }

    /// Whether the location is marked external (`X:` prefix).
    pub fn is_external(&self) -> bool {
        self.build_id == Some(b"X".as_slice())
    }
}

impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(id) = self.build_id {
            write!(f, "{}:", String::from_utf8_lossy(id))?;
        }
        write!(f, "{:x}", self.offset)
    }
}

/// Whether a `T`/`R` record's branch is a plain taken branch or a return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TraceKind {
    /// `T`: taken branch followed by a fall-through.
    Branch,
    /// `R`: the branch is a return (offset 0 = return from outside the binary).
    Return,
}

/// The three fall-through-only record types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FallThroughKind {
    /// `F`: fall-through with an internal origin.
    Internal,
    /// `f`: fall-through whose origin is external.
    ExternalOrigin,
    /// `r`: fall-through starting at an external return.
    ExternalReturn,
}

/// One pre-aggregated record. Borrowed from the input bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Record<'a> {
    /// `E <event>`: event name for the following records.
    Event {
        /// The event name (one blank-free token).
        name: &'a [u8],
    },
    /// `S <addr> <count>`: basic sample.
    Sample {
        /// Sampled address.
        addr: Location<'a>,
        /// Number of samples.
        count: u64,
    },
    /// `T`/`R <branch> <ft_start> <ft_end> <count>`.
    Trace {
        /// `T` or `R`.
        kind: TraceKind,
        /// Branch source.
        branch: Location<'a>,
        /// Branch target = fall-through start.
        ft_start: Location<'a>,
        /// Fall-through end (source of the next taken branch).
        ft_end: Location<'a>,
        /// Number of times taken.
        count: u64,
    },
    /// `B <from> <to> <count> <mispreds>`: branch without fall-through.
    Branch {
        /// Branch source.
        from: Location<'a>,
        /// Branch target.
        to: Location<'a>,
        /// Number of times taken.
        count: u64,
        /// Number of mispredictions.
        mispreds: u64,
    },
    /// `F`/`f`/`r <from> <to> <count>`: fall-through without branch.
    FallThrough {
        /// `F`, `f` or `r`.
        kind: FallThroughKind,
        /// Fall-through start.
        from: Location<'a>,
        /// Fall-through end.
        to: Location<'a>,
        /// Number of times executed.
        count: u64,
    },
}

impl Record<'_> {
    /// The record's type letter (`E S T R B F f r`).
    pub fn letter(&self) -> char {
        match self {
            Record::Event { .. } => 'E',
            Record::Sample { .. } => 'S',
            Record::Trace {
                kind: TraceKind::Branch,
                ..
            } => 'T',
            Record::Trace {
                kind: TraceKind::Return,
                ..
            } => 'R',
            Record::Branch { .. } => 'B',
            Record::FallThrough {
                kind: FallThroughKind::Internal,
                ..
            } => 'F',
            Record::FallThrough {
                kind: FallThroughKind::ExternalOrigin,
                ..
            } => 'f',
            Record::FallThrough {
                kind: FallThroughKind::ExternalReturn,
                ..
            } => 'r',
        }
    }

    /// The record's main count (0 for events).
    pub fn count(&self) -> u64 {
        match *self {
            Record::Event { .. } => 0,
            Record::Sample { count, .. }
            | Record::Trace { count, .. }
            | Record::Branch { count, .. }
            | Record::FallThrough { count, .. } => count,
        }
    }
}

impl fmt::Display for Record<'_> {
    /// The canonical text form, without the newline (lower-case hex, single spaces).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.letter();
        match self {
            Record::Event { name } => write!(f, "E {}", String::from_utf8_lossy(name)),
            Record::Sample { addr, count } => write!(f, "S {addr} {}", *count as i64),
            Record::Trace {
                branch,
                ft_start,
                ft_end,
                count,
                ..
            } => {
                write!(f, "{l} {branch} {ft_start} {ft_end} {}", *count as i64)
            }
            Record::Branch {
                from,
                to,
                count,
                mispreds,
            } => write!(f, "B {from} {to} {} {}", *count as i64, *mispreds as i64),
            Record::FallThrough {
                from, to, count, ..
            } => write!(f, "{l} {from} {to} {}", *count as i64),
        }
    }
}

/// A located pre-aggregated parse error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pos}: {kind}")]
pub struct Error {
    /// Where the offending field starts.
    pub pos: TextPos,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// What went wrong while parsing a pre-aggregated line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The first field is not a known record type.
    #[error("expected a record type (T, R, S, E, B, F, f or r), found `{0}`")]
    UnknownType(String),
    /// A location field is not `[<id>:]<hex>`.
    #[error("expected {field} as [<id>:]<hex> (hexadecimal without 0x), found `{found}`")]
    BadLocation {
        /// Which field.
        field: &'static str,
        /// The text found.
        found: String,
    },
    /// A count field is not a signed 64-bit decimal number.
    #[error("expected {field} as a decimal number, found `{found}`")]
    BadCount {
        /// Which field.
        field: &'static str,
        /// The text found.
        found: String,
    },
    /// The line ends before a required field.
    #[error("missing {field} (the line ends early)")]
    MissingField {
        /// Which field.
        field: &'static str,
    },
    /// The last line does not end in a newline.
    #[error("expected a newline at the end of the line")]
    MissingNewline,
    /// Extra text after the last field of a record.
    #[error("expected end of line after the {record} record, found `{found}`")]
    TrailingField {
        /// The record type letter.
        record: char,
        /// The text found.
        found: String,
    },
}

/// Field names per record type, in order.
const T_FIELDS: [&str; 4] = [
    "branch address",
    "fall-through start",
    "fall-through end",
    "count",
];
const B_FIELDS: [&str; 4] = [
    "branch source",
    "branch target",
    "count",
    "misprediction count",
];
const F_FIELDS: [&str; 3] = ["fall-through start", "fall-through end", "count"];
const S_FIELDS: [&str; 2] = ["sample address", "count"];

#[inline]
fn is_blank(b: u8) -> bool {
    b == b' '
}

/// A tokenizer over one line (without its `\n`).
struct Fields<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    /// Next blank-separated field and its 0-based byte column.
    #[inline]
    fn next(&mut self) -> Option<(&'a [u8], usize)> {
        let line = self.line;
        let mut i = self.pos;
        while i < line.len() && is_blank(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            self.pos = i;
            return None;
        }
        let start = i;
        while i < line.len() && !is_blank(line[i]) {
            i += 1;
        }
        self.pos = i;
        Some((&line[start..i], start))
    }
}

/// Hex digit values (0xff = not a hex digit).
const HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// The hex number at `line[*i..]`: its value if it has 1 to 16 digits (then `*i` is moved past
/// them), `None` otherwise. Digit by digit ([`hex_at`] takes eight at a time).
#[inline(always)]
fn hex_digits_at(line: &[u8], i: &mut usize) -> Option<u64> {
    let start = *i;
    let mut v: u64 = 0;
    while let Some(&c) = line.get(*i) {
        let d = HEX[c as usize];
        if d == 0xff {
            break;
        }
        v = (v << 4) | u64::from(d);
        *i += 1;
    }
    let n = *i - start;
    (n > 0 && n <= 16).then_some(v)
}

/// The leading hex digits of the eight bytes of `w` (the first byte lowest): how many there are
/// (8 when all are), and the number they make.
///
/// Written by hand, a word at a time ("SIMD within a register"): reading addresses digit by
/// digit took a sixth of the instructions spent reading a pre-aggregated profile (and this a
/// fifth as many), and the crates that parse numbers want the number's extent known first.
#[inline(always)]
fn hex8(w: u64) -> (u32, u64) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Each byte's low seven bits: adding to them carries into no other byte.
    let low7 = w & !HIGH;
    // High bit of each byte that lies in `lo..=hi` (ASCII only: bytes with the high bit set
    // are no digits).
    let within = |lo: u8, hi: u8| {
        let at_least_lo = low7.wrapping_add(ONES * u64::from(0x80 - lo));
        let above_hi = low7.wrapping_add(ONES * u64::from(0x7f - hi));
        at_least_lo & !above_hi & !w & HIGH
    };
    let digits = within(b'0', b'9') | within(b'a', b'f') | within(b'A', b'F');
    let others = !digits & HIGH;
    let n = if others == 0 {
        8
    } else {
        others.trailing_zeros() / 8
    };
    if n == 0 {
        return (0, 0);
    }
    // Digit values: the low nibble, plus 9 for letters (bit 6 set).
    let values = (w & (ONES * 0x0f)) + ((w >> 6) & ONES) * 9;
    // The n digits moved to the top bytes (what follows them shifted out), then reversed: the
    // last digit in the lowest byte. Neighbouring digits are then joined pairwise.
    let mut v = (values << (8 * (8 - n))).swap_bytes();
    v = (v | (v >> 4)) & 0x00ff_00ff_00ff_00ff;
    v = (v | (v >> 8)) & 0x0000_ffff_0000_ffff;
    v = (v | (v >> 16)) & 0xffff_ffff;
    (n, v)
}

/// [`hex_digits_at`], eight digits at a time where the line has the bytes to read.
#[inline(always)]
fn hex_at(line: &[u8], i: &mut usize) -> Option<u64> {
    let word = |at: usize| {
        line.get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    };
    let Some(w) = word(*i) else {
        return hex_digits_at(line, i);
    };
    let (n, v) = hex8(w);
    match n {
        0 => None,
        1..=7 => {
            *i += n as usize;
            Some(v)
        }
        // Eight digits or more: the next eight bytes, unless the line ends first or the number
        // goes on past them (then digit by digit, which rejects it past sixteen).
        _ => match word(*i + 8).map(hex8) {
            Some((more, rest)) if more < 8 => {
                *i += 8 + more as usize;
                Some((v << (4 * more)) | rest)
            }
            _ => hex_digits_at(line, i),
        },
    }
}

/// Fast path for well-formed lines (single spaces, no errors): one pass, no tokenizer. Returns `None`
/// for anything unusual; the general parser then handles the line (and reports errors precisely).
#[inline]
fn fast_line(line: &[u8]) -> Option<Record<'_>> {
    let mut i = 2;
    if line.len() < 3 || line[1] != b' ' {
        return None;
    }
    #[inline(always)]
    fn loc<'a>(line: &'a [u8], i: &mut usize) -> Option<Location<'a>> {
        let start = *i;
        let v = hex_at(line, i)?;
        match line.get(*i) {
            Some(b' ') => {
                *i += 1;
                Some(Location {
                    build_id: None,
                    offset: v,
                })
            }
            Some(b':') => {
                let id = &line[start..*i];
                *i += 1;
                let v = hex_at(line, i)?;
                if line.get(*i) != Some(&b' ') {
                    return None;
                }
                *i += 1;
                Some(Location {
                    build_id: Some(id),
                    offset: v,
                })
            }
            _ => None,
        }
    }
    #[inline(always)]
    fn dec_at(line: &[u8], i: &mut usize, last: bool) -> Option<u64> {
        let start = *i;
        let mut v: u64 = 0;
        while let Some(&c) = line.get(*i) {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            v = v.checked_mul(10)?.checked_add(u64::from(d))?;
            *i += 1;
        }
        if *i == start || v > i64::MAX as u64 {
            return None;
        }
        if last {
            (*i == line.len()).then_some(v)
        } else if line.get(*i) == Some(&b' ') {
            *i += 1;
            Some(v)
        } else {
            None
        }
    }
    let l = line;
    Some(match line[0] {
        b'T' | b'R' => {
            let kind = if line[0] == b'T' {
                TraceKind::Branch
            } else {
                TraceKind::Return
            };
            let branch = loc(l, &mut i)?;
            let ft_start = loc(l, &mut i)?;
            let ft_end = loc(l, &mut i)?;
            Record::Trace {
                kind,
                branch,
                ft_start,
                ft_end,
                count: dec_at(l, &mut i, true)?,
            }
        }
        b'B' => {
            let from = loc(l, &mut i)?;
            let to = loc(l, &mut i)?;
            let count = dec_at(l, &mut i, false)?;
            Record::Branch {
                from,
                to,
                count,
                mispreds: dec_at(l, &mut i, true)?,
            }
        }
        b'F' | b'f' | b'r' => {
            let kind = match line[0] {
                b'F' => FallThroughKind::Internal,
                b'f' => FallThroughKind::ExternalOrigin,
                _ => FallThroughKind::ExternalReturn,
            };
            let from = loc(l, &mut i)?;
            let to = loc(l, &mut i)?;
            Record::FallThrough {
                kind,
                from,
                to,
                count: dec_at(l, &mut i, true)?,
            }
        }
        b'S' => {
            let addr = loc(l, &mut i)?;
            Record::Sample {
                addr,
                count: dec_at(l, &mut i, true)?,
            }
        }
        _ => return None,
    })
}

/// Parse one line (without the trailing `\n`). `line_no` is used for errors. A blank line is an error
/// (perf2bolt rejects it); the `Option` is always `Some` on success.
pub fn parse_line<'a>(line: &'a [u8], line_no: u64) -> Result<Option<Record<'a>>, Error> {
    if let Some(r) = fast_line(line) {
        return Ok(Some(r));
    }
    let mut f = Fields { line, pos: 0 };
    let err = |col: usize, kind| Error {
        pos: TextPos {
            line: line_no,
            column: col as u64 + 1,
        },
        kind,
    };
    let Some((ty, ty_col)) = f.next() else {
        return Err(err(line.len(), ErrorKind::UnknownType(String::new())));
    };
    let end_col = line.len();

    let loc = |f: &mut Fields<'a>, field: &'static str| -> Result<Location<'a>, Error> {
        let (tok, col) = f
            .next()
            .ok_or_else(|| err(end_col, ErrorKind::MissingField { field }))?;
        parse_location(tok).ok_or_else(|| {
            err(
                col,
                ErrorKind::BadLocation {
                    field,
                    found: show(tok),
                },
            )
        })
    };
    let cnt = |f: &mut Fields<'a>, field: &'static str| -> Result<u64, Error> {
        let (tok, col) = f
            .next()
            .ok_or_else(|| err(end_col, ErrorKind::MissingField { field }))?;
        parse_count(tok).ok_or_else(|| {
            err(
                col,
                ErrorKind::BadCount {
                    field,
                    found: show(tok),
                },
            )
        })
    };

    let rec = match ty {
        b"E" => {
            let (name, _) = f.next().ok_or_else(|| {
                err(
                    end_col,
                    ErrorKind::MissingField {
                        field: "event name",
                    },
                )
            })?;
            Record::Event { name }
        }
        b"S" => {
            let addr = loc(&mut f, S_FIELDS[0])?;
            let count = cnt(&mut f, S_FIELDS[1])?;
            Record::Sample { addr, count }
        }
        b"T" | b"R" => {
            let kind = if ty == b"T" {
                TraceKind::Branch
            } else {
                TraceKind::Return
            };
            let branch = loc(&mut f, T_FIELDS[0])?;
            let ft_start = loc(&mut f, T_FIELDS[1])?;
            let ft_end = loc(&mut f, T_FIELDS[2])?;
            let count = cnt(&mut f, T_FIELDS[3])?;
            Record::Trace {
                kind,
                branch,
                ft_start,
                ft_end,
                count,
            }
        }
        b"B" => {
            let from = loc(&mut f, B_FIELDS[0])?;
            let to = loc(&mut f, B_FIELDS[1])?;
            let count = cnt(&mut f, B_FIELDS[2])?;
            let mispreds = cnt(&mut f, B_FIELDS[3])?;
            Record::Branch {
                from,
                to,
                count,
                mispreds,
            }
        }
        b"F" | b"f" | b"r" => {
            let kind = match ty {
                b"F" => FallThroughKind::Internal,
                b"f" => FallThroughKind::ExternalOrigin,
                _ => FallThroughKind::ExternalReturn,
            };
            let from = loc(&mut f, F_FIELDS[0])?;
            let to = loc(&mut f, F_FIELDS[1])?;
            let count = cnt(&mut f, F_FIELDS[2])?;
            Record::FallThrough {
                kind,
                from,
                to,
                count,
            }
        }
        _ => return Err(err(ty_col, ErrorKind::UnknownType(show(ty)))),
    };
    // perf2bolt consumes one separator after the last field, then wants the end of the line.
    let after = f.pos;
    let rest = &line[after..];
    if !(rest.is_empty() || rest == b" ") {
        let (col, found) = match f.next() {
            Some((extra, col)) => (col, extra),
            // Only spaces: the second one is the unexpected byte.
            None => (after + 1, &rest[1..]),
        };
        return Err(err(
            col,
            ErrorKind::TrailingField {
                record: rec.letter(),
                found: show(found),
            },
        ));
    }
    Ok(Some(rec))
}

/// A count as perf2bolt reads it: a signed 64-bit decimal number (no `+`), negative values wrapping
/// to unsigned.
#[inline]
fn parse_count(s: &[u8]) -> Option<u64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
    }
    Some(if neg {
        v.wrapping_neg() as u64
    } else {
        v as u64
    })
}

#[inline]
fn parse_location(tok: &[u8]) -> Option<Location<'_>> {
    match memchr::memchr(b':', tok) {
        None => Some(Location {
            build_id: None,
            offset: parse_hex(tok)?,
        }),
        Some(0) => None,
        Some(i) => Some(Location {
            build_id: Some(&tok[..i]),
            offset: parse_hex(&tok[i + 1..])?,
        }),
    }
}

/// Serial iterator over the records of a whole input (see [`parse`]).
pub struct Records<'a> {
    data: &'a [u8],
    pos: usize,
    line: u64,
    failed: bool,
}

/// Iterate over the records of `data` in order. After an error the iterator ends.
pub fn parse(data: &[u8]) -> Records<'_> {
    Records {
        data,
        pos: 0,
        line: 0,
        failed: false,
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.failed && self.pos < self.data.len() {
            let rest = &self.data[self.pos..];
            self.line += 1;
            let Some(len) = memchr::memchr(b'\n', rest) else {
                self.failed = true;
                return Some(Err(Error {
                    pos: TextPos {
                        line: self.line,
                        column: rest.len() as u64 + 1,
                    },
                    kind: ErrorKind::MissingNewline,
                }));
            };
            let line = &rest[..len];
            self.pos += len + 1;
            match parse_line(line, self.line) {
                Ok(None) => continue,
                Ok(Some(r)) => return Some(Ok(r)),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// Parse all records into a vector (convenient for small inputs and tests).
pub fn parse_all(data: &[u8]) -> Result<Vec<Record<'_>>, Error> {
    parse(data).collect()
}

/// Split `data` into newline-aligned chunks of roughly `target` bytes.
fn chunks(data: &[u8], target: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(data.len() / target.max(1) + 1);
    let mut start = 0;
    while start < data.len() {
        let mut end = (start + target).min(data.len());
        if end < data.len() {
            end = match memchr::memchr(b'\n', &data[end..]) {
                Some(i) => end + i + 1,
                None => data.len(),
            };
        }
        out.push(&data[start..end]);
        start = end;
    }
    out
}

/// Fold all records of `data` in parallel: `data` is split into newline-aligned chunks, each chunk is
/// folded from `init()` with `fold` on the rayon pool, and the per-chunk results are combined **in input
/// order** with `reduce(left, right)`. Event records (`E`) reach `fold` like any other record, so a fold
/// that tracks the current event sees them in order within its chunk.
///
/// On a parse error the error of the first failing line in input order is returned (line numbers are
/// global).
pub fn fold_parallel<'a, A, I, F, R>(
    data: &'a [u8],
    init: I,
    fold: F,
    reduce: R,
) -> Result<A, Error>
where
    A: Send,
    I: Fn() -> A + Sync,
    F: Fn(&mut A, Record<'a>) + Sync,
    R: Fn(A, A) -> A + Sync + Send,
{
    fold_chunks(data, &init, fold, reduce, &|_| {})
}

/// [`fold_parallel`] with a progress callback (byte count of each finished chunk).
pub(crate) fn fold_chunks<'a, A, I, F, R>(
    data: &'a [u8],
    init: &I,
    fold: F,
    reduce: R,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<A, Error>
where
    A: Send,
    I: Fn() -> A + Sync,
    F: Fn(&mut A, Record<'a>) + Sync,
    R: Fn(A, A) -> A + Sync + Send,
{
    let threads = rayon::current_num_threads().max(1);
    let target = (data.len() / (threads * 8)).clamp(256 << 10, 16 << 20);
    let parts = chunks(data, target);
    let results: Vec<Result<A, Error>> = parts
        .par_iter()
        .map(|chunk| {
            let mut acc = init();
            for r in parse(chunk) {
                fold(&mut acc, r?);
            }
            progress(chunk.len() as u64);
            Ok(acc)
        })
        .collect();
    // The first failing chunk in input order names the error (with its global line number).
    let mut oks = Vec::with_capacity(results.len());
    let mut offset = 0usize;
    for (chunk, res) in parts.iter().zip(results) {
        match res {
            Ok(a) => oks.push(a),
            Err(mut e) => {
                let before = memchr::memchr_iter(b'\n', &data[..offset]).count() as u64;
                e.pos.line += before;
                return Err(e);
            }
        }
        offset += chunk.len();
    }
    // Combined pairwise in parallel; rayon keeps the order of an indexed iterator's items.
    Ok(oks.into_par_iter().reduce_with(reduce).unwrap_or_else(init))
}

/// Write one record in canonical form followed by `\n` (event names and build-ids as raw bytes; counts
/// as perf2bolt reads them, signed 64-bit).
pub fn write_record<W: Write + ?Sized>(w: &mut W, r: &Record<'_>) -> io::Result<()> {
    fn loc<W: Write + ?Sized>(w: &mut W, l: &Location<'_>) -> io::Result<()> {
        w.write_all(b" ")?;
        if let Some(id) = l.build_id {
            w.write_all(id)?;
            w.write_all(b":")?;
        }
        write!(w, "{:x}", l.offset)
    }
    let mut letter = [0u8; 4];
    w.write_all(r.letter().encode_utf8(&mut letter).as_bytes())?;
    match r {
        Record::Event { name } => {
            w.write_all(b" ")?;
            w.write_all(name)?;
        }
        Record::Sample { addr, count } => {
            loc(w, addr)?;
            write!(w, " {}", *count as i64)?;
        }
        Record::Trace {
            branch,
            ft_start,
            ft_end,
            count,
            ..
        } => {
            loc(w, branch)?;
            loc(w, ft_start)?;
            loc(w, ft_end)?;
            write!(w, " {}", *count as i64)?;
        }
        Record::Branch {
            from,
            to,
            count,
            mispreds,
        } => {
            loc(w, from)?;
            loc(w, to)?;
            write!(w, " {} {}", *count as i64, *mispreds as i64)?;
        }
        Record::FallThrough {
            from, to, count, ..
        } => {
            loc(w, from)?;
            loc(w, to)?;
            write!(w, " {}", *count as i64)?;
        }
    }
    w.write_all(b"\n")
}

/// Write records in canonical form, one per line.
pub fn write<'r, W: Write + ?Sized>(
    w: &mut W,
    records: impl IntoIterator<Item = &'r Record<'r>>,
) -> io::Result<()> {
    for r in records {
        write_record(w, r)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_record_types() {
        let text = b"E cycles\nS 41be50 3\nT 4b196f 4b19e0 4b19ef 2\nR 0 10 20 1\nB X:7f00 401190 1 0\nF 1 2 3\nf 1 2 3\nr 1 2 3\n";
        let recs = parse_all(text).unwrap();
        assert_eq!(recs.len(), 8);
        assert_eq!(recs[0], Record::Event { name: b"cycles" });
        assert!(
            matches!(recs[4], Record::Branch { from, .. } if from.is_external() && from.offset == 0x7f00)
        );
        let mut out = Vec::new();
        write(&mut out, &recs).unwrap();
        assert_eq!(out, text);
    }

    #[test]
    fn errors_are_located() {
        let e = parse_all(b"E cycles\nB 401000 0x401010 1 0\n").unwrap_err();
        assert_eq!(
            e.pos,
            TextPos {
                line: 2,
                column: 10
            }
        );
        let e = parse_all(b"X 1 2\n").unwrap_err();
        assert!(matches!(e.kind, ErrorKind::UnknownType(_)));
        let e = parse_all(b"B 1 2 3\n").unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::MissingField {
                field: "misprediction count"
            }
        );
        let e = parse_all(b"S 1 2 3\n").unwrap_err();
        assert_eq!(e.pos.column, 7);
        let e = parse_all(b"S :1 2\n").unwrap_err();
        assert!(matches!(e.kind, ErrorKind::BadLocation { .. }));
    }

    #[test]
    fn non_utf8_event_names_roundtrip() {
        // Found by fuzzing: event names are written as raw bytes.
        let text = b"E \x0eE\xb77\xd7/\n";
        let recs = parse_all(text).unwrap();
        let mut out = Vec::new();
        write(&mut out, &recs).unwrap();
        assert_eq!(out, text);
    }

    /// perf2bolt 22's dialect (checked by running it): extra spaces between fields, leading spaces
    /// and one trailing space are fine, negative counts wrap; tabs, `\r\n`, blank lines, a missing
    /// final newline, `:addr` and two trailing spaces are errors.
    #[test]
    fn perf2bolt_dialect() {
        let recs = parse_all(b" B 1  2 3 4 \nS 5 -1\nE cycles \n").unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[1].count(), u64::MAX);
        let mut out = Vec::new();
        write(&mut out, &recs[1..2]).unwrap();
        assert_eq!(out, b"S 5 -1\n");
        for bad in [
            &b"B\t1 2 3 4\n"[..],
            b"B 1 2 3 4\r\n",
            b"\nB 1 2 3 4\n",
            b"B 1 2 3 4",
            b"B :1 2 3 4\n",
            b"B 1 2 3 4  \n",
            b"B 1 2 +3 4\n",
            b"B 1 2 9223372036854775808 4\n",
        ] {
            assert!(
                parse_all(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            parse_all(b"B 1 2 3 4").unwrap_err().kind,
            ErrorKind::MissingNewline
        );
        assert_eq!(parse_all(b"B 1 2 3 4  \n").unwrap_err().pos.column, 11);
    }

    proptest::proptest! {
        /// Eight digits at a time read what digit by digit does, from any position of any line
        /// (digits of both cases, separators, bytes with the high bit set, numbers too long).
        #[test]
        fn hex_words_read_like_hex_digits(
            line in proptest::collection::vec(
                proptest::prop_oneof![
                    6 => proptest::sample::select(b"0123456789abcdefABCDEF".to_vec()),
                    1 => proptest::sample::select(b" :gG/@`\x00\x7f\x80\xb0\xe6\xff".to_vec()),
                    1 => proptest::num::u8::ANY,
                ],
                0..40,
            ),
            start in 0usize..40,
        ) {
            let start = start.min(line.len());
            let (mut fast, mut slow) = (start, start);
            proptest::prop_assert_eq!(
                hex_at(&line, &mut fast),
                hex_digits_at(&line, &mut slow)
            );
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn parallel_matches_serial() {
        let mut text = Vec::new();
        for i in 0..200_000u64 {
            writeln!(text, "B {:x} {:x} {} {}", i, i * 3, i % 7, i % 2).unwrap();
        }
        let serial: u64 = parse(&text).map(|r| r.unwrap().count()).sum();
        let par = fold_parallel(&text, || 0u64, |a, r| *a += r.count(), |a, b| a + b).unwrap();
        assert_eq!(serial, par);
        text.extend_from_slice(b"B 1 2 zz 0\n");
        let e = fold_parallel(&text, || 0u64, |a, r| *a += r.count(), |a, b| a + b).unwrap_err();
        assert_eq!(
            e.pos,
            TextPos {
                line: 200_001,
                column: 7
            }
        );
    }
}
