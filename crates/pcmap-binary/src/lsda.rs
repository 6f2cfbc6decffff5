//! C++ exception tables: the language-specific data area (LSDA, in `.gcc_except_table`) that a
//! function's FDE points to through its augmentation data, read the way BOLT's `parseLSDA`
//! reads it for building CFGs.
//!
//! An LSDA starts with a header (landing-pad base encoding and value, type-table encoding and
//! offset, call-site encoding and table length) followed by the call-site table. Each call site
//! is a range of the function (offset and length from the function start), a landing pad
//! (relative to the landing-pad base, 0 for none) and an action-table index. Only the call-site
//! table matters for control flow; the action and type tables are not decoded.
//!
//! Reading is bounded by the section holding the LSDA; every failure names the LSDA and the
//! file offset of the field ([`Error::Lsda`], [`Error::LsdaEncoding`]).

use pcmap_bytes::Cursor;

use crate::{Binary, Error, Result};

/// `DW_EH_PE_omit`: the field is absent.
const DW_EH_PE_OMIT: u8 = 0xff;

/// One entry of an LSDA's call-site table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSite {
    /// Start of the range, as an offset from the function start.
    pub start: u64,
    /// Length of the range in bytes.
    pub length: u64,
    /// Address of the landing pad (the landing-pad base plus the table's value), or 0 when the
    /// range has none.
    pub landing_pad: u64,
    /// Index into the action table plus one (0: no action, a cleanup-free range).
    pub action: u64,
}

/// A function's LSDA: its call-site table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lsda {
    /// Address of the LSDA.
    pub address: u64,
    /// Base address landing pads are relative to (the function start unless the header says
    /// otherwise).
    pub landing_pad_base: u64,
    /// Call sites in table order.
    pub call_sites: Vec<CallSite>,
}

impl Binary<'_> {
    /// `(function start, LSDA address)` of every FDE whose augmentation data names an LSDA,
    /// sorted by function start (parsing `.eh_frame` stops at the first malformed entry, as for
    /// [`Binary::fde_ranges`]).
    pub fn fde_lsdas(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = self
            .fdes()
            .into_iter()
            .filter_map(|(start, _, lsda)| Some((start, lsda?)))
            .collect();
        out.sort_unstable();
        out
    }

    /// Read the LSDA at `address` of the function starting at `function`.
    pub fn lsda(&self, address: u64, function: u64) -> Result<Lsda> {
        let section = self
            .sections()
            .iter()
            .find(|s| {
                s.address != 0
                    && s.sh_type != crate::section::SHT_NOBITS
                    && address >= s.address
                    && address - s.address < s.raw.len() as u64
            })
            .ok_or_else(|| Error::NoBytes {
                what: format!("LSDA of the function at {function:#x}"),
                address,
            })?;
        let mut c = Cursor::new(section.raw, section.offset as usize).with_endian(self.endian());
        // In bounds: checked when the section was found.
        c.set_pos((address - section.address) as usize);
        let reader = Reader {
            lsda: address,
            section_address: section.address,
            pointer_size: self.address_size(),
        };
        let lp_encoding = reader.u8(&mut c, "landing-pad base encoding")?;
        let landing_pad_base = if lp_encoding == DW_EH_PE_OMIT {
            function
        } else {
            reader.pointer(&mut c, lp_encoding, "landing-pad base")?
        };
        let type_encoding = reader.u8(&mut c, "type-table encoding")?;
        if type_encoding != DW_EH_PE_OMIT {
            reader.uleb(&mut c, "type-table offset")?;
        }
        let site_encoding = reader.u8(&mut c, "call-site encoding")?;
        let table_length = reader.uleb(&mut c, "call-site table length")?;
        let table_start = c.pos();
        let table_end = usize::try_from(table_length)
            .ok()
            .and_then(|l| table_start.checked_add(l))
            .filter(|&e| e <= c.data().len())
            .ok_or_else(|| Error::Lsda {
                lsda: address,
                field: "call-site table length",
                source: pcmap_bytes::Error {
                    offset: c.offset(),
                    kind: pcmap_bytes::ErrorKind::UnexpectedEnd {
                        needed: usize::try_from(table_length).unwrap_or(usize::MAX),
                        available: c.remaining(),
                    },
                },
            })?;
        let mut call_sites = Vec::new();
        while c.pos() < table_end {
            let start = reader.pointer(&mut c, site_encoding, "call-site start")?;
            let length = reader.pointer(&mut c, site_encoding, "call-site length")?;
            let pad = reader.pointer(&mut c, site_encoding, "call-site landing pad")?;
            let action = reader.uleb(&mut c, "call-site action")?;
            call_sites.push(CallSite {
                start,
                length,
                landing_pad: if pad == 0 {
                    0
                } else {
                    pad.wrapping_add(landing_pad_base)
                },
                action,
            });
        }
        Ok(Lsda {
            address,
            landing_pad_base,
            call_sites,
        })
    }
}

/// Field reader for one LSDA (names the LSDA in every error).
struct Reader {
    lsda: u64,
    section_address: u64,
    pointer_size: u8,
}

impl Reader {
    fn err(&self, field: &'static str) -> impl FnOnce(pcmap_bytes::Error) -> Error + '_ {
        move |source| Error::Lsda {
            lsda: self.lsda,
            field,
            source,
        }
    }

    fn u8(&self, c: &mut Cursor<'_>, field: &'static str) -> Result<u8> {
        c.read_u8().map_err(self.err(field))
    }

    fn uleb(&self, c: &mut Cursor<'_>, field: &'static str) -> Result<u64> {
        c.read_uleb128().map_err(self.err(field))
    }

    /// A `DW_EH_PE_*`-encoded pointer: absolute or relative to the field's own address.
    fn pointer(&self, c: &mut Cursor<'_>, encoding: u8, field: &'static str) -> Result<u64> {
        let unsupported = || Error::LsdaEncoding {
            lsda: self.lsda,
            field,
            encoding,
        };
        let at = self.section_address.wrapping_add(c.pos() as u64);
        let e = self.err(field);
        let value = match encoding & 0x0f {
            0x00 if self.pointer_size == 8 => c.read_u64().map_err(e)?,
            0x00 => u64::from(c.read_u32().map_err(e)?),
            0x01 => c.read_uleb128().map_err(e)?,
            0x02 => u64::from(c.read_u16().map_err(e)?),
            0x03 => u64::from(c.read_u32().map_err(e)?),
            0x04 | 0x0c => c.read_u64().map_err(e)?,
            0x09 => c.read_sleb128().map_err(e)? as u64,
            0x0a => c.read_u16().map_err(e)? as i16 as u64,
            0x0b => c.read_u32().map_err(e)? as i32 as u64,
            _ => return Err(unsupported()),
        };
        match encoding & 0xf0 {
            0x00 => Ok(value),
            0x10 => Ok(at.wrapping_add(value)),
            _ => Err(unsupported()),
        }
    }
}
