//! Small helpers shared by the text-format readers: positions and number parsing over bytes.

use std::fmt;

/// A 1-based line and column in a text input (columns count bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TextPos {
    /// Line number, starting at 1.
    pub line: u64,
    /// Byte column within the line, starting at 1.
    pub column: u64,
}

impl fmt::Display for TextPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Parse an unsigned hexadecimal number without `0x` (upper or lower case digits). `None` on an empty
/// string, a non-hex digit or overflow of 64 bits.
#[inline]
pub(crate) fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        v = v.checked_mul(16)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// Parse an unsigned decimal number. `None` on an empty string, a non-digit or overflow.
#[inline]
pub(crate) fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// Show a field in an error message: lossy UTF-8 with control characters escaped (`\r`, `\t`),
/// shortened to 64 bytes.
pub(crate) fn show(s: &[u8]) -> String {
    let cut = &s[..s.len().min(64)];
    let mut out = String::new();
    for c in String::from_utf8_lossy(cut).chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    if s.len() > 64 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_dec() {
        assert_eq!(parse_hex(b"401aF0"), Some(0x401af0));
        assert_eq!(parse_hex(b"ffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_hex(b"00000000000000000001"), Some(1));
        assert_eq!(parse_hex(b"10000000000000000"), None);
        assert_eq!(parse_hex(b"0x10"), None);
        assert_eq!(parse_hex(b""), None);
        assert_eq!(parse_dec(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_dec(b"18446744073709551616"), None);
        assert_eq!(parse_dec(b"-1"), None);
    }
}
