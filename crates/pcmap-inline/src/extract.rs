//! Extraction of inline sites: a parallel scan of every compilation unit, then a global pass that
//! resolves abstract-origin chains (which may cross units) into [`Function`]s.

use std::borrow::Cow;

use gimli::{AttributeValue, DebuggingInformationEntry, UnitRef, UnwindContext, constants as dw};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::cfa::CfaIndex;
use crate::location::{ClassifyCtx, FrameBaseRule, Location, classify, constant_bytes};
use crate::sections::{DebugData, Slice};
use crate::{
    Error, Function, FunctionId, InlineInfo, InlineSite, LocationSource, ParamDecl, ParamLocation,
    SiteAddrSource,
};

type Die<'a> = DebuggingInformationEntry<Slice<'a>>;

/// A subprogram DIE as scanned.
struct SubRaw<'a> {
    die: u64,
    name: Option<Cow<'a, str>>,
    linkage_name: Option<Cow<'a, str>>,
    origin: Option<u64>,
    has_code: bool,
    return_type: Option<u64>,
    params: Vec<u64>,
    variadic: bool,
}

/// A formal parameter DIE directly below a subprogram.
struct ParamRaw<'a> {
    die: u64,
    name: Option<Cow<'a, str>>,
    type_die: Option<u64>,
    byte_size: Option<u64>,
    origin: Option<u64>,
}

/// An inline site as scanned (unit-local references).
struct SiteRaw {
    die: u64,
    origin: Option<u64>,
    caller_die: Option<u64>,
    parent: Option<u32>,
    depth: u32,
    /// The site's ranges: `UnitScan::ranges[ranges.0..ranges.0 + ranges.1]`.
    ranges: (u32, u32),
    range_list: bool,
    site_addr: Option<u64>,
    source: SiteAddrSource,
    call_file: Option<u32>,
    call_line: u32,
    call_column: u32,
}

/// A concrete parameter of an inline site: the site (index in `UnitScan::sites`), the
/// parameter's abstract origin and its location.
type SiteParam = (u32, Option<u64>, ParamLocation);

/// What one unit's scan keeps. Sites' ranges and parameters live in flat per-unit vectors (not
/// one small vector per site), which keeps the allocator's per-site overhead out of the peak.
#[derive(Default)]
struct UnitScan<'a> {
    /// `.debug_info` offset of the unit (its DIEs follow).
    start: u64,
    /// Subprograms and their parameters, in DIE (offset) order.
    subs: Vec<SubRaw<'a>>,
    params: Vec<ParamRaw<'a>>,
    sites: Vec<SiteRaw>,
    ranges: Vec<std::ops::Range<u64>>,
    site_params: Vec<SiteParam>,
    files: Vec<String>,
}

/// The parts of a [`UnitScan`] that become [`InlineSite`]s.
struct UnitSites {
    sites: Vec<SiteRaw>,
    ranges: Vec<std::ops::Range<u64>>,
    site_params: Vec<SiteParam>,
    files: Vec<String>,
}

#[derive(Clone, Copy)]
enum ScopeKind {
    Subprogram(usize),
    Site(u32),
    Other,
}

#[derive(Clone, Copy)]
struct Scope {
    depth: isize,
    kind: ScopeKind,
    concrete: Option<(u64, FrameBaseRule)>,
    site: Option<u32>,
    site_depth: u32,
}

/// Read every inline site of `data`'s DWARF (units in parallel on the current rayon pool).
pub fn extract_sites<'d>(data: &'d DebugData<'_>) -> Result<InlineInfo<'d>, Error> {
    let mut sites = Vec::new();
    let mut info = extract_sites_each(data, true, |site, _, total| {
        sites.reserve_exact(total.saturating_sub(sites.len()));
        sites.push(site);
    })?;
    info.sites = sites;
    Ok(info)
}

/// [`extract_sites`], handing each site to `sink` (in the same order, with the functions known so
/// far, which include the site's callee and caller, and the total number of sites) instead of
/// collecting them: the returned
/// [`InlineInfo`] has no sites. A consumer that converts sites as they come never holds all of
/// them. Without `ranges`, [`InlineSite::ranges`] stays empty (the site address is still derived
/// from them).
pub(crate) fn extract_sites_each<'d>(
    data: &'d DebugData<'_>,
    ranges: bool,
    sink: impl FnMut(InlineSite, &[Function<'d>], usize),
) -> Result<InlineInfo<'d>, Error> {
    let dwarf = data.dwarf();
    let mut headers = Vec::new();
    let mut iter = dwarf.units();
    loop {
        let off = headers
            .last()
            .map_or(0, |h: &gimli::UnitHeader<Slice<'d>>| {
                h.debug_info_offset().map_or(0, |o| o.0 as u64)
            });
        match iter.next() {
            Ok(Some(h)) => headers.push(h),
            Ok(None) => break,
            Err(e) => return Err(Error::dwarf(off, "unit header")(e)),
        }
    }
    let address_size = headers.first().map_or(8, |h| h.address_size());
    let cfa = CfaIndex::new(data, address_size);
    let scans: Vec<UnitScan<'d>> = headers
        .par_iter()
        .map(|h| {
            let scan = scan_unit(&dwarf, h, &cfa, data.endian());
            if let Some(off) = h.debug_info_offset() {
                data.release(data.debug_info_bytes(off.0, h.length_including_self()));
            }
            scan
        })
        .collect::<Result<_, Error>>()?;
    data.release_sections();
    Ok(resolve(scans, ranges, sink))
}

fn global(unit: &gimli::Unit<Slice<'_>>, off: gimli::UnitOffset) -> u64 {
    unit.header
        .debug_info_offset()
        .map_or(0, |u| (u.0 + off.0) as u64)
}

fn die_ref(unit: &gimli::Unit<Slice<'_>>, v: AttributeValue<Slice<'_>>) -> Option<u64> {
    match v {
        AttributeValue::UnitRef(o) => Some(global(unit, o)),
        AttributeValue::DebugInfoRef(o) => Some(o.0 as u64),
        _ => None,
    }
}

fn string<'a>(unit: UnitRef<'_, Slice<'a>>, v: AttributeValue<Slice<'a>>) -> Option<Cow<'a, str>> {
    unit.attr_string(v)
        .ok()
        .map(|s| String::from_utf8_lossy(s.slice()))
}

fn udata(v: Option<AttributeValue<Slice<'_>>>) -> Option<u64> {
    v.and_then(|v| v.udata_value())
}

fn scan_unit<'d>(
    dwarf: &gimli::Dwarf<Slice<'d>>,
    header: &gimli::UnitHeader<Slice<'d>>,
    cfa: &CfaIndex<'d>,
    endian: gimli::RunTimeEndian,
) -> Result<UnitScan<'d>, Error> {
    let uoff = header.debug_info_offset().map_or(0, |o| o.0 as u64);
    let unit_owned = dwarf.unit(*header).map_err(Error::dwarf(uoff, "unit"))?;
    let unit = UnitRef::new(dwarf, &unit_owned);
    let mut scan = UnitScan {
        start: uoff,
        ..UnitScan::default()
    };
    let mut file_ids: FxHashMap<u64, u32> = FxHashMap::default();
    let mut unwind = UnwindContext::new();
    let mut stack: Vec<Scope> = Vec::new();
    let tree_error = || Error::dwarf(uoff, "DIE tree");
    let mut raw = unit_owned.entries_raw(None).map_err(tree_error())?;
    let mut die_buf: Die<'d> = DebuggingInformationEntry::null();
    while !raw.is_empty() {
        let depth = raw.next_depth();
        // Peek at the abbreviation: the attributes of DIEs the scan does not look at (types,
        // variables, blocks, call sites, ... most of the tree) are skipped, not decoded.
        let mut peek = raw.clone();
        let Some(abbrev) = peek.read_abbreviation().map_err(tree_error())? else {
            raw = peek; // a null entry ends a list of children
            continue;
        };
        while stack.last().is_some_and(|s| s.depth >= depth) {
            stack.pop();
        }
        let parent = stack.last().copied();
        let inherited = parent.unwrap_or(Scope {
            depth: -1,
            kind: ScopeKind::Other,
            concrete: None,
            site: None,
            site_depth: 0,
        });
        let mut scope = Scope {
            depth,
            kind: ScopeKind::Other,
            ..inherited
        };
        let wanted = match abbrev.tag() {
            dw::DW_TAG_subprogram | dw::DW_TAG_inlined_subroutine => true,
            dw::DW_TAG_formal_parameter | dw::DW_TAG_unspecified_parameters => {
                !matches!(inherited.kind, ScopeKind::Other)
            }
            _ => false,
        };
        if !wanted {
            let has_children = abbrev.has_children();
            peek.skip_attributes(abbrev.attributes())
                .map_err(tree_error())?;
            raw = peek;
            if has_children {
                stack.push(scope);
            }
            continue;
        }
        raw.read_entry(&mut die_buf).map_err(tree_error())?;
        let entry = &die_buf;
        match entry.tag() {
            dw::DW_TAG_subprogram => {
                let die = global(&unit_owned, entry.offset());
                let has_code = entry.has_attr(dw::DW_AT_low_pc) || entry.has_attr(dw::DW_AT_ranges);
                let origin = entry
                    .attr_value(dw::DW_AT_abstract_origin)
                    .or_else(|| entry.attr_value(dw::DW_AT_specification))
                    .and_then(|v| die_ref(&unit_owned, v));
                let frame_base = match entry.attr_value(dw::DW_AT_frame_base) {
                    Some(AttributeValue::Exprloc(e)) => {
                        FrameBaseRule::from_expression(e, unit.encoding())
                    }
                    _ => FrameBaseRule::Unknown,
                };
                scan.subs.push(SubRaw {
                    die,
                    name: entry
                        .attr_value(dw::DW_AT_name)
                        .and_then(|v| string(unit, v)),
                    linkage_name: entry
                        .attr_value(dw::DW_AT_linkage_name)
                        .or_else(|| entry.attr_value(dw::DW_AT_MIPS_linkage_name))
                        .and_then(|v| string(unit, v)),
                    origin,
                    has_code,
                    return_type: entry
                        .attr_value(dw::DW_AT_type)
                        .and_then(|v| die_ref(&unit_owned, v)),
                    params: Vec::new(),
                    variadic: false,
                });
                scope.kind = ScopeKind::Subprogram(scan.subs.len() - 1);
                scope.concrete = has_code.then_some((die, frame_base));
                scope.site = None;
                scope.site_depth = 0;
            }
            dw::DW_TAG_inlined_subroutine => {
                let site = scan_site(
                    unit,
                    entry,
                    &inherited,
                    &mut scan.ranges,
                    &mut scan.files,
                    &mut file_ids,
                )?;
                scan.sites.push(site);
                let idx = (scan.sites.len() - 1) as u32;
                scope.kind = ScopeKind::Site(idx);
                scope.site = Some(idx);
                scope.site_depth = inherited.site_depth + 1;
            }
            dw::DW_TAG_formal_parameter => match inherited.kind {
                ScopeKind::Subprogram(s) => {
                    let die = global(&unit_owned, entry.offset());
                    let type_die = entry
                        .attr_value(dw::DW_AT_type)
                        .and_then(|v| die_ref(&unit_owned, v));
                    let byte_size = match entry.attr_value(dw::DW_AT_type) {
                        Some(AttributeValue::UnitRef(o)) => type_size(unit, o),
                        _ => None,
                    };
                    scan.params.push(ParamRaw {
                        die,
                        name: entry
                            .attr_value(dw::DW_AT_name)
                            .and_then(|v| string(unit, v)),
                        type_die,
                        byte_size,
                        origin: entry
                            .attr_value(dw::DW_AT_abstract_origin)
                            .and_then(|v| die_ref(&unit_owned, v)),
                    });
                    if let Some(sub) = scan.subs.get_mut(s) {
                        sub.params.push(die);
                    }
                }
                ScopeKind::Site(i) => {
                    let origin = entry
                        .attr_value(dw::DW_AT_abstract_origin)
                        .and_then(|v| die_ref(&unit_owned, v));
                    let site_addr = scan.sites.get(i as usize).and_then(|s| s.site_addr);
                    let mut ctx = ClassifyCtx {
                        unit,
                        frame_base: inherited.concrete.map_or(FrameBaseRule::Unknown, |c| c.1),
                        site_addr,
                        cfa,
                        unwind: &mut unwind,
                        endian,
                    };
                    let loc = param_location(entry, &mut ctx)?;
                    scan.site_params.push((i, origin, loc));
                }
                ScopeKind::Other => {}
            },
            dw::DW_TAG_unspecified_parameters => {
                if let ScopeKind::Subprogram(s) = inherited.kind
                    && let Some(sub) = scan.subs.get_mut(s)
                {
                    sub.variadic = true;
                }
            }
            _ => {}
        }
        if entry.has_children() {
            stack.push(scope);
        }
    }
    // All units' scans are held until they are resolved: give back the vectors' growth slack
    // (up to half of each) while this thread's allocator can still reuse it for the next unit.
    scan.subs.shrink_to_fit();
    scan.params.shrink_to_fit();
    scan.sites.shrink_to_fit();
    scan.ranges.shrink_to_fit();
    scan.site_params.shrink_to_fit();
    scan.files.shrink_to_fit();
    Ok(scan)
}

/// Byte size of a unit-local type, through typedefs and qualifiers.
fn type_size(unit: UnitRef<'_, Slice<'_>>, mut off: gimli::UnitOffset) -> Option<u64> {
    for _ in 0..16 {
        let e = unit.entry(off).ok()?;
        if let Some(s) = udata(e.attr_value(dw::DW_AT_byte_size)) {
            return Some(s);
        }
        match e.tag() {
            dw::DW_TAG_pointer_type
            | dw::DW_TAG_reference_type
            | dw::DW_TAG_rvalue_reference_type
            | dw::DW_TAG_ptr_to_member_type => {
                return Some(u64::from(unit.encoding().address_size));
            }
            dw::DW_TAG_typedef
            | dw::DW_TAG_const_type
            | dw::DW_TAG_volatile_type
            | dw::DW_TAG_restrict_type
            | dw::DW_TAG_atomic_type => match e.attr_value(dw::DW_AT_type) {
                Some(AttributeValue::UnitRef(o)) => off = o,
                _ => return None,
            },
            _ => return None,
        }
    }
    None
}

pub(crate) fn file_path(unit: UnitRef<'_, Slice<'_>>, index: u64) -> Option<String> {
    let program = unit.line_program.as_ref()?;
    let header = program.header();
    let file = header.file(index)?;
    let name = unit.attr_string(file.path_name()).ok()?;
    let name = String::from_utf8_lossy(name.slice());
    if name.starts_with('/') {
        return Some(name.into_owned());
    }
    let mut path = String::new();
    if let Some(dir) = file.directory(header)
        && let Ok(dir) = unit.attr_string(dir)
    {
        let dir = String::from_utf8_lossy(dir.slice());
        if !dir.starts_with('/')
            && let Some(comp) = unit.comp_dir.as_ref()
        {
            path.push_str(&String::from_utf8_lossy(comp.slice()));
            if !path.is_empty() && !path.ends_with('/') {
                path.push('/');
            }
        }
        path.push_str(&dir);
    } else if let Some(comp) = unit.comp_dir.as_ref() {
        path.push_str(&String::from_utf8_lossy(comp.slice()));
    }
    if !path.is_empty() && !path.ends_with('/') {
        path.push('/');
    }
    path.push_str(&name);
    Some(path)
}

fn scan_site<'a>(
    unit: UnitRef<'_, Slice<'a>>,
    entry: &Die<'a>,
    parent: &Scope,
    all_ranges: &mut Vec<std::ops::Range<u64>>,
    files: &mut Vec<String>,
    file_ids: &mut FxHashMap<u64, u32>,
) -> Result<SiteRaw, Error> {
    let die = global(unit.unit, entry.offset());
    let low_pc = match entry.attr_value(dw::DW_AT_low_pc) {
        Some(v) => unit.attr_address(v).ok().flatten(),
        None => None,
    };
    // gimli computes `low_pc + size` for a constant DW_AT_high_pc without checking for overflow
    // (a panic in builds with overflow checks); a range that wraps around the address space is
    // malformed, so such a site keeps its low_pc and gets no ranges.
    let wraps = low_pc.is_some_and(|low| {
        entry
            .attr_value(dw::DW_AT_high_pc)
            .and_then(|v| v.udata_value())
            .is_some_and(|size| low.checked_add(size).is_none())
    });
    let first = all_ranges.len();
    if !wraps && let Ok(mut iter) = unit.die_ranges(entry) {
        while let Some(r) = iter
            .next()
            .map_err(Error::dwarf(die, "inline site ranges"))?
        {
            all_ranges.push(r.begin..r.end);
        }
    }
    let ranges = &all_ranges[first..];
    let range_list = entry.has_attr(dw::DW_AT_ranges);
    let entry_pc = match entry.attr_value(dw::DW_AT_entry_pc) {
        Some(v @ (AttributeValue::Addr(_) | AttributeValue::DebugAddrIndex(_))) => {
            unit.attr_address(v).ok().flatten()
        }
        // DWARF 5: a constant is an offset from the entity's base address.
        Some(v) => v.udata_value().and_then(|off| {
            low_pc
                .or_else(|| ranges.iter().map(|r| r.start).min())
                .map(|b| b.wrapping_add(off))
        }),
        None => None,
    };
    let (site_addr, source) = if let Some(a) = entry_pc {
        (Some(a), SiteAddrSource::EntryPc)
    } else if let Some(a) = low_pc {
        (Some(a), SiteAddrSource::LowPc)
    } else if let Some(r) = ranges.first() {
        (Some(r.start), SiteAddrSource::FirstRange)
    } else {
        (None, SiteAddrSource::None)
    };
    let call_file = match entry.attr_value(dw::DW_AT_call_file) {
        Some(AttributeValue::FileIndex(i)) => Some(i),
        v => udata(v),
    }
    .and_then(|i| {
        if let Some(&id) = file_ids.get(&i) {
            return Some(id);
        }
        let path = file_path(unit, i)?;
        files.push(path);
        let id = (files.len() - 1) as u32;
        file_ids.insert(i, id);
        Some(id)
    });
    Ok(SiteRaw {
        die,
        origin: entry
            .attr_value(dw::DW_AT_abstract_origin)
            .and_then(|v| die_ref(unit.unit, v)),
        caller_die: parent.concrete.map(|c| c.0),
        parent: parent.site,
        depth: parent.site_depth + 1,
        ranges: (first as u32, ranges.len() as u32),
        range_list,
        site_addr,
        source,
        call_file,
        call_line: udata(entry.attr_value(dw::DW_AT_call_line)).unwrap_or(0) as u32,
        call_column: udata(entry.attr_value(dw::DW_AT_call_column)).unwrap_or(0) as u32,
    })
}

/// The location of a concrete parameter DIE of an inline site at the site address.
fn param_location<'a>(
    entry: &Die<'a>,
    ctx: &mut ClassifyCtx<'a, '_>,
) -> Result<ParamLocation, Error> {
    let unit = ctx.unit;
    if let Some(v) = entry.attr_value(dw::DW_AT_location) {
        if let AttributeValue::Exprloc(e) = v {
            return Ok(ParamLocation {
                location: classify(e, ctx),
                source: LocationSource::Expression,
                zero_length_view: false,
            });
        }
        let die = global(unit.unit, entry.offset());
        let Some(offset) = unit
            .attr_locations_offset(v)
            .map_err(Error::dwarf(die, "location list offset"))?
        else {
            return Ok(ParamLocation {
                location: Location::NoLocation,
                source: LocationSource::None,
                zero_length_view: false,
            });
        };
        let (found, count) = find_location(unit, offset, ctx.site_addr)
            .map_err(Error::dwarf(die, "location list"))?;
        let source = LocationSource::LocationList(count);
        return Ok(match found {
            Some((expr, zero_length_view)) => ParamLocation {
                location: classify(expr, ctx),
                source,
                zero_length_view,
            },
            None => ParamLocation {
                location: Location::NotCovered,
                source,
                zero_length_view: false,
            },
        });
    }
    if let Some(v) = entry.attr_value(dw::DW_AT_const_value) {
        let location = match v {
            AttributeValue::Block(b) => constant_bytes(b.slice()),
            AttributeValue::Sdata(s) => Location::Constant { value: s as u64 },
            AttributeValue::Exprloc(e) => constant_bytes(e.0.slice()),
            other => match other.udata_value() {
                Some(u) => Location::Constant { value: u },
                None => Location::NoLocation,
            },
        };
        return Ok(ParamLocation {
            location,
            source: LocationSource::ConstValue,
            zero_length_view: false,
        });
    }
    Ok(ParamLocation {
        location: Location::NoLocation,
        source: LocationSource::None,
        zero_length_view: false,
    })
}

/// A location-list entry's expression and whether it was a zero-length (view) entry.
type CoveringEntry<'a> = (gimli::Expression<Slice<'a>>, bool);

/// Find the location-list entry covering `addr`; a GCC zero-length entry `[addr, addr)` counts when
/// no non-empty entry covers it. Returns the expression, whether it came from a zero-length entry,
/// and the number of entries in the list.
fn find_location<'a>(
    unit: UnitRef<'_, Slice<'a>>,
    offset: gimli::LocationListsOffset,
    addr: Option<u64>,
) -> gimli::Result<(Option<CoveringEntry<'a>>, u32)> {
    use gimli::RawLocListEntry as E;
    let mut raw = unit.raw_locations(offset)?;
    let tombstone = if unit.encoding().address_size == 4 {
        u64::from(u32::MAX) - 1
    } else {
        u64::MAX - 1
    };
    let mask = if unit.encoding().address_size == 4 {
        u64::from(u32::MAX)
    } else {
        u64::MAX
    };
    let mut base = unit.low_pc;
    let mut count = 0u32;
    let mut covering = None;
    let mut zero = None;
    while let Some(e) = raw.next()? {
        let (begin, end, data) = match e {
            E::BaseAddress { addr } => {
                base = addr;
                continue;
            }
            E::BaseAddressx { addr } => {
                base = unit.address(addr)?;
                continue;
            }
            E::StartxEndx { begin, end, data } => (unit.address(begin)?, unit.address(end)?, data),
            E::StartxLength {
                begin,
                length,
                data,
            } => {
                let b = unit.address(begin)?;
                (b, b.wrapping_add(length) & mask, data)
            }
            E::DefaultLocation { data } => (0, u64::MAX, data),
            E::AddressOrOffsetPair { begin, end, data } | E::OffsetPair { begin, end, data } => {
                if base >= tombstone {
                    continue;
                }
                (
                    base.wrapping_add(begin) & mask,
                    base.wrapping_add(end) & mask,
                    data,
                )
            }
            E::StartEnd { begin, end, data } => (begin, end, data),
            E::StartLength {
                begin,
                length,
                data,
            } => (begin, begin.wrapping_add(length) & mask, data),
        };
        if begin >= tombstone || begin > end {
            continue;
        }
        count = count.saturating_add(1);
        let Some(a) = addr else { continue };
        if covering.is_none() && begin <= a && a < end {
            covering = Some(data);
        } else if zero.is_none() && begin == a && end == a {
            zero = Some(data);
        }
    }
    Ok((
        covering
            .map(|d| (d, false))
            .or_else(|| zero.map(|d| (d, true))),
        count,
    ))
}

/// Merge the per-unit scans: build the global DIE maps, resolve origin chains to root functions,
/// match concrete parameters to the callee's declared parameters, renumber sites and files.
fn resolve<'a>(
    mut scans: Vec<UnitScan<'a>>,
    keep_ranges: bool,
    mut sink: impl FnMut(InlineSite, &[Function<'a>], usize),
) -> InlineInfo<'a> {
    let units = scans.len();
    // The sites and file names are consumed unit by unit below (each raw site is dropped as soon
    // as it is converted), so at most one copy of every site is alive at a time.
    let unit_sites: Vec<UnitSites> = scans
        .iter_mut()
        .map(|s| UnitSites {
            sites: std::mem::take(&mut s.sites),
            ranges: std::mem::take(&mut s.ranges),
            site_params: std::mem::take(&mut s.site_params),
            files: std::mem::take(&mut s.files),
        })
        .collect();
    // DIEs by offset: the units are in offset order and each unit's subprograms and parameters
    // are in DIE order, so a binary search finds the unit and then the DIE (no global hash maps,
    // which cost as much memory as the records).
    let unit_of = |die: u64| {
        scans
            .partition_point(|s| s.start <= die)
            .checked_sub(1)
            .and_then(|u| scans.get(u))
    };
    let sub_at = |die: u64| {
        let subs = &unit_of(die)?.subs;
        subs.binary_search_by_key(&die, |s| s.die)
            .ok()
            .map(|i| &subs[i])
    };
    let param_at = |die: u64| {
        let params = &unit_of(die)?.params;
        params
            .binary_search_by_key(&die, |p| p.die)
            .ok()
            .map(|i| &params[i])
    };
    // Root of a subprogram DIE: follow origin/specification until it ends (bounded against cycles).
    let root_of = |mut die: u64| -> u64 {
        for _ in 0..16 {
            match sub_at(die).and_then(|s| s.origin) {
                Some(o) if sub_at(o).is_some() => die = o,
                _ => break,
            }
        }
        die
    };

    let mut functions: Vec<Function<'a>> = Vec::new();
    let mut function_ids: FxHashMap<u64, FunctionId> = FxHashMap::default();
    let mut param_slot: FxHashMap<u64, (FunctionId, usize)> = FxHashMap::default();
    let mut function_for = |root: u64,
                            functions: &mut Vec<Function<'a>>,
                            param_slot: &mut FxHashMap<u64, (FunctionId, usize)>|
     -> FunctionId {
        if let Some(&id) = function_ids.get(&root) {
            return id;
        }
        let id = functions.len() as FunctionId;
        function_ids.insert(root, id);
        // Name and parameters: the first DIE along the chain that has them.
        let mut name = None;
        let mut linkage_name = None;
        let mut return_type = None;
        let mut variadic = false;
        let mut params = Vec::new();
        if let Some(s) = sub_at(root) {
            params.reserve_exact(s.params.len());
            name = s.name.clone();
            linkage_name = s.linkage_name.clone();
            return_type = s.return_type;
            variadic = s.variadic;
            for (i, &p) in s.params.iter().enumerate() {
                param_slot.insert(p, (id, i));
                let decl = param_at(p);
                params.push(ParamDecl {
                    die: p,
                    name: decl.and_then(|d| d.name.clone()),
                    type_die: decl.and_then(|d| d.type_die),
                    byte_size: decl.and_then(|d| d.byte_size),
                });
            }
        }
        functions.push(Function {
            die: root,
            name,
            linkage_name,
            return_type,
            params,
            variadic,
            out_of_line: false,
            inline_sites: 0,
        });
        id
    };

    // Out-of-line copies.
    for s in &scans {
        for sub in s.subs.iter().filter(|s| s.has_code) {
            let id = function_for(root_of(sub.die), &mut functions, &mut param_slot);
            functions[id as usize].out_of_line = true;
        }
    }

    let total_sites: usize = unit_sites.iter().map(|u| u.sites.len()).sum();
    let mut site_count = 0u32;
    let mut files: Vec<String> = Vec::new();
    let mut file_ids: FxHashMap<String, u32> = FxHashMap::default();
    for unit in unit_sites {
        let base = site_count;
        let file_map: Vec<u32> = unit
            .files
            .into_iter()
            .map(|f| match file_ids.get(&f) {
                Some(&id) => id,
                None => {
                    let id = files.len() as u32;
                    files.push(f.clone());
                    file_ids.insert(f, id);
                    id
                }
            })
            .collect();
        let ranges = unit.ranges;
        let mut site_params = unit.site_params;
        // In DIE order already unless a site's parameters follow a nested site; the stable sort
        // keeps each site's parameters in DIE order.
        site_params.sort_by_key(|p| p.0);
        let mut site_params = site_params.into_iter().peekable();
        for (index, raw) in unit.sites.into_iter().enumerate() {
            let callee_root = raw.origin.map_or(u64::MAX, &root_of);
            let callee = function_for(callee_root, &mut functions, &mut param_slot);
            functions[callee as usize].inline_sites += 1;
            let caller = raw
                .caller_die
                .map(|d| function_for(root_of(d), &mut functions, &mut param_slot));
            let n = functions[callee as usize].params.len();
            let mut params = vec![
                ParamLocation {
                    location: Location::Missing,
                    source: LocationSource::None,
                    zero_length_view: false,
                };
                n
            ];
            while let Some((_, origin, loc)) = site_params.next_if(|p| p.0 as usize <= index) {
                // Follow the parameter's own origin chain until it lands on a slot of the callee.
                let mut p = origin;
                for _ in 0..16 {
                    let Some(die) = p else { break };
                    if let Some(&(f, i)) = param_slot.get(&die)
                        && f == callee
                    {
                        if let Some(slot) = params.get_mut(i) {
                            *slot = loc;
                        }
                        break;
                    }
                    p = param_at(die).and_then(|d| d.origin);
                }
            }
            site_count = site_count.saturating_add(1);
            let site = InlineSite {
                die: raw.die,
                callee,
                caller,
                caller_die: raw.caller_die,
                parent: raw.parent.map(|p| p + base),
                depth: raw.depth,
                ranges: if keep_ranges {
                    let (first, len) = (raw.ranges.0 as usize, raw.ranges.1 as usize);
                    ranges.get(first..first + len).unwrap_or_default().to_vec()
                } else {
                    Vec::new()
                },
                range_list: raw.range_list,
                site_addr: raw.site_addr,
                site_addr_source: raw.source,
                call_file: raw
                    .call_file
                    .and_then(|f| file_map.get(f as usize).copied()),
                call_line: raw.call_line,
                call_column: raw.call_column,
                params,
            };
            sink(site, &functions, total_sites);
        }
    }
    InlineInfo {
        functions,
        sites: Vec::new(),
        files,
        units,
    }
}

/// Parameter locations of inline sites at any PC inside them (extraction evaluates them at the
/// site's probe address only): the same classification, with the location-list entry that covers
/// the PC. Build once per binary (it indexes the call-frame information) and ask per address.
pub struct ParamsAt<'d> {
    data: &'d DebugData<'d>,
    cfa: CfaIndex<'d>,
}

impl<'d> ParamsAt<'d> {
    /// Prepare to evaluate parameter locations in `data`.
    pub fn new(data: &'d DebugData<'d>) -> Self {
        let address_size = data
            .dwarf()
            .units()
            .next()
            .ok()
            .flatten()
            .map_or(8, |h| h.address_size());
        ParamsAt {
            data,
            cfa: CfaIndex::new(data, address_size),
        }
    }

    /// The locations of `site`'s parameters at `pc`, one per [`Function::params`] of the callee
    /// (as [`InlineSite::params`]); a parameter whose DIE is not found stays
    /// [`Location::Missing`].
    pub fn params(
        &self,
        info: &InlineInfo<'_>,
        site: &InlineSite,
        pc: u64,
    ) -> Result<Vec<ParamLocation>, Error> {
        let callee = &info.functions[site.callee as usize];
        let mut out = vec![
            ParamLocation {
                location: Location::Missing,
                source: LocationSource::None,
                zero_length_view: false,
            };
            callee.params.len()
        ];
        let dwarf = self.data.dwarf();
        let target = gimli::DebugInfoOffset(site.die as usize);
        let mut units = dwarf.units();
        let header = loop {
            match units.next() {
                Ok(Some(h)) if target.to_unit_offset(&h).is_some() => break h,
                Ok(Some(_)) => continue,
                Ok(None) => return Ok(out),
                Err(e) => return Err(Error::dwarf(site.die, "unit header")(e)),
            }
        };
        let unit_owned = dwarf.unit(header).map_err(Error::dwarf(site.die, "unit"))?;
        let unit = UnitRef::new(&dwarf, &unit_owned);
        let frame_base = site
            .caller_die
            .and_then(|d| gimli::DebugInfoOffset(d as usize).to_unit_offset(&header))
            .and_then(|o| unit.entry(o).ok())
            .and_then(|e| match e.attr_value(dw::DW_AT_frame_base) {
                Some(AttributeValue::Exprloc(e)) => {
                    Some(FrameBaseRule::from_expression(e, unit.encoding()))
                }
                _ => None,
            })
            .unwrap_or(FrameBaseRule::Unknown);
        let Some(offset) = target.to_unit_offset(&header) else {
            return Ok(out);
        };
        let mut tree = unit
            .entries_tree(Some(offset))
            .map_err(Error::dwarf(site.die, "DIE tree"))?;
        let root = tree.root().map_err(Error::dwarf(site.die, "DIE tree"))?;
        let mut children = root.children();
        let mut unwind = UnwindContext::new();
        while let Some(child) = children
            .next()
            .map_err(Error::dwarf(site.die, "DIE tree"))?
        {
            let entry = child.entry();
            if entry.tag() != dw::DW_TAG_formal_parameter {
                continue;
            }
            let origin = entry
                .attr_value(dw::DW_AT_abstract_origin)
                .and_then(|v| die_ref(&unit_owned, v));
            let mut ctx = ClassifyCtx {
                unit,
                frame_base,
                site_addr: Some(pc),
                cfa: &self.cfa,
                unwind: &mut unwind,
                endian: self.data.endian(),
            };
            let loc = param_location(entry, &mut ctx)?;
            if let Some(i) = callee.params.iter().position(|p| Some(p.die) == origin) {
                out[i] = loc;
            }
        }
        Ok(out)
    }
}
