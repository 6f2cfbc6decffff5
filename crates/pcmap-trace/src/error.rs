//! The error type of every reader and pass in this crate.

/// A failure while reading or processing a trace. Text formats name `file:line:column`, the
/// binary format names the byte offset and the field being read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A malformed line in a text format.
    #[error("{file}:{line}:{column}: {message}")]
    Text {
        /// The file's label (usually its path).
        file: String,
        /// 1-based line number.
        line: u64,
        /// 1-based column (in bytes).
        column: u64,
        /// What was expected and what was found.
        message: String,
    },
    /// A malformed record in the binary format.
    #[error("{file}: byte offset {offset}: reading {field}: {message}")]
    Binary {
        /// The file's label (usually its path).
        file: String,
        /// Byte offset of the failing record or field.
        offset: u64,
        /// The field being read.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The input's format could not be recognised.
    #[error("{file}: {message}")]
    Unrecognised {
        /// The file's label.
        file: String,
        /// Why, with a hint.
        message: String,
    },
    /// An I/O failure.
    #[error("{file}: {source}")]
    Io {
        /// The file's label.
        file: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl TraceError {
    /// A text-format error at `file:line:column`.
    pub fn text(file: &str, line: u64, column: u64, message: impl Into<String>) -> Self {
        TraceError::Text {
            file: file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    /// A binary-format error at `offset` while reading `field`.
    pub fn binary(
        file: &str,
        offset: u64,
        field: &'static str,
        message: impl Into<String>,
    ) -> Self {
        TraceError::Binary {
            file: file.to_string(),
            offset,
            field,
            message: message.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = TraceError> = std::result::Result<T, E>;
