//! Errors of the decoder and the encoder.

use std::fmt;

/// The field of the BAT section that was being read when decoding failed.
///
/// Names follow upstream `BoltAddressTranslation.cpp` / `BAT.md` so the error can be read next to
/// the format description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// The 12-byte ELF note header (`n_namesz`, `n_descsz`, `n_type`).
    NoteHeader,
    /// The note owner name (`"BOLT"`).
    NoteName,
    /// The note payload (`n_descsz` bytes).
    NoteDesc,
    /// `NumFuncs` of the hot or cold functions table.
    NumFuncs,
    /// A function's `Address` delta.
    Address,
    /// A hot function's `FuncHash`.
    FuncHash,
    /// A hot function's `NumBlocks`.
    NumBlocks,
    /// A hot function's `NumSecEntryPoints`.
    NumSecEntryPoints,
    /// A cold fragment's `HotIndex` delta.
    HotIndex,
    /// A cold fragment's `ColdInputSkew`.
    ColdInputSkew,
    /// A function's `NumEntries`.
    NumEntries,
    /// A function's `EqualElems`.
    EqualElems,
    /// A function's `BranchEntries` bitmask.
    BranchEntries,
    /// An entry's `OutputOffset` delta.
    OutputOffset,
    /// An entry's `InputOffset` delta.
    InputOffset,
    /// An entry's `BBHash`.
    BBHash,
    /// An entry's `BBIdx` delta.
    BBIdx,
    /// A `SecEntryPoint` delta.
    SecEntryPoint,
    /// Bytes after the cold functions table inside the note payload.
    TrailingBytes,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Field::NoteHeader => "note header",
            Field::NoteName => "note name",
            Field::NoteDesc => "note payload",
            Field::NumFuncs => "NumFuncs",
            Field::Address => "function Address",
            Field::FuncHash => "FuncHash",
            Field::NumBlocks => "NumBlocks",
            Field::NumSecEntryPoints => "NumSecEntryPoints",
            Field::HotIndex => "HotIndex",
            Field::ColdInputSkew => "ColdInputSkew",
            Field::NumEntries => "NumEntries",
            Field::EqualElems => "EqualElems",
            Field::BranchEntries => "BranchEntries bitmask",
            Field::OutputOffset => "entry OutputOffset",
            Field::InputOffset => "entry InputOffset",
            Field::BBHash => "entry BBHash",
            Field::BBIdx => "entry BBIdx",
            Field::SecEntryPoint => "SecEntryPoint",
            Field::TrailingBytes => "end of table",
        };
        f.write_str(name)
    }
}

/// What was wrong with the bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The input ended before the field was complete.
    #[error("unexpected end of data")]
    UnexpectedEnd,
    /// A LEB128 number does not fit in 64 bits.
    #[error("LEB128 number does not fit in 64 bits")]
    LebOverflow,
    /// A value is outside the range the format allows (e.g. an output offset that does not fit
    /// `uint32_t`, an input offset not below 2^31, a hot index past the hot table).
    #[error("value {value:#x} is out of range (at most {max:#x})")]
    OutOfRange {
        /// The decoded value.
        value: u64,
        /// The largest value allowed here.
        max: u64,
    },
    /// A count larger than the remaining bytes could possibly hold.
    #[error("count {count} is larger than the {remaining} bytes left could hold")]
    CountTooLarge {
        /// The decoded count.
        count: u64,
        /// Bytes left in the input.
        remaining: usize,
    },
    /// Function addresses or entry output offsets are not in increasing order.
    #[error("not in increasing order (follows {previous:#x}, got {value:#x})")]
    NotSorted {
        /// The previous address or offset.
        previous: u64,
        /// This address or offset.
        value: u64,
    },
    /// A cold fragment starts at the address of a hot function.
    #[error("cold fragment at {0:#x} has the address of a hot function")]
    DuplicateAddress(u64),
    /// The note is not a BOLT BAT note.
    #[error("not a BOLT address translation note ({0})")]
    BadNote(&'static str),
    /// Bytes remain after the cold functions table.
    #[error("{0} unexpected bytes after the cold functions table")]
    TrailingBytes(usize),
}

/// A BAT section or payload that could not be decoded: where, which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed BOLT address translation table at byte offset {offset:#x} ({field}): {kind}")]
pub struct DecodeError {
    /// Byte offset of the field in the buffer given to the decoder (the section start when
    /// decoding a note, the payload start when decoding a payload).
    pub offset: usize,
    /// The field being read.
    pub field: Field,
    /// What was wrong.
    pub kind: DecodeErrorKind,
}

/// A model that cannot be encoded because it breaks a rule of the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Entries of a fragment are not sorted by output offset.
    #[error(
        "fragment at {fragment:#x}: entry {entry} has output offset {offset:#x} below the previous entry's"
    )]
    EntriesNotSorted {
        /// Output address of the fragment.
        fragment: u64,
        /// Index of the offending entry.
        entry: usize,
        /// Its output offset.
        offset: u32,
    },
    /// An input offset is 2^31 or more (the format keeps it shifted left by one in 32 bits).
    #[error(
        "fragment at {fragment:#x}: entry {entry} has input offset {offset:#x}, which does not fit in 31 bits"
    )]
    InputOffsetTooLarge {
        /// Output address of the fragment.
        fragment: u64,
        /// Index of the offending entry.
        entry: usize,
        /// The input offset.
        offset: u32,
    },
    /// Hot functions or cold fragments are not in strictly increasing address order.
    #[error("fragment at {address:#x} does not follow {previous:#x} in increasing address order")]
    FragmentsNotSorted {
        /// The previous fragment's address.
        previous: u64,
        /// This fragment's address.
        address: u64,
    },
    /// A cold fragment has the address of a hot function.
    #[error("cold fragment at {0:#x} has the address of a hot function")]
    DuplicateAddress(u64),
    /// A cold fragment's `hot_index` is past the hot functions table.
    #[error(
        "cold fragment at {address:#x} names hot function #{hot_index}, but there are only {num_hot}"
    )]
    BadHotIndex {
        /// Output address of the cold fragment.
        address: u64,
        /// Its hot index.
        hot_index: usize,
        /// Number of hot functions.
        num_hot: usize,
    },
    /// The payload is larger than an ELF note can describe (4 GiB).
    #[error("payload of {0} bytes is too large for an ELF note")]
    TooLarge(usize),
    /// A fragment has more entries than `NumEntries` (a `uint32_t`) can count.
    #[error("fragment at {0:#x} has more than 2^32-1 entries")]
    TooManyEntries(u64),
}
