//! Errors of the inline-site reader.

/// An error while reading an ELF file or its DWARF.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The ELF container could not be parsed.
    #[error("cannot parse ELF file: {0}")]
    Elf(#[from] pcmap_binary::Error),
    /// A section could not be read or decompressed.
    #[error("cannot read section {section}: {source}")]
    Section {
        /// Section name.
        section: String,
        /// Underlying error.
        source: pcmap_binary::Error,
    },
    /// The file has no `.debug_info`.
    #[error("no DWARF debug information (.debug_info is missing or empty)")]
    NoDebugInfo,
    /// Malformed DWARF.
    #[error("malformed DWARF at {section}+{offset:#x} while reading {what}: {source}")]
    Dwarf {
        /// Section the offset refers to.
        section: &'static str,
        /// Byte offset in that section (unit or DIE offset).
        offset: u64,
        /// What was being read.
        what: &'static str,
        /// gimli's error.
        source: gimli::Error,
    },
    /// An error from the symbolizer.
    #[error("symbolization failed for address {address:#x}: {source}")]
    Symbolize {
        /// The address being symbolized.
        address: u64,
        /// gimli's error.
        source: gimli::Error,
    },
}

impl Error {
    pub(crate) fn dwarf(offset: u64, what: &'static str) -> impl FnOnce(gimli::Error) -> Error {
        move |source| Error::Dwarf {
            section: ".debug_info",
            offset,
            what,
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
