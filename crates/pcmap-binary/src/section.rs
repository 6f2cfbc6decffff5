//! Sections: headers, raw bytes, and compressed contents decompressed on demand.

use std::borrow::Cow;

use crate::error::{Error, Result};

/// `SHT_NOBITS`: occupies no file space (`.bss`).
pub const SHT_NOBITS: u32 = 8;
/// `SHT_NOTE`.
pub const SHT_NOTE: u32 = 7;
/// `SHT_LLVM_BB_ADDR_MAP`: LLVM's basic-block address map (`object` has no constant for it).
pub const SHT_LLVM_BB_ADDR_MAP: u32 = 0x6fff_4c0a;
/// `SHF_ALLOC`.
pub const SHF_ALLOC: u64 = 1 << 1;
/// `SHF_EXECINSTR`.
pub const SHF_EXECINSTR: u64 = 1 << 2;
/// `SHF_COMPRESSED`.
pub const SHF_COMPRESSED: u64 = 1 << 11;

/// The largest expansion we accept from a compressed section, as a multiple of its compressed
/// size. zlib cannot exceed about 1032:1; zstd can in theory, but no real debug or map section
/// comes near this, and the bound keeps memory proportional to the input.
const MAX_EXPANSION: u64 = 4096;

/// One section header with its name and the bytes it covers in the file.
#[derive(Debug, Clone)]
pub struct Section<'data> {
    /// Index in the section header table.
    pub index: usize,
    /// Name from `.shstrtab`.
    pub name: &'data str,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_addr`.
    pub address: u64,
    /// `sh_offset`.
    pub offset: u64,
    /// `sh_size` (the compressed size for `SHF_COMPRESSED` sections).
    pub size: u64,
    /// `sh_addralign`.
    pub align: u64,
    /// `sh_link`.
    pub link: u32,
    /// `sh_info`.
    pub info: u32,
    /// `sh_entsize`.
    pub entsize: u64,
    /// The section's bytes as stored in the file (empty for `SHT_NOBITS`); for a compressed
    /// section this includes the compression header.
    pub raw: &'data [u8],
    pub(crate) compression: Option<Compression>,
}

/// How an `SHF_COMPRESSED` section is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Compression {
    pub(crate) format: CompressionFormat,
    /// Offset of the compressed stream within `raw` (after the `Chdr`).
    pub(crate) header_len: usize,
    pub(crate) uncompressed_size: u64,
}

/// The compression algorithm of an `SHF_COMPRESSED` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionFormat {
    /// `ELFCOMPRESS_ZLIB`.
    Zlib,
    /// `ELFCOMPRESS_ZSTD`.
    Zstd,
}

impl CompressionFormat {
    /// "zlib" or "zstd".
    pub fn name(self) -> &'static str {
        match self {
            CompressionFormat::Zlib => "zlib",
            CompressionFormat::Zstd => "zstd",
        }
    }
}

impl<'data> Section<'data> {
    /// True for `SHF_ALLOC` sections (loaded at run time).
    pub fn is_alloc(&self) -> bool {
        self.flags & SHF_ALLOC != 0
    }

    /// True for executable sections.
    pub fn is_executable(&self) -> bool {
        self.flags & SHF_EXECINSTR != 0
    }

    /// The compression format, for `SHF_COMPRESSED` sections.
    pub fn compression(&self) -> Option<CompressionFormat> {
        self.compression.map(|c| c.format)
    }

    /// The size of the contents once decompressed.
    pub fn uncompressed_size(&self) -> u64 {
        self.compression.map_or(self.size, |c| c.uncompressed_size)
    }

    /// True if `address` lies inside this allocated section.
    pub fn contains_address(&self, address: u64) -> bool {
        self.is_alloc() && address >= self.address && address - self.address < self.size
    }

    /// The section's contents: borrowed from the file, or decompressed for `SHF_COMPRESSED`
    /// sections (zlib or zstd). Decompression is bounded by the compressed size and checked
    /// against the size the header claims.
    pub fn data(&self) -> Result<Cow<'data, [u8]>> {
        let Some(c) = self.compression else {
            return Ok(Cow::Borrowed(self.raw));
        };
        let stream = &self.raw[c.header_len..];
        let fail = |problem: String| Error::Decompress {
            section: self.name.to_string(),
            format: c.format.name(),
            compressed: stream.len() as u64,
            offset: self.offset + c.header_len as u64,
            problem,
        };
        let limit = (stream.len() as u64)
            .saturating_mul(MAX_EXPANSION)
            .max(1 << 20);
        if c.uncompressed_size > limit {
            return Err(fail(format!(
                "the header claims {} uncompressed bytes, more than {MAX_EXPANSION} times the compressed size",
                c.uncompressed_size
            )));
        }
        let data = object::read::CompressedData {
            format: match c.format {
                CompressionFormat::Zlib => object::CompressionFormat::Zlib,
                CompressionFormat::Zstd => object::CompressionFormat::Zstandard,
            },
            data: stream,
            uncompressed_size: c.uncompressed_size,
        };
        data.decompress().map_err(|e| fail(e.to_string()))
    }
}
