//! Small helpers shared by the text formats: positions and number parsing over bytes for the
//! readers, and one parallel line formatter for the writers.

use std::fmt;
use std::io::{self, Write};

use rayon::prelude::*;

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

/// Write `items` as text: `format` appends the text of a slice of at most `slice` items to a
/// buffer. Slices are formatted in parallel and written in order, so the output is what one
/// sequential pass would write (the fdata and YAML writers of large profiles spend most of their
/// time formatting numbers). The text is never held whole: a round of a few slices per thread
/// is formatted (into buffers reused from round to round) while the calling thread writes the
/// previous round.
pub fn write_in_parallel<T: Sync>(
    w: &mut (impl Write + ?Sized),
    items: &[T],
    slice: usize,
    format: impl Fn(&mut Vec<u8>, &[T]) + Sync,
) -> io::Result<()> {
    let slice = slice.max(1);
    let round = slice * rayon::current_num_threads().max(1) * 8;
    // Format `part` into the first buffers of `bufs`; returns how many it used.
    let format_round = |bufs: &mut Vec<Vec<u8>>, part: &[T]| -> usize {
        let n = part.len().div_ceil(slice);
        if bufs.len() < n {
            bufs.resize_with(n, Vec::new);
        }
        bufs[..n]
            .par_iter_mut()
            .zip(part.par_chunks(slice))
            .for_each(|(buf, items)| {
                buf.clear();
                format(buf, items);
            });
        n
    };
    let mut rounds = items.chunks(round);
    let (mut ready, mut next): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    let mut n_ready = rounds
        .next()
        .map_or(0, |part| format_round(&mut ready, part));
    while n_ready > 0 {
        let part = rounds.next();
        let mut n_next = 0;
        let mut written = Ok(());
        rayon::in_place_scope(|s| {
            if let Some(part) = part {
                let (next, n_next) = (&mut next, &mut n_next);
                let format_round = &format_round;
                s.spawn(move |_| *n_next = format_round(next, part));
            }
            written = ready[..n_ready].iter().try_for_each(|buf| w.write_all(buf));
        });
        written?;
        std::mem::swap(&mut ready, &mut next);
        n_ready = n_next;
    }
    Ok(())
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
