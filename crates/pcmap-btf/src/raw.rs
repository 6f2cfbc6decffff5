//! Text dump of type records in the style of `bpftool btf dump ... format raw` (standard kinds:
//! byte-for-byte the same lines), extended to the location kinds in the style of the 2026
//! revision's selftests (`VALIDATE_RAW_BTF`).

use std::fmt::Write as _;

use crate::error::Result;
use crate::kind::{Kind, func_linkage_name, var_linkage_name};
use crate::reader::{Btf, LocFlavor, TypeRecord};

fn name_or_anon<'a>(btf: &Btf<'a>, off: u32) -> Result<&'a str> {
    if off == 0 {
        return Ok("(anon)");
    }
    let s = btf.string(off)?;
    Ok(if s.is_empty() { "(anon)" } else { s })
}

/// Print the own types of `btf`, one record per line group, ids as bpftool numbers them.
pub fn dump_raw(btf: &Btf<'_>, out: &mut String) -> Result<()> {
    for rec in btf.own_records() {
        dump_record(btf, &rec?, out)?;
    }
    Ok(())
}

/// Print one record.
pub fn dump_record(btf: &Btf<'_>, r: &TypeRecord<'_>, out: &mut String) -> Result<()> {
    let kind = r.kind();
    let name = name_or_anon(btf, r.name_off)?;
    let _ = write!(out, "[{}] {} '{}'", r.id, kind.name(), name);
    match kind {
        Kind::INT => {
            let w = r.fixed_word(0);
            let enc = match (w >> 24) & 0x0f {
                0 => "(none)",
                1 => "SIGNED",
                2 => "CHAR",
                4 => "BOOL",
                _ => "UNKN",
            };
            let _ = write!(
                out,
                " size={} bits_offset={} nr_bits={} encoding={}",
                r.size_or_type,
                (w >> 16) & 0xff,
                w & 0xff,
                enc
            );
        }
        Kind::PTR
        | Kind::VOLATILE
        | Kind::CONST
        | Kind::RESTRICT
        | Kind::TYPEDEF
        | Kind::TYPE_TAG => {
            let _ = write!(out, " type_id={}", r.size_or_type);
        }
        Kind::ARRAY => {
            let _ = write!(
                out,
                " type_id={} index_type_id={} nr_elems={}",
                r.fixed_word(0),
                r.fixed_word(1),
                r.fixed_word(2)
            );
        }
        Kind::STRUCT | Kind::UNION => {
            let _ = write!(out, " size={} vlen={}", r.size_or_type, r.vlen());
            for i in 0..r.elem_count() {
                let m_name = name_or_anon(btf, r.elem_word(i, 0))?;
                let off = r.elem_word(i, 2);
                let (bit_off, bf) = if r.kflag() {
                    (off & 0x00ff_ffff, off >> 24)
                } else {
                    (off, 0)
                };
                let _ = write!(
                    out,
                    "\n\t'{}' type_id={} bits_offset={}",
                    m_name,
                    r.elem_word(i, 1),
                    bit_off
                );
                if bf != 0 {
                    let _ = write!(out, " bitfield_size={bf}");
                }
            }
        }
        Kind::ENUM => {
            let signed = r.kflag();
            let _ = write!(
                out,
                " encoding={} size={} vlen={}",
                if signed { "SIGNED" } else { "UNSIGNED" },
                r.size_or_type,
                r.vlen()
            );
            for i in 0..r.elem_count() {
                let v = r.elem_word(i, 1);
                let n = name_or_anon(btf, r.elem_word(i, 0))?;
                if signed {
                    let _ = write!(out, "\n\t'{}' val={}", n, v as i32);
                } else {
                    let _ = write!(out, "\n\t'{}' val={}", n, v);
                }
            }
        }
        Kind::ENUM64 => {
            let signed = r.kflag();
            let _ = write!(
                out,
                " encoding={} size={} vlen={}",
                if signed { "SIGNED" } else { "UNSIGNED" },
                r.size_or_type,
                r.vlen()
            );
            for i in 0..r.elem_count() {
                let v = u64::from(r.elem_word(i, 1)) | (u64::from(r.elem_word(i, 2)) << 32);
                let n = name_or_anon(btf, r.elem_word(i, 0))?;
                if signed {
                    let _ = write!(out, "\n\t'{}' val={}LL", n, v as i64);
                } else {
                    let _ = write!(out, "\n\t'{}' val={}ULL", n, v);
                }
            }
        }
        Kind::FWD => {
            let _ = write!(
                out,
                " fwd_kind={}",
                if r.kflag() { "union" } else { "struct" }
            );
        }
        Kind::FUNC => {
            let _ = write!(
                out,
                " type_id={} linkage={}",
                r.size_or_type,
                func_linkage_name(r.vlen())
            );
        }
        Kind::FUNC_PROTO => {
            let _ = write!(out, " ret_type_id={} vlen={}", r.size_or_type, r.vlen());
            for i in 0..r.elem_count() {
                let _ = write!(
                    out,
                    "\n\t'{}' type_id={}",
                    name_or_anon(btf, r.elem_word(i, 0))?,
                    r.elem_word(i, 1)
                );
            }
        }
        Kind::VAR => {
            let _ = write!(
                out,
                " type_id={}, linkage={}",
                r.size_or_type,
                var_linkage_name(r.fixed_word(0))
            );
        }
        Kind::DATASEC => {
            let _ = write!(out, " size={} vlen={}", r.size_or_type, r.vlen());
            for i in 0..r.elem_count() {
                let ty = r.elem_word(i, 0);
                let _ = write!(
                    out,
                    "\n\ttype_id={} offset={} size={}",
                    ty,
                    r.elem_word(i, 1),
                    r.elem_word(i, 2)
                );
                // bpftool names the variable an entry points at.
                if let Ok(v) = btf.record(ty) {
                    let _ = write!(
                        out,
                        " ({} '{}')",
                        v.kind().name(),
                        name_or_anon(btf, v.name_off)?
                    );
                }
            }
        }
        Kind::FLOAT => {
            let _ = write!(out, " size={}", r.size_or_type);
        }
        Kind::DECL_TAG => {
            let _ = write!(
                out,
                " type_id={} component_idx={}",
                r.size_or_type,
                r.fixed_word(0) as i32
            );
        }
        Kind::LOC_PARAM | Kind::LOC_PROTO | Kind::LOCSEC => dump_loc_record(btf, r, out)?,
        _ => {}
    }
    out.push('\n');
    Ok(())
}

fn dump_loc_record(btf: &Btf<'_>, r: &TypeRecord<'_>, out: &mut String) -> Result<()> {
    match (btf.loc_flavor(), r.kind()) {
        (LocFlavor::Rev2026, Kind::LOC_PARAM) => {
            let _ = write!(
                out,
                " size={} flags={:#x} vlen={}",
                r.size_or_type,
                r.fixed_word(0),
                r.vlen()
            );
            for i in 0..r.elem_count() {
                let _ = write!(out, "\n\tvalue={}", r.elem_word(i, 0));
            }
        }
        (LocFlavor::Oct2025, Kind::LOC_PARAM) => {
            let size = r.size_or_type as i32;
            if r.kflag() {
                let v = u64::from(r.fixed_word(0)) | (u64::from(r.fixed_word(1)) << 32);
                let _ = write!(out, " size={size} value={v}");
            } else {
                let w = r.fixed_word(0);
                let _ = write!(
                    out,
                    " size={size} reg={} flags={:#x} offset={}",
                    w & 0xffff,
                    w >> 16,
                    r.fixed_word(1) as i32
                );
            }
        }
        (LocFlavor::Rev2026, Kind::LOC_PROTO) => {
            let _ = write!(out, " vlen={}", r.vlen());
            for i in 0..r.elem_count() {
                let _ = write!(out, "\n\ttype_id={}", r.elem_word(i, 0));
            }
        }
        (LocFlavor::Oct2025, Kind::LOC_PROTO) => {
            let _ = write!(out, " type_id={} vlen={}", r.size_or_type, r.vlen());
            for i in 0..r.elem_count() {
                let _ = write!(out, "\n\ttype_id={}", r.elem_word(i, 0));
            }
        }
        (LocFlavor::Rev2026, _) => {
            let _ = write!(out, " vlen={}", r.vlen());
            for i in 0..r.elem_count() {
                let _ = write!(
                    out,
                    "\n\tfunc_type_id={} loc_proto_type_id={} offset={}",
                    r.elem_word(i, 0),
                    r.elem_word(i, 1),
                    r.elem_word(i, 2)
                );
            }
        }
        (LocFlavor::Oct2025, _) => {
            let _ = write!(out, " vlen={}", r.vlen());
            for i in 0..r.elem_count() {
                let _ = write!(
                    out,
                    "\n\t'{}' func_proto_type_id={} loc_proto_type_id={} offset={}",
                    name_or_anon(btf, r.elem_word(i, 0))?,
                    r.elem_word(i, 1),
                    r.elem_word(i, 2),
                    r.elem_word(i, 3)
                );
            }
        }
    }
    Ok(())
}
