//! pcmap's compact encoding. Everything after the 6-byte prefix is ULEB128/SLEB128:
//!
//! ```text
//! "PCIL" u8 version=1 u8 flags=0
//! locations:  count, then per location: u8 tag (bits 0-3 variant: 0 const, 1 addr, 2 reg,
//!             3 reg pair, 4 reg+offset, 5 *(reg+offset); bit 4 signed), size, operands
//! lists:      count, then per list: n, n x (location index + 1, 0 = no location)
//! variants:   count, then per (function, list) pair: FUNC type id, list index
//!             (sorted by how many sites use them, so common ones get 1-byte indices)
//! sections:   count, then per section: name length, name, site count, and per site sorted
//!             by offset: offset delta from the previous site, variant index
//! ```
//! The per-site cost is a delta (1-2 bytes) and a variant index (1-2 bytes) instead of the
//! 12-16 bytes of a `btf_loc`. FUNC ids refer to the same split BTF as the other encodings.

use rustc_hash::FxHashMap;

use crate::encoding::{Dedup, Encoded, Format, Prepared, func_name};
use crate::error::{Cursor, Error, Result};
use crate::model::{DecodedSite, Loc, ParamLoc, SiteSet};
use crate::reader::Btf;
use pcmap_bytes::leb128::{write_sleb128 as put_sleb, write_uleb128 as put_uleb};

/// Magic bytes.
pub const MAGIC: &[u8; 4] = b"PCIL";
/// Version.
pub const VERSION: u8 = 1;

fn put_loc(out: &mut Vec<u8>, p: &ParamLoc) {
    let (variant, a, b): (u8, u64, Option<i64>) = match p.loc {
        Loc::Const(v) => (0, v, None),
        Loc::Addr(v) => (1, v, None),
        Loc::Reg(r) => (2, r.into(), None),
        Loc::RegPair(r, s) => (3, r.into(), Some(s.into())),
        Loc::RegOffset { reg, offset } => (4, reg.into(), Some(offset.into())),
        Loc::Deref { reg, offset } => (5, reg.into(), Some(offset.into())),
    };
    out.push(variant | (u8::from(p.signed) << 4));
    put_uleb(out, p.size.into());
    put_uleb(out, a);
    match (variant, b) {
        (3, Some(b)) => put_uleb(out, b as u64),
        (_, Some(b)) => put_sleb(out, b),
        _ => {}
    }
}

fn get_loc(c: &mut Cursor<'_>) -> Result<ParamLoc> {
    let at = c.offset();
    let tag = c.u8("location tag")?;
    let size = u32::try_from(c.uleb("location size")?)
        .map_err(|_| Error::invalid("location size", at + 1, "exceeds 32 bits"))?;
    let a = c.uleb("location operand")?;
    let reg = |v: u64| {
        u32::try_from(v).map_err(|_| Error::invalid("location register", at, "exceeds 32 bits"))
    };
    let off = |v: i64| {
        i32::try_from(v).map_err(|_| Error::invalid("location offset", at, "exceeds 32 bits"))
    };
    let loc = match tag & 0x0f {
        0 => Loc::Const(a),
        1 => Loc::Addr(a),
        2 => Loc::Reg(reg(a)?),
        3 => Loc::RegPair(reg(a)?, reg(c.uleb("location register")?)?),
        4 => Loc::RegOffset {
            reg: reg(a)?,
            offset: off(c.sleb("location offset")?)?,
        },
        5 => Loc::Deref {
            reg: reg(a)?,
            offset: off(c.sleb("location offset")?)?,
        },
        v => {
            return Err(Error::invalid(
                "location tag",
                at,
                format!("unknown variant {v}"),
            ));
        }
    };
    if tag & 0xe0 != 0 {
        return Err(Error::invalid(
            "location tag",
            at,
            format!("reserved bits set in {tag:#x}"),
        ));
    }
    Ok(ParamLoc {
        size,
        signed: tag & 0x10 != 0,
        loc,
    })
}

pub(crate) fn encode(p: Prepared, set: &SiteSet) -> Result<Encoded> {
    let Prepared {
        writer,
        func_ids,
        sites,
        mut stats,
    } = p;
    let types = writer.finish();
    let mut locs: Dedup<ParamLoc> = Dedup::new();
    let mut lists: Dedup<Vec<u32>> = Dedup::new();
    let mut variants: Dedup<(u32, u32)> = Dedup::new();
    let mut uses: Vec<u32> = Vec::new();
    let mut site_variant = Vec::with_capacity(sites.len());
    for s in &sites {
        let list: Vec<u32> = s
            .params
            .iter()
            .map(|p| p.map_or(0, |p| locs.insert(&p) as u32 + 1))
            .collect();
        let li = lists.insert(&list) as u32;
        let (func, _) = func_ids[s.func].expect("prepared sites have FUNC ids");
        let v = variants.insert(&(func, li));
        if v == uses.len() {
            uses.push(0);
        }
        uses[v] += 1;
        site_variant.push(v);
    }
    // Renumber variants by descending use.
    let mut order: Vec<usize> = (0..variants.items.len()).collect();
    order.sort_by_key(|&v| (std::cmp::Reverse(uses[v]), v));
    let mut rank = vec![0usize; order.len()];
    for (r, &v) in order.iter().enumerate() {
        rank[v] = r;
    }
    let mut out = Vec::with_capacity(sites.len() * 4 + 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[VERSION, 0]);
    put_uleb(&mut out, locs.items.len() as u64);
    for l in &locs.items {
        put_loc(&mut out, l);
    }
    put_uleb(&mut out, lists.items.len() as u64);
    for l in &lists.items {
        put_uleb(&mut out, l.len() as u64);
        for &i in l {
            put_uleb(&mut out, i.into());
        }
    }
    put_uleb(&mut out, order.len() as u64);
    for &v in &order {
        let (f, l) = variants.items[v];
        put_uleb(&mut out, f.into());
        put_uleb(&mut out, l.into());
    }
    let mut by_section: FxHashMap<usize, Vec<(u32, usize)>> = FxHashMap::default();
    for (s, &v) in sites.iter().zip(&site_variant) {
        by_section
            .entry(s.section)
            .or_default()
            .push((s.offset, rank[v]));
    }
    let mut secs: Vec<_> = by_section.into_iter().collect();
    secs.sort_by_key(|(i, _)| *i);
    put_uleb(&mut out, secs.len() as u64);
    for (i, recs) in &secs {
        let name = set.sections[*i].name.as_bytes();
        put_uleb(&mut out, name.len() as u64);
        out.extend_from_slice(name);
        put_uleb(&mut out, recs.len() as u64);
        let mut prev = 0u32;
        for &(off, v) in recs {
            put_uleb(&mut out, (off - prev).into());
            put_uleb(&mut out, v as u64);
            prev = off;
        }
    }
    stats.distinct_locations = locs.items.len();
    stats.distinct_location_lists = lists.items.len();
    Ok(Encoded {
        format: Format::Compact,
        blob: out,
        types,
        stats,
    })
}

/// A parsed compact blob.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactBlob {
    /// Distinct locations.
    pub locations: Vec<ParamLoc>,
    /// Distinct lists of (location index + 1, 0 = none).
    pub lists: Vec<Vec<u32>>,
    /// (FUNC id, list index) pairs.
    pub variants: Vec<(u32, u32)>,
    /// Per section: name and (offset, variant index) of each site.
    pub sections: Vec<(String, Vec<(u32, u32)>)>,
}

impl CompactBlob {
    /// Parse and check every index.
    pub fn parse(data: &[u8]) -> Result<CompactBlob> {
        let mut c = Cursor::new(data, 0, false);
        let magic = c.bytes(4, "magic")?;
        if magic != MAGIC {
            return Err(Error::invalid(
                "magic",
                0,
                format!("{magic:02x?}, expected \"PCIL\""),
            ));
        }
        let version = c.u8("version")?;
        if version != VERSION {
            return Err(Error::invalid(
                "version",
                4,
                format!("{version}, expected {VERSION}"),
            ));
        }
        c.u8("flags")?;
        let mut b = CompactBlob::default();
        let n = c.count(3, "location count")?;
        for _ in 0..n {
            b.locations.push(get_loc(&mut c)?);
        }
        let n = c.count(1, "list count")?;
        for _ in 0..n {
            let len = c.count(1, "list length")?;
            let mut l = Vec::with_capacity(len);
            for _ in 0..len {
                let at = c.offset();
                let i = c.uleb("list entry")?;
                if i > b.locations.len() as u64 {
                    return Err(Error::invalid(
                        "list entry",
                        at,
                        format!("location {i} of {}", b.locations.len()),
                    ));
                }
                l.push(i as u32);
            }
            b.lists.push(l);
        }
        let n = c.count(2, "variant count")?;
        for _ in 0..n {
            let at = c.offset();
            let f = c.uleb("variant func")?;
            let l = c.uleb("variant list")?;
            if l >= b.lists.len() as u64 || f > u64::from(u32::MAX) {
                return Err(Error::invalid(
                    "variant",
                    at,
                    format!("func {f} / list {l} out of range"),
                ));
            }
            b.variants.push((f as u32, l as u32));
        }
        let n = c.count(2, "section count")?;
        for _ in 0..n {
            let len = c.count(1, "section name length")?;
            let at = c.offset();
            let name = std::str::from_utf8(c.bytes(len, "section name")?)
                .map_err(|_| Error::invalid("section name", at, "not UTF-8"))?
                .to_string();
            let count = c.count(2, "site count")?;
            let mut sites = Vec::with_capacity(count);
            let mut off = 0u64;
            for _ in 0..count {
                let at = c.offset();
                off = off.saturating_add(c.uleb("site offset delta")?);
                let v = c.uleb("site variant")?;
                if off > u64::from(u32::MAX) || v >= b.variants.len() as u64 {
                    return Err(Error::invalid(
                        "site",
                        at,
                        format!("offset {off:#x} / variant {v} out of range"),
                    ));
                }
                sites.push((off as u32, v as u32));
            }
            b.sections.push((name, sites));
        }
        if c.remaining() != 0 {
            return Err(Error::invalid(
                "blob",
                c.offset(),
                format!("{} trailing bytes", c.remaining()),
            ));
        }
        Ok(b)
    }

    /// The parameter locations of list `i`.
    pub fn list(&self, i: u32) -> Vec<Option<ParamLoc>> {
        self.lists
            .get(i as usize)
            .map(|l| {
                l.iter()
                    .map(|&j| {
                        j.checked_sub(1)
                            .and_then(|j| self.locations.get(j as usize).copied())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Decode every site; function names come from `names` (base plus the split types).
pub fn decode(blob: &[u8], names: &Btf<'_>) -> Result<Vec<DecodedSite>> {
    let b = CompactBlob::parse(blob)?;
    let mut func_names = FxHashMap::default();
    let mut out = Vec::new();
    for (sec, sites) in &b.sections {
        for &(off, v) in sites {
            let (f, l) = b.variants[v as usize];
            let name = match func_names.get(&f) {
                Some(n) => String::clone(n),
                None => {
                    let n = func_name(names, f, 0)?;
                    func_names.insert(f, n.clone());
                    n
                }
            };
            out.push(DecodedSite {
                section: sec.clone(),
                offset: off.into(),
                func: name,
                params: b.list(l),
            });
        }
    }
    Ok(out)
}
