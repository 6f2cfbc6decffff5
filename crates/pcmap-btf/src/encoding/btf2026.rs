//! The 2026 revision: `LOC_PARAM` (kind 20) with `u32 flags` and `vlen` 4-byte values,
//! `LOC_PROTO` (21) listing LOC_PARAM ids, `LOCSEC` (22) per code section with 12-byte
//! `{func, loc_proto, offset}` records, and a layout section so layout-aware parsers can skip
//! the new kinds.

use crate::encoding::{
    Dedup, EncodeStats, Encoded, Format, Prepared, func_name, locsec_name, section_of_locsec,
};
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::layout::Layout;
use crate::model::{DecodedSite, FRAME_BASE_REG, Loc, ParamLoc, SiteSet};
use crate::reader::{Btf, LocFlavor, TypeRecord};

/// `btf_loc_param` flags of the 2026 revision.
pub mod flags {
    /// The value is signed.
    pub const SIGNED: u32 = 0x1;
    /// The value is a constant.
    pub const CONST: u32 = 0x2;
    /// The constant is an address (relocate with the load base).
    pub const ADDR: u32 = 0x4;
    /// Register (1 value) or register pair (2 values).
    pub const REG: u32 = 0x8;
    /// Dereference.
    pub const DEREF: u32 = 0x10;
    /// Second value is a signed offset.
    pub const OFFSET: u32 = 0x20;
}

/// Largest LOCSEC vlen (24 bits).
pub const MAX_VLEN: usize = 0x00ff_ffff;

pub(crate) fn project(p: ParamLoc) -> Option<ParamLoc> {
    Some(p)
}

/// (flags, values) of one location.
pub fn loc_param_words(p: &ParamLoc) -> (u32, Vec<u32>) {
    use flags::*;
    let sign = if p.signed { SIGNED } else { 0 };
    match p.loc {
        Loc::Const(v) => {
            if v >> 32 == 0 {
                (sign | CONST, vec![v as u32])
            } else {
                (sign | CONST, vec![v as u32, (v >> 32) as u32])
            }
        }
        Loc::Addr(a) => (sign | CONST | ADDR, vec![a as u32, (a >> 32) as u32]),
        Loc::Reg(r) => (sign | REG, vec![r]),
        Loc::RegPair(a, b) => (sign | REG, vec![a, b]),
        Loc::RegOffset { reg, offset } => (sign | REG | OFFSET, vec![reg, offset as u32]),
        Loc::Deref { reg, offset: 0 } => (sign | REG | DEREF, vec![reg]),
        Loc::Deref { reg, offset } => (sign | REG | DEREF | OFFSET, vec![reg, offset as u32]),
    }
}

/// Inverse of [`loc_param_words`].
pub fn loc_param_from_words(size: u32, fl: u32, values: &[u32], offset: usize) -> Result<ParamLoc> {
    use flags::*;
    let signed = fl & SIGNED != 0;
    let bad = || {
        Error::invalid(
            "btf_loc_param",
            offset,
            format!("flags {fl:#x} with {} values", values.len()),
        )
    };
    let loc = match (fl & !SIGNED, values) {
        (f, [lo]) if f == CONST => Loc::Const(u64::from(*lo)),
        (f, [lo, hi]) if f == CONST => Loc::Const(u64::from(*lo) | (u64::from(*hi) << 32)),
        (f, [lo]) if f == CONST | ADDR => Loc::Addr(u64::from(*lo)),
        (f, [lo, hi]) if f == CONST | ADDR => Loc::Addr(u64::from(*lo) | (u64::from(*hi) << 32)),
        (f, [r]) if f == REG => Loc::Reg(*r),
        (f, [a, b]) if f == REG => Loc::RegPair(*a, *b),
        (f, [r, o]) if f == REG | OFFSET => Loc::RegOffset {
            reg: *r,
            offset: *o as i32,
        },
        (f, [r]) if f == REG | DEREF => Loc::Deref { reg: *r, offset: 0 },
        (f, [r, o]) if f == REG | DEREF | OFFSET => Loc::Deref {
            reg: *r,
            offset: *o as i32,
        },
        _ => return Err(bad()),
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
    writer.set_layout(Some(Layout::revision_2026()));
    // Locations, deduplicated.
    let mut locs: Dedup<ParamLoc> = Dedup::new();
    let mut loc_ids: Vec<u32> = Vec::new();
    let mut lists: Dedup<Vec<u32>> = Dedup::new();
    let mut list_ids: Vec<u32> = Vec::new();
    let mut records: Vec<Vec<(u32, u32, u32)>> = vec![Vec::new(); set.sections.len()];
    for s in &sites {
        let mut ids = Vec::with_capacity(s.params.len());
        for p in &s.params {
            ids.push(match p {
                None => 0,
                Some(p) => {
                    let i = locs.insert(p);
                    if i == loc_ids.len() {
                        let (fl, values) = loc_param_words(p);
                        loc_ids.push(writer.add_raw(
                            0,
                            Kind::LOC_PARAM,
                            false,
                            values.len() as u32,
                            p.size,
                            &[&[fl][..], &values].concat(),
                        )?);
                    }
                    loc_ids[i]
                }
            });
        }
        let li = lists.insert(&ids);
        if li == list_ids.len() {
            list_ids.push(writer.add_raw(0, Kind::LOC_PROTO, false, ids.len() as u32, 0, &ids)?);
        }
        let (func, _) = func_ids[s.func].expect("prepared sites have FUNC ids");
        records[s.section].push((func, list_ids[li], s.offset));
    }
    for (sec, recs) in set.sections.iter().zip(&records) {
        if recs.is_empty() {
            continue;
        }
        let name = writer.add_str(&locsec_name(&sec.name));
        for chunk in recs.chunks(MAX_VLEN) {
            let words: Vec<u32> = chunk.iter().flat_map(|&(f, l, o)| [f, l, o]).collect();
            writer.add_raw(name, Kind::LOCSEC, false, chunk.len() as u32, 0, &words)?;
        }
    }
    stats.distinct_locations = locs.items.len();
    stats.distinct_location_lists = lists.items.len();
    Ok(Encoded {
        format: Format::Btf2026,
        blob: writer.finish(),
        types,
        stats: EncodeStats { ..stats },
    })
}

/// The parameter locations of a LOC_PROTO record (either revision).
pub(crate) fn loc_proto_params(
    btf: &Btf<'_>,
    proto: &TypeRecord<'_>,
) -> Result<Vec<Option<ParamLoc>>> {
    let mut out = Vec::with_capacity(proto.elem_count());
    for i in 0..proto.elem_count() {
        let id = proto.elem_word(i, 0);
        if id == 0 {
            out.push(None);
            continue;
        }
        let at = proto.offset + 12 + 4 * i;
        let rec = btf.record(id).map_err(|_| {
            Error::invalid("LOC_PROTO param id", at, format!("{id} does not exist"))
        })?;
        if rec.kind() != Kind::LOC_PARAM {
            return Err(Error::invalid(
                "LOC_PROTO param id",
                at,
                format!("[{id}] is {}, not LOC_PARAM", rec.kind().name()),
            ));
        }
        out.push(Some(match btf.loc_flavor() {
            LocFlavor::Rev2026 => {
                let values: Vec<u32> = (0..rec.elem_count()).map(|j| rec.elem_word(j, 0)).collect();
                loc_param_from_words(rec.size_or_type, rec.fixed_word(0), &values, rec.offset)?
            }
            LocFlavor::Oct2025 => crate::encoding::btf2025::loc_param_from_record(btf, &rec)?,
        }));
    }
    Ok(out)
}

/// Decode every LOCSEC of a split BTF blob, in either revision.
pub fn decode_any(btf: &Btf<'_>) -> Result<Vec<DecodedSite>> {
    let mut out = Vec::new();
    for rec in btf.own_records() {
        let rec = rec?;
        if rec.kind() != Kind::LOCSEC {
            continue;
        }
        let section = section_of_locsec(btf.name_of(&rec)?.unwrap_or(""));
        for i in 0..rec.elem_count() {
            let at = rec.offset + 12 + i * rec.elem_sz;
            let (func, proto_id, offset) = match btf.loc_flavor() {
                LocFlavor::Rev2026 => (
                    func_name(btf, rec.elem_word(i, 0), at)?,
                    rec.elem_word(i, 1),
                    rec.elem_word(i, 2),
                ),
                LocFlavor::Oct2025 => (
                    btf.string(rec.elem_word(i, 0))?.to_string(),
                    rec.elem_word(i, 2),
                    rec.elem_word(i, 3),
                ),
            };
            let proto = btf.record(proto_id).map_err(|_| {
                Error::invalid(
                    "btf_loc.loc_proto",
                    at,
                    format!("{proto_id} does not exist"),
                )
            })?;
            if proto.kind() != Kind::LOC_PROTO {
                return Err(Error::invalid(
                    "btf_loc.loc_proto",
                    at,
                    format!("[{proto_id}] is {}, not LOC_PROTO", proto.kind().name()),
                ));
            }
            let params = loc_proto_params(btf, &proto)?;
            out.push(DecodedSite {
                section: section.clone(),
                offset: u64::from(offset),
                func,
                params,
            });
        }
    }
    Ok(out)
}

/// Whether `r` is the frame-base pseudo register.
pub fn is_frame_base(r: u32) -> bool {
    r == FRAME_BASE_REG
}
