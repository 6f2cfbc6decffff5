//! The reports of `pcmap inline stats`, `pcmap inline sites` and `pcmap symbolize`: the census
//! table, site records (text and JSON) and symbolizer frames in `llvm-symbolizer`'s layout.

use std::io::Write;

use serde::Serialize;

use crate::census::Census;
use crate::symbolize::Frame;
use crate::{DebugData, Function, InlineInfo, InlineSite, ParamLocation};

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
        params: json_params(callee, &site.params),
    }
}

/// The JSON records of `callee`'s parameters at the locations `params` (one per parameter, as
/// [`InlineSite::params`] or [`crate::ParamsAt::params`] give them).
pub fn json_params<'a>(callee: &'a Function, params: &'a [ParamLocation]) -> Vec<JsonParam<'a>> {
    params
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
        .collect()
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

/// The frames of one address as `llvm-symbolizer` prints them by default: function, then
/// `file:line:column`, per frame, then an empty line.
pub fn write_frames_text(w: &mut dyn Write, frames: &[Frame]) -> std::io::Result<()> {
    write_symbolized_text(w, None, frames, &TextStyle::default())
}

/// The answer to a symbol lookup in llvm-symbolizer's text layout `style`: each location as an
/// outermost frame, then the end of the answer; nothing found prints the unknown frame.
pub fn write_symbol_locations_text(
    w: &mut dyn Write,
    locations: &[Frame],
    style: &TextStyle,
) -> std::io::Result<()> {
    if locations.is_empty() {
        return write_symbolized_text(w, None, &[], style);
    }
    // Symbol locations come from llvm's single-frame lookup.
    let style = &TextStyle {
        inline_lookup: false,
        ..*style
    };
    for l in locations {
        write_frame(w, l, false, style)?;
    }
    if !style.gnu {
        writeln!(w)?;
    }
    Ok(())
}

/// llvm-symbolizer's text layouts (`--output-style=LLVM|GNU` and the options that shape them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextStyle {
    /// `--output-style=GNU`: `file:line` with ` (discriminator N)`, no empty line after an address.
    pub gnu: bool,
    /// `--print-address`: the address (`0x...`) first.
    pub print_address: bool,
    /// `--pretty-print`: one line per frame, `function at file:line:column`, callers prefixed with
    /// ` (inlined by) `.
    pub pretty: bool,
    /// Print function names (false for `--functions=none`).
    pub print_functions: bool,
    /// `--verbose`: file, function start, line, column and discriminator on separate lines.
    pub verbose: bool,
    /// The frames come from llvm-symbolizer's inline lookup (`--inlines`, or any address in the
    /// GNU layout): an unknown function start file is then printed empty, else as llvm's
    /// `<invalid>`.
    pub inline_lookup: bool,
}

impl Default for TextStyle {
    fn default() -> Self {
        TextStyle {
            gnu: false,
            print_address: false,
            pretty: false,
            print_functions: true,
            verbose: false,
            inline_lookup: false,
        }
    }
}

/// The frames of one address in llvm-symbolizer's text layout `style`; `address` is printed
/// when `style.print_address` asks for it.
pub fn write_symbolized_text(
    w: &mut dyn Write,
    address: Option<u64>,
    frames: &[Frame],
    style: &TextStyle,
) -> std::io::Result<()> {
    if let Some(a) = address
        && style.print_address
    {
        write!(w, "{a:#x}{}", if style.pretty { ": " } else { "\n" })?;
    }
    let unknown = [Frame::default()];
    let frames = if frames.is_empty() { &unknown } else { frames };
    for (i, f) in frames.iter().enumerate() {
        write_frame(w, f, i > 0, style)?;
    }
    if !style.gnu {
        writeln!(w)?;
    }
    Ok(())
}

/// One frame in llvm-symbolizer's text layout; `inlined` frames get ` (inlined by) ` when pretty.
fn write_frame(
    w: &mut dyn Write,
    f: &Frame,
    inlined: bool,
    style: &TextStyle,
) -> std::io::Result<()> {
    if style.print_functions {
        if style.pretty && inlined {
            write!(w, " (inlined by) ")?;
        }
        write!(
            w,
            "{}{}",
            f.function.as_deref().unwrap_or("??"),
            if style.pretty { " at " } else { "\n" }
        )?;
    }
    let file = f.file.as_deref().unwrap_or("??");
    if style.verbose {
        writeln!(w, "  Filename: {file}")?;
        if f.start_line != 0 {
            let unknown = if style.inline_lookup { "" } else { "<invalid>" };
            let start = f.start_file.as_deref().unwrap_or(unknown);
            writeln!(w, "  Function start filename: {start}")?;
            writeln!(w, "  Function start line: {}", f.start_line)?;
        }
        if !style.gnu
            && let Some(a) = f.start_address
        {
            writeln!(w, "  Function start address: {a:#x}")?;
        }
        writeln!(w, "  Line: {}", f.line)?;
        writeln!(w, "  Column: {}", f.column)?;
        if f.discriminator != 0 {
            writeln!(w, "  Discriminator: {}", f.discriminator)?;
        }
    } else if style.gnu {
        write!(w, "{file}:{}", f.line)?;
        if f.discriminator != 0 {
            write!(w, " (discriminator {})", f.discriminator)?;
        }
        writeln!(w)?;
    } else {
        writeln!(w, "{file}:{}:{}", f.line, f.column)?;
    }
    Ok(())
}

/// One frame in `llvm-symbolizer --output-style=JSON` (keys in llvm's order; `""` for unknown
/// names and addresses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct LlvmJsonFrame<'a> {
    /// Column (0 = unknown).
    pub column: u32,
    /// Discriminator (0 = none).
    pub discriminator: u32,
    /// Source file, `""` when unknown.
    pub file_name: &'a str,
    /// Function name, `""` when unknown.
    pub function_name: &'a str,
    /// Line (0 = unknown).
    pub line: u32,
    /// Start of the function (`0x...`), `""` when unknown.
    pub start_address: String,
    /// Declaration file of the function, `""` when unknown.
    pub start_file_name: &'a str,
    /// Declaration line of the function (0 = unknown).
    pub start_line: u32,
}

impl<'a> From<&'a Frame> for LlvmJsonFrame<'a> {
    fn from(f: &'a Frame) -> Self {
        LlvmJsonFrame {
            column: f.column,
            discriminator: f.discriminator,
            file_name: f.file.as_deref().unwrap_or(""),
            function_name: f.function.as_deref().unwrap_or(""),
            line: f.line,
            start_address: f.start_address.map_or(String::new(), |a| format!("{a:#x}")),
            start_file_name: f.start_file.as_deref().unwrap_or(""),
            start_line: f.start_line,
        }
    }
}

/// One answer of `llvm-symbolizer --output-style=JSON`: for an address (`Symbol` holds its
/// frames) or for an input that is not an address (`SymName`, with an empty `Loc`: pcmap does not
/// look symbols up by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct LlvmJsonRecord<'a> {
    /// The address as `0x...`, absent when the input named no address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Symbol lookups: the location of every symbol of that name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loc: Option<Vec<LlvmJsonFrame<'a>>>,
    /// The binary as it was named.
    pub module_name: &'a str,
    /// The input that was not an address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sym_name: Option<&'a str>,
    /// Frames, innermost first (absent for a symbol lookup).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<Vec<LlvmJsonFrame<'a>>>,
}

impl<'a> LlvmJsonRecord<'a> {
    /// The record of `address` in `module` (an empty frame when `frames` is empty).
    pub fn address(module: &'a str, address: Option<u64>, frames: &'a [Frame]) -> Self {
        let mut symbol: Vec<LlvmJsonFrame<'a>> = frames.iter().map(LlvmJsonFrame::from).collect();
        if symbol.is_empty() {
            symbol.push(LlvmJsonFrame {
                column: 0,
                discriminator: 0,
                file_name: "",
                function_name: "",
                line: 0,
                start_address: String::new(),
                start_file_name: "",
                start_line: 0,
            });
        }
        LlvmJsonRecord {
            address: address.map(|a| format!("{a:#x}")),
            loc: None,
            module_name: module,
            sym_name: None,
            symbol: Some(symbol),
        }
    }

    /// The record of a symbol lookup: `name` (as the input spelled it) and the locations found.
    pub fn symbol_name(module: &'a str, name: &'a str, locations: &'a [Frame]) -> Self {
        LlvmJsonRecord {
            address: None,
            loc: Some(locations.iter().map(LlvmJsonFrame::from).collect()),
            module_name: module,
            sym_name: Some(name),
            symbol: None,
        }
    }
}

/// One input line of llvm-symbolizer: an optional `CODE `/`DATA ` prefix, the binary when no
/// `--obj` was given (quoted or not), then an address (`0x` hexadecimal, `0` octal, else
/// decimal, as llvm-symbolizer reads it) or something else (a symbol name). Text after the first
/// address is ignored, as llvm-symbolizer ignores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputLine<'a> {
    /// The binary named on the line (`None` when `--obj` gave it).
    pub module: Option<&'a str>,
    /// The address, or the text that is not one.
    pub target: Result<u64, &'a str>,
}

/// Parse one input line (see [`InputLine`]); `with_module` says the line starts with a binary.
pub fn parse_input_line(line: &str, with_module: bool) -> InputLine<'_> {
    let delims: &[char] = &[' ', '\n', '\r'];
    let mut rest = line;
    for p in ["CODE ", "DATA ", "FRAME "] {
        if let Some(r) = rest.strip_prefix(p) {
            rest = r;
            break;
        }
    }
    rest = rest.trim_start_matches(delims);
    let mut module = None;
    if with_module {
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'');
        let (m, r) = match quote {
            Some(q) => match rest[1..].find(q) {
                Some(end) => (&rest[1..1 + end], &rest[end + 2..]),
                None => (&rest[1..], ""),
            },
            None => rest.split_at(rest.find(delims).unwrap_or(rest.len())),
        };
        module = Some(m);
        rest = r.trim_start_matches(delims);
    }
    let token = &rest[..rest.find(delims).unwrap_or(rest.len())];
    InputLine {
        module,
        target: parse_llvm_number(token).ok_or(token),
    }
}

/// A symbol-lookup input split into the symbol and its offset (`name+0x10`; 0 without one).
pub fn split_symbol_offset(s: &str) -> (&str, u64) {
    if let Some((name, off)) = s.rsplit_once('+')
        && let Some(off) = parse_llvm_number(off)
    {
        return (name, off);
    }
    (s, 0)
}

/// A number as llvm's `getAsInteger(0, ...)` reads it: `0x`/`0X` hexadecimal, `0b` binary, a
/// leading `0` octal, else decimal.
pub fn parse_llvm_number(s: &str) -> Option<u64> {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        (b, 2)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// One address as `pcmap symbolize --json` prints it.
#[derive(Debug, Serialize)]
pub struct JsonAddress<'a> {
    /// The address.
    pub address: u64,
    /// Its frames, innermost first.
    pub frames: &'a [Frame],
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn input_lines_as_llvm_symbolizer_reads_them() {
        let l = parse_input_line("0x10", false);
        assert_eq!((l.module, l.target), (None, Ok(0x10)));
        assert_eq!(parse_input_line("010", false).target, Ok(8));
        assert_eq!(parse_input_line("10 0x20", false).target, Ok(10));
        assert_eq!(parse_input_line("CODE 0x10", false).target, Ok(0x10));
        assert_eq!(parse_input_line("main+4", false).target, Err("main+4"));
        let l = parse_input_line("\"/a b/c\" 0x10", true);
        assert_eq!((l.module, l.target), (Some("/a b/c"), Ok(0x10)));
        let l = parse_input_line("/bin/x", true);
        assert_eq!((l.module, l.target), (Some("/bin/x"), Err("")));
        assert_eq!(split_symbol_offset("main+0x10"), ("main", 0x10));
        assert_eq!(split_symbol_offset("main+x"), ("main+x", 0));
        assert_eq!(parse_llvm_number("0x"), None);
        assert_eq!(parse_llvm_number("0"), Some(0));
        assert_eq!(parse_llvm_number("-1"), None);
    }

    proptest! {
        #[test]
        fn any_input_line_parses_without_panicking(line in "\\PC{0,40}", module: bool) {
            let l = parse_input_line(&line, module);
            if let Err(s) = l.target {
                let _ = split_symbol_offset(s);
            }
        }
    }
}
