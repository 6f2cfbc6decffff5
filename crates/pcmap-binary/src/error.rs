//! Typed errors for reading binaries.

use std::path::PathBuf;

/// Everything that can go wrong while opening, parsing or decoding a binary.
///
/// Every variant that comes from the file's bytes names the structure being read and, where it
/// is known, the file offset, so a user can look at the bytes with a hex dump.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened or mapped.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The bytes are not an ELF file at all.
    #[error("not an ELF file: {0}")]
    NotElf(String),
    /// A structure of the ELF file is malformed.
    #[error("malformed ELF {structure} at file offset {offset:#x}: {problem}")]
    Malformed {
        /// Which structure (e.g. "file header", "section header table", "name of section 7").
        structure: String,
        /// The file offset of the structure (0 when it is the file header itself).
        offset: u64,
        /// What is wrong, in words.
        problem: String,
    },
    /// A compressed section could not be decompressed.
    #[error(
        "cannot decompress section {section} ({format}, {compressed} bytes at file offset {offset:#x}): {problem}"
    )]
    Decompress {
        /// The section's name.
        section: String,
        /// "zlib" or "zstd".
        format: &'static str,
        /// Compressed size in bytes.
        compressed: u64,
        /// File offset of the compressed data.
        offset: u64,
        /// What went wrong.
        problem: String,
    },
    /// Instruction decoding is not available for this machine yet.
    #[error("disassembly of {machine} code is not supported yet (only x86-64 is decoded)")]
    UnsupportedMachine {
        /// The machine's name, e.g. "AArch64".
        machine: &'static str,
    },
    /// An address or function does not map to bytes of the file.
    #[error("{what} at {address:#x} has no bytes in the file")]
    NoBytes {
        /// What was asked for (e.g. "function main").
        what: String,
        /// The virtual address.
        address: u64,
    },
    /// A field of a C++ exception table (LSDA) could not be read.
    #[error("LSDA at {lsda:#x}: {field}: {source}")]
    Lsda {
        /// Address of the LSDA.
        lsda: u64,
        /// The field being read.
        field: &'static str,
        /// Where and what (file offset of the field).
        #[source]
        source: pcmap_bytes::Error,
    },
    /// A pointer of an LSDA uses an encoding pcmap (like BOLT) does not read.
    #[error("LSDA at {lsda:#x}: {field} has unsupported pointer encoding {encoding:#04x}")]
    LsdaEncoding {
        /// Address of the LSDA.
        lsda: u64,
        /// The field.
        field: &'static str,
        /// The `DW_EH_PE_*` encoding byte.
        encoding: u8,
    },
    /// A model of the functions kept by an earlier run
    /// ([`crate::bolt::BoltFunctions::from_discovered`]) does not fit this binary.
    #[error("the kept model of the functions does not fit this binary: {problem}")]
    Discovered {
        /// What does not fit, in words.
        problem: &'static str,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn malformed(
    structure: impl Into<String>,
    offset: u64,
    problem: impl Into<String>,
) -> Error {
    Error::Malformed {
        structure: structure.into(),
        offset,
        problem: problem.into(),
    }
}
