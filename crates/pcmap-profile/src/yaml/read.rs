//! Schema-specific reader for the BOLT YAML profile.
//!
//! Hand-written: generic YAML crates build a document tree (a 100 MB profile takes 5-15 s with them, see
//! rust-ecosystem.md §6). This reader parses the YAML subset any producer of this schema uses — block
//! mappings and sequences (including compact `- key: value` items and sequences at their parent key's
//! indentation), flow sequences and mappings spanning lines, plain/single-/double-quoted scalars,
//! comments, `---`/`...` markers — and builds a small tree per *function* only, handing each function to a
//! callback. Anchors, aliases, tags and block scalars (`|`, `>`) are rejected with a located error (no
//! producer of BOLT profiles emits them).

use std::borrow::Cow;

use super::{
    Block, CallSite, Function, HashFunction, Header, InlineTreeNode, Profile, PseudoProbeDesc,
    PseudoProbeInfo, Successor,
};
use super::{PF_LBR, PF_MEMEVENT, PF_SAMPLE};
use crate::TextPos;
use crate::text::show;

/// A located YAML profile error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pos}: {kind}")]
pub struct Error {
    /// Where the offending node starts.
    pub pos: TextPos,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// What went wrong while reading a YAML profile.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The text is not YAML this reader understands.
    #[error("YAML syntax: {0}")]
    Syntax(String),
    /// A required key of the schema is missing.
    #[error("missing required key `{key}` in {within}")]
    MissingKey {
        /// The key.
        key: &'static str,
        /// The enclosing object (`header`, `function`, `block`, ...).
        within: &'static str,
    },
    /// A value has the wrong type or range.
    #[error("`{key}`: expected {expected}, found `{found}`")]
    BadValue {
        /// The key.
        key: String,
        /// What was expected.
        expected: &'static str,
        /// The text found.
        found: String,
    },
    /// A YAML feature this reader does not support (anchors, aliases, tags, block scalars).
    #[error("unsupported YAML feature: {0}")]
    Unsupported(&'static str),
}

/// A parsed YAML node (per function at most, never the whole document).
#[derive(Debug)]
enum Node<'a> {
    Null(TextPos),
    Scalar(Cow<'a, str>, TextPos),
    Seq(Vec<Node<'a>>, TextPos),
    Map(Vec<(Cow<'a, str>, Node<'a>)>, TextPos),
}

impl Node<'_> {
    fn pos(&self) -> TextPos {
        match self {
            Node::Null(p) | Node::Scalar(_, p) | Node::Seq(_, p) | Node::Map(_, p) => *p,
        }
    }

    fn describe(&self) -> String {
        match self {
            Node::Null(_) => "an empty value".into(),
            Node::Scalar(s, _) => show(s.as_bytes()),
            Node::Seq(..) => "a sequence".into(),
            Node::Map(..) => "a mapping".into(),
        }
    }
}

type Result<T> = std::result::Result<T, Error>;

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    line: u64,
    line_start: usize,
}

/// Nesting limit for flow collections and block structure (bounds recursion on hostile input).
const MAX_DEPTH: usize = 64;

impl<'a> Parser<'a> {
    fn tpos(&self) -> TextPos {
        TextPos {
            line: self.line,
            column: (self.pos - self.line_start) as u64 + 1,
        }
    }

    fn col(&self) -> usize {
        self.pos - self.line_start
    }

    fn err<T>(&self, kind: ErrorKind) -> Result<T> {
        Err(Error {
            pos: self.tpos(),
            kind,
        })
    }

    fn syntax<T>(&self, msg: &str) -> Result<T> {
        self.err(ErrorKind::Syntax(msg.to_string()))
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn peek_at(&self, off: usize) -> Option<u8> {
        self.s.get(self.pos + off).copied()
    }

    fn newline(&mut self) {
        self.pos += 1;
        self.line += 1;
        self.line_start = self.pos;
    }

    fn skip_inline_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// After inline blanks: end of line, end of input, or a comment.
    fn at_line_end(&mut self) -> bool {
        self.skip_inline_ws();
        matches!(self.peek(), None | Some(b'\n' | b'\r' | b'#'))
    }

    fn skip_comment(&mut self) {
        while !matches!(self.peek(), None | Some(b'\n')) {
            self.pos += 1;
        }
    }

    fn is_blank_or_end(b: Option<u8>) -> bool {
        matches!(b, None | Some(b' ' | b'\t' | b'\n' | b'\r'))
    }

    /// Skip blanks, comments, line breaks and document markers up to the next content byte.
    fn skip_to_content(&mut self) {
        loop {
            self.skip_inline_ws();
            match self.peek() {
                Some(b'#') => self.skip_comment(),
                Some(b'\r') => self.pos += 1,
                Some(b'\n') => self.newline(),
                Some(b'-')
                    if self.col() == 0
                        && self.s[self.pos..].starts_with(b"---")
                        && Self::is_blank_or_end(self.peek_at(3)) =>
                {
                    self.pos += 3;
                }
                Some(b'.')
                    if self.col() == 0
                        && self.s[self.pos..].starts_with(b"...")
                        && Self::is_blank_or_end(self.peek_at(3)) =>
                {
                    self.pos = self.s.len();
                }
                Some(b'%') if self.col() == 0 => self.skip_comment(),
                _ => return,
            }
        }
    }

    /// Skip blanks, line breaks and comments inside flow collections.
    fn skip_flow_ws(&mut self) {
        loop {
            self.skip_inline_ws();
            match self.peek() {
                Some(b'#') => self.skip_comment(),
                Some(b'\r') => self.pos += 1,
                Some(b'\n') => self.newline(),
                _ => return,
            }
        }
    }

    fn is_seq_item(&self) -> bool {
        self.peek() == Some(b'-') && Self::is_blank_or_end(self.peek_at(1))
    }

    fn expect_line_end(&mut self) -> Result<()> {
        if self.at_line_end() {
            Ok(())
        } else {
            let found = self.rest_of_line();
            self.syntax(&format!("expected end of line, found `{found}`"))
        }
    }

    fn rest_of_line(&self) -> String {
        let end = memchr::memchr(b'\n', &self.s[self.pos..]).map_or(self.s.len(), |i| self.pos + i);
        show(&self.s[self.pos..end])
    }

    fn check_unsupported(&self) -> Result<()> {
        match self.peek() {
            Some(b'&') => self.err(ErrorKind::Unsupported("anchors (&)")),
            Some(b'*') => self.err(ErrorKind::Unsupported("aliases (*)")),
            Some(b'!') => self.err(ErrorKind::Unsupported("tags (!)")),
            Some(b'|' | b'>') => self.err(ErrorKind::Unsupported("block scalars (| and >)")),
            Some(b'?') if Self::is_blank_or_end(self.peek_at(1)) => {
                self.err(ErrorKind::Unsupported("complex keys (?)"))
            }
            _ => Ok(()),
        }
    }

    fn str_of(&self, a: usize, b: usize) -> Result<&'a str> {
        std::str::from_utf8(&self.s[a..b]).or_else(|_| self.syntax("invalid UTF-8"))
    }

    /// A plain scalar. In block context it ends at a line end, ` #` or `: `; in flow context also at
    /// `,[]{}` and `:` before a blank or flow indicator.
    fn plain(&mut self, flow: bool) -> Result<Cow<'a, str>> {
        let start = self.pos;
        let mut end = start;
        while let Some(c) = self.peek() {
            match c {
                b'\n' | b'\r' => break,
                b'#' if self.pos > start && matches!(self.s[self.pos - 1], b' ' | b'\t') => break,
                b':' => {
                    let n = self.peek_at(1);
                    if Self::is_blank_or_end(n)
                        || flow && matches!(n, Some(b',' | b']' | b'}' | b'[' | b'{'))
                    {
                        break;
                    }
                }
                b',' | b'[' | b']' | b'{' | b'}' if flow => break,
                _ => {}
            }
            self.pos += 1;
            if !matches!(c, b' ' | b'\t') {
                end = self.pos;
            }
        }
        let s = self.str_of(start, end)?;
        self.pos = end.max(start);
        Ok(Cow::Borrowed(s))
    }

    fn single_quoted(&mut self) -> Result<Cow<'a, str>> {
        let open = self.tpos();
        self.pos += 1;
        let start = self.pos;
        let mut owned: Option<String> = None;
        loop {
            match self.peek() {
                None => {
                    return Err(Error {
                        pos: open,
                        kind: ErrorKind::Syntax("unterminated single-quoted string".into()),
                    });
                }
                Some(b'\'') if self.peek_at(1) == Some(b'\'') => {
                    let o = owned.get_or_insert_with(String::new);
                    if o.is_empty() {
                        o.push_str(self.str_of(start, self.pos)?);
                    }
                    o.push('\'');
                    self.pos += 2;
                    if let Some(o) = owned.as_mut() {
                        // keep appending from here
                        let _ = o;
                    }
                    return self.single_quoted_rest(owned.take().unwrap_or_default(), open);
                }
                Some(b'\'') => {
                    let s = self.str_of(start, self.pos)?;
                    self.pos += 1;
                    return Ok(owned.map_or(Cow::Borrowed(s), Cow::Owned));
                }
                Some(b'\n') => {
                    let mut o = self.str_of(start, self.pos)?.trim_end().to_string();
                    o.push(' ');
                    self.newline();
                    self.skip_inline_ws();
                    return self.single_quoted_rest(o, open);
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    /// Slow path of a single-quoted scalar after an escape or a line break: append into `o`.
    fn single_quoted_rest(&mut self, mut o: String, open: TextPos) -> Result<Cow<'a, str>> {
        let mut start = self.pos;
        loop {
            match self.peek() {
                None => {
                    return Err(Error {
                        pos: open,
                        kind: ErrorKind::Syntax("unterminated single-quoted string".into()),
                    });
                }
                Some(b'\'') if self.peek_at(1) == Some(b'\'') => {
                    o.push_str(self.str_of(start, self.pos)?);
                    o.push('\'');
                    self.pos += 2;
                    start = self.pos;
                }
                Some(b'\'') => {
                    o.push_str(self.str_of(start, self.pos)?);
                    self.pos += 1;
                    return Ok(Cow::Owned(o));
                }
                Some(b'\n') => {
                    o.push_str(self.str_of(start, self.pos)?.trim_end());
                    o.push(' ');
                    self.newline();
                    self.skip_inline_ws();
                    start = self.pos;
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    fn double_quoted(&mut self) -> Result<Cow<'a, str>> {
        let open = self.tpos();
        self.pos += 1;
        let start = self.pos;
        // Fast path: no escapes, no line breaks.
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    let s = self.str_of(start, self.pos)?;
                    self.pos += 1;
                    return Ok(Cow::Borrowed(s));
                }
                b'\\' | b'\n' => break,
                _ => self.pos += 1,
            }
        }
        let mut o = self.str_of(start, self.pos)?.to_string();
        let mut seg = self.pos;
        loop {
            match self.peek() {
                None => {
                    return Err(Error {
                        pos: open,
                        kind: ErrorKind::Syntax("unterminated double-quoted string".into()),
                    });
                }
                Some(b'"') => {
                    o.push_str(self.str_of(seg, self.pos)?);
                    self.pos += 1;
                    return Ok(Cow::Owned(o));
                }
                Some(b'\n') => {
                    o.push_str(self.str_of(seg, self.pos)?.trim_end());
                    o.push(' ');
                    self.newline();
                    self.skip_inline_ws();
                    seg = self.pos;
                }
                Some(b'\\') => {
                    o.push_str(self.str_of(seg, self.pos)?);
                    self.pos += 1;
                    let Some(e) = self.peek() else { continue };
                    self.pos += 1;
                    let hex = |p: &mut Self, n: usize| -> Result<char> {
                        let digits =
                            p.s.get(p.pos..p.pos + n)
                                .and_then(|d| std::str::from_utf8(d).ok());
                        let v = digits
                            .and_then(|d| u32::from_str_radix(d, 16).ok())
                            .and_then(char::from_u32);
                        p.pos += n;
                        v.map_or_else(|| p.syntax("bad escape in double-quoted string"), Ok)
                    };
                    match e {
                        b'0' => o.push('\0'),
                        b'a' => o.push('\x07'),
                        b'b' => o.push('\x08'),
                        b't' | b'\t' => o.push('\t'),
                        b'n' => o.push('\n'),
                        b'v' => o.push('\x0b'),
                        b'f' => o.push('\x0c'),
                        b'r' => o.push('\r'),
                        b'e' => o.push('\x1b'),
                        b' ' => o.push(' '),
                        b'"' => o.push('"'),
                        b'/' => o.push('/'),
                        b'\\' => o.push('\\'),
                        b'N' => o.push('\u{85}'),
                        b'_' => o.push('\u{a0}'),
                        b'L' => o.push('\u{2028}'),
                        b'P' => o.push('\u{2029}'),
                        b'x' => o.push(hex(self, 2)?),
                        b'u' => o.push(hex(self, 4)?),
                        b'U' => o.push(hex(self, 8)?),
                        b'\n' => {
                            self.pos -= 1;
                            self.newline();
                            self.skip_inline_ws();
                        }
                        _ => return self.syntax("bad escape in double-quoted string"),
                    }
                    seg = self.pos;
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    fn scalar(&mut self, flow: bool) -> Result<Node<'a>> {
        let p = self.tpos();
        self.check_unsupported()?;
        let s = match self.peek() {
            Some(b'\'') => self.single_quoted()?,
            Some(b'"') => self.double_quoted()?,
            _ => {
                let s = self.plain(flow)?;
                if s.is_empty() || s == "~" || s == "null" || s == "Null" || s == "NULL" {
                    return Ok(Node::Null(p));
                }
                s
            }
        };
        Ok(Node::Scalar(s, p))
    }

    fn flow_node(&mut self, depth: usize) -> Result<Node<'a>> {
        if depth > MAX_DEPTH {
            return self.syntax("nesting too deep");
        }
        self.skip_flow_ws();
        let p = self.tpos();
        match self.peek() {
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_flow_ws();
                    match self.peek() {
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(Node::Seq(items, p));
                        }
                        None => {
                            return Err(Error {
                                pos: p,
                                kind: ErrorKind::Syntax("unterminated flow sequence".into()),
                            });
                        }
                        _ => {}
                    }
                    items.push(self.flow_node(depth + 1)?);
                    self.skip_flow_ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {}
                        _ => return self.syntax("expected `,` or `]` in flow sequence"),
                    }
                }
            }
            Some(b'{') => {
                self.pos += 1;
                let mut entries = Vec::new();
                loop {
                    self.skip_flow_ws();
                    match self.peek() {
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(Node::Map(entries, p));
                        }
                        None => {
                            return Err(Error {
                                pos: p,
                                kind: ErrorKind::Syntax("unterminated flow mapping".into()),
                            });
                        }
                        _ => {}
                    }
                    let key = match self.scalar(true)? {
                        Node::Scalar(k, _) => k,
                        _ => return self.syntax("expected a key in flow mapping"),
                    };
                    self.skip_flow_ws();
                    if self.peek() != Some(b':') {
                        return self.syntax("expected `:` after a flow mapping key");
                    }
                    self.pos += 1;
                    self.skip_flow_ws();
                    let value = match self.peek() {
                        Some(b',' | b'}') => Node::Null(self.tpos()),
                        _ => self.flow_node(depth + 1)?,
                    };
                    entries.push((key, value));
                    self.skip_flow_ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => return self.syntax("expected `,` or `}` in flow mapping"),
                    }
                }
            }
            Some(b']' | b'}' | b',') => self.syntax("unexpected flow indicator"),
            _ => self.scalar(true),
        }
    }

    /// If a block mapping key starts here, return it and leave the position after its `:`.
    fn try_key(&mut self) -> Result<Option<Cow<'a, str>>> {
        let save = (self.pos, self.line, self.line_start);
        if matches!(self.peek(), Some(b'[' | b'{')) || self.is_seq_item() {
            return Ok(None);
        }
        self.check_unsupported()?;
        let key = match self.peek() {
            Some(b'\'') => self.single_quoted(),
            Some(b'"') => self.double_quoted(),
            _ => self.plain(false),
        };
        if let Ok(k) = key {
            self.skip_inline_ws();
            if self.line == save.1
                && self.peek() == Some(b':')
                && Self::is_blank_or_end(self.peek_at(1))
            {
                self.pos += 1;
                return Ok(Some(k));
            }
        }
        (self.pos, self.line, self.line_start) = save;
        Ok(None)
    }

    /// The value after `key:` of a block mapping whose keys are at column `col`.
    fn value(&mut self, col: usize, depth: usize) -> Result<Node<'a>> {
        if self.at_line_end() {
            self.block_node(col, true, depth + 1)
        } else {
            let n = self.inline_node(depth + 1)?;
            self.expect_line_end()?;
            Ok(n)
        }
    }

    fn inline_node(&mut self, depth: usize) -> Result<Node<'a>> {
        match self.peek() {
            Some(b'[' | b'{') => self.flow_node(depth),
            _ => self.scalar(false),
        }
    }

    /// A block node on a following line, more indented than `parent` (or a sequence at `parent` when
    /// `seq_at_parent`, as YAML allows for mapping values).
    fn block_node(&mut self, parent: usize, seq_at_parent: bool, depth: usize) -> Result<Node<'a>> {
        let p = self.tpos();
        self.skip_to_content();
        if self.peek().is_none() {
            return Ok(Node::Null(p));
        }
        let c = self.col();
        if c < parent || c == parent && !(seq_at_parent && self.is_seq_item()) {
            return Ok(Node::Null(p));
        }
        self.node_here(depth)
    }

    fn node_here(&mut self, depth: usize) -> Result<Node<'a>> {
        if depth > MAX_DEPTH {
            return self.syntax("nesting too deep");
        }
        let c = self.col();
        if self.is_seq_item() {
            let p = self.tpos();
            let mut items = Vec::new();
            self.block_seq_each(c, depth, &mut |n| {
                items.push(n);
                Ok(())
            })?;
            return Ok(Node::Seq(items, p));
        }
        if matches!(self.peek(), Some(b'[' | b'{')) {
            let n = self.flow_node(depth)?;
            self.expect_line_end()?;
            return Ok(n);
        }
        let save = (self.pos, self.line, self.line_start);
        if self.try_key()?.is_some() {
            (self.pos, self.line, self.line_start) = save;
            let p = self.tpos();
            let mut entries = Vec::new();
            self.block_map_with(c, depth, &mut |this, key| {
                let v = this.value(c, depth)?;
                entries.push((key, v));
                Ok(())
            })?;
            return Ok(Node::Map(entries, p));
        }
        let n = self.scalar(false)?;
        self.expect_line_end()?;
        Ok(n)
    }

    /// A block sequence whose `-` are at column `col`; `f` receives each item.
    fn block_seq_each(
        &mut self,
        col: usize,
        depth: usize,
        f: &mut dyn FnMut(Node<'a>) -> Result<()>,
    ) -> Result<()> {
        loop {
            if !self.is_seq_item() {
                return self.syntax("expected `- ` (a sequence item)");
            }
            self.pos += 1;
            let item = if self.at_line_end() {
                self.block_node(col, false, depth + 1)?
            } else {
                self.node_here(depth + 1)?
            };
            f(item)?;
            self.skip_to_content();
            if self.peek().is_none() {
                return Ok(());
            }
            let c = self.col();
            if c < col || c == col && !self.is_seq_item() {
                return Ok(());
            }
            if c > col {
                return self.syntax("bad indentation in block sequence");
            }
        }
    }

    /// A block mapping whose keys are at column `col`; `f` is called after each key's `:` and must parse
    /// the value.
    fn block_map_with(
        &mut self,
        col: usize,
        _depth: usize,
        f: &mut dyn FnMut(&mut Self, Cow<'a, str>) -> Result<()>,
    ) -> Result<()> {
        loop {
            let Some(key) = self.try_key()? else {
                return self.syntax(&format!(
                    "expected `key: value`, found `{}`",
                    self.rest_of_line()
                ));
            };
            f(self, key)?;
            self.skip_to_content();
            if self.peek().is_none() {
                return Ok(());
            }
            let c = self.col();
            if c < col {
                return Ok(());
            }
            if c > col {
                return self.syntax("bad indentation in block mapping");
            }
            if self.is_seq_item() {
                return self.syntax("unexpected sequence item in a mapping");
            }
        }
    }
}

// ----- schema conversion -----

fn bad(n: &Node<'_>, key: &str, expected: &'static str) -> Error {
    Error {
        pos: n.pos(),
        kind: ErrorKind::BadValue {
            key: key.to_string(),
            expected,
            found: n.describe(),
        },
    }
}

/// LLVM's auto-radix unsigned parse (`0x`, `0b`, `0o`, leading `0` = octal, else decimal).
fn parse_uint(s: &str) -> Option<u64> {
    let (digits, radix) = if let Some(r) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (r, 16)
    } else if let Some(r) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        (r, 2)
    } else if let Some(r) = s.strip_prefix("0o") {
        (r, 8)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || digits.starts_with('+') || digits.starts_with('-') {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn uint(n: &Node<'_>, key: &str) -> Result<u64> {
    match n {
        Node::Scalar(s, _) => parse_uint(s).ok_or_else(|| bad(n, key, "an unsigned integer")),
        _ => Err(bad(n, key, "an unsigned integer")),
    }
}

fn uint32(n: &Node<'_>, key: &str) -> Result<u32> {
    let v = uint(n, key)?;
    u32::try_from(v).map_err(|_| bad(n, key, "an unsigned 32-bit integer"))
}

fn string(n: &Node<'_>, key: &str) -> Result<String> {
    match n {
        Node::Scalar(s, _) => Ok(s.to_string()),
        Node::Null(_) => Ok(String::new()),
        _ => Err(bad(n, key, "a string")),
    }
}

fn boolean(n: &Node<'_>, key: &str) -> Result<bool> {
    match n {
        Node::Scalar(s, _) => match s.as_ref() {
            "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
                Ok(true)
            }
            "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n"
            | "N" => Ok(false),
            _ => Err(bad(n, key, "true or false")),
        },
        _ => Err(bad(n, key, "true or false")),
    }
}

fn seq<'n, 'a>(n: &'n Node<'a>, key: &str) -> Result<&'n [Node<'a>]> {
    match n {
        Node::Seq(v, _) => Ok(v),
        Node::Null(_) => Ok(&[]),
        _ => Err(bad(n, key, "a sequence")),
    }
}

fn map<'n, 'a>(n: &'n Node<'a>, what: &str) -> Result<&'n [(Cow<'a, str>, Node<'a>)]> {
    match n {
        Node::Map(v, _) => Ok(v),
        _ => Err(bad(n, what, "a mapping")),
    }
}

/// Tracks required keys of one mapping.
struct Required<'n> {
    pos: TextPos,
    within: &'static str,
    seen: u32,
    _p: std::marker::PhantomData<&'n ()>,
}

impl Required<'_> {
    fn new(n: &Node<'_>, within: &'static str) -> Self {
        Required {
            pos: n.pos(),
            within,
            seen: 0,
            _p: std::marker::PhantomData,
        }
    }
    fn see(&mut self, bit: u32) {
        self.seen |= 1 << bit;
    }
    fn check(&self, keys: &[&'static str]) -> Result<()> {
        for (i, k) in keys.iter().enumerate() {
            if self.seen & (1 << i) == 0 {
                return Err(Error {
                    pos: self.pos,
                    kind: ErrorKind::MissingKey {
                        key: k,
                        within: self.within,
                    },
                });
            }
        }
        Ok(())
    }
}

fn header(n: &Node<'_>) -> Result<Header> {
    let mut h = Header::default();
    let mut req = Required::new(n, "header");
    for (k, v) in map(n, "header")? {
        match k.as_ref() {
            "profile-version" => {
                h.version = uint32(v, k)?;
                req.see(0)
            }
            "binary-name" => {
                h.binary_name = string(v, k)?;
                req.see(1)
            }
            "binary-build-id" => h.build_id = string(v, k)?,
            "profile-flags" => {
                req.see(2);
                let items: Vec<&Node<'_>> = match v {
                    Node::Seq(items, _) => items.iter().collect(),
                    Node::Scalar(..) => vec![v],
                    Node::Null(_) => vec![],
                    Node::Map(..) => return Err(bad(v, k, "a sequence of lbr, sample, memevent")),
                };
                for it in items {
                    h.flags |= match it {
                        Node::Scalar(s, _) if s == "lbr" => PF_LBR,
                        Node::Scalar(s, _) if s == "sample" => PF_SAMPLE,
                        Node::Scalar(s, _) if s == "memevent" => PF_MEMEVENT,
                        _ => return Err(bad(it, k, "lbr, sample or memevent")),
                    };
                }
            }
            "profile-origin" => h.origin = string(v, k)?,
            "profile-events" => h.events = string(v, k)?,
            "dfs-order" => h.dfs_order = boolean(v, k)?,
            "hash-func" => {
                h.hash_func = match v {
                    Node::Scalar(s, _) if s == "xxh3" => HashFunction::Xxh3,
                    Node::Scalar(s, _) if s == "std-hash" => HashFunction::StdHash,
                    _ => return Err(bad(v, k, "std-hash or xxh3")),
                }
            }
            _ => {}
        }
    }
    req.check(&["profile-version", "binary-name", "profile-flags"])?;
    Ok(h)
}

fn call_site(n: &Node<'_>) -> Result<CallSite> {
    let mut c = CallSite::default();
    let mut req = Required::new(n, "call site");
    for (k, v) in map(n, "calls item")? {
        match k.as_ref() {
            "off" => {
                c.offset = uint32(v, k)?;
                req.see(0)
            }
            "fid" => {
                c.dest_id = uint32(v, k)?;
                req.see(1)
            }
            "cnt" => {
                c.count = uint(v, k)?;
                req.see(2)
            }
            "disc" => c.entry_discriminator = uint32(v, k)?,
            "mis" => c.mispreds = uint(v, k)?,
            "pp" => c.probe = uint32(v, k)?,
            "ppn" => c.inline_tree_node = uint32(v, k)?,
            "ind" => c.indirect = boolean(v, k)?,
            _ => {}
        }
    }
    req.check(&["off", "fid", "cnt"])?;
    Ok(c)
}

fn successor(n: &Node<'_>) -> Result<Successor> {
    let mut s = Successor::default();
    let mut req = Required::new(n, "successor");
    for (k, v) in map(n, "succ item")? {
        match k.as_ref() {
            "bid" => {
                s.index = uint32(v, k)?;
                req.see(0)
            }
            "cnt" => {
                s.count = uint(v, k)?;
                req.see(1)
            }
            "mis" => s.mispreds = uint(v, k)?,
            _ => {}
        }
    }
    req.check(&["bid", "cnt"])?;
    Ok(s)
}

fn block(n: &Node<'_>) -> Result<Block> {
    let mut b = Block::default();
    let mut req = Required::new(n, "block");
    for (k, v) in map(n, "blocks item")? {
        match k.as_ref() {
            "bid" => {
                b.index = uint32(v, k)?;
                req.see(0)
            }
            "insns" => {
                b.num_instructions = uint32(v, k)?;
                req.see(1)
            }
            "hash" => b.hash = uint(v, k)?,
            "exec" => b.exec_count = uint(v, k)?,
            "events" => b.event_count = uint(v, k)?,
            "calls" => b.calls = seq(v, k)?.iter().map(call_site).collect::<Result<_>>()?,
            "succ" => b.successors = seq(v, k)?.iter().map(successor).collect::<Result<_>>()?,
            "probes" => {
                b.pseudo_probes = seq(v, k)?
                    .iter()
                    .map(|p| {
                        let mut info = PseudoProbeInfo {
                            block_probes: vec![1],
                            inline_tree_nodes: vec![0],
                        };
                        for (k, v) in map(p, "probes item")? {
                            match k.as_ref() {
                                "blk" => {
                                    info.block_probes = seq(v, k)?
                                        .iter()
                                        .map(|x| uint(x, k))
                                        .collect::<Result<_>>()?
                                }
                                "ids" => {
                                    info.inline_tree_nodes = seq(v, k)?
                                        .iter()
                                        .map(|x| uint32(x, k))
                                        .collect::<Result<_>>()?
                                }
                                _ => {}
                            }
                        }
                        Ok(info)
                    })
                    .collect::<Result<_>>()?
            }
            "probe" => b.pseudo_probes_str = string(v, k)?,
            _ => {}
        }
    }
    req.check(&["bid", "insns"])?;
    Ok(b)
}

fn function(n: &Node<'_>) -> Result<Function> {
    let mut f = Function::default();
    let mut req = Required::new(n, "function");
    for (k, v) in map(n, "functions item")? {
        match k.as_ref() {
            "name" => {
                f.name = string(v, k)?;
                req.see(0)
            }
            "fid" => {
                f.id = uint32(v, k)?;
                req.see(1)
            }
            "hash" => {
                f.hash = uint(v, k)?;
                req.see(2)
            }
            "exec" => {
                f.exec_count = uint(v, k)?;
                req.see(3)
            }
            "nblocks" => {
                f.num_basic_blocks = uint32(v, k)?;
                req.see(4)
            }
            "extern" => f.extern_entry_count = uint(v, k)?,
            "blocks" => f.blocks = seq(v, k)?.iter().map(block).collect::<Result<_>>()?,
            "inline_tree" => {
                f.inline_tree = seq(v, k)?
                    .iter()
                    .map(|t| {
                        let mut node = InlineTreeNode {
                            guid_index: u32::MAX,
                            parent_index_delta: 0,
                            call_site_probe: 0,
                        };
                        for (k, v) in map(t, "inline_tree item")? {
                            match k.as_ref() {
                                "g" => node.guid_index = uint32(v, k)?,
                                "p" => node.parent_index_delta = uint32(v, k)?,
                                "cs" => node.call_site_probe = uint32(v, k)?,
                                _ => {}
                            }
                        }
                        Ok(node)
                    })
                    .collect::<Result<_>>()?
            }
            "ppit" => f.inline_tree_str = string(v, k)?,
            _ => {}
        }
    }
    req.check(&["name", "fid", "hash", "exec", "nblocks"])?;
    Ok(f)
}

fn probe_desc(n: &Node<'_>) -> Result<PseudoProbeDesc> {
    let mut d = PseudoProbeDesc::default();
    for (k, v) in map(n, "pseudo_probe_desc")? {
        match k.as_ref() {
            "gs" => {
                d.guids = seq(v, k)?
                    .iter()
                    .map(|x| uint(x, k))
                    .collect::<Result<_>>()?
            }
            "gh" => {
                d.guid_hash_index = seq(v, k)?
                    .iter()
                    .map(|x| uint32(x, k))
                    .collect::<Result<_>>()?
            }
            "hs" => {
                d.hashes = seq(v, k)?
                    .iter()
                    .map(|x| uint(x, k))
                    .collect::<Result<_>>()?
            }
            _ => {}
        }
    }
    Ok(d)
}

/// Parse a YAML profile, handing each function to `on_function` as soon as it is read (memory stays
/// proportional to one function). Returns the header and the pseudo-probe descriptor.
pub fn parse_with(
    data: &[u8],
    on_function: &mut dyn FnMut(Function) -> std::result::Result<(), Error>,
) -> Result<(Header, PseudoProbeDesc)> {
    let mut p = Parser {
        s: data,
        pos: 0,
        line: 1,
        line_start: 0,
    };
    if data.starts_with(b"\xef\xbb\xbf") {
        p.pos = 3;
    }
    p.skip_to_content();
    if p.peek().is_none() {
        return Err(Error {
            pos: p.tpos(),
            kind: ErrorKind::MissingKey {
                key: "header",
                within: "the document",
            },
        });
    }
    let col = p.col();
    let mut hdr: Option<Header> = None;
    let mut have_functions = false;
    let mut desc = PseudoProbeDesc::default();
    p.block_map_with(col, 0, &mut |p, key| {
        match key.as_ref() {
            "header" => {
                let n = p.value(col, 0)?;
                hdr = Some(header(&n)?);
            }
            "functions" => {
                have_functions = true;
                let mut each = |n: Node<'_>| on_function(function(&n)?);
                if p.at_line_end() {
                    p.skip_to_content();
                    if p.peek().is_some() && p.col() >= col && p.is_seq_item() {
                        let c = p.col();
                        p.block_seq_each(c, 1, &mut each)?;
                    } else if p.peek().is_some() && p.col() > col {
                        let n = p.node_here(1)?;
                        for item in seq(&n, "functions")? {
                            on_function(function(item)?)?;
                        }
                    }
                } else {
                    let n = p.inline_node(1)?;
                    p.expect_line_end()?;
                    let items = match n {
                        Node::Seq(items, _) => items,
                        Node::Null(_) => Vec::new(),
                        other => return Err(bad(&other, "functions", "a sequence")),
                    };
                    for item in items {
                        each(item)?;
                    }
                }
            }
            "pseudo_probe_desc" => {
                let n = p.value(col, 0)?;
                desc = probe_desc(&n)?;
            }
            _ => {
                p.value(col, 0)?;
            }
        }
        Ok(())
    })?;
    // Anything left at a smaller indentation than the top mapping is not part of it.
    p.skip_to_content();
    if p.peek().is_some() {
        return p.syntax(&format!(
            "unexpected text after the top-level mapping: `{}`",
            p.rest_of_line()
        ));
    }
    let end = p.tpos();
    let h = hdr.ok_or(Error {
        pos: end,
        kind: ErrorKind::MissingKey {
            key: "header",
            within: "the document",
        },
    })?;
    if !have_functions {
        return Err(Error {
            pos: end,
            kind: ErrorKind::MissingKey {
                key: "functions",
                within: "the document",
            },
        });
    }
    Ok((h, desc))
}

/// Parse a whole YAML profile into memory.
pub fn parse(data: &[u8]) -> Result<Profile> {
    let mut functions = Vec::new();
    let (header, pseudo_probe_desc) = parse_with(data, &mut |f| {
        functions.push(f);
        Ok(())
    })?;
    Ok(Profile {
        header,
        functions,
        pseudo_probe_desc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "---\nheader:\n  profile-version: 1\n  binary-name:     'bin/p1'\n  binary-build-id: abc\n  profile-flags:   [ lbr ]\n  profile-origin:  perf data aggregator\n  profile-events:  ''\n  dfs-order:       false\n  hash-func:       xxh3\nfunctions:\n  - name:            work\n    fid:             10\n    hash:            0x73A693C61F5BC7CA\n    exec:            45\n    nblocks:         2\n    blocks:\n      - bid:             0\n        insns:           7\n        hash:            0xF6D913D24D490020\n        calls:           [ { off: 0x2, fid: 9, cnt: 45 }, { off: 0xB, fid: 11, disc: 1, cnt: 45, mis: 2 } ]\n        succ:            [ { bid: 1, cnt: 0 }, { bid: 5, cnt: 100, mis: 5 } ]\n...\n";

    #[test]
    fn roundtrip_llvm_layout() {
        let p = parse(DOC.as_bytes()).unwrap();
        assert_eq!(p.header.binary_name, "bin/p1");
        assert_eq!(p.functions[0].blocks[0].calls[1].entry_discriminator, 1);
        let mut out = Vec::new();
        super::super::write(&mut out, &p).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), DOC);
    }

    #[test]
    fn other_layouts() {
        let doc = "# comment\nheader: {profile-version: 1, binary-name: \"a b\", profile-flags: sample}\nfunctions:\n- name: f\n  fid: 1\n  hash: 10\n  exec: 0\n  nblocks: 1\n  blocks:\n  - bid: 0\n    insns: 3\n    succ:\n      - bid: 0\n        cnt: 4\n- {name: g, fid: 2, hash: 0x1, exec: 1, nblocks: 1}\n";
        let p = parse(doc.as_bytes()).unwrap();
        assert_eq!(p.header.flags, PF_SAMPLE);
        assert_eq!(p.header.binary_name, "a b");
        assert_eq!(p.functions.len(), 2);
        assert_eq!(p.functions[0].blocks[0].successors[0].count, 4);
        assert_eq!(p.functions[1].hash, 1);
    }

    #[test]
    fn located_errors() {
        let doc = "header:\n  profile-version: 1\n  binary-name: x\n  profile-flags: [ lbr ]\nfunctions:\n  - name: f\n    fid: x1\n";
        let e = parse(doc.as_bytes()).unwrap_err();
        assert_eq!(
            e.pos,
            TextPos {
                line: 7,
                column: 10
            }
        );
        let doc = "header:\n  profile-version: 1\n  binary-name: x\n  profile-flags: [ lbr ]\nfunctions:\n  - name: f\n    fid: 1\n";
        let e = parse(doc.as_bytes()).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::MissingKey { key: "hash", .. }));
        let e = parse(b"header: [ 1, 2\n").unwrap_err();
        assert!(matches!(e.kind, ErrorKind::Syntax(_)));
    }
}
