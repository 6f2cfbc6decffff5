//! Census of inline sites and parameter locations (the table of the BTF-inline research note §3.3).

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::location::{Location, LocationClass};
use crate::{InlineInfo, LocationSource, SiteAddrSource};

/// Count and share of one category.
#[derive(Debug, Clone, Serialize)]
pub struct Share {
    /// Category name.
    pub name: &'static str,
    /// Count.
    pub count: u64,
    /// Percentage of the category's denominator.
    pub percent: f64,
}

/// The census of one binary.
#[derive(Debug, Clone, Serialize)]
pub struct Census {
    /// Compilation units.
    pub units: usize,
    /// `DW_TAG_inlined_subroutine` DIEs.
    pub sites: u64,
    /// Sites without any code address.
    pub sites_without_address: u64,
    /// Arguments (declared parameters of the callee, summed over sites).
    pub args: u64,
    /// Distinct inlined functions (by root DIE).
    pub inlined_functions: u64,
    /// Inlined functions without any out-of-line copy.
    pub inlined_functions_without_out_of_line: u64,
    /// Where site addresses came from: entry_pc / low_pc / first_range / none.
    pub site_addr_sources: Vec<Share>,
    /// Sites with `DW_AT_ranges` whose `DW_AT_entry_pc` is not the start of the first range.
    pub entry_pc_not_first_range: u64,
    /// Sites with `DW_AT_ranges`.
    pub sites_with_range_list: u64,
    /// Sites by number of ranges: 1, 2, 3, 4, 5+.
    pub range_counts: Vec<Share>,
    /// Sites by nesting depth: 1, 2, 3, 4+.
    pub depths: Vec<Share>,
    /// Maximum nesting depth.
    pub max_depth: u32,
    /// Arguments by location class (percent of args).
    pub classes: Vec<Share>,
    /// Arguments by DWARF form: exprloc, loclist 1, loclist 2-3, loclist 4+, const_value, none.
    pub forms: Vec<Share>,
    /// Arguments resolved only through a GCC zero-length view entry.
    pub via_zero_length_view: u64,
    /// Sites with all / some / none of their arguments located, and with no arguments.
    pub site_coverage: Vec<Share>,
    /// Cumulative coverage in the RFC's categories: literal, register+above, arithmetic+above,
    /// composite+above, stack+above, and empty.
    pub cumulative: Vec<Share>,
    /// Share of located arguments that are a register or a constant.
    pub reg_const_share_of_located: f64,
    /// Distinct (location, size) pairs among located arguments.
    pub distinct_locations: u64,
    /// Distinct per-site location tuples (LOC_PROTO candidates).
    pub distinct_location_lists: u64,
    /// Size estimates of the published encodings, in bytes.
    pub encoding_estimates: Vec<EncodingEstimate>,
}

/// Estimated size of one encoding.
#[derive(Debug, Clone, Serialize)]
pub struct EncodingEstimate {
    /// Layout name.
    pub layout: &'static str,
    /// Estimated bytes.
    pub bytes: u64,
}

/// A location with the byte size of its parameter: the dedup key of a `LOC_PARAM`.
type SizedLocation<'a> = (&'a Location, Option<u64>);

fn pct(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        (n as f64) * 100.0 / (d as f64)
    }
}

fn shares(items: &[(&'static str, u64)], denom: u64) -> Vec<Share> {
    items
        .iter()
        .map(|&(name, count)| Share {
            name,
            count,
            percent: pct(count, denom),
        })
        .collect()
}

/// Number of 4-byte value words a location needs in a 2026-style `LOC_PARAM`, or `None` when it
/// is not encodable there.
fn loc_param_words(loc: &Location) -> Option<u64> {
    match loc {
        Location::Constant { value } => Some(if *value > u64::from(u32::MAX) { 2 } else { 1 }),
        Location::Address { .. } | Location::AddressValue { .. } => Some(2),
        Location::Register { .. } => Some(1),
        Location::RegisterOffsetValue { .. } | Location::Memory { .. } => Some(2),
        Location::FrameBase { base: Some(_), .. }
        | Location::FrameBaseValue { base: Some(_), .. } => Some(2),
        _ => None,
    }
}

impl Census {
    /// Compute the census of `info`.
    pub fn new(info: &InlineInfo<'_>) -> Census {
        let sites = info.sites.len() as u64;
        let mut args = 0u64;
        let mut classes: FxHashMap<LocationClass, u64> = FxHashMap::default();
        let mut forms = [0u64; 6];
        let mut via_zero = 0u64;
        let mut site_cov = [0u64; 4];
        let mut depths = [0u64; 4];
        let mut max_depth = 0;
        let mut ranges = [0u64; 5];
        let mut range_list = 0u64;
        let mut sources = [0u64; 4];
        let mut entry_not_first = 0u64;
        let mut without_addr = 0u64;
        let mut distinct_locs: FxHashSet<SizedLocation<'_>> = FxHashSet::default();
        let mut distinct_lists: FxHashSet<Vec<Option<SizedLocation<'_>>>> = FxHashSet::default();
        for site in &info.sites {
            let callee = &info.functions[site.callee as usize];
            max_depth = max_depth.max(site.depth);
            depths[(site.depth.clamp(1, 4) - 1) as usize] += 1;
            if !site.ranges.is_empty() {
                ranges[site.ranges.len().min(5) - 1] += 1;
            }
            if site.range_list {
                range_list += 1;
                if site.site_addr_source == SiteAddrSource::EntryPc
                    && site.ranges.first().map(|r| r.start) != site.site_addr
                {
                    entry_not_first += 1;
                }
            }
            sources[match site.site_addr_source {
                SiteAddrSource::EntryPc => 0,
                SiteAddrSource::LowPc => 1,
                SiteAddrSource::FirstRange => 2,
                SiteAddrSource::None => 3,
            }] += 1;
            if site.site_addr.is_none() {
                without_addr += 1;
            }
            let mut located = 0;
            let mut tuple = Vec::with_capacity(site.params.len());
            for (p, decl) in site.params.iter().zip(&callee.params) {
                args += 1;
                *classes.entry(p.location.class()).or_default() += 1;
                forms[match p.source {
                    LocationSource::Expression => 0,
                    LocationSource::LocationList(1) => 1,
                    LocationSource::LocationList(2..=3) => 2,
                    LocationSource::LocationList(_) => 3,
                    LocationSource::ConstValue => 4,
                    LocationSource::None => 5,
                }] += 1;
                if p.zero_length_view {
                    via_zero += 1;
                }
                if p.location.is_available() {
                    located += 1;
                    distinct_locs.insert((&p.location, decl.byte_size));
                    tuple.push(Some((&p.location, decl.byte_size)));
                } else {
                    tuple.push(None);
                }
            }
            distinct_lists.insert(tuple);
            let n = site.params.len();
            site_cov[if n == 0 {
                3
            } else if located == n {
                0
            } else if located > 0 {
                1
            } else {
                2
            }] += 1;
        }
        let c = |k: LocationClass| classes.get(&k).copied().unwrap_or(0);
        use LocationClass as K;
        let literal = c(K::Constant) + c(K::Address);
        let register =
            literal + c(K::Register) + c(K::Memory) + c(K::RegisterOffsetValue) + c(K::EntryValue);
        let arithmetic = register + c(K::Computed);
        let composite = arithmetic + c(K::Pieces);
        let stack = composite + c(K::FrameBase);
        let empty = c(K::Missing) + c(K::NoLocation) + c(K::NotCovered);
        let located_total = args - empty;
        let inlined: Vec<_> = info
            .functions
            .iter()
            .filter(|f| f.inline_sites > 0)
            .collect();

        // Size estimates (see the research note §1.2/§1.3): fixed 12-byte btf_type records.
        let loc_params: u64 = distinct_locs
            .iter()
            .filter_map(|(l, _)| loc_param_words(l))
            .count() as u64;
        let loc_param_words_total: u64 = distinct_locs
            .iter()
            .filter_map(|(l, _)| loc_param_words(l))
            .sum();
        let protos: u64 = distinct_lists.iter().map(|t| 12 + 4 * t.len() as u64).sum();
        let func_protos: u64 = inlined.iter().map(|f| 12 + 8 * f.params.len() as u64).sum();
        let names: u64 = inlined
            .iter()
            .map(|f| f.name.as_deref().map_or(0, str::len) as u64 + 1)
            .sum();
        let v1 = 24 + loc_params * 20 + protos + 12 + 16 * sites + func_protos + names;
        let v2026 = 32
            + 23 * 4
            + loc_params * 16
            + loc_param_words_total * 4
            + protos
            + 12
            + 12 * sites
            + inlined.len() as u64 * 12
            + func_protos
            + names;
        Census {
            units: info.units,
            sites,
            sites_without_address: without_addr,
            args,
            inlined_functions: inlined.len() as u64,
            inlined_functions_without_out_of_line: inlined.iter().filter(|f| !f.out_of_line).count()
                as u64,
            site_addr_sources: shares(
                &[
                    ("entry_pc", sources[0]),
                    ("low_pc", sources[1]),
                    ("first_range", sources[2]),
                    ("none", sources[3]),
                ],
                sites,
            ),
            entry_pc_not_first_range: entry_not_first,
            sites_with_range_list: range_list,
            range_counts: shares(
                &[
                    ("1", ranges[0]),
                    ("2", ranges[1]),
                    ("3", ranges[2]),
                    ("4", ranges[3]),
                    ("5+", ranges[4]),
                ],
                sites,
            ),
            depths: shares(
                &[
                    ("1", depths[0]),
                    ("2", depths[1]),
                    ("3", depths[2]),
                    ("4+", depths[3]),
                ],
                sites,
            ),
            max_depth,
            classes: LocationClass::ALL
                .iter()
                .map(|&k| Share {
                    name: k.name(),
                    count: c(k),
                    percent: pct(c(k), args),
                })
                .collect(),
            forms: shares(
                &[
                    ("exprloc", forms[0]),
                    ("loclist_1", forms[1]),
                    ("loclist_2_3", forms[2]),
                    ("loclist_4plus", forms[3]),
                    ("const_value", forms[4]),
                    ("none", forms[5]),
                ],
                args,
            ),
            via_zero_length_view: via_zero,
            site_coverage: shares(
                &[
                    ("all", site_cov[0]),
                    ("some", site_cov[1]),
                    ("none", site_cov[2]),
                    ("no_args", site_cov[3]),
                ],
                sites,
            ),
            cumulative: shares(
                &[
                    ("literal", literal),
                    ("register+above", register),
                    ("arithmetic+above", arithmetic),
                    ("composite+above", composite),
                    ("stack+above", stack),
                    ("empty", empty),
                ],
                args,
            ),
            reg_const_share_of_located: pct(c(K::Register) + c(K::Constant), located_total),
            distinct_locations: distinct_locs.len() as u64,
            distinct_location_lists: distinct_lists.len() as u64,
            encoding_estimates: vec![
                EncodingEstimate {
                    layout: "btf-2025 (Oct-2025 RFC, 16 B/site)",
                    bytes: v1,
                },
                EncodingEstimate {
                    layout: "btf-2026 (12 B/site + FUNC + layout)",
                    bytes: v2026,
                },
            ],
        }
    }
}
