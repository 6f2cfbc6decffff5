//! The BTF header (24 bytes, or 32 with the 2026 layout section).

use crate::error::{Cursor, Error, Result};

/// `0xEB9F`: BTF magic, also used by the RFC's `.BTF.inline`.
pub const BTF_MAGIC: u16 = 0xeb9f;
/// Size of the classic header.
pub const HEADER_LEN_V1: u32 = 24;
/// Size of the header with `layout_off`/`layout_len` (2026).
pub const HEADER_LEN_LAYOUT: u32 = 32;

/// A parsed BTF header. Offsets are relative to the end of the header (`hdr_len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    /// Always 1.
    pub version: u8,
    /// Always 0 so far.
    pub flags: u8,
    /// Header length; readers honour it.
    pub hdr_len: u32,
    /// Offset of the type section.
    pub type_off: u32,
    /// Length of the type section.
    pub type_len: u32,
    /// Offset of the string section.
    pub str_off: u32,
    /// Length of the string section.
    pub str_len: u32,
    /// Offset and length of the kind-layout section, when `hdr_len >= 32` and the length is non-zero.
    pub layout: Option<(u32, u32)>,
    /// Whether the blob is big-endian (magic read as `0x9FEB`).
    pub big_endian: bool,
}

impl Header {
    /// Parse the header at the start of `data`.
    pub fn parse(data: &[u8]) -> Result<Header> {
        let mut c = Cursor::new(data, 0, false);
        let magic = c.u16("btf_header.magic")?;
        let big_endian = match magic {
            BTF_MAGIC => false,
            0x9feb => true,
            other => {
                return Err(Error::invalid(
                    "btf_header.magic",
                    0,
                    format!("{other:#06x}, expected 0xeb9f"),
                ));
            }
        };
        c.set_big_endian(big_endian);
        let version = c.u8("btf_header.version")?;
        if version != 1 {
            return Err(Error::invalid(
                "btf_header.version",
                2,
                format!("{version}, expected 1"),
            ));
        }
        let flags = c.u8("btf_header.flags")?;
        let hdr_len = c.u32("btf_header.hdr_len")?;
        if hdr_len < HEADER_LEN_V1 || hdr_len as usize > data.len() {
            return Err(Error::invalid(
                "btf_header.hdr_len",
                4,
                format!("{hdr_len} (blob is {} bytes)", data.len()),
            ));
        }
        let type_off = c.u32("btf_header.type_off")?;
        let type_len = c.u32("btf_header.type_len")?;
        let str_off = c.u32("btf_header.str_off")?;
        let str_len = c.u32("btf_header.str_len")?;
        let mut layout = None;
        if hdr_len >= HEADER_LEN_LAYOUT {
            let off = c.u32("btf_header.layout_off")?;
            let len = c.u32("btf_header.layout_len")?;
            if len != 0 {
                layout = Some((off, len));
            }
        }
        Ok(Header {
            version,
            flags,
            hdr_len,
            type_off,
            type_len,
            str_off,
            str_len,
            layout,
            big_endian,
        })
    }

    /// Serialise (little-endian). Writes 32 bytes when `hdr_len` is 32.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
        out.push(1);
        out.push(self.flags);
        for v in [
            self.hdr_len,
            self.type_off,
            self.type_len,
            self.str_off,
            self.str_len,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        if self.hdr_len >= HEADER_LEN_LAYOUT {
            let (off, len) = self.layout.unwrap_or((0, 0));
            out.extend_from_slice(&off.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
            out.resize(out.len() + (self.hdr_len - HEADER_LEN_LAYOUT) as usize, 0);
        }
    }
}
