//! The glue from the DWARF extractor's model to the BTF encoders' neutral model
//! ([`pcmap_btf::SiteSet`]), including a small gimli walk that describes parameter type DIEs so
//! the encoder can find them in the base BTF. Behind the `btf` feature.

use gimli::{AttributeValue, constants as dw};
use pcmap_binary::Binary;
use pcmap_btf::model::FRAME_BASE_REG;
use pcmap_btf::{CodeSection, FuncParam, InlineFunc, Loc, ParamLoc, Site, SiteSet, TypeDesc};
use rustc_hash::FxHashMap;

use crate::sections::Slice;
use crate::{DebugData, Error, Location};

/// `SHT_PROGBITS`.
const SHT_PROGBITS: u32 = 1;

/// Build the BTF encoders' input from the binary's DWARF: every inline site with an address,
/// its callee described with the DWARF types of its parameters, and each parameter's location
/// in the encoders' terms.
pub fn site_set(bin: &Binary<'_>, debug: &DebugData<'_>) -> Result<SiteSet, Error> {
    // Allocated, executable `SHT_PROGBITS` sections with contents.
    let sections: Vec<CodeSection> = bin
        .sections()
        .iter()
        .filter(|s| s.sh_type == SHT_PROGBITS && s.is_alloc() && s.is_executable())
        .filter(|s| s.size > 0)
        .map(|s| CodeSection {
            name: s.name.to_string(),
            address: s.address,
            size: s.size,
        })
        .collect();
    let mut types = TypeDescriber::new(debug)?;
    let mut func_index: FxHashMap<u32, usize> = FxHashMap::default();
    let mut funcs = Vec::new();
    let mut sites = Vec::new();
    // Each site is converted as the extractor resolves it (and then dropped): the extractor's
    // sites are never all held at once, and their ranges are not needed.
    crate::extract::extract_sites_each(debug, false, |site, functions, total| {
        if sites.capacity() == 0 {
            // An upper bound: sites without an address are skipped.
            sites.reserve_exact(total);
        }
        let Some(address) = site.site_addr else {
            return;
        };
        let Some(f) = functions.get(site.callee as usize) else {
            return;
        };
        let fi = match func_index.get(&site.callee) {
            Some(&i) => i,
            None => {
                let func = InlineFunc {
                    name: f.name.as_deref().unwrap_or("<unknown>").to_string(),
                    ret: types.describe_opt(f.return_type),
                    params: f
                        .params
                        .iter()
                        .map(|p| FuncParam {
                            name: p.name.as_deref().unwrap_or("").to_string(),
                            ty: types.describe_opt(p.type_die),
                        })
                        .collect(),
                    varargs: f.variadic,
                };
                funcs.push(func);
                func_index.insert(site.callee, funcs.len() - 1);
                funcs.len() - 1
            }
        };
        let params = site
            .params
            .iter()
            .zip(&funcs[fi].params)
            .zip(&f.params)
            .map(|((p, decl), d)| param_loc(&p.location, d.byte_size.unwrap_or(0), &decl.ty))
            .collect();
        sites.push(Site {
            address,
            func: fi,
            params,
        });
    })?;
    Ok(SiteSet {
        sections,
        funcs,
        sites,
    })
}

fn is_signed(t: &TypeDesc) -> bool {
    match t {
        TypeDesc::Int { signed, .. } | TypeDesc::Enum { signed, .. } => *signed,
        TypeDesc::Typedef { target, .. }
        | TypeDesc::Const(target)
        | TypeDesc::Volatile(target)
        | TypeDesc::Restrict(target) => is_signed(target),
        _ => false,
    }
}

/// The encoders' location for the extractor's location (`None`: no BTF location can express it).
fn param_loc(l: &Location, size: u64, ty: &TypeDesc) -> Option<ParamLoc> {
    let size = u32::try_from(size).unwrap_or(0);
    let signed = is_signed(ty);
    let off = |o: i64| i32::try_from(o).ok();
    let loc = match l {
        Location::Constant { value } => Loc::Const(*value),
        Location::Register { reg } => Loc::Reg(u32::from(*reg)),
        Location::RegisterOffsetValue { reg, offset } => Loc::RegOffset {
            reg: u32::from(*reg),
            offset: off(*offset)?,
        },
        Location::Memory { reg, offset } => Loc::Deref {
            reg: u32::from(*reg),
            offset: off(*offset)?,
        },
        Location::FrameBase {
            offset,
            base: Some(b),
        } => Loc::Deref {
            reg: u32::from(b.reg),
            offset: off(b.offset.checked_add(*offset)?)?,
        },
        Location::FrameBase { offset, base: None } => Loc::Deref {
            reg: FRAME_BASE_REG,
            offset: off(*offset)?,
        },
        Location::Pieces { pieces } => match pieces.as_slice() {
            [a, b] => match (&a.location, &b.location) {
                (Location::Register { reg: ra }, Location::Register { reg: rb }) => {
                    Loc::RegPair(u32::from(*ra), u32::from(*rb))
                }
                _ => return None,
            },
            _ => return None,
        },
        // A value in memory at a fixed address, entry values (the register at entry of the
        // out-of-line caller, not at the site), implicit pointers, parameter references and
        // computed expressions have no BTF location; neither do the three "no location" cases.
        _ => return None,
    };
    Some(ParamLoc { size, signed, loc }.canonical())
}

/// Parsed units kept by [`TypeDescriber`]: types are described in site order, so their DIEs
/// cluster in a few units at a time.
const UNIT_CACHE: usize = 8;

/// The parsed unit `idx` of `headers`, from `cache` when recently used. (The extractor has
/// already parsed every unit, so a unit that fails to parse here cannot occur in practice; its
/// types would be described as opaque.)
/// A unit evicted from the cache has its `.debug_info` bytes released (see
/// [`DebugData::set_release`]).
fn cached_unit<'c, 'a>(
    cache: &'c mut Vec<(usize, gimli::Unit<Slice<'a>>)>,
    headers: &[(u64, gimli::UnitHeader<Slice<'a>>)],
    dwarf: &gimli::Dwarf<Slice<'a>>,
    debug: &DebugData<'_>,
    idx: usize,
) -> Option<&'c gimli::Unit<Slice<'a>>> {
    if let Some(pos) = cache.iter().position(|(i, _)| *i == idx) {
        let hit = cache.remove(pos);
        cache.push(hit);
    } else {
        let header = headers.get(idx)?.1;
        let unit = dwarf.unit(header).ok()?;
        if cache.len() >= UNIT_CACHE {
            let (_, old) = cache.remove(0);
            release_unit(debug, &old.header);
        }
        cache.push((idx, unit));
    }
    cache.last().map(|(_, u)| u)
}

fn release_unit(debug: &DebugData<'_>, header: &gimli::UnitHeader<Slice<'_>>) {
    if let Some(off) = header.debug_info_offset() {
        debug.release(debug.debug_info_bytes(off.0, header.length_including_self()));
    }
}

/// Describes DWARF type DIEs (by `.debug_info` offset) as [`TypeDesc`]s, memoised.
///
/// Only the unit headers are kept for the whole file; a unit is parsed (abbreviations, root DIE)
/// when a type DIE in it is first described, and a handful of parsed units are cached, so memory
/// does not grow with the number of units.
struct TypeDescriber<'a> {
    debug: &'a DebugData<'a>,
    dwarf: gimli::Dwarf<Slice<'a>>,
    headers: Vec<(u64, gimli::UnitHeader<Slice<'a>>)>,
    /// Recently used parsed units (index into `headers`), most recent last.
    cache: Vec<(usize, gimli::Unit<Slice<'a>>)>,
    memo: FxHashMap<u64, TypeDesc>,
}

impl<'a> TypeDescriber<'a> {
    fn new(debug: &'a DebugData<'a>) -> Result<TypeDescriber<'a>, Error> {
        let dwarf = debug.dwarf();
        let mut headers = Vec::new();
        let mut iter = dwarf.units();
        while let Some(header) = iter
            .next()
            .map_err(Error::dwarf(0, "unit headers for parameter types"))?
        {
            let Some(off) = header.debug_info_offset() else {
                continue;
            };
            headers.push((off.0 as u64, header));
        }
        headers.sort_by_key(|(o, _)| *o);
        Ok(TypeDescriber {
            debug,
            dwarf,
            headers,
            cache: Vec::with_capacity(UNIT_CACHE),
            memo: FxHashMap::default(),
        })
    }

    fn describe_opt(&mut self, die: Option<u64>) -> TypeDesc {
        match die {
            Some(d) => self.describe(d, 0),
            None => TypeDesc::Void,
        }
    }

    fn describe(&mut self, die: u64, depth: u32) -> TypeDesc {
        if let Some(t) = self.memo.get(&die) {
            return t.clone();
        }
        let t = self
            .describe_uncached(die, depth)
            .unwrap_or(TypeDesc::Struct {
                name: None,
                size: 0,
            });
        self.memo.insert(die, t.clone());
        t
    }

    fn describe_uncached(&mut self, die: u64, depth: u32) -> Option<TypeDesc> {
        if depth > 24 {
            return None;
        }
        let idx = self
            .headers
            .partition_point(|(o, _)| *o <= die)
            .checked_sub(1)?;
        let unit = cached_unit(&mut self.cache, &self.headers, &self.dwarf, self.debug, idx)?;
        let uoff = gimli::DebugInfoOffset(die as usize).to_unit_offset(&unit.header)?;
        let entry = unit.entry(uoff).ok()?;
        let name = entry
            .attr_value(dw::DW_AT_name)
            .and_then(|v| self.dwarf.attr_string(unit, v).ok())
            .map(|s| s.to_string_lossy().into_owned());
        let size = entry
            .attr_value(dw::DW_AT_byte_size)
            .and_then(|v| v.udata_value())
            .unwrap_or(0) as u32;
        let target = match entry.attr_value(dw::DW_AT_type) {
            Some(AttributeValue::UnitRef(o)) => {
                Some(o.to_debug_info_offset(&unit.header)?.0 as u64)
            }
            Some(AttributeValue::DebugInfoRef(o)) => Some(o.0 as u64),
            _ => None,
        };
        let tag = entry.tag();
        let encoding = entry
            .attr_value(dw::DW_AT_encoding)
            .and_then(|v| v.udata_value())
            .unwrap_or(0) as u8;
        let mut children_types = Vec::new();
        let mut varargs = false;
        let mut array_len = 0u32;
        if tag == dw::DW_TAG_subroutine_type || tag == dw::DW_TAG_array_type {
            let mut tree = unit.entries_tree(Some(uoff)).ok()?;
            let root = tree.root().ok()?;
            let mut children = root.children();
            let mut first_subrange = true;
            while let Ok(Some(child)) = children.next() {
                let e = child.entry();
                match e.tag() {
                    dw::DW_TAG_formal_parameter => {
                        let t = match e.attr_value(dw::DW_AT_type) {
                            Some(AttributeValue::UnitRef(o)) => {
                                o.to_debug_info_offset(&unit.header).map(|o| o.0 as u64)
                            }
                            Some(AttributeValue::DebugInfoRef(o)) => Some(o.0 as u64),
                            _ => None,
                        };
                        children_types.push(t);
                    }
                    dw::DW_TAG_unspecified_parameters => varargs = true,
                    dw::DW_TAG_subrange_type if first_subrange => {
                        first_subrange = false;
                        if let Some(c) = e.attr_value(dw::DW_AT_count).and_then(|v| v.udata_value())
                        {
                            array_len = c as u32;
                        } else if let Some(u) = e
                            .attr_value(dw::DW_AT_upper_bound)
                            .and_then(|v| v.udata_value())
                        {
                            array_len = u.saturating_add(1) as u32;
                        }
                    }
                    _ => {}
                }
            }
        }
        let inner = |s: &mut Self| match target {
            Some(t) => s.describe(t, depth + 1),
            None => TypeDesc::Void,
        };
        Some(match tag {
            dw::DW_TAG_base_type => match dw::DwAte(encoding) {
                dw::DW_ATE_float => TypeDesc::Float { name: name?, size },
                e => TypeDesc::Int {
                    name: name?,
                    size,
                    signed: matches!(e, dw::DW_ATE_signed | dw::DW_ATE_signed_char),
                    char: matches!(e, dw::DW_ATE_signed_char | dw::DW_ATE_unsigned_char),
                    bool: e == dw::DW_ATE_boolean,
                },
            },
            dw::DW_TAG_pointer_type
            | dw::DW_TAG_reference_type
            | dw::DW_TAG_rvalue_reference_type => TypeDesc::Pointer(Box::new(inner(self))),
            dw::DW_TAG_const_type => TypeDesc::Const(Box::new(inner(self))),
            dw::DW_TAG_volatile_type => TypeDesc::Volatile(Box::new(inner(self))),
            dw::DW_TAG_restrict_type => TypeDesc::Restrict(Box::new(inner(self))),
            dw::DW_TAG_atomic_type => inner(self),
            dw::DW_TAG_typedef => TypeDesc::Typedef {
                name: name?,
                target: Box::new(inner(self)),
            },
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type => TypeDesc::Struct { name, size },
            dw::DW_TAG_union_type => TypeDesc::Union { name, size },
            dw::DW_TAG_enumeration_type => {
                let signed = matches!(inner(self), TypeDesc::Int { signed: true, .. });
                TypeDesc::Enum { name, size, signed }
            }
            dw::DW_TAG_array_type => TypeDesc::Array {
                elem: Box::new(inner(self)),
                len: array_len,
            },
            dw::DW_TAG_subroutine_type => {
                let ret = Box::new(inner(self));
                let params = children_types
                    .into_iter()
                    .map(|t| match t {
                        Some(t) => self.describe(t, depth + 1),
                        None => TypeDesc::Void,
                    })
                    .collect();
                TypeDesc::Function {
                    ret,
                    params,
                    varargs,
                }
            }
            _ => return None,
        })
    }
}
