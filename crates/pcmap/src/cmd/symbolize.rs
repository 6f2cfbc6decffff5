//! `pcmap symbolize`: function, inline frames and source locations of addresses, as a drop-in for
//! `llvm-symbolizer` 22 (same options, text and JSON layouts, standard-input mode).
//!
//! Two forms:
//! * `pcmap symbolize --obj BINARY [ADDR...]` (llvm-symbolizer's): llvm-symbolizer's defaults
//!   (inline frames, in every output style), addresses read as llvm reads them (`0x` hex,
//!   leading `0` octal, else decimal); without addresses, one address per standard-input line.
//!   Without `--obj` and without arguments, each input line is `BINARY ADDR`.
//! * `pcmap symbolize BINARY ADDR...` (pcmap's original form): hexadecimal addresses with or
//!   without `0x`, only the innermost frame unless `--inlines`; `--json` prints pcmap's own schema.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use pcmap_inline::DebugData;
use pcmap_inline::report::{
    JsonAddress, LlvmJsonRecord, TextStyle, parse_input_line, parse_llvm_number,
    split_symbol_offset, write_symbol_locations_text, write_symbolized_text,
};
use pcmap_inline::symbolize::{FunctionNameKind, Options, Symbolizer};

/// Symbolize addresses like llvm-symbolizer: function, inline frames, file:line:column
#[derive(clap::Args, Debug)]
#[command(args_override_self = true)]
pub struct Args {
    /// `BINARY ADDR...` (pcmap's form), or with --obj only addresses; none: read standard input
    inputs: Vec<String>,
    /// The binary (llvm-symbolizer's --obj / -e / --exe)
    #[arg(
        long = "obj",
        short = 'e',
        visible_alias = "exe",
        value_name = "BINARY"
    )]
    obj: Option<String>,
    /// Print every inline frame, innermost first (the default with --obj or standard input)
    #[arg(
        short = 'i',
        long = "inlines",
        visible_alias = "inlining",
        overrides_with = "no_inlines"
    )]
    inlines: bool,
    /// Only the innermost frame, named from the symbol table
    #[arg(long = "no-inlines", overrides_with = "inlines")]
    no_inlines: bool,
    /// Function names: linkage (default; symbol-table names), short (DW_AT_name) or none
    #[arg(short = 'f', long, value_enum, num_args = 0..=1, require_equals = true,
          default_missing_value = "linkage")]
    functions: Option<Functions>,
    /// Output layout: LLVM (default), GNU or JSON (llvm-symbolizer's exact schema)
    #[arg(long, value_enum, ignore_case = true)]
    output_style: Option<Style>,
    /// Demangle function names as llvm-symbolizer does (the default)
    #[arg(short = 'C', long, overrides_with = "no_demangle")]
    demangle: bool,
    /// Print function names as stored (mangled)
    #[arg(long, overrides_with = "demangle")]
    no_demangle: bool,
    /// Accepted for compatibility: ELF addresses are already relative to the image
    #[arg(long)]
    relative_address: bool,
    /// Print the address before its frames
    #[arg(short = 'a', long, visible_alias = "addresses")]
    print_address: bool,
    /// One line per frame: `function at file:line:column`
    #[arg(short = 'p', long)]
    pretty_print: bool,
    /// Subtract this from every address before the lookup (the printed address is unchanged)
    #[arg(long, value_name = "OFFSET")]
    adjust_vma: Option<String>,
    /// One line per field: file, function start file/line/address, line, column, discriminator
    #[arg(long)]
    verbose: bool,
    /// File names without directories
    #[arg(short = 's', long)]
    basenames: bool,
    /// pcmap's own JSON schema (address + frames); see --output-style=JSON for llvm-symbolizer's
    #[arg(long)]
    json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Functions {
    None,
    Short,
    Linkage,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    #[value(name = "LLVM")]
    Llvm,
    #[value(name = "GNU")]
    Gnu,
    #[value(name = "JSON")]
    Json,
}

fn parse_hex_address(s: &str) -> Result<u64> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(t, 16)
        .with_context(|| format!("invalid address {s:?} (expected hexadecimal)"))
}

/// An opened binary and its symbolizer, alive for the whole run.
fn open(path: &str) -> Result<Symbolizer<'static>> {
    let file = pcmap_binary::MappedFile::open(Path::new(path))
        .with_context(|| format!("opening {path}"))?;
    // The process symbolizes until it exits: the mapping and the DWARF live as long.
    let file: &'static pcmap_binary::MappedFile = Box::leak(Box::new(file));
    let data = DebugData::load(file.bytes()).with_context(|| format!("reading {path}"))?;
    let data: &'static DebugData<'static> = Box::leak(Box::new(data));
    Symbolizer::new(data).with_context(|| format!("reading {path}"))
}

struct Printer {
    style: Style,
    text: TextStyle,
    options: Options,
    adjust_vma: u64,
}

impl Printer {
    /// One answer: the JSON record (compact, no newline) or the text block.
    fn answer(
        &self,
        w: &mut dyn Write,
        symbolizer: Option<&Symbolizer<'_>>,
        module: &str,
        target: Result<u64, &str>,
    ) -> Result<()> {
        let (address, frames) = match target {
            Ok(a) => {
                let frames = match symbolizer {
                    Some(s) => s.lookup(a.wrapping_sub(self.adjust_vma), &self.options)?,
                    None => Vec::new(),
                };
                (Some(a), frames)
            }
            Err(spec) if !spec.is_empty() => {
                let (name, offset) = split_symbol_offset(spec);
                let found = match symbolizer {
                    Some(s) => s.find_symbol(name, offset, &self.options)?,
                    None => Vec::new(),
                };
                if self.style == Style::Json {
                    let record = LlvmJsonRecord::symbol_name(module, name, &found);
                    serde_json::to_writer(&mut *w, &record)?;
                } else {
                    write_symbol_locations_text(w, &found, &self.text)?;
                }
                return Ok(());
            }
            Err(_) => (None, Vec::new()),
        };
        if self.style == Style::Json {
            serde_json::to_writer(&mut *w, &LlvmJsonRecord::address(module, address, &frames))?;
        } else {
            write_symbolized_text(w, address, &frames, &self.text)?;
        }
        Ok(())
    }
}

/// llvm-symbolizer's boolean spellings clap cannot express (`--inlining=false`,
/// `-demangle=true`), rewritten to their flags for `pcmap symbolize`.
pub fn normalize_llvm_options(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if args.get(1).and_then(|a| a.to_str()) != Some("symbolize") {
        return args;
    }
    args.into_iter()
        .map(|a| {
            let flag = match a.to_str() {
                Some("--inlining=true") => "--inlines",
                Some("--inlining=false") => "--no-inlines",
                Some("-demangle=true") => "--demangle",
                Some("-demangle=false") => "--no-demangle",
                _ => return a,
            };
            flag.into()
        })
        .collect()
}

pub fn run(args: Args) -> Result<()> {
    let style = args.output_style.unwrap_or(Style::Llvm);
    let legacy = args.obj.is_none() && !args.inputs.is_empty();
    let inlines = if args.inlines {
        true
    } else if args.no_inlines {
        false
    } else {
        !legacy
    };
    let names = match args.functions.unwrap_or(Functions::Linkage) {
        Functions::None => FunctionNameKind::None,
        Functions::Short => FunctionNameKind::Short,
        Functions::Linkage => FunctionNameKind::Linkage,
    };
    let adjust_vma = match &args.adjust_vma {
        Some(s) => parse_llvm_number(s).with_context(|| format!("invalid --adjust-vma {s:?}"))?,
        None => 0,
    };
    let printer = Printer {
        style,
        text: TextStyle {
            gnu: style == Style::Gnu,
            print_address: args.print_address,
            pretty: args.pretty_print,
            print_functions: names != FunctionNameKind::None,
            verbose: args.verbose,
            inline_lookup: inlines || style == Style::Gnu,
        },
        options: Options {
            inlines,
            names,
            gnu: style == Style::Gnu,
            basenames: args.basenames,
            demangle: !args.no_demangle,
        },
        adjust_vma,
    };

    let (module, addresses): (Option<&str>, &[String]) = match (&args.obj, legacy) {
        (Some(obj), _) => (Some(obj), &args.inputs),
        (None, true) => (Some(&args.inputs[0]), &args.inputs[1..]),
        (None, false) => (None, &[]),
    };
    if legacy && addresses.is_empty() {
        bail!("no address given");
    }
    let symbolizer = module.map(open).transpose()?;

    if !addresses.is_empty() {
        let module = module.unwrap_or_default();
        let targets: Vec<Result<u64, &str>> = if legacy {
            addresses
                .iter()
                .map(|a| parse_hex_address(a).map(Ok))
                .collect::<Result<_>>()?
        } else {
            addresses
                .iter()
                .map(|a| parse_input_line(a, false).target)
                .collect()
        };
        return crate::output::write_atomic(Path::new("-"), |w| {
            if args.json {
                let mut results = Vec::with_capacity(targets.len());
                for t in &targets {
                    let a = t.unwrap_or_default();
                    let s = symbolizer.as_ref().expect("legacy form has a binary");
                    results.push((a, s.lookup(a.wrapping_sub(adjust_vma), &printer.options)?));
                }
                let v: Vec<JsonAddress<'_>> = results
                    .iter()
                    .map(|(a, f)| JsonAddress {
                        address: *a,
                        frames: f,
                    })
                    .collect();
                serde_json::to_writer_pretty(&mut *w, &v)?;
                writeln!(w)?;
                return Ok(());
            }
            if style == Style::Json {
                write!(w, "[")?;
            }
            for (i, t) in targets.iter().enumerate() {
                if style == Style::Json && i > 0 {
                    write!(w, ",")?;
                }
                printer.answer(w, symbolizer.as_ref(), module, *t)?;
            }
            if style == Style::Json {
                writeln!(w, "]")?;
            }
            Ok(())
        });
    }

    // Standard input: one answer per line, flushed at once (usable as a coprocess).
    let mut opened: HashMap<String, Option<Symbolizer<'static>>> = HashMap::new();
    let stdin = std::io::stdin();
    crate::output::write_atomic(Path::new("-"), |w| {
        for line in stdin.lock().lines() {
            let line = line.context("reading standard input")?;
            let input = parse_input_line(&line, module.is_none());
            let (name, s) = match (module, input.module) {
                (Some(m), _) => (m, symbolizer.as_ref()),
                (None, m) => {
                    let m = m.unwrap_or_default();
                    let s = opened.entry(m.to_string()).or_insert_with(|| {
                        if m.is_empty() {
                            return None;
                        }
                        open(m)
                            .map_err(|e| eprintln!("pcmap symbolize: {e:#}"))
                            .ok()
                    });
                    (m, s.as_ref())
                }
            };
            printer.answer(w, s, name, input.target)?;
            if style == Style::Json {
                writeln!(w)?;
            }
            w.flush().context("writing to standard output")?;
        }
        Ok(())
    })
}
