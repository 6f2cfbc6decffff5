//! The reports of `pcmap inline stats`, `pcmap inline sites` and `pcmap symbolize`: the census
//! table, site records (text and JSON) and symbolizer frames in `llvm-symbolizer`'s layout.

use std::io::Write;

use serde::Serialize;

use crate::census::Census;
use crate::symbolize::Frame;
use crate::{DebugData, InlineInfo, InlineSite};

/// The text table of `pcmap inline stats`; `debug_info` is the size of `.debug_info` in bytes.
pub fn write_census(w: &mut dyn Write, c: &Census, debug_info: u64) -> std::io::Result<()> {
    writeln!(w, "compilation units                 {}", c.units)?;
    writeln!(w, ".debug_info bytes                 {debug_info}")?;
    writeln!(w, "inline sites                      {}", c.sites)?;
    writeln!(
        w,
        "  without code address            {}",
        c.sites_without_address
    )?;
    writeln!(w, "args (from abstract origin)       {}", c.args)?;
    writeln!(
        w,
        "distinct inlined functions        {} ({} with no out-of-line copy)",
        c.inlined_functions, c.inlined_functions_without_out_of_line
    )?;
    let list = |shares: &[crate::census::Share]| {
        shares
            .iter()
            .map(|s| format!("{} {} ({:.1}%)", s.name, s.count, s.percent))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(
        w,
        "site address from                 {}",
        list(&c.site_addr_sources)
    )?;
    writeln!(
        w,
        "sites with DW_AT_ranges           {} ({:.1}%); entry_pc not the first range: {}",
        c.sites_with_range_list,
        if c.sites == 0 {
            0.0
        } else {
            c.sites_with_range_list as f64 * 100.0 / c.sites as f64
        },
        c.entry_pc_not_first_range
    )?;
    writeln!(
        w,
        "ranges per site                   {}",
        list(&c.range_counts)
    )?;
    writeln!(
        w,
        "nesting depth                     {} (max {})",
        list(&c.depths),
        c.max_depth
    )?;
    writeln!(w, "location classes (% of args):")?;
    for s in &c.classes {
        writeln!(w, "  {:<14} {:>9} {:>6.1}%", s.name, s.count, s.percent)?;
    }
    writeln!(w, "location forms                    {}", list(&c.forms))?;
    writeln!(
        w,
        "  resolved only via zero-length view entries: {}",
        c.via_zero_length_view
    )?;
    writeln!(
        w,
        "sites: args located               {}",
        list(&c.site_coverage)
    )?;
    writeln!(w, "cumulative coverage (RFC categories):")?;
    for s in &c.cumulative {
        writeln!(w, "  {:<18} {:>9} {:>6.1}%", s.name, s.count, s.percent)?;
    }
    writeln!(
        w,
        "reg+const share of located args   {:.1}%",
        c.reg_const_share_of_located
    )?;
    writeln!(
        w,
        "distinct locations / location lists after dedup: {} / {}",
        c.distinct_locations, c.distinct_location_lists
    )?;
    writeln!(w, "encoding size estimates (bytes):")?;
    for e in &c.encoding_estimates {
        writeln!(w, "  {:<40} {:>10}", e.layout, e.bytes)?;
    }
    Ok(())
}

/// One parameter of a [`JsonSite`].
#[derive(Debug, Serialize)]
pub struct JsonParam<'a> {
    /// Declared name.
    pub name: Option<&'a str>,
    /// Declared size in bytes.
    pub byte_size: Option<u64>,
    /// Location class name.
    pub class: &'static str,
    /// The location.
    pub location: &'a crate::Location,
    /// The location with x86-64 register names.
    pub display: String,
    /// Where the location came from.
    pub source: crate::LocationSource,
    /// Found only through a zero-length view entry.
    pub zero_length_view: bool,
}

/// One inline site as `pcmap inline sites --json` prints it.
#[derive(Debug, Serialize)]
pub struct JsonSite<'a> {
    /// `.debug_info` offset of the `DW_TAG_inlined_subroutine`.
    pub die: u64,
    /// Inlined function.
    pub function: &'a str,
    /// Enclosing out-of-line function.
    pub caller: Option<&'a str>,
    /// Nesting depth.
    pub depth: u32,
    /// DIE of the enclosing inline site.
    pub parent_die: Option<u64>,
    /// Probe address.
    pub address: Option<u64>,
    /// File offset of the probe address.
    pub file_offset: Option<u64>,
    /// Where the address came from.
    pub address_source: crate::SiteAddrSource,
    /// Address ranges.
    pub ranges: Vec<[u64; 2]>,
    /// Call file.
    pub call_file: &'a str,
    /// Call line.
    pub call_line: u32,
    /// Call column.
    pub call_column: u32,
    /// Parameters with their locations.
    pub params: Vec<JsonParam<'a>>,
}

/// The JSON record of `site`.
pub fn json_site<'a>(
    info: &'a InlineInfo<'_>,
    data: &DebugData<'_>,
    site: &'a InlineSite,
) -> JsonSite<'a> {
    let callee = &info.functions[site.callee as usize];
    JsonSite {
        die: site.die,
        function: info.function_name(site.callee),
        caller: site.caller.map(|c| info.function_name(c)),
        depth: site.depth,
        parent_die: site
            .parent
            .and_then(|p| info.sites.get(p as usize))
            .map(|p| p.die),
        address: site.site_addr,
        file_offset: site.site_addr.and_then(|a| data.file_offset(a)),
        address_source: site.site_addr_source,
        ranges: site.ranges.iter().map(|r| [r.start, r.end]).collect(),
        call_file: info.file_name(site.call_file),
        call_line: site.call_line,
        call_column: site.call_column,
        params: site
            .params
            .iter()
            .zip(&callee.params)
            .map(|(p, d)| JsonParam {
                name: d.name.as_deref(),
                byte_size: d.byte_size,
                class: p.location.class().name(),
                location: &p.location,
                display: p.location.display_x86_64(),
                source: p.source,
                zero_length_view: p.zero_length_view,
            })
            .collect(),
    }
}

/// The text line of `site` and one line per parameter (`pcmap inline sites`).
pub fn write_site_text(
    w: &mut dyn Write,
    info: &InlineInfo<'_>,
    s: &InlineSite,
) -> std::io::Result<()> {
    let callee = &info.functions[s.callee as usize];
    let addr = s.site_addr.map_or("-".to_string(), |a| format!("{a:#x}"));
    writeln!(
        w,
        "{addr} {} in {} depth {} at {}:{}:{}",
        info.function_name(s.callee),
        s.caller.map_or("??", |c| info.function_name(c)),
        s.depth,
        info.file_name(s.call_file),
        s.call_line,
        s.call_column
    )?;
    for (p, d) in s.params.iter().zip(&callee.params) {
        writeln!(
            w,
            "    {} = {}{}",
            d.name.as_deref().unwrap_or("?"),
            p.location.display_x86_64(),
            if p.zero_length_view {
                " (zero-length view entry)"
            } else {
                ""
            }
        )?;
    }
    Ok(())
}

/// The frames of one address as `llvm-symbolizer` prints them: function, then
/// `file:line:column`, per frame, then an empty line.
pub fn write_frames_text(w: &mut dyn Write, frames: &[Frame]) -> std::io::Result<()> {
    for f in frames {
        writeln!(w, "{}", f.function.as_deref().unwrap_or("??"))?;
        writeln!(
            w,
            "{}:{}:{}",
            f.file.as_deref().unwrap_or("??"),
            f.line,
            f.column
        )?;
    }
    writeln!(w)
}

/// One address as `pcmap symbolize --json` prints it.
#[derive(Debug, Serialize)]
pub struct JsonAddress<'a> {
    /// The address.
    pub address: u64,
    /// Its frames, innermost first.
    pub frames: &'a [Frame],
}
