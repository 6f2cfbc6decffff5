//! bpftool-style text for the inline-site encodings: which encoding a blob is in, its records
//! (`.BTF.inline` and compact; the BTF encodings print through [`crate::raw::dump_raw`]) and
//! decoded sites.

use std::fmt::Write as _;

use crate::encoding::{compact::CompactBlob, rfc::RfcBlob};
use crate::model::FRAME_BASE_REG;
use crate::{Btf, DecodedSite, Format, Loc, ParamLoc, Result};

/// Which encoding a raw blob is in: compact by magic, RFC by its header (inline info right after
/// a 24-byte header), otherwise BTF (2026 when it has a layout section).
pub fn detect(blob: &[u8]) -> Format {
    if blob.starts_with(crate::encoding::compact::MAGIC) {
        return Format::Compact;
    }
    let word = |i: usize| {
        blob.get(i..i + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_le_bytes)
    };
    if word(4) == Some(24) && word(8) == Some(24) {
        return Format::Rfc;
    }
    match crate::header::Header::parse(blob) {
        Ok(h) if h.layout.is_some() => Format::Btf2026,
        _ => Format::Btf2025,
    }
}

/// One location as bpftool prints it (`size=8 signed reg=5`, `(none)`).
pub fn describe_loc(p: &Option<ParamLoc>) -> String {
    let Some(p) = p else {
        return "(none)".to_string();
    };
    let reg = |r: u32| {
        if r == FRAME_BASE_REG {
            "fbreg".to_string()
        } else {
            r.to_string()
        }
    };
    let what = match p.loc {
        Loc::Const(v) => format!("const={v:#x}"),
        Loc::Addr(a) => format!("addr={a:#x}"),
        Loc::Reg(r) => format!("reg={}", reg(r)),
        Loc::RegPair(a, b) => format!("reg={} reg_hi={}", reg(a), reg(b)),
        Loc::RegOffset { reg: r, offset } => format!("reg={} offset={offset}", reg(r)),
        Loc::Deref { reg: r, offset } => format!("deref reg={} offset={offset}", reg(r)),
    };
    format!(
        "size={}{} {what}",
        p.size,
        if p.signed { " signed" } else { "" }
    )
}

fn func_label(btf: &Btf<'_>, id: u32) -> String {
    btf.record(id)
        .ok()
        .and_then(|r| btf.name_of(&r).ok().flatten())
        .unwrap_or("(anon)")
        .to_string()
}

/// Decoded sites: one line per site, then one per parameter.
pub fn dump_sites(sites: &[DecodedSite], out: &mut String) {
    for s in sites {
        let _ = writeln!(
            out,
            "SITE '{}' {}{:#x} vlen={}",
            s.func,
            if s.section.is_empty() {
                String::new()
            } else {
                format!("{}+", s.section)
            },
            s.offset,
            s.params.len()
        );
        for p in &s.params {
            let _ = writeln!(out, "\t{}", describe_loc(p));
        }
    }
}

/// The records of a `.BTF.inline` blob; function names come from `names`.
pub fn dump_rfc(blob: &[u8], names: &Btf<'_>, out: &mut String) -> Result<()> {
    let b = RfcBlob::parse(blob)?;
    let h = b.header;
    let _ = writeln!(
        out,
        "BTF.inline flags={:#x} hdr_len={} inline_info_off={} inline_info_len={} location_off={} location_len={}",
        h.flags,
        h.header_length,
        h.inline_info_offset,
        h.inline_info_length,
        h.location_offset,
        h.location_length
    );
    for s in b.sites() {
        let s = s?;
        let _ = writeln!(
            out,
            "INLINE '{}' type_id={} insn_offset={:#x} vlen={}",
            func_label(names, s.type_id),
            s.type_id,
            s.insn_offset,
            s.param_locations.len()
        );
        for &o in &s.param_locations {
            let loc = if o == 0 { None } else { b.location(o)? };
            let _ = writeln!(out, "\tlocation_off={o} {}", describe_loc(&loc));
        }
    }
    Ok(())
}

/// The records of a compact blob; function names come from `names`.
pub fn dump_compact(blob: &[u8], names: &Btf<'_>, out: &mut String) -> Result<()> {
    let b = CompactBlob::parse(blob)?;
    for (i, l) in b.locations.iter().enumerate() {
        let _ = writeln!(out, "LOC [{}] {}", i + 1, describe_loc(&Some(*l)));
    }
    for (i, l) in b.lists.iter().enumerate() {
        let ids: Vec<String> = l.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "LOC_LIST [{i}] vlen={} locs={}",
            l.len(),
            ids.join(",")
        );
    }
    for (sec, sites) in &b.sections {
        let _ = writeln!(out, "SECTION '{sec}' vlen={}", sites.len());
        for &(off, v) in sites {
            let (f, l) = b.variants[v as usize];
            let _ = writeln!(
                out,
                "\tfunc_type_id={f} ('{}') loc_list={l} offset={off:#x}",
                func_label(names, f)
            );
        }
    }
    Ok(())
}
