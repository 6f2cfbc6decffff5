//! Line iteration shared by the text formats: 1-based line numbers, CRLF tolerated, UTF-8 checked.

use crate::TraceError;

/// An iterator over the lines of a buffer, yielding `(line number, line without its ending)`.
pub struct Lines<'data, 'f> {
    data: &'data [u8],
    pos: usize,
    lineno: u64,
    file: &'f str,
}

impl<'data, 'f> Lines<'data, 'f> {
    /// Iterate over the lines of `data`; errors name `file`.
    pub fn new(data: &'data [u8], file: &'f str) -> Self {
        Lines {
            data,
            pos: 0,
            lineno: 0,
            file,
        }
    }
}

impl<'data> Iterator for Lines<'data, '_> {
    type Item = Result<(u64, &'data str), TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.data.len() {
            return None;
        }
        let rest = &self.data[self.pos..];
        let (raw, advance) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..i], i + 1),
            None => (rest, rest.len()),
        };
        self.pos += advance;
        self.lineno += 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        Some(match std::str::from_utf8(raw) {
            Ok(s) => Ok((self.lineno, s)),
            Err(e) => Err(TraceError::text(
                self.file,
                self.lineno,
                e.valid_up_to() as u64 + 1,
                "invalid UTF-8",
            )),
        })
    }
}
