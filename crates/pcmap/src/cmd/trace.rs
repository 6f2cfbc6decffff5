//! `pcmap trace`: record control-flow traces without Intel PT, summarise them with the
//! hierarchical trace representation, and export them for Perfetto, lldb and flame graphs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use pcmap_binary::{Binary, FileKind, MappedFile, PT_LOAD};
use pcmap_trace::Record;
use pcmap_trace::binary_code::BinaryCode;
use pcmap_trace::export::{
    ChromeOptions, ThreadView, folded_stacks, write_chrome, write_flamegraph,
};
use pcmap_trace::format::binary::{BinaryWriter, PcmTrace};
use pcmap_trace::format::text::TextWriter;
use pcmap_trace::format::{self, Format};
use pcmap_trace::htr::function::CallTree;
use pcmap_trace::htr::lldb::{InstructionLayer, LldbHtr};
use pcmap_trace::htr::streaming;
use pcmap_trace::htr::{BuildOptions, Htr};
use pcmap_trace::recording::Recording;
use pcmap_trace::summary::{SummaryOut, ThreadOut, print_summary};
use pcmap_trace::symbols::{CodeInfo, NoCode};
use pcmap_trace::trace::Trace;

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

/// Parse `path` and collect the code knowledge of the addresses `trace` executed.
fn load_code(path: &Path, trace: &Trace) -> Result<BinaryCode> {
    let file = MappedFile::open(path).with_context(|| format!("opening {}", path.display()))?;
    let bin = Binary::parse(file.bytes()).with_context(|| format!("parsing {}", path.display()))?;
    Ok(BinaryCode::new(&bin, trace))
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
        MappedFile::open(&log).with_context(|| format!("reading the {} log", tool.display()))?;
    let label = log.display().to_string();
    let meta = vec![
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
    let Recording { records, insns } =
        pcmap_trace::recording::from_tracer_log(fmt, &data, &label, meta, &keep)?;
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
        // Streaming: memory proportional to distinct addresses; pages already decoded are
        // dropped from the resident set.
        let pt = PcmTrace::parse(data, &label)?;
        for t in streaming::summarize_with(&pt, 16, &|r| file.release(r))? {
            out.insns += t.insns;
            out.threads.push(ThreadOut::from_streaming(&t, a.top));
        }
    } else {
        let trace = Trace::read(data, &label)?;
        let code: Box<dyn CodeInfo> = match &a.binary {
            Some(b) => Box::new(load_code(b, &trace)?),
            None => Box::new(NoCode),
        };
        out.insns = trace.insns();
        for t in &trace.threads {
            let htr = Htr::build(t, &BuildOptions::default());
            out.threads.push(ThreadOut::from_htr(
                t,
                &htr,
                code.as_ref(),
                a.binary.is_some(),
                a.top,
            ));
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

// ---------------------------------------------------------------------------------------------
// export

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
        Some(b) => Box::new(load_code(b, &trace)?),
        None => Box::new(NoCode),
    };
    if let (Some(out), JsonFormat::Lldb) = (&a.chrome, a.format) {
        let Some(t) = trace.threads.first() else {
            bail!("{label}: the trace is empty")
        };
        let htr = LldbHtr::build(InstructionLayer::from_thread(t, code.as_ref()));
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
    Ok(())
}
