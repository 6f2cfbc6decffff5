//! Rendering decoded maps as llvm-readobj 22 does with `--elf-output-style=JSON --bb-addr-map`:
//! the same field names, the same values (numbers, not hex strings) and the same rules for which
//! optional fields appear. llvm-readobj repeats the `"BBAddrMap"` key once per map section; this
//! renderer writes one `"BBAddrMap"` list holding the functions of all sections in section order
//! (the same content with duplicate keys merged), so the output is valid JSON for every parser.

use std::fmt::Write;

use crate::elf::ElfBbAddrMaps;
use crate::model::FunctionMap;

fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Render one function as llvm-readobj's `{"Function": {...}}` object. `name` of `None` prints
/// as `<?>`, as llvm-readobj does when no function symbol has the function's address.
pub fn render_function(out: &mut String, f: &FunctionMap, name: Option<&str>) {
    let feat = f.features;
    let _ = write!(
        out,
        "{{\"Function\":{{\"At\":{},\"Name\":",
        f.function_address()
    );
    push_json_string(out, name.unwrap_or("<?>"));
    out.push_str(",\"BB Ranges\":[");
    for (ri, r) in f.ranges.iter().enumerate() {
        if ri > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"Base Address\":{},\"BB Entries\":[",
            r.base_address
        );
        for (bi, e) in r.entries.iter().enumerate() {
            if bi > 0 {
                out.push(',');
            }
            let _ = write!(out, "{{\"ID\":{},\"Offset\":{}", e.id, e.offset);
            if !e.callsite_end_offsets.is_empty() {
                out.push_str(",\"Callsite End Offsets\":[");
                for (i, c) in e.callsite_end_offsets.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{c}");
                }
                out.push(']');
            }
            if feat.bb_hash() {
                let _ = write!(out, ",\"Hash\":{}", e.hash);
            }
            let m = e.metadata;
            let _ = write!(
                out,
                ",\"Size\":{},\"HasReturn\":{},\"HasTailCall\":{},\"IsEHPad\":{},\"CanFallThrough\":{},\"HasIndirectBranch\":{}}}",
                e.size,
                m.has_return(),
                m.has_tail_call(),
                m.is_eh_pad(),
                m.can_fall_through(),
                m.has_indirect_branch()
            );
        }
        out.push_str("]}");
    }
    out.push(']');
    if let Some(p) = f.pgo.as_ref().filter(|_| feat.has_pgo_analysis()) {
        out.push_str(",\"PGO analyses\":{");
        let mut first = true;
        if feat.func_entry_count() {
            let _ = write!(out, "\"FuncEntryCount\":{}", p.func_entry_count);
            first = false;
        }
        if feat.has_pgo_analysis_bb_data() {
            if !first {
                out.push(',');
            }
            out.push_str("\"PGO BB entries\":[");
            for (i, b) in p.bb_entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('{');
                let mut first = true;
                if feat.bb_freq() {
                    let _ = write!(out, "\"Frequency\":{}", b.frequency);
                    if feat.post_link_cfg() {
                        let _ = write!(out, ",\"PostLink Frequency\":{}", b.post_link_frequency);
                    }
                    first = false;
                }
                if feat.br_prob() {
                    if !first {
                        out.push(',');
                    }
                    out.push_str("\"Successors\":[");
                    for (j, s) in b.successors.iter().enumerate() {
                        if j > 0 {
                            out.push(',');
                        }
                        let _ = write!(out, "{{\"ID\":{},\"Probability\":{}", s.id, s.probability);
                        if feat.post_link_cfg() {
                            let _ =
                                write!(out, ",\"PostLink Probability\":{}", s.post_link_frequency);
                        }
                        out.push('}');
                    }
                    out.push(']');
                }
                out.push('}');
            }
            out.push(']');
        }
        out.push('}');
    }
    out.push_str("}}");
}

/// Render a whole file: `[{"FileSummary": {...}, "BBAddrMap": [...]}]`. The summary has
/// llvm-readobj's `File`, `Format`, `Arch` and `AddressSize` (not `LoadName`).
pub fn render_file(file_name: &str, maps: &ElfBbAddrMaps) -> String {
    let mut out = String::with_capacity(1 << 16);
    out.push_str("[{\"FileSummary\":{\"File\":");
    push_json_string(&mut out, file_name);
    out.push_str(",\"Format\":");
    push_json_string(&mut out, &maps.format_name());
    out.push_str(",\"Arch\":");
    push_json_string(&mut out, maps.arch_name());
    let _ = write!(
        out,
        ",\"AddressSize\":\"{}bit\"}}",
        u32::from(maps.address_size) * 8
    );
    out.push_str(",\"BBAddrMap\":[");
    let mut first = true;
    for s in &maps.sections {
        for (f, name) in s.functions.iter().zip(&s.names) {
            if !first {
                out.push(',');
            }
            first = false;
            render_function(&mut out, f, name.as_deref());
        }
    }
    out.push_str("]}]");
    out
}
