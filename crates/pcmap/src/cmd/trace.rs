//! `pcmap trace`: record control-flow traces without Intel PT, summarise them with the
//! hierarchical trace representation, and export them for Perfetto, lldb and flame graphs.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use pcmap_binary::{Binary, BranchKind, FileKind, MappedFile, PT_LOAD};
use pcmap_trace::export::{
    ChromeOptions, ThreadView, folded_stacks, write_chrome, write_flamegraph,
};
use pcmap_trace::format::binary::{BinaryWriter, PcmTrace};
use pcmap_trace::format::text::TextWriter;
use pcmap_trace::format::{self, Format};
use pcmap_trace::htr::function::CallTree;
use pcmap_trace::htr::lldb::{InstructionLayer, LldbHtr};
use pcmap_trace::htr::streaming::{self, LoopStat, SuperBlockStat};
use pcmap_trace::htr::{BuildOptions, Htr, LayerKind};
use pcmap_trace::symbols::{CodeInfo, FunctionSym, InsnInfo, InsnKind, NoCode};
use pcmap_trace::trace::{ThreadTrace, Trace};
use pcmap_trace::{GapReason, Record};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::output::write_atomic;

/// Record, summarise and export control-flow traces (hierarchical trace representation)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Record an instruction trace of PROGRAM with qemu-user or valgrind (no Intel PT needed)
    Record(RecordArgs),
    /// Top super blocks, loops and per-function calls of a trace
    Summarize(SummarizeArgs),
    /// Export a trace as Chrome/Perfetto JSON, lldb JSON, folded stacks or a flame graph
    Export(ExportArgs),
    /// Convert a trace (any readable format) to pcmap text or PCMTRACE binary
    Convert(ConvertArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Qemu,
    Valgrind,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum OutFormat {
    Text,
    Binary,
}

#[derive(clap::Args, Debug)]
struct RecordArgs {
    /// Tracing method (default: qemu if installed, else valgrind)
    #[arg(long, value_enum)]
    method: Option<Method>,
    /// Output trace file
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// Output format (default: binary for *.pcmtrace, else text)
    #[arg(long, value_enum)]
    format: Option<OutFormat>,
    /// Keep the whole process (ld.so, libc), not only the main executable
    #[arg(long)]
    all: bool,
    /// The program and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    program: Vec<String>,
}

#[derive(clap::Args, Debug)]
struct SummarizeArgs {
    /// Trace file (format detected)
    trace: PathBuf,
    /// The traced binary, for symbols and the function pass
    #[arg(long)]
    binary: Option<PathBuf>,
    /// Print JSON instead of text
    #[arg(long)]
    json: bool,
    /// How many super blocks, loops and functions to list
    #[arg(long, default_value_t = 20)]
    top: usize,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum JsonFormat {
    Chrome,
    Lldb,
}

#[derive(clap::Args, Debug)]
struct ExportArgs {
    /// Trace file (format detected)
    trace: PathBuf,
    /// Write Chrome trace JSON (Perfetto UI, chrome://tracing) here
    #[arg(long)]
    chrome: Option<PathBuf>,
    /// JSON flavour: chrome (object format, named tracks) or lldb (byte-compatible with
    /// `thread trace export ctf`)
    #[arg(long, value_enum, default_value = "chrome")]
    format: JsonFormat,
    /// Write collapsed stacks (function pass; needs --binary)
    #[arg(long)]
    folded: Option<PathBuf>,
    /// Write a flame-graph SVG (function pass; needs --binary)
    #[arg(long)]
    flamegraph: Option<PathBuf>,
    /// The traced binary, for symbols and the function pass
    #[arg(long)]
    binary: Option<PathBuf>,
    /// Layers to export, e.g. `1,2` (0 = instructions); default: every block layer
    #[arg(long, value_delimiter = ',')]
    layers: Option<Vec<usize>>,
    /// Export only this thread (lldb format: default the first thread)
    #[arg(long)]
    tid: Option<u64>,
}

#[derive(clap::Args, Debug)]
struct ConvertArgs {
    /// Input trace (format detected)
    input: PathBuf,
    /// Output trace
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// Output format (default: binary for *.pcmtrace, else text)
    #[arg(long, value_enum)]
    format: Option<OutFormat>,
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Sub::Record(a) => record(a),
        Sub::Summarize(a) => summarize(a),
        Sub::Export(a) => export(a),
        Sub::Convert(a) => convert(a),
    }
}

// ---------------------------------------------------------------------------------------------
// Symbols from pcmap-binary.

/// Function symbols and decoded instruction kinds of one binary, for the trace passes.
struct BinaryCode {
    functions: Vec<(u64, u64, String)>,
    insns: FxHashMap<u64, InsnInfo>,
}

impl BinaryCode {
    /// Load symbols from `path` and decode every distinct address the trace executed.
    fn load(path: &Path, trace: &Trace) -> Result<BinaryCode> {
        let file = MappedFile::open(path).with_context(|| format!("opening {}", path.display()))?;
        let bin =
            Binary::parse(file.bytes()).with_context(|| format!("parsing {}", path.display()))?;
        let functions = bin
            .functions()
            .iter()
            .map(|f| (f.address, f.end(), bin.function_name(f).to_string()))
            .collect();
        let mut insns = FxHashMap::default();
        for t in trace.threads.iter() {
            for u in &t.units {
                let a = u.addr();
                if u.is_gap() || insns.contains_key(&a) {
                    continue;
                }
                if let Some(info) = decode_at(&bin, a) {
                    insns.insert(a, info);
                }
            }
        }
        Ok(BinaryCode { functions, insns })
    }
}

fn decode_at(bin: &Binary<'_>, addr: u64) -> Option<InsnInfo> {
    let bytes = (1..=15u64).rev().find_map(|n| bin.bytes_at(addr, n))?;
    let insn = bin.decode(bytes, addr).ok()?.next()?;
    if insn.is_invalid() {
        return None;
    }
    let kind = match insn.kind() {
        BranchKind::Call | BranchKind::IndirectCall => InsnKind::Call,
        BranchKind::Return => InsnKind::Return,
        BranchKind::Jump | BranchKind::IndirectJump => InsnKind::Jump,
        BranchKind::ConditionalJump => InsnKind::CondJump,
        BranchKind::Other => InsnKind::Other,
    };
    Some(InsnInfo {
        len: insn.len() as u8,
        kind,
    })
}

impl CodeInfo for BinaryCode {
    fn function_at(&self, addr: u64) -> Option<FunctionSym<'_>> {
        let i = self.functions.partition_point(|f| f.0 <= addr);
        self.functions[..i]
            .iter()
            .rev()
            .take(8)
            .find(|f| addr < f.1.max(f.0.saturating_add(1)))
            .map(|f| FunctionSym {
                start: f.0,
                end: f.1,
                name: &f.2,
            })
    }

    fn instruction(&self, addr: u64) -> Option<InsnInfo> {
        self.insns.get(&addr).copied()
    }
}

// ---------------------------------------------------------------------------------------------
// record

fn find_program(name: &str) -> Result<PathBuf> {
    if name.contains('/') {
        return Ok(PathBuf::from(name));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("program `{name}` not found on PATH"))
}

fn on_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

fn out_format(path: &Path, f: Option<OutFormat>) -> OutFormat {
    f.unwrap_or_else(|| {
        if path
            .extension()
            .is_some_and(|e| e == "pcmtrace" || e == "bin")
        {
            OutFormat::Binary
        } else {
            OutFormat::Text
        }
    })
}

/// Write `records` to `path` atomically in `format`.
fn write_records(
    path: &Path,
    format: OutFormat,
    records: impl Iterator<Item = Record>,
) -> Result<()> {
    match format {
        OutFormat::Text => write_atomic(path, |w| {
            let mut tw = TextWriter::new(w)?;
            for r in records {
                tw.write(&r)?;
            }
            tw.finish()?;
            Ok(())
        }),
        OutFormat::Binary => {
            if path.as_os_str() == "-" {
                bail!("the binary format needs a seekable output file, not standard output");
            }
            let out = crate::output::AtomicFile::create(path)?;
            {
                let mut bw =
                    BinaryWriter::new(std::io::BufWriter::with_capacity(1 << 20, out.file()), 62)?;
                for r in records {
                    bw.write(&r)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                bw.finish()
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            out.commit()
        }
    }
}

fn record(a: RecordArgs) -> Result<()> {
    let program = find_program(&a.program[0])?;
    let method = match a.method {
        Some(m) => m,
        None if on_path("qemu-x86_64").is_some() => Method::Qemu,
        None if on_path("valgrind").is_some() => Method::Valgrind,
        None => bail!(
            "neither qemu-user nor valgrind is installed: run `apt-get install -y qemu-user` (faster) or \
             `apt-get install -y valgrind`"
        ),
    };
    let tool = match method {
        Method::Qemu => on_path("qemu-x86_64")
            .context("qemu-x86_64 is not installed: run `apt-get install -y qemu-user`")?,
        Method::Valgrind => on_path("valgrind")
            .context("valgrind is not installed: run `apt-get install -y valgrind`")?,
    };
    // Executable ranges of the main program.
    let file =
        MappedFile::open(&program).with_context(|| format!("opening {}", program.display()))?;
    let bin =
        Binary::parse(file.bytes()).with_context(|| format!("parsing {}", program.display()))?;
    let ranges: Vec<(u64, u64)> = bin
        .segments()
        .iter()
        .filter(|s| s.p_type == PT_LOAD && s.flags & 1 != 0 && s.mem_size > 0)
        .map(|s| (s.vaddr, s.vaddr + s.mem_size))
        .collect();
    if !a.all && bin.kind() != FileKind::Executable {
        bail!(
            "{} is a {}: its load address is not known before it runs, so the trace cannot be filtered to it; \
             build it with -fno-pie -no-pie or pass --all to keep the whole process",
            program.display(),
            bin.kind().describe()
        );
    }
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let log = dir.path().join("trace.log");
    let mut cmd = match method {
        Method::Qemu => {
            // qemu 8.1 renamed -singlestep to -one-insn-per-tb.
            let help = Command::new(&tool)
                .arg("-h")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let one_insn = if help.contains("-one-insn-per-tb") {
                "-one-insn-per-tb"
            } else {
                "-singlestep"
            };
            let mut c = Command::new(&tool);
            c.arg(one_insn).arg("-d").arg("exec,nochain");
            if !a.all {
                let filter: Vec<String> = ranges
                    .iter()
                    .map(|(lo, hi)| format!("{lo:#x}+{:#x}", hi - lo))
                    .collect();
                c.arg("-dfilter").arg(filter.join(","));
            }
            c.arg("-D").arg(&log);
            c
        }
        Method::Valgrind => {
            let mut c = Command::new(&tool);
            c.arg("--tool=lackey")
                .arg("--trace-mem=yes")
                .arg(format!("--log-file={}", log.display()));
            c
        }
    };
    cmd.arg(&program).args(&a.program[1..]);
    let status = cmd
        .status()
        .with_context(|| format!("running {}", tool.display()))?;
    if !status.success() {
        eprintln!("pcmap: note: the traced program exited with {status}");
    }
    let data =
        std::fs::read(&log).with_context(|| format!("reading the {} log", tool.display()))?;
    let label = log.display().to_string();
    let mut records = vec![
        Record::Meta {
            key: "exe".into(),
            value: program.display().to_string(),
        },
        Record::Meta {
            key: "method".into(),
            value: format!("{method:?}").to_lowercase(),
        },
        Record::Meta {
            key: "arch".into(),
            value: "x86_64".into(),
        },
    ];
    let keep = |addr: u64| a.all || ranges.iter().any(|&(lo, hi)| addr >= lo && addr < hi);
    let fmt = match method {
        Method::Qemu => Format::QemuExec,
        Method::Valgrind => Format::Lackey,
    };
    let mut insns = 0u64;
    format::read_as(fmt, &data, &label, &mut |r| {
        match &r {
            Record::Insn { addr } if !keep(*addr) => return Ok(()),
            Record::Insn { .. } => insns += 1,
            Record::Meta { .. } => return Ok(()),
            _ => {}
        }
        records.push(r);
        Ok(())
    })?;
    // qemu names threads by CPU index; a single-threaded program needs no thread records.
    let mut tids: Vec<u64> = records
        .iter()
        .filter_map(|r| {
            if let Record::Thread { tid } = r {
                Some(*tid)
            } else {
                None
            }
        })
        .collect();
    tids.sort_unstable();
    tids.dedup();
    if tids.len() <= 1 {
        records.retain(|r| !matches!(r, Record::Thread { .. }));
    }
    write_records(
        &a.output,
        out_format(&a.output, a.format),
        records.into_iter(),
    )?;
    eprintln!(
        "pcmap: recorded {insns} instructions of {} with {method:?} into {}",
        program.display(),
        a.output.display()
    );
    Ok(())
}

fn convert(a: ConvertArgs) -> Result<()> {
    let file =
        MappedFile::open(&a.input).with_context(|| format!("opening {}", a.input.display()))?;
    let trace = Trace::read(file.bytes(), &a.input.display().to_string())?;
    write_records(&a.output, out_format(&a.output, a.format), trace.records())
}

// ---------------------------------------------------------------------------------------------
// summarize

#[derive(Serialize)]
struct BlockOut {
    addr: String,
    symbol: String,
    insns: u64,
    occurrences: u64,
    total_insns: u64,
    percent: f64,
}

#[derive(Serialize)]
struct LoopOut {
    body: Vec<String>,
    insns_per_iteration: u64,
    occurrences: u64,
    iterations: u64,
    max_iterations: u64,
    total_insns: u64,
}

#[derive(Serialize)]
struct FunctionOut {
    name: String,
    addr: String,
    calls: u64,
    self_insns: u64,
}

#[derive(Serialize)]
struct ThreadOut {
    tid: Option<u64>,
    insns: u64,
    units: u64,
    distinct_units: u64,
    gaps: u64,
    layer_units: Vec<(String, u64)>,
    super_blocks: Vec<BlockOut>,
    loops: Vec<LoopOut>,
    functions: Option<Vec<FunctionOut>>,
}

#[derive(Serialize)]
struct SummaryOut {
    trace: String,
    format: String,
    insns: u64,
    threads: Vec<ThreadOut>,
}

fn block_outs(
    stats: &[SuperBlockStat],
    code: &dyn CodeInfo,
    total: u64,
    top: usize,
) -> Vec<BlockOut> {
    let mut v: Vec<&SuperBlockStat> = stats.iter().filter(|s| s.insns > 0).collect();
    v.sort_by(|a, b| {
        (b.insns * b.occurrences)
            .cmp(&(a.insns * a.occurrences))
            .then(a.first_addr.cmp(&b.first_addr))
    });
    v.into_iter()
        .take(top)
        .map(|s| BlockOut {
            addr: format!("{:#x}", s.first_addr),
            symbol: code.describe(s.first_addr),
            insns: s.insns,
            occurrences: s.occurrences,
            total_insns: s.insns * s.occurrences,
            percent: if total == 0 {
                0.0
            } else {
                (s.insns * s.occurrences) as f64 * 100.0 / total as f64
            },
        })
        .collect()
}

fn loop_outs(stats: &[LoopStat], code: &dyn CodeInfo, top: usize) -> Vec<LoopOut> {
    let mut v: Vec<&LoopStat> = stats.iter().collect();
    v.sort_by(|a, b| {
        (b.iterations * b.insns_per_iteration).cmp(&(a.iterations * a.insns_per_iteration))
    });
    v.into_iter()
        .take(top)
        .map(|s| LoopOut {
            body: s.body.iter().map(|&a| code.describe(a)).collect(),
            insns_per_iteration: s.insns_per_iteration,
            occurrences: s.occurrences,
            iterations: s.iterations,
            max_iterations: s.max_iterations,
            total_insns: s.iterations * s.insns_per_iteration,
        })
        .collect()
}

fn function_outs(tree: &CallTree, top: usize) -> Vec<FunctionOut> {
    let mut idx: Vec<usize> = (0..tree.functions.len()).collect();
    idx.sort_by(|&a, &b| {
        tree.self_insns[b]
            .cmp(&tree.self_insns[a])
            .then(tree.functions[a].name.cmp(&tree.functions[b].name))
    });
    idx.into_iter()
        .take(top)
        .map(|i| FunctionOut {
            name: tree.functions[i].name.clone(),
            addr: format!("{:#x}", tree.functions[i].entry),
            calls: tree.call_counts[i],
            self_insns: tree.self_insns[i],
        })
        .collect()
}

/// Super-block and loop statistics from in-memory layers (layer 1 and the first loop layer).
fn stats_from_htr(htr: &Htr) -> (Vec<SuperBlockStat>, Vec<LoopStat>) {
    let l1 = &htr.layers[1];
    let mut occ = vec![0u64; l1.defs.len()];
    for &u in &l1.units {
        occ[u as usize] += 1;
    }
    let sbs = l1
        .defs
        .iter()
        .zip(&occ)
        .map(|(d, &n)| SuperBlockStat {
            first_addr: d.first_addr,
            insns: d.insns,
            len: d.children.len() as u64,
            occurrences: n,
        })
        .collect();
    let mut loops: Vec<LoopStat> = Vec::new();
    if let Some(l2) = htr.layers.get(2).filter(|l| l.kind == LayerKind::Loops) {
        let mut by_body: BTreeMap<Vec<u32>, usize> = BTreeMap::new();
        let mut occ2 = vec![0u64; l2.defs.len()];
        for &u in &l2.units {
            occ2[u as usize] += 1;
        }
        for (d, &n) in l2.defs.iter().zip(&occ2) {
            if d.repeat < 2 || n == 0 {
                continue;
            }
            let k = loops.len();
            let i = *by_body.entry(d.children.clone()).or_insert(k);
            if i == k {
                loops.push(LoopStat {
                    body: d
                        .children
                        .iter()
                        .map(|&c| l1.defs[c as usize].first_addr)
                        .collect(),
                    insns_per_iteration: d
                        .children
                        .iter()
                        .map(|&c| l1.defs[c as usize].insns)
                        .sum(),
                    occurrences: 0,
                    iterations: 0,
                    max_iterations: 0,
                });
            }
            let s = &mut loops[i];
            s.occurrences += n;
            s.iterations += n * d.repeat as u64;
            s.max_iterations = s.max_iterations.max(d.repeat as u64);
        }
    }
    (sbs, loops)
}

fn summarize(a: SummarizeArgs) -> Result<()> {
    let file =
        MappedFile::open(&a.trace).with_context(|| format!("opening {}", a.trace.display()))?;
    let label = a.trace.display().to_string();
    let data = file.bytes();
    let fmt = format::detect(data, &label)?;
    let mut out = SummaryOut {
        trace: label.clone(),
        format: fmt.name().to_string(),
        insns: 0,
        threads: Vec::new(),
    };
    if fmt == Format::Binary && a.binary.is_none() {
        // Streaming: memory proportional to distinct addresses. The file is mapped again here so
        // pages already decoded can be dropped from the resident set.
        let f = std::fs::File::open(&a.trace)
            .with_context(|| format!("opening {}", a.trace.display()))?;
        // SAFETY: the map is read-only; pcmap does not modify trace files while reading them.
        let map = unsafe { memmap2::Mmap::map(&f) }
            .with_context(|| format!("mapping {}", a.trace.display()))?;
        let pt = PcmTrace::parse(&map, &label)?;
        let release = |r: std::ops::Range<usize>| {
            // SAFETY: DONTNEED on a read-only shared file mapping only drops clean page-cache
            // pages from this process; touching them again re-reads the file.
            let _ = unsafe {
                map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    r.start,
                    r.end - r.start,
                )
            };
        };
        for t in streaming::summarize_with(&pt, 16, &release)? {
            out.insns += t.insns;
            out.threads.push(ThreadOut {
                tid: t.tid,
                insns: t.insns,
                units: t.units,
                distinct_units: t.distinct_units,
                gaps: t.gaps,
                layer_units: vec![
                    ("L0 instructions".into(), t.units),
                    ("L1 super blocks".into(), t.layer1_units),
                    ("L2 loops".into(), t.layer2_units),
                ],
                super_blocks: block_outs(&t.super_blocks, &NoCode, t.insns, a.top),
                loops: loop_outs(&t.loops, &NoCode, a.top),
                functions: None,
            });
        }
    } else {
        let trace = Trace::read(data, &label)?;
        let code: Box<dyn CodeInfo> = match &a.binary {
            Some(b) => Box::new(BinaryCode::load(b, &trace)?),
            None => Box::new(NoCode),
        };
        out.insns = trace.insns();
        for t in &trace.threads {
            let htr = Htr::build(t, &BuildOptions::default());
            let (sbs, loops) = stats_from_htr(&htr);
            let functions = a
                .binary
                .as_ref()
                .map(|_| function_outs(&CallTree::build(&htr.layers[0], code.as_ref()), a.top));
            out.threads.push(ThreadOut {
                tid: t.tid,
                insns: t.insns,
                units: t.ids.len() as u64,
                distinct_units: t.units.iter().filter(|u| !u.is_gap()).count() as u64,
                gaps: t
                    .ids
                    .iter()
                    .filter(|&&i| t.units[i as usize].is_gap())
                    .count() as u64,
                layer_units: htr
                    .layers
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (format!("L{i} {}", l.kind.name()), l.units.len() as u64))
                    .collect(),
                super_blocks: block_outs(&sbs, code.as_ref(), t.insns, a.top),
                loops: loop_outs(&loops, code.as_ref(), a.top),
                functions,
            });
        }
    }
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    if a.json {
        serde_json::to_writer_pretty(&mut w, &out)?;
        writeln!(w)?;
    } else {
        print_summary(&mut w, &out)?;
    }
    w.flush()?;
    Ok(())
}

fn print_summary(w: &mut dyn Write, s: &SummaryOut) -> Result<()> {
    writeln!(
        w,
        "trace {} ({}): {} instructions, {} thread(s)",
        s.trace,
        s.format,
        s.insns,
        s.threads.len()
    )?;
    for t in &s.threads {
        let tid = t.tid.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
        writeln!(
            w,
            "\nthread {tid}: {} instructions, {} units ({} distinct addresses, {} gaps)",
            t.insns, t.units, t.distinct_units, t.gaps
        )?;
        let layers: Vec<String> = t
            .layer_units
            .iter()
            .map(|(n, u)| format!("{n} {u}"))
            .collect();
        writeln!(w, "  layers: {}", layers.join(", "))?;
        writeln!(w, "  top super blocks by instructions:")?;
        for b in &t.super_blocks {
            writeln!(
                w,
                "    {:6.2}%  {:>12} insns  x{:<9} size {:<5} {}",
                b.percent, b.total_insns, b.occurrences, b.insns, b.symbol
            )?;
        }
        if !t.loops.is_empty() {
            writeln!(w, "  loops:")?;
            for l in &t.loops {
                writeln!(
                    w,
                    "    {:>10} iterations in {} run(s) (max {}), {} insns/iteration: [{}]",
                    l.iterations,
                    l.occurrences,
                    l.max_iterations,
                    l.insns_per_iteration,
                    l.body.join(", ")
                )?;
            }
        }
        if let Some(fs) = &t.functions {
            writeln!(
                w,
                "  functions:   {:>10} {:>14}  name",
                "calls", "self insns"
            )?;
            for f in fs {
                writeln!(
                    w,
                    "               {:>10} {:>14}  {}",
                    f.calls, f.self_insns, f.name
                )?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// export

fn lldb_layer(t: &ThreadTrace, code: &dyn CodeInfo) -> InstructionLayer {
    let mut layer = InstructionLayer::default();
    for (i, &id) in t.ids.iter().enumerate() {
        let u = &t.units[id as usize];
        layer.addrs.push(u.addr());
        layer.insns.push(u.insns().max(1));
        if u.is_gap() {
            continue;
        }
        if code
            .instruction(u.addr())
            .is_some_and(|k| k.kind == InsnKind::Call)
        {
            let next = t.ids.get(i + 1).map(|&n| &t.units[n as usize]);
            let callee = match next {
                Some(n) if !n.is_gap() => code.function_at(n.addr()).map(|f| f.name.to_string()),
                _ => None,
            };
            layer.add_call(u.addr(), callee);
        }
    }
    layer
}

fn export(a: ExportArgs) -> Result<()> {
    if a.chrome.is_none() && a.folded.is_none() && a.flamegraph.is_none() {
        bail!(
            "nothing to export: give --chrome OUT.json, --folded OUT.txt or --flamegraph OUT.svg"
        );
    }
    if (a.folded.is_some() || a.flamegraph.is_some()) && a.binary.is_none() {
        bail!("--folded and --flamegraph need the function pass: give --binary BINARY");
    }
    let file =
        MappedFile::open(&a.trace).with_context(|| format!("opening {}", a.trace.display()))?;
    let label = a.trace.display().to_string();
    let mut trace = Trace::read(file.bytes(), &label)?;
    if let Some(tid) = a.tid {
        trace.threads.retain(|t| t.tid == Some(tid));
        if trace.threads.is_empty() {
            bail!("{label}: no thread {tid} in the trace");
        }
    }
    let code: Box<dyn CodeInfo> = match &a.binary {
        Some(b) => Box::new(BinaryCode::load(b, &trace)?),
        None => Box::new(NoCode),
    };
    if let (Some(out), JsonFormat::Lldb) = (&a.chrome, a.format) {
        let Some(t) = trace.threads.first() else {
            bail!("{label}: the trace is empty")
        };
        let htr = LldbHtr::build(lldb_layer(t, code.as_ref()));
        write_atomic(out, |w| Ok(htr.write_json(w)?))?;
    }
    let need_htr = a.chrome.is_some() && a.format == JsonFormat::Chrome;
    let htrs: Vec<Htr> = if need_htr {
        trace
            .threads
            .iter()
            .map(|t| Htr::build(t, &BuildOptions::default()))
            .collect()
    } else {
        Vec::new()
    };
    let trees: Vec<Option<CallTree>> = trace
        .threads
        .iter()
        .map(|t| {
            a.binary
                .as_ref()
                .map(|_| CallTree::build(&pcmap_trace::htr::Layer::instructions(t), code.as_ref()))
        })
        .collect();
    if let (Some(out), JsonFormat::Chrome) = (&a.chrome, a.format) {
        let views: Vec<ThreadView<'_>> = trace
            .threads
            .iter()
            .zip(&htrs)
            .zip(&trees)
            .map(|((t, h), c)| ThreadView {
                thread: t,
                htr: h,
                calls: c.as_ref(),
            })
            .collect();
        let pid = trace
            .meta
            .iter()
            .find(|(k, _)| k == "pid")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(1);
        let exe = trace
            .meta
            .iter()
            .find(|(k, _)| k == "exe")
            .map(|(_, v)| v.clone());
        let opts = ChromeOptions {
            pid,
            process_name: exe.unwrap_or_else(|| label.clone()),
            layers: a.layers.clone(),
            functions: true,
        };
        write_atomic(out, |w| Ok(write_chrome(w, &views, code.as_ref(), &opts)?))?;
    }
    if a.folded.is_some() || a.flamegraph.is_some() {
        let multi = trace.threads.len() > 1;
        let mut lines = Vec::new();
        for (t, tree) in trace.threads.iter().zip(&trees) {
            let prefix = multi.then(|| {
                t.tid
                    .map(|x| format!("tid_{x}"))
                    .unwrap_or_else(|| "thread".into())
            });
            if let Some(tree) = tree {
                lines.extend(folded_stacks(tree, prefix.as_deref()));
            }
        }
        if let Some(out) = &a.folded {
            write_atomic(out, |w| {
                for l in &lines {
                    writeln!(w, "{l}")?;
                }
                Ok(())
            })?;
        }
        if let Some(out) = &a.flamegraph {
            if lines.is_empty() {
                bail!("{label}: no instructions, so no flame graph");
            }
            write_atomic(out, |w| {
                Ok(write_flamegraph(
                    &lines,
                    &format!("pcmap trace {label}"),
                    w,
                )?)
            })?;
        }
    }
    let _ = GapReason::Filtered;
    Ok(())
}
