//! `pcmap info`: what a binary is and what pcmap can find in it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use pcmap_binary::{Binary, MappedFile};
use serde::Serialize;

/// Describe an ELF binary: kind, machine, build-id, sections, function count, and which of
/// .note.bolt_bat, .llvm_bb_addr_map, .debug_info and .BTF it carries.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ELF file to describe.
    pub binary: PathBuf,
    /// List every function (name, address, size) instead of the summary.
    #[arg(long)]
    pub functions: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Info<'a> {
    file: String,
    kind: String,
    class: &'static str,
    endianness: &'static str,
    machine: &'static str,
    entry: String,
    build_id: Option<String>,
    functions: usize,
    function_symbols: usize,
    symbols_from: &'static str,
    has: Has,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    note_errors: Vec<String>,
    sections: Vec<SectionInfo<'a>>,
}

#[derive(Serialize)]
struct Has {
    bolt_bat: bool,
    bb_addr_map: bool,
    debug_info: bool,
    btf: bool,
}

#[derive(Serialize)]
struct SectionInfo<'a> {
    index: usize,
    name: &'a str,
    #[serde(rename = "type")]
    sh_type: String,
    address: String,
    offset: String,
    size: u64,
    flags: String,
    compressed: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uncompressed_size: Option<u64>,
}

#[derive(Serialize)]
struct FunctionInfo<'a> {
    name: &'a str,
    address: String,
    size: u64,
    local: bool,
    ifunc: bool,
    bolt_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    bolt_file_name: Option<&'a str>,
}

pub fn run(args: Args) -> Result<()> {
    let file = MappedFile::open(&args.binary)?;
    // The path is in every error below: "reading FILE: malformed ELF ... at file offset ...".
    let bin = Binary::parse(file.bytes())
        .with_context(|| format!("reading {}", args.binary.display()))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.functions {
        let table = bin.function_table();
        let list: Vec<FunctionInfo<'_>> = table
            .symbols()
            .iter()
            .map(|s| FunctionInfo {
                name: s.name,
                address: format!("{:#x}", s.address),
                size: s.size,
                local: s.is_local,
                ifunc: s.is_ifunc,
                bolt_name: &s.bolt_name,
                bolt_file_name: s.bolt_file_name.as_deref(),
            })
            .collect();
        if args.json {
            serde_json::to_writer_pretty(&mut out, &list)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{:<18} {:>8}  name", "address", "size")?;
            for f in &list {
                writeln!(out, "{:<18} {:>8}  {}", f.address, f.size, f.name)?;
            }
        }
        out.flush()?;
        return Ok(());
    }

    // Check every compressed section decompresses (and report its real size).
    let mut uncompressed = std::collections::HashMap::new();
    for s in bin.sections().iter().filter(|s| s.compression().is_some()) {
        let data = bin
            .section_data(s)
            .with_context(|| format!("reading {}", args.binary.display()))?;
        uncompressed.insert(s.index, data.len() as u64);
    }
    let has_section = |n: &str| bin.section_by_name(n).is_some();
    let info = Info {
        file: args.binary.display().to_string(),
        kind: bin.kind().describe(),
        class: if bin.is_64() { "ELF64" } else { "ELF32" },
        endianness: if bin.is_little_endian() {
            "little"
        } else {
            "big"
        },
        machine: bin.machine().name(),
        entry: format!("{:#x}", bin.entry()),
        build_id: bin.build_id_hex(),
        functions: bin.functions().len(),
        function_symbols: bin.function_table().symbols().len(),
        symbols_from: if bin.symbols_from_dynsym() {
            ".dynsym"
        } else {
            ".symtab"
        },
        has: Has {
            bolt_bat: has_section(".note.bolt_bat"),
            bb_addr_map: bin
                .sections()
                .iter()
                .any(|s| s.sh_type == pcmap_binary::SHT_LLVM_BB_ADDR_MAP),
            debug_info: has_section(".debug_info") || has_section(".zdebug_info"),
            btf: has_section(".BTF"),
        },
        note_errors: bin.note_errors().iter().map(|e| e.to_string()).collect(),
        sections: bin
            .sections()
            .iter()
            .skip(1)
            .map(|s| SectionInfo {
                index: s.index,
                name: s.name,
                sh_type: s.type_name(),
                address: format!("{:#x}", s.address),
                offset: format!("{:#x}", s.offset),
                size: s.size,
                flags: s.flag_letters(),
                compressed: s.compression().map(|c| c.name()),
                uncompressed_size: uncompressed.get(&s.index).copied(),
            })
            .collect(),
    };
    if args.json {
        serde_json::to_writer_pretty(&mut out, &info)?;
        writeln!(out)?;
    } else {
        let yes = |b: bool| if b { "yes" } else { "no" };
        writeln!(out, "file:        {}", info.file)?;
        writeln!(out, "kind:        {}", info.kind)?;
        writeln!(
            out,
            "format:      {}, {}-endian, {}",
            info.class, info.endianness, info.machine
        )?;
        writeln!(out, "entry:       {}", info.entry)?;
        writeln!(
            out,
            "build-id:    {}",
            info.build_id.as_deref().unwrap_or("(none)")
        )?;
        writeln!(
            out,
            "functions:   {} ({} symbols from {})",
            info.functions, info.function_symbols, info.symbols_from
        )?;
        writeln!(
            out,
            "BOLT translation table (.note.bolt_bat): {}",
            yes(info.has.bolt_bat)
        )?;
        writeln!(
            out,
            "basic-block address map (SHT_LLVM_BB_ADDR_MAP): {}",
            yes(info.has.bb_addr_map)
        )?;
        writeln!(out, "DWARF (.debug_info): {}", yes(info.has.debug_info))?;
        writeln!(out, "BTF (.BTF): {}", yes(info.has.btf))?;
        for e in &info.note_errors {
            writeln!(out, "warning:     {e}")?;
        }
        writeln!(out, "sections:")?;
        writeln!(
            out,
            "  {:>3} {:<24} {:<16} {:>18} {:>10} flags",
            "idx", "name", "type", "address", "size"
        )?;
        for s in &info.sections {
            writeln!(
                out,
                "  {:>3} {:<24} {:<16} {:>18} {:>10} {}{}",
                s.index,
                s.name,
                s.sh_type,
                s.address,
                s.size,
                s.flags,
                s.compressed
                    .map(|c| format!(
                        " ({c}, {} bytes uncompressed)",
                        s.uncompressed_size.unwrap_or(0)
                    ))
                    .unwrap_or_default()
            )?;
        }
    }
    out.flush()?;
    Ok(())
}
