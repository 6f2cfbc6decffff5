//! Treyer's April-2025 `.BTF.inline` layout, byte for byte as the RFC's `inline_encoder.c` writes
//! it (little-endian):
//!
//! ```text
//! header (24 B): u16 magic 0xeb9f, u8 version 1, u8 flags, u32 header_length,
//!                u32 inline_info_offset, u32 inline_info_length,   (offsets from the blob start)
//!                u32 location_offset, u32 location_length
//! inline info:   per site, unaligned: u64 insn_offset (the site address), u32 type_id (FUNC),
//!                u16 param_count, u32 param_location[param_count] (0 = no location)
//! locations:     expressions of {u8 op, u8 op_size_in_bytes, operands}, each ended by op 0;
//!                the first expression is the empty one, so offset 0 means "no location".
//! ```
//! Operators: 0 END, 1-4 signed constants of 1/2/4/8 bytes, 5-8 unsigned ones, 9 REGISTER
//! `{u8 reg, s64 offset}` (value = reg + offset, as the RFC code writes it), 11 DEREF `{u8 size}`
//! (from the RFC cover letter). pcmap's conventions where the RFC is silent: register 255 is the
//! frame base, two REGISTER pushes are a value split over two registers (low part first), and
//! identical expressions are stored once.

use crate::encoding::{Dedup, Encoded, Format, Prepared, func_name};
use crate::error::{Cursor, Error, Result};
use crate::header::BTF_MAGIC;
use crate::model::{DecodedSite, FRAME_BASE_REG, Loc, ParamLoc, SiteSet};
use crate::reader::Btf;

/// Operator numbers.
#[allow(missing_docs)]
pub mod op {
    pub const END_OF_EXPR: u8 = 0;
    pub const SIGNED_CONST_1: u8 = 1;
    pub const UNSIGNED_CONST_1: u8 = 5;
    pub const REGISTER: u8 = 9;
    pub const REGISTER_OFFSET: u8 = 10;
    pub const DEREF: u8 = 11;
}

/// Register number standing for the frame base.
pub const FRAME_BASE_REG8: u8 = 0xff;
/// Header length.
pub const HEADER_LEN: u32 = 24;

fn reg8(r: u32) -> Option<u8> {
    if r == FRAME_BASE_REG {
        Some(FRAME_BASE_REG8)
    } else {
        u8::try_from(r).ok().filter(|&r| r != FRAME_BASE_REG8)
    }
}

fn reg32(r: u8) -> u32 {
    if r == FRAME_BASE_REG8 {
        FRAME_BASE_REG
    } else {
        u32::from(r)
    }
}

fn const_size(size: u32) -> u32 {
    match size {
        0 | 1 => 1,
        2 => 2,
        3 | 4 => 4,
        _ => 8,
    }
}

pub(crate) fn project(p: ParamLoc) -> Option<ParamLoc> {
    let untyped = |loc| {
        Some(ParamLoc {
            size: 0,
            signed: false,
            loc,
        })
    };
    match p.loc {
        Loc::Const(v) => Some(
            ParamLoc {
                size: const_size(p.size),
                signed: p.signed,
                loc: Loc::Const(v),
            }
            .canonical(),
        ),
        Loc::Addr(a) => Some(ParamLoc {
            size: 8,
            signed: false,
            loc: Loc::Const(a),
        }),
        Loc::Reg(r) => untyped(Loc::Reg(reg32(reg8(r)?))),
        Loc::RegOffset { reg, offset } => {
            reg8(reg)?;
            untyped(Loc::RegOffset { reg, offset })
        }
        Loc::RegPair(a, b) => {
            if a == FRAME_BASE_REG || b == FRAME_BASE_REG {
                return None;
            }
            reg8(a)?;
            reg8(b)?;
            untyped(Loc::RegPair(a, b))
        }
        Loc::Deref { reg, offset } => {
            reg8(reg)?;
            let size = u8::try_from(p.size).ok()?;
            Some(ParamLoc {
                size: u32::from(size),
                signed: false,
                loc: Loc::Deref { reg, offset },
            })
        }
    }
}

/// The expression bytes of one (projected) location, including the END operator.
pub fn expression(p: &ParamLoc) -> Vec<u8> {
    let mut e = Vec::with_capacity(16);
    let reg = |e: &mut Vec<u8>, r: u32, off: i64| {
        e.extend_from_slice(&[op::REGISTER, 11, reg8(r).unwrap_or(0)]);
        e.extend_from_slice(&off.to_le_bytes());
    };
    match p.loc {
        Loc::Const(v) | Loc::Addr(v) => {
            let n = const_size(p.size);
            let idx = match n {
                1 => 0,
                2 => 1,
                4 => 2,
                _ => 3,
            };
            let base = if p.signed {
                op::SIGNED_CONST_1
            } else {
                op::UNSIGNED_CONST_1
            };
            e.extend_from_slice(&[base + idx, 2 + n as u8]);
            e.extend_from_slice(&v.to_le_bytes()[..n as usize]);
        }
        Loc::Reg(r) => reg(&mut e, r, 0),
        Loc::RegOffset { reg: r, offset } => reg(&mut e, r, offset.into()),
        Loc::RegPair(a, b) => {
            reg(&mut e, a, 0);
            reg(&mut e, b, 0);
        }
        Loc::Deref { reg: r, offset } => {
            reg(&mut e, r, offset.into());
            e.extend_from_slice(&[op::DEREF, 3, p.size as u8]);
        }
    }
    e.extend_from_slice(&[op::END_OF_EXPR, 2]);
    e
}

pub(crate) fn encode(p: Prepared, _set: &SiteSet) -> Result<Encoded> {
    let Prepared {
        writer,
        func_ids,
        sites,
        mut stats,
    } = p;
    let types = writer.finish();
    let mut info = Vec::with_capacity(sites.len() * 20);
    let mut locations = vec![op::END_OF_EXPR, 2];
    let mut exprs: Dedup<ParamLoc> = Dedup::new();
    let mut expr_offsets: Vec<u32> = Vec::new();
    let mut lists: Dedup<Vec<u32>> = Dedup::new();
    for s in &sites {
        let (func, _) = func_ids[s.func].expect("prepared sites have FUNC ids");
        let count = u16::try_from(s.params.len()).map_err(|_| Error::Unrepresentable {
            field: "param_count",
            message: format!("{} parameters", s.params.len()),
        })?;
        info.extend_from_slice(&s.address.to_le_bytes());
        info.extend_from_slice(&func.to_le_bytes());
        info.extend_from_slice(&count.to_le_bytes());
        let mut offs = Vec::with_capacity(s.params.len());
        for p in &s.params {
            let off = match p {
                None => 0,
                Some(p) => {
                    let i = exprs.insert(p);
                    if i == expr_offsets.len() {
                        expr_offsets.push(locations.len() as u32);
                        locations.extend_from_slice(&expression(p));
                    }
                    expr_offsets[i]
                }
            };
            info.extend_from_slice(&off.to_le_bytes());
            offs.push(off);
        }
        lists.insert(&offs);
    }
    let info_len = u32::try_from(info.len()).map_err(|_| Error::Unrepresentable {
        field: "inline_info_length",
        message: "over 4 GiB".into(),
    })?;
    let mut blob = Vec::with_capacity(24 + info.len() + locations.len());
    blob.extend_from_slice(&BTF_MAGIC.to_le_bytes());
    blob.extend_from_slice(&[1, 0]);
    for w in [
        HEADER_LEN,
        HEADER_LEN,
        info_len,
        HEADER_LEN + info_len,
        locations.len() as u32,
    ] {
        blob.extend_from_slice(&w.to_le_bytes());
    }
    blob.extend_from_slice(&info);
    blob.extend_from_slice(&locations);
    stats.distinct_locations = exprs.items.len();
    stats.distinct_location_lists = lists.items.len();
    Ok(Encoded {
        format: Format::Rfc,
        blob,
        types,
        stats,
    })
}

/// The parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RfcHeader {
    /// Flags.
    pub flags: u8,
    /// Header length.
    pub header_length: u32,
    /// Offset of the inline-info section from the blob start.
    pub inline_info_offset: u32,
    /// Its length.
    pub inline_info_length: u32,
    /// Offset of the location section from the blob start.
    pub location_offset: u32,
    /// Its length.
    pub location_length: u32,
}

/// One inline-info record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RfcSite {
    /// Byte offset of the record in the blob.
    pub offset: usize,
    /// Site address.
    pub insn_offset: u64,
    /// FUNC type id.
    pub type_id: u32,
    /// Per parameter: offset of its expression in the location section (0 = none).
    pub param_locations: Vec<u32>,
}

/// A parsed `.BTF.inline` blob.
#[derive(Debug, Clone)]
pub struct RfcBlob<'a> {
    /// Header.
    pub header: RfcHeader,
    info: &'a [u8],
    info_at: usize,
    locations: &'a [u8],
    locations_at: usize,
}

impl<'a> RfcBlob<'a> {
    /// Parse the header and check the two sections' bounds.
    pub fn parse(data: &'a [u8]) -> Result<RfcBlob<'a>> {
        let mut c = Cursor::new(data, 0, false);
        let magic = c.u16("btf_inline_header.magic")?;
        if magic != BTF_MAGIC {
            return Err(Error::invalid(
                "btf_inline_header.magic",
                0,
                format!("{magic:#06x}, expected 0xeb9f"),
            ));
        }
        let version = c.u8("btf_inline_header.version")?;
        if version != 1 {
            return Err(Error::invalid(
                "btf_inline_header.version",
                2,
                format!("{version}, expected 1"),
            ));
        }
        let flags = c.u8("btf_inline_header.flags")?;
        let header = RfcHeader {
            flags,
            header_length: c.u32("btf_inline_header.header_length")?,
            inline_info_offset: c.u32("btf_inline_header.inline_info_offset")?,
            inline_info_length: c.u32("btf_inline_header.inline_info_length")?,
            location_offset: c.u32("btf_inline_header.location_offset")?,
            location_length: c.u32("btf_inline_header.location_length")?,
        };
        let sec = |off: u32, len: u32, field: &'static str| -> Result<&'a [u8]> {
            let (s, e) = (off as usize, off as usize + len as usize);
            if off < HEADER_LEN.min(header.header_length) || e > data.len() {
                return Err(Error::invalid(
                    field,
                    8,
                    format!(
                        "[{off:#x}, +{len:#x}) is outside the {}-byte blob",
                        data.len()
                    ),
                ));
            }
            Ok(&data[s..e])
        };
        let info = sec(
            header.inline_info_offset,
            header.inline_info_length,
            "btf_inline_header.inline_info",
        )?;
        let locations = sec(
            header.location_offset,
            header.location_length,
            "btf_inline_header.location",
        )?;
        Ok(RfcBlob {
            header,
            info,
            info_at: header.inline_info_offset as usize,
            locations,
            locations_at: header.location_offset as usize,
        })
    }

    /// The inline-info records.
    pub fn sites(&self) -> impl Iterator<Item = Result<RfcSite>> + '_ {
        let mut c = Cursor::new(self.info, self.info_at, false);
        let mut failed = false;
        std::iter::from_fn(move || {
            if failed || c.remaining() == 0 {
                return None;
            }
            let r = (|| {
                let offset = c.offset();
                let insn_offset = c.u64("btf_inline_instance.insn_offset")?;
                let type_id = c.u32("btf_inline_instance.type_id")?;
                let n = c.u16("btf_inline_instance.param_count")? as usize;
                if n.saturating_mul(4) > c.remaining() {
                    return Err(Error::Truncated {
                        field: "btf_inline_instance.param_location",
                        offset: c.offset(),
                        needed: n * 4,
                        available: c.remaining(),
                    });
                }
                let mut param_locations = Vec::with_capacity(n);
                for _ in 0..n {
                    param_locations.push(c.u32("btf_inline_instance.param_location")?);
                }
                Ok(RfcSite {
                    offset,
                    insn_offset,
                    type_id,
                    param_locations,
                })
            })();
            failed = r.is_err();
            Some(r)
        })
    }

    /// Decode the expression at `off` of the location section (`None` for the empty one).
    pub fn location(&self, off: u32) -> Result<Option<ParamLoc>> {
        let start = off as usize;
        if start >= self.locations.len() {
            return Err(Error::invalid(
                "param_location",
                self.locations_at,
                format!("offset {off:#x} is beyond the location section"),
            ));
        }
        let mut c = Cursor::new(&self.locations[start..], self.locations_at + start, false);
        let mut ops: Vec<(u8, &[u8], usize)> = Vec::new();
        loop {
            let at = c.offset();
            let kind = c.u8("location op")?;
            let size = c.u8("location op size")? as usize;
            if size < 2 {
                return Err(Error::invalid(
                    "location op size",
                    at + 1,
                    format!("{size} is smaller than the op header"),
                ));
            }
            let operands = c.bytes(size - 2, "location operands")?;
            if kind == op::END_OF_EXPR {
                break;
            }
            if ops.len() >= 16 {
                return Err(Error::invalid(
                    "location expression",
                    at,
                    "more than 16 operators",
                ));
            }
            ops.push((kind, operands, at));
        }
        let err = |at: usize, m: &str| Error::invalid("location expression", at, m.to_string());
        let reg = |operands: &[u8], at: usize| -> Result<(u32, i64)> {
            if operands.len() != 9 {
                return Err(err(at, "REGISTER needs 9 operand bytes"));
            }
            Ok((
                reg32(operands[0]),
                i64::from_le_bytes(operands[1..9].try_into().expect("8 bytes")),
            ))
        };
        let off32 = |o: i64, at: usize| {
            i32::try_from(o).map_err(|_| err(at, "register offset does not fit in 32 bits"))
        };
        Ok(match ops.as_slice() {
            [] => None,
            [(k @ 1..=8, operands, at)] => {
                let n = operands.len();
                if !matches!(n, 1 | 2 | 4 | 8) || 1usize << ((k - 1) % 4) != n {
                    return Err(err(
                        *at,
                        "constant operand size does not match its operator",
                    ));
                }
                let mut b = [0u8; 8];
                b[..n].copy_from_slice(operands);
                Some(ParamLoc {
                    size: n as u32,
                    signed: *k <= 4,
                    loc: Loc::Const(u64::from_le_bytes(b)),
                })
            }
            [(op::REGISTER, operands, at)] => {
                let (r, o) = reg(operands, *at)?;
                let loc = if o == 0 {
                    Loc::Reg(r)
                } else {
                    Loc::RegOffset {
                        reg: r,
                        offset: off32(o, *at)?,
                    }
                };
                Some(ParamLoc {
                    size: 0,
                    signed: false,
                    loc,
                })
            }
            [(op::REGISTER, a, at_a), (op::REGISTER, b, at_b)] => {
                let (ra, oa) = reg(a, *at_a)?;
                let (rb, ob) = reg(b, *at_b)?;
                if oa != 0 || ob != 0 {
                    return Err(err(*at_a, "register pair with offsets"));
                }
                Some(ParamLoc {
                    size: 0,
                    signed: false,
                    loc: Loc::RegPair(ra, rb),
                })
            }
            [(op::REGISTER, a, at), (op::DEREF, d, at_d)] => {
                let (r, o) = reg(a, *at)?;
                let &[size] = *d else {
                    return Err(err(*at_d, "DEREF needs one operand byte"));
                };
                Some(ParamLoc {
                    size: u32::from(size),
                    signed: false,
                    loc: Loc::Deref {
                        reg: r,
                        offset: off32(o, *at)?,
                    },
                })
            }
            [(_, _, at), ..] => {
                return Err(err(*at, "operator sequence not supported by this decoder"));
            }
        })
    }
}

/// Decode every site; function names come from `names` (base plus the split types).
pub fn decode(blob: &[u8], names: &Btf<'_>) -> Result<Vec<DecodedSite>> {
    let b = RfcBlob::parse(blob)?;
    let mut out = Vec::new();
    for s in b.sites() {
        let s = s?;
        let func = func_name(names, s.type_id, s.offset + 8)?;
        let params = s
            .param_locations
            .iter()
            .map(|&o| if o == 0 { Ok(None) } else { b.location(o) })
            .collect::<Result<Vec<_>>>()?;
        out.push(DecodedSite {
            section: String::new(),
            offset: s.insn_offset,
            func,
            params,
        });
    }
    Ok(out)
}
