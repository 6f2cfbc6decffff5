//! The October-2025 RFC kinds: `LOC_PARAM` (kind 20) with an 8-byte
//! `btf_loc_param{u16 reg, u16 flags, s32 offset | u32 val_lo, val_hi}` and a signed size,
//! `LOC_PROTO` (21) pointing at the FUNC_PROTO, and `LOCSEC` (22) with 16-byte
//! `btf_loc{name_off, func_proto, loc_proto, offset}` records. No layout section: parsers that
//! do not know kinds 20-22 reject the blob.

use crate::encoding::{Dedup, Encoded, Format, Prepared, locsec_name};
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::model::{FRAME_BASE_REG, Loc, ParamLoc, SiteSet};
use crate::reader::{Btf, TypeRecord};

/// `*(reg + offset)`.
pub const BTF_LOC_FLAG_REG_DEREF: u16 = 0x1;
/// The next LOC_PARAM belongs to the same argument (value in two registers).
pub const BTF_LOC_FLAG_CONTINUE: u16 = 0x2;
/// Register number standing for the frame base (16-bit field).
pub const FRAME_BASE_REG16: u16 = 0xffff;
/// Largest vlen of the classic 16-bit encoding.
pub const MAX_VLEN: usize = 0xffff;

fn reg16(r: u32) -> Option<u16> {
    if r == FRAME_BASE_REG {
        Some(FRAME_BASE_REG16)
    } else {
        u16::try_from(r).ok().filter(|&r| r != FRAME_BASE_REG16)
    }
}

fn reg32(r: u16) -> u32 {
    if r == FRAME_BASE_REG16 {
        FRAME_BASE_REG
    } else {
        u32::from(r)
    }
}

pub(crate) fn project(p: ParamLoc) -> Option<ParamLoc> {
    // Size is stored as a signed 32-bit "negative = signed" value.
    let size = i32::try_from(p.size).ok()?;
    let signed = p.signed && size != 0;
    let loc = match p.loc {
        Loc::Addr(a) => Loc::Const(a),
        Loc::Reg(r) => {
            reg16(r)?;
            Loc::Reg(r)
        }
        Loc::RegPair(a, b) => {
            reg16(a)?;
            reg16(b)?;
            if a == FRAME_BASE_REG || b == FRAME_BASE_REG {
                return None;
            }
            Loc::RegPair(a, b)
        }
        Loc::RegOffset { reg, offset } => {
            reg16(reg)?;
            Loc::RegOffset { reg, offset }
        }
        Loc::Deref { reg, offset } => {
            reg16(reg)?;
            Loc::Deref { reg, offset }
        }
        c @ Loc::Const(_) => c,
    };
    Some(
        ParamLoc {
            size: size as u32,
            signed,
            loc,
        }
        .canonical(),
    )
}

fn size_word(p: &ParamLoc) -> u32 {
    if p.signed {
        (p.size as i32).wrapping_neg() as u32
    } else {
        p.size
    }
}

/// (kflag, size word, two payload words) of the records of one location (two for a register pair).
fn records_of(p: &ParamLoc) -> Vec<(bool, u32, [u32; 2])> {
    let size = size_word(p);
    let reg = |r: u32, fl: u16, off: i32| {
        (
            false,
            size,
            [
                u32::from(reg16(r).unwrap_or(0)) | (u32::from(fl) << 16),
                off as u32,
            ],
        )
    };
    match p.loc {
        Loc::Const(v) | Loc::Addr(v) => vec![(true, size, [v as u32, (v >> 32) as u32])],
        Loc::Reg(r) => vec![reg(r, 0, 0)],
        Loc::RegOffset { reg: r, offset } => vec![reg(r, 0, offset)],
        Loc::Deref { reg: r, offset } => vec![reg(r, BTF_LOC_FLAG_REG_DEREF, offset)],
        Loc::RegPair(a, b) => vec![reg(a, BTF_LOC_FLAG_CONTINUE, 0), reg(b, 0, 0)],
    }
}

/// Decode the location that starts at `rec` (reading the next record for a CONTINUE pair).
pub(crate) fn loc_param_from_record(btf: &Btf<'_>, rec: &TypeRecord<'_>) -> Result<ParamLoc> {
    let size_i = rec.size_or_type as i32;
    let (size, signed) = (size_i.unsigned_abs(), size_i < 0);
    let (w0, w1) = (rec.fixed_word(0), rec.fixed_word(1));
    if rec.kflag() {
        return Ok(ParamLoc {
            size,
            signed,
            loc: Loc::Const(u64::from(w0) | (u64::from(w1) << 32)),
        });
    }
    let reg = reg32((w0 & 0xffff) as u16);
    let fl = (w0 >> 16) as u16;
    let offset = w1 as i32;
    let loc = match fl {
        0 if offset == 0 => Loc::Reg(reg),
        0 => Loc::RegOffset { reg, offset },
        BTF_LOC_FLAG_REG_DEREF => Loc::Deref { reg, offset },
        BTF_LOC_FLAG_CONTINUE if offset == 0 => {
            let next = rec.id.checked_add(1).and_then(|id| btf.record(id).ok());
            match next {
                Some(n)
                    if n.kind() == Kind::LOC_PARAM
                        && !n.kflag()
                        && n.fixed_word(0) >> 16 == 0
                        && n.fixed_word(1) == 0 =>
                {
                    Loc::RegPair(reg, reg32((n.fixed_word(0) & 0xffff) as u16))
                }
                _ => {
                    return Err(Error::invalid(
                        "btf_loc_param.flags",
                        rec.offset + 12,
                        "CONTINUE without a following register LOC_PARAM",
                    ));
                }
            }
        }
        other => {
            return Err(Error::invalid(
                "btf_loc_param.flags",
                rec.offset + 12,
                format!("unsupported flags {other:#x}"),
            ));
        }
    };
    Ok(ParamLoc { size, signed, loc })
}

pub(crate) fn encode(p: Prepared, set: &SiteSet) -> Result<Encoded> {
    let Prepared {
        mut writer,
        func_ids,
        sites,
        mut stats,
    } = p;
    let types = writer.finish();
    let mut locs: Dedup<ParamLoc> = Dedup::new();
    let mut loc_ids: Vec<u32> = Vec::new();
    let mut lists: Dedup<(u32, Vec<u32>)> = Dedup::new();
    let mut list_ids: Vec<u32> = Vec::new();
    let mut records: Vec<Vec<[u32; 4]>> = vec![Vec::new(); set.sections.len()];
    for s in &sites {
        let mut ids = Vec::with_capacity(s.params.len());
        for p in &s.params {
            ids.push(match p {
                None => 0,
                Some(p) => {
                    let i = locs.insert(p);
                    if i == loc_ids.len() {
                        let mut first = 0;
                        for (j, (kflag, size, w)) in records_of(p).into_iter().enumerate() {
                            let id = writer.add_raw(0, Kind::LOC_PARAM, kflag, 0, size, &w)?;
                            if j == 0 {
                                first = id;
                            }
                        }
                        loc_ids.push(first);
                    }
                    loc_ids[i]
                }
            });
        }
        let (func, proto) = func_ids[s.func].expect("prepared sites have FUNC ids");
        let key = (proto, ids);
        let li = lists.insert(&key);
        if li == list_ids.len() {
            list_ids.push(writer.add_raw(
                0,
                Kind::LOC_PROTO,
                false,
                key.1.len() as u32,
                proto,
                &key.1,
            )?);
        }
        let name = writer.add_str(&set.funcs[s.func].name);
        let _ = func;
        records[s.section].push([name, proto, list_ids[li], s.offset]);
    }
    for (sec, recs) in set.sections.iter().zip(&records) {
        if recs.is_empty() {
            continue;
        }
        let name = writer.add_str(&locsec_name(&sec.name));
        for chunk in recs.chunks(MAX_VLEN) {
            let words: Vec<u32> = chunk.iter().flatten().copied().collect();
            writer.add_raw(name, Kind::LOCSEC, false, chunk.len() as u32, 0, &words)?;
        }
    }
    stats.distinct_locations = locs.items.len();
    stats.distinct_location_lists = lists.items.len();
    Ok(Encoded {
        format: Format::Btf2025,
        blob: writer.finish(),
        types,
        stats,
    })
}
