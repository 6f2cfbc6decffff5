//! Text reports of `pcmap bbmap dump`, `lookup` and `stats` over the map sections of a file.

use std::io::{self, Write};

use crate::elf::{ElfBbAddrMaps, ElfKind};
use crate::index::BlockIndex;
use crate::model::FunctionMap;

impl ElfBbAddrMaps {
    /// All functions of all map sections with their names (`<?>` when unnamed), in section order.
    pub fn functions_with_names(&self) -> (Vec<&FunctionMap>, Vec<String>) {
        let mut fs = Vec::new();
        let mut names = Vec::new();
        for s in &self.sections {
            for (f, n) in s.functions.iter().zip(&s.names) {
                fs.push(f);
                names.push(n.clone().unwrap_or_else(|| "<?>".to_string()));
            }
        }
        (fs, names)
    }
}

/// Every function, range and block with all decoded fields (`pcmap bbmap dump`); `label` names
/// the file.
pub fn write_dump(w: &mut dyn Write, label: &str, maps: &ElfBbAddrMaps) -> io::Result<()> {
    if maps.sections.is_empty() {
        writeln!(w, "{}: no basic-block address map", label)?;
    }
    let rel = maps.kind == ElfKind::Relocatable;
    for s in &maps.sections {
        writeln!(
            w,
            "section [{}] {} ({} bytes{}), {} functions{}",
            s.index,
            s.name,
            s.data_size,
            if s.compressed { ", compressed" } else { "" },
            s.functions.len(),
            if rel {
                format!(", addresses are offsets in section [{}]", s.link)
            } else {
                String::new()
            }
        )?;
        for (f, name) in s.functions.iter().zip(&s.names) {
            let layout = match f.layout {
                crate::model::Layout::Versioned(v) => format!("version {v}"),
                crate::model::Layout::Unversioned => "unversioned".to_string(),
                crate::model::Layout::BbInfoProposal => ".bb_info".to_string(),
            };
            writeln!(
                w,
                "function {} at {:#x} ({layout}, features {:#x})",
                name.as_deref().unwrap_or("<?>"),
                f.function_address(),
                f.features.0
            )?;
            for (ri, r) in f.ranges.iter().enumerate() {
                writeln!(
                    w,
                    "  range {ri} at {:#x}: {} blocks",
                    r.base_address, r.num_blocks
                )?;
                for (bi, e) in r.entries.iter().enumerate() {
                    let start = r.base_address.wrapping_add(u64::from(e.offset));
                    let m = e.metadata;
                    let mut flags = Vec::new();
                    for (on, n) in [
                        (m.has_return(), "HasReturn"),
                        (m.has_tail_call(), "HasTailCall"),
                        (m.is_eh_pad(), "IsEHPad"),
                        (m.can_fall_through(), "CanFallThrough"),
                        (m.has_indirect_branch(), "HasIndirectBranch"),
                    ] {
                        if on {
                            flags.push(n);
                        }
                    }
                    write!(
                        w,
                        "    [{bi}] BB{} [{:#x}, {:#x}) offset {:#x} size {:#x}",
                        e.id,
                        start,
                        start + u64::from(e.size),
                        e.offset,
                        e.size
                    )?;
                    if !flags.is_empty() {
                        write!(w, " {}", flags.join(" "))?;
                    }
                    if !e.callsite_end_offsets.is_empty() {
                        write!(w, " callsite ends {:?}", e.callsite_end_offsets)?;
                    }
                    if f.features.bb_hash() {
                        write!(w, " hash {:#018x}", e.hash)?;
                    }
                    writeln!(w)?;
                }
            }
            if let Some(p) = &f.pgo {
                if f.features.func_entry_count() {
                    writeln!(w, "  entry count {}", p.func_entry_count)?;
                }
                let ids: Vec<u32> = f
                    .ranges
                    .iter()
                    .flat_map(|r| r.entries.iter().map(|e| e.id))
                    .collect();
                for (b, id) in p.bb_entries.iter().zip(ids) {
                    write!(w, "  BB{id}")?;
                    if f.features.bb_freq() {
                        write!(w, " frequency {}", b.frequency)?;
                    }
                    if f.features.post_link_cfg() {
                        write!(w, " post-link count {}", b.post_link_frequency)?;
                    }
                    if f.features.br_prob() {
                        let succ: Vec<String> = b
                            .successors
                            .iter()
                            .map(|s| {
                                let pct = f64::from(s.probability) / f64::from(1u32 << 31) * 100.0;
                                if f.features.post_link_cfg() {
                                    format!(
                                        "BB{} {pct:.2}% (count {})",
                                        s.id, s.post_link_frequency
                                    )
                                } else {
                                    format!("BB{} {pct:.2}%", s.id)
                                }
                            })
                            .collect();
                        write!(w, " -> {}", succ.join(", "))?;
                    }
                    writeln!(w)?;
                }
            }
        }
    }
    Ok(())
}

/// One line for `addr` (`pcmap bbmap lookup`): the block containing it (or, with `target`, the
/// block a branch to it enters), with the calls before it in the block.
pub fn write_lookup(
    w: &mut dyn Write,
    index: &BlockIndex,
    names: &[String],
    a: u64,
    target: bool,
) -> io::Result<()> {
    let pos = if target {
        index.lookup_branch_target(a)
    } else {
        index.lookup(a)
    };
    match pos {
        Some(p) => {
            let b = index.block(p);
            write!(
                w,
                "{a:#x} -> {} range {} BB{} [{:#x}, {:#x}) index {}",
                names[b.handle.function as usize],
                b.handle.range,
                b.id,
                b.start,
                b.end,
                b.handle.index
            )?;
            let cs = index.callsite_position(p, a);
            if cs.calls_in_block > 0 {
                write!(
                    w,
                    " after {} of {} calls{}",
                    cs.calls_before,
                    cs.calls_in_block,
                    if cs.at_callsite_end {
                        " (at a callsite end)"
                    } else {
                        ""
                    }
                )?;
            }
            writeln!(w)?;
        }
        None => writeln!(w, "{a:#x} -> not in any block")?,
    }
    Ok(())
}

/// Sizes of the map against the text and the file, and of the block-symbol alternative
/// (`pcmap bbmap stats`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeStats {
    /// Size of the file.
    pub file_size: u64,
    /// Size of the allocated executable sections.
    pub text_size: u64,
    /// Number of map sections.
    pub map_sections: usize,
    /// Size of the map sections in the file.
    pub map_file_bytes: u64,
    /// Size of the map sections decompressed.
    pub map_data_bytes: u64,
    /// Functions.
    pub functions: u64,
    /// Ranges.
    pub ranges: u64,
    /// Blocks.
    pub blocks: u64,
    /// Size of one symbol table entry (24 or 16 bytes).
    pub sym_size: u64,
    /// Block symbols the alternative would add.
    pub extra_symbols: u64,
    /// Their string bytes.
    pub strtab_bytes: u64,
    /// Their total size.
    pub symbol_bytes: u64,
}

impl SizeStats {
    /// The statistics of `maps`, read from a file of `file_size` bytes.
    pub fn new(maps: &ElfBbAddrMaps, file_size: u64) -> SizeStats {
        let map_file_bytes: u64 = maps.sections.iter().map(|s| s.file_size).sum();
        let map_data_bytes: u64 = maps.sections.iter().map(|s| s.data_size).sum();
        let (fs, names) = maps.functions_with_names();
        let functions = fs.len() as u64;
        let ranges: u64 = fs.iter().map(|f| f.ranges.len() as u64).sum();
        let blocks: u64 = fs
            .iter()
            .flat_map(|f| f.ranges.iter())
            .map(|r| u64::from(r.num_blocks))
            .sum();
        // The proposal's alternative: one symbol per block except each range's first (which has a
        // function or `.cold`/`.__part` symbol already), named in the unary scheme
        // (`a.BB.f`, `ra.BB.f`, `rra.BB.f`, ...). With string-table tail merging only the longest
        // name of a function is stored: (blocks - 1) + len(".BB.") + len(name) + 1 bytes.
        let sym_size: u64 = if maps.address_size == 8 { 24 } else { 16 };
        let mut extra_symbols = 0u64;
        let mut strtab_bytes = 0u64;
        for (f, name) in fs.iter().zip(&names) {
            let n: u64 = f.ranges.iter().map(|r| u64::from(r.num_blocks)).sum();
            let labels = n.saturating_sub(f.ranges.len() as u64);
            extra_symbols += labels;
            if labels > 0 {
                strtab_bytes += labels + 4 + name.len() as u64 + 1;
            }
        }
        let symbol_bytes = extra_symbols * sym_size + strtab_bytes;
        SizeStats {
            file_size,
            text_size: maps.text_size,
            map_sections: maps.sections.len(),
            map_file_bytes,
            map_data_bytes,
            functions,
            ranges,
            blocks,
            sym_size,
            extra_symbols,
            strtab_bytes,
            symbol_bytes,
        }
    }

    /// `a` as a percentage of `b` (0 when `b` is 0).
    pub fn percent(a: u64, b: u64) -> f64 {
        if b == 0 {
            0.0
        } else {
            a as f64 * 100.0 / b as f64
        }
    }

    /// The text report; `label` names the file.
    pub fn write_text(&self, w: &mut dyn Write, label: &str) -> io::Result<()> {
        let pct = Self::percent;
        let SizeStats {
            file_size,
            text_size,
            map_sections,
            map_file_bytes,
            map_data_bytes,
            functions,
            ranges,
            blocks,
            sym_size,
            extra_symbols,
            strtab_bytes,
            symbol_bytes,
        } = *self;
        writeln!(w, "file                 {label} ({file_size} bytes)")?;
        writeln!(w, "text                 {text_size} bytes")?;
        writeln!(
            w,
            "map                  {map_file_bytes} bytes in {map_sections} section(s){} = {:.1}% of text, {:.1}% of the file",
            if map_data_bytes != map_file_bytes {
                format!(" ({map_data_bytes} decompressed)")
            } else {
                String::new()
            },
            pct(map_file_bytes, text_size),
            pct(map_file_bytes, file_size)
        )?;
        writeln!(
            w,
            "functions            {functions} ({ranges} ranges, {blocks} blocks)"
        )?;
        writeln!(
            w,
            "as block symbols     {extra_symbols} symbols x {sym_size} bytes + {strtab_bytes} string bytes = {symbol_bytes} bytes = {:.1}% of the file ({:.1}x the map)",
            pct(symbol_bytes, file_size),
            if map_file_bytes == 0 {
                0.0
            } else {
                symbol_bytes as f64 / map_file_bytes as f64
            }
        )
    }
}
