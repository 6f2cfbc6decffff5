//! The legacy fdata profile (`perf2bolt -o x.fdata`, BOLT instrumentation, `merge-fdata`).
//!
//! ```text
//! boltedcollection                              optional: collected on a BOLTed binary (BAT mode)
//! no_lbr cpu-clock:                             optional: basic-sample mode, then the event names
//! <k> <name> <hex off> <k> <name> <hex off> <mispreds> <count>   LBR branch (k: 0 DSO/unknown, 1 symbol, 2 local symbol)
//! <k> <name> <hex off> <count>                                     basic sample (no_lbr mode)
//! <k> <name> <hex off> <k> <name> <hex off> <count>                memory event (k: 3, 4, 5 = 0, 1, 2 + 3)
//! ```
//! Names escape a space as `\ ` and a backslash as `\\`. A [`Location`] keeps the name exactly as written
//! (escaped), so parsing and writing back reproduces a file byte for byte; use
//! [`Location::symbol`] to build one from a plain symbol name and [`Location::unescaped_name`] to read it.
//!
//! The reader accepts both header orders (`boltedcollection` then `no_lbr`, as perf2bolt writes, or the
//! reverse, as llvm-bolt's reader expects), several blanks between fields and a missing final newline.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::io::{self, Write};

use crate::TextPos;
use crate::text::{parse_dec, parse_hex, show};

/// What a location's name denotes (the leading `0`..`5` digit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LocationKind {
    /// `0`: a DSO name or `[unknown]`; the offset is relative to it.
    Dso,
    /// `1`: a symbol (function) name.
    Symbol,
    /// `2`: a local symbol whose name includes the file name.
    LocalSymbol,
}

impl LocationKind {
    /// Whether the name is a symbol (kinds 1 and 2).
    pub fn is_symbol(self) -> bool {
        !matches!(self, LocationKind::Dso)
    }

    fn digit(self) -> u8 {
        match self {
            LocationKind::Dso => b'0',
            LocationKind::Symbol => b'1',
            LocationKind::LocalSymbol => b'2',
        }
    }
}

/// A location in an fdata record: kind, name (escaped as in the file) and hexadecimal offset.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Location<'a> {
    /// Symbol, local symbol or DSO.
    pub kind: LocationKind,
    /// The name with fdata escapes (`\ `, `\\`) as written in the file.
    pub name: Cow<'a, str>,
    /// Offset from the start of the symbol or DSO.
    pub offset: u64,
}

impl<'a> Location<'a> {
    /// A symbol location from a plain (unescaped) symbol name (borrowed unless it needs escapes).
    pub fn symbol(name: &'a str, offset: u64) -> Self {
        Location {
            kind: LocationKind::Symbol,
            name: escape_name(name),
            offset,
        }
    }

    /// The location perf2bolt prints for an address outside the binary: `0 [unknown] 0`.
    pub fn unknown() -> Self {
        Location {
            kind: LocationKind::Dso,
            name: Cow::Borrowed("[unknown]"),
            offset: 0,
        }
    }
}

impl Location<'_> {
    /// The name without fdata escapes.
    pub fn unescaped_name(&self) -> Cow<'_, str> {
        unescape_name(&self.name)
    }

    /// Detach from the input buffer.
    pub fn into_owned(self) -> Location<'static> {
        Location {
            kind: self.kind,
            name: Cow::Owned(self.name.into_owned()),
            offset: self.offset,
        }
    }
}

impl Ord for Location<'_> {
    /// perf2bolt's `Location::operator<`: non-symbols first, then by name (bytes), then by offset.
    fn cmp(&self, o: &Self) -> Ordering {
        // `kind` last keeps the order consistent with `Eq` (symbol and local symbol compare alike in perf2bolt).
        (
            self.kind.is_symbol(),
            self.name.as_bytes(),
            self.offset,
            self.kind,
        )
            .cmp(&(o.kind.is_symbol(), o.name.as_bytes(), o.offset, o.kind))
    }
}

impl PartialOrd for Location<'_> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// An LBR-mode line: a branch (or fall-through) from one location to another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BranchRecord<'a> {
    /// Branch source.
    pub from: Location<'a>,
    /// Branch target.
    pub to: Location<'a>,
    /// Mispredicted count.
    pub mispreds: u64,
    /// Taken count.
    pub count: u64,
}

/// A `no_lbr`-mode line: samples at one location.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SampleRecord<'a> {
    /// Sampled location.
    pub at: Location<'a>,
    /// Number of samples.
    pub count: u64,
}

/// A memory-event line (location kinds 3, 4, 5): an instruction and the data address it accessed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemRecord<'a> {
    /// The instruction (kind written as `3 + kind`).
    pub pc: Location<'a>,
    /// The accessed data address (kind written as `3 + kind`).
    pub addr: Location<'a>,
    /// Number of events.
    pub count: u64,
}

/// One line of an fdata file after the header lines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Line<'a> {
    /// LBR-mode branch.
    Branch(BranchRecord<'a>),
    /// `no_lbr`-mode sample.
    Sample(SampleRecord<'a>),
    /// Memory event.
    Mem(MemRecord<'a>),
}

impl Line<'_> {
    /// Detach from the input buffer.
    pub fn into_owned(self) -> Line<'static> {
        match self {
            Line::Branch(b) => Line::Branch(BranchRecord {
                from: b.from.into_owned(),
                to: b.to.into_owned(),
                mispreds: b.mispreds,
                count: b.count,
            }),
            Line::Sample(s) => Line::Sample(SampleRecord {
                at: s.at.into_owned(),
                count: s.count,
            }),
            Line::Mem(m) => Line::Mem(MemRecord {
                pc: m.pc.into_owned(),
                addr: m.addr.into_owned(),
                count: m.count,
            }),
        }
    }
}

/// A whole fdata profile. Records keep the file's order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Profile<'a> {
    /// `boltedcollection` header: collected on a BOLTed binary.
    pub bolted_collection: bool,
    /// `no_lbr` header with its event names (`None` = LBR mode).
    pub no_lbr: Option<Vec<Cow<'a, str>>>,
    /// The records in file order (branch lines in LBR mode, sample lines in `no_lbr` mode, memory events).
    pub lines: Vec<Line<'a>>,
}

impl<'a> Profile<'a> {
    /// Whether the profile is in basic-sample (`no_lbr`) mode.
    pub fn is_no_lbr(&self) -> bool {
        self.no_lbr.is_some()
    }

    /// The LBR branch records.
    pub fn branches(&self) -> impl Iterator<Item = &BranchRecord<'a>> {
        self.lines.iter().filter_map(|l| {
            if let Line::Branch(b) = l {
                Some(b)
            } else {
                None
            }
        })
    }

    /// The basic-sample records.
    pub fn samples(&self) -> impl Iterator<Item = &SampleRecord<'a>> {
        self.lines.iter().filter_map(|l| {
            if let Line::Sample(s) = l {
                Some(s)
            } else {
                None
            }
        })
    }

    /// The memory-event records.
    pub fn mem_events(&self) -> impl Iterator<Item = &MemRecord<'a>> {
        self.lines
            .iter()
            .filter_map(|l| if let Line::Mem(m) = l { Some(m) } else { None })
    }
}

/// A located fdata parse error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pos}: {kind}")]
pub struct Error {
    /// Where the offending field starts.
    pub pos: TextPos,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// What went wrong while parsing fdata.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A location kind digit is wrong for the line type.
    #[error("expected {expected} as the {field} kind, found `{found}`")]
    BadKind {
        /// Which location.
        field: &'static str,
        /// The allowed digits.
        expected: &'static str,
        /// The text found.
        found: String,
    },
    /// A hexadecimal offset is malformed.
    #[error("expected the {field} as a hexadecimal number, found `{found}`")]
    BadOffset {
        /// Which field.
        field: &'static str,
        /// The text found.
        found: String,
    },
    /// A count is malformed.
    #[error("expected the {field} as an unsigned decimal number, found `{found}`")]
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
    /// Extra text after the last field.
    #[error("expected end of line, found `{found}`")]
    TrailingField {
        /// The text found.
        found: String,
    },
    /// A name ends in a lone backslash.
    #[error("name ends with an unfinished `\\` escape")]
    BadEscape,
    /// The input is not UTF-8.
    #[error("invalid UTF-8 in a name")]
    InvalidUtf8,
    /// A header line in the middle of the records.
    #[error("`{0}` header after records")]
    LateHeader(String),
}

/// Escape a plain symbol name for fdata: space → `\ `, backslash → `\\`.
pub fn escape_name(name: &str) -> Cow<'_, str> {
    if !name.bytes().any(|b| b == b' ' || b == b'\\') {
        return Cow::Borrowed(name);
    }
    let mut s = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c == ' ' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    Cow::Owned(s)
}

/// Undo [`escape_name`]: `\x` → `x` for any character `x`.
pub fn unescape_name(name: &str) -> Cow<'_, str> {
    if !name.contains('\\') {
        return Cow::Borrowed(name);
    }
    let mut s = String::with_capacity(name.len());
    let mut it = name.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            if let Some(n) = it.next() {
                s.push(n);
            }
        } else {
            s.push(c);
        }
    }
    Cow::Owned(s)
}

struct LineParser<'a> {
    line: &'a str,
    pos: usize,
    line_no: u64,
}

impl<'a> LineParser<'a> {
    fn err(&self, col: usize, kind: ErrorKind) -> Error {
        Error {
            pos: TextPos {
                line: self.line_no,
                column: col as u64 + 1,
            },
            kind,
        }
    }

    fn skip_blanks(&mut self) {
        let b = self.line.as_bytes();
        while self.pos < b.len() && (b[self.pos] == b' ' || b[self.pos] == b'\r') {
            self.pos += 1;
        }
    }

    /// Next space-separated token honouring `\` escapes, with its 0-based column.
    fn token(&mut self, field: &'static str) -> Result<(&'a str, usize), Error> {
        self.skip_blanks();
        let b = self.line.as_bytes();
        let start = self.pos;
        if start >= b.len() {
            return Err(self.err(start, ErrorKind::MissingField { field }));
        }
        let mut i = start;
        while i < b.len() && b[i] != b' ' && b[i] != b'\r' {
            if b[i] == b'\\' {
                if i + 1 >= b.len() {
                    return Err(self.err(i, ErrorKind::BadEscape));
                }
                i += 1;
            }
            i += 1;
        }
        self.pos = i;
        // Escapes are ASCII, so `i` is a char boundary unless an escape swallowed half a UTF-8 sequence.
        let tok = self
            .line
            .get(start..i)
            .ok_or_else(|| self.err(start, ErrorKind::InvalidUtf8))?;
        Ok((tok, start))
    }

    fn location(&mut self, field: &'static str, mem: bool) -> Result<Location<'a>, Error> {
        let (k, col) = self.token(field)?;
        let kind = match (k, mem) {
            ("0", false) | ("3", true) => LocationKind::Dso,
            ("1", false) | ("4", true) => LocationKind::Symbol,
            ("2", false) | ("5", true) => LocationKind::LocalSymbol,
            _ => {
                let expected = if mem { "3, 4 or 5" } else { "0, 1 or 2" };
                return Err(self.err(
                    col,
                    ErrorKind::BadKind {
                        field,
                        expected,
                        found: show(k.as_bytes()),
                    },
                ));
            }
        };
        let (name, _) = self.token(field)?;
        let (off, col) = self.token(field)?;
        let offset = parse_hex(off.as_bytes()).ok_or_else(|| {
            self.err(
                col,
                ErrorKind::BadOffset {
                    field,
                    found: show(off.as_bytes()),
                },
            )
        })?;
        Ok(Location {
            kind,
            name: Cow::Borrowed(name),
            offset,
        })
    }

    fn count(&mut self, field: &'static str) -> Result<u64, Error> {
        let (t, col) = self.token(field)?;
        parse_dec(t.as_bytes()).ok_or_else(|| {
            self.err(
                col,
                ErrorKind::BadCount {
                    field,
                    found: show(t.as_bytes()),
                },
            )
        })
    }

    fn end(&mut self) -> Result<(), Error> {
        self.skip_blanks();
        if self.pos < self.line.len() {
            let rest = &self.line.as_bytes()[self.pos..];
            return Err(self.err(self.pos, ErrorKind::TrailingField { found: show(rest) }));
        }
        Ok(())
    }
}

/// Parse one record line (not a header). `no_lbr` selects the sample layout for kinds 0–2.
pub fn parse_line(line: &str, line_no: u64, no_lbr: bool) -> Result<Line<'_>, Error> {
    let mut p = LineParser {
        line,
        pos: 0,
        line_no,
    };
    p.skip_blanks();
    let mem = matches!(line.as_bytes().get(p.pos), Some(b'3' | b'4' | b'5'));
    let rec = if mem {
        let pc = p.location("instruction location", true)?;
        let addr = p.location("data address location", true)?;
        let count = p.count("event count")?;
        Line::Mem(MemRecord { pc, addr, count })
    } else if no_lbr {
        let at = p.location("sample location", false)?;
        let count = p.count("sample count")?;
        Line::Sample(SampleRecord { at, count })
    } else {
        let from = p.location("branch source", false)?;
        let to = p.location("branch target", false)?;
        let mispreds = p.count("misprediction count")?;
        let count = p.count("branch count")?;
        Line::Branch(BranchRecord {
            from,
            to,
            mispreds,
            count,
        })
    };
    p.end()?;
    Ok(rec)
}

/// Parse a whole fdata file.
pub fn parse(data: &[u8]) -> Result<Profile<'_>, Error> {
    let text = std::str::from_utf8(data).map_err(|e| {
        let before = &data[..e.valid_up_to()];
        let line = memchr::memchr_iter(b'\n', before).count() as u64 + 1;
        let column = (before.len()
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)) as u64
            + 1;
        Error {
            pos: TextPos { line, column },
            kind: ErrorKind::InvalidUtf8,
        }
    })?;
    let mut profile = Profile::default();
    let mut in_header = true;
    for (i, raw) in text.split_terminator('\n').enumerate() {
        let line_no = i as u64 + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            continue;
        }
        if line == "boltedcollection"
            || line.starts_with("no_lbr") && (line.len() == 6 || line.as_bytes()[6] == b' ')
        {
            if !in_header {
                let word = line.split(' ').next().unwrap_or(line);
                return Err(Error {
                    pos: TextPos {
                        line: line_no,
                        column: 1,
                    },
                    kind: ErrorKind::LateHeader(word.into()),
                });
            }
            if line == "boltedcollection" {
                profile.bolted_collection = true;
            } else {
                // Event names are blank-separated (`\r` counts as a blank, as in record lines).
                let events = line[6..]
                    .split([' ', '\r'])
                    .filter(|s| !s.is_empty())
                    .map(Cow::Borrowed)
                    .collect();
                profile.no_lbr = Some(events);
            }
            continue;
        }
        in_header = false;
        profile
            .lines
            .push(parse_line(line, line_no, profile.no_lbr.is_some())?);
    }
    Ok(profile)
}

fn write_location<W: Write + ?Sized>(w: &mut W, l: &Location<'_>, mem: bool) -> io::Result<()> {
    let mut hex = [0u8; 16];
    let digit = if mem {
        l.kind.digit() + 3
    } else {
        l.kind.digit()
    };
    w.write_all(&[digit, b' '])?;
    w.write_all(l.name.as_bytes())?;
    w.write_all(b" ")?;
    w.write_all(fmt_hex(l.offset, &mut hex))
}

/// Lower-case hexadecimal without leading zeros into `buf`.
fn fmt_hex(mut v: u64, buf: &mut [u8; 16]) -> &[u8] {
    let mut i = 16;
    loop {
        i -= 1;
        buf[i] = b"0123456789abcdef"[(v & 15) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Write one record line (with its `\n`).
pub fn write_line<W: Write + ?Sized>(w: &mut W, line: &Line<'_>) -> io::Result<()> {
    let mut num = itoa::Buffer::new();
    match line {
        Line::Branch(b) => {
            write_location(w, &b.from, false)?;
            w.write_all(b" ")?;
            write_location(w, &b.to, false)?;
            w.write_all(b" ")?;
            w.write_all(num.format(b.mispreds).as_bytes())?;
            w.write_all(b" ")?;
            w.write_all(num.format(b.count).as_bytes())?;
        }
        Line::Sample(s) => {
            write_location(w, &s.at, false)?;
            w.write_all(b" ")?;
            w.write_all(num.format(s.count).as_bytes())?;
        }
        Line::Mem(m) => {
            write_location(w, &m.pc, true)?;
            w.write_all(b" ")?;
            write_location(w, &m.addr, true)?;
            w.write_all(b" ")?;
            w.write_all(num.format(m.count).as_bytes())?;
        }
    }
    w.write_all(b"\n")
}

/// Write a profile's header lines: `boltedcollection` when `bolted_collection`, then
/// `no_lbr[ <event>]*` for a basic-sample profile (`no_lbr` is `Some`).
pub fn write_header<W: Write + ?Sized, E: AsRef<str>>(
    w: &mut W,
    bolted_collection: bool,
    no_lbr: Option<&[E]>,
) -> io::Result<()> {
    if bolted_collection {
        w.write_all(b"boltedcollection\n")?;
    }
    if let Some(events) = no_lbr {
        w.write_all(b"no_lbr")?;
        for e in events {
            w.write_all(b" ")?;
            w.write_all(e.as_ref().as_bytes())?;
        }
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Write a profile: `boltedcollection`, then `no_lbr[ <event>]*`, then the lines in the given order.
pub fn write<W: Write + ?Sized>(w: &mut W, p: &Profile<'_>) -> io::Result<()> {
    write_header(w, p.bolted_collection, p.no_lbr.as_deref())?;
    for l in &p.lines {
        write_line(w, l)?;
    }
    Ok(())
}

/// Order LBR branch records as perf2bolt 22 writes them: grouped by function (the source symbol's name,
/// or the target's name for entries from unknown code), groups by byte-wise name; inside a group the
/// function's own branches stably sorted by `(from, to)` (perf2bolt's `Location` order), then the entries
/// from unknown code sorted the same way.
pub fn sort_branches_like_perf2bolt(branches: &mut [BranchRecord<'_>]) {
    branches.sort_by(|a, b| {
        let key = |r: &BranchRecord<'_>| {
            let external = !r.from.kind.is_symbol();
            let group = if external {
                r.to.name.as_bytes().to_vec()
            } else {
                r.from.name.as_bytes().to_vec()
            };
            (group, external)
        };
        key(a)
            .cmp(&key(b))
            .then_with(|| a.from.cmp(&b.from))
            .then_with(|| a.to.cmp(&b.to))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_modes() {
        for text in [
            "1 main 3fb 0 /lib/ld-2.21.so 12 4 221\n0 [unknown] 0 1 work 0 0 1\n",
            "boltedcollection\nno_lbr cpu-clock:\n1 classify/p1.c/1 23 13\n",
            "no_lbr\n1 a\\ b\\\\c 0 1\n",
            "1 f 10 1 f 20 0 5\n4 f 10 3 [heap] 20 7\n",
        ] {
            let p = parse(text.as_bytes()).unwrap();
            let mut out = Vec::new();
            write(&mut out, &p).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), text);
        }
        let p = parse(b"no_lbr\n1 a\\ b\\\\c 0 1\n").unwrap();
        assert_eq!(p.samples().next().unwrap().at.unescaped_name(), "a b\\c");
    }

    #[test]
    fn carriage_returns_in_the_no_lbr_line_are_blanks() {
        // Found by fuzzing: `\r` separates event names like a space, so writing back is stable.
        let p = parse(b"no_lbr a\rb\r\n").unwrap();
        assert_eq!(p.no_lbr.as_deref(), Some(&["a".into(), "b".into()][..]));
        let mut out = Vec::new();
        write(&mut out, &p).unwrap();
        assert_eq!(parse(&out).unwrap(), p);
    }

    #[test]
    fn errors() {
        let e = parse(b"1 main 3fb 0 x 12 4\n").unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::MissingField {
                field: "branch count"
            }
        );
        let e = parse(b"1 main 3fg 0 x 12 4 5\n").unwrap_err();
        assert_eq!(e.pos, TextPos { line: 1, column: 8 });
        let e = parse(b"7 main 3f 0 x 12 4 5\n").unwrap_err();
        assert!(matches!(e.kind, ErrorKind::BadKind { .. }));
        let e = parse(b"1 main 3f 0 x 12 4 5\nno_lbr\n").unwrap_err();
        assert!(matches!(e.kind, ErrorKind::LateHeader(_)));
    }
}
