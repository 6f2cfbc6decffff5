//! `pcmap inline encode` / `pcmap inline decode`: inline sites and parameter locations as split
//! BTF (the RFC's `.BTF.inline`, the October-2025 and 2026 location kinds, pcmap's compact
//! encoding), and a bpftool-style dump of such blobs.
//! The DWARF → BTF glue is `pcmap_inline::btf::site_set`; the record printers are
//! `pcmap_btf::dump`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use pcmap_binary::{Binary, MappedFile};
use pcmap_btf::dump::{detect, dump_compact, dump_rfc, dump_sites};
use pcmap_btf::elf_append::{self, NewSection};
use pcmap_btf::{Btf, Format};
use pcmap_inline::DebugData;

/// The encodings, as named on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatArg {
    /// The April-2025 RFC's `.BTF.inline` layout.
    Rfc,
    /// October-2025 kinds LOC_PARAM/LOC_PROTO/LOCSEC with 16-byte site records.
    #[value(name = "btf-2025")]
    Btf2025,
    /// 2026 revision: variable-length LOC_PARAM, 12-byte site records, layout section.
    #[value(name = "btf-2026")]
    Btf2026,
    /// pcmap's compact encoding (delta-coded sites over deduplicated location tuples).
    Compact,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Rfc => Format::Rfc,
            FormatArg::Btf2025 => Format::Btf2025,
            FormatArg::Btf2026 => Format::Btf2026,
            FormatArg::Compact => Format::Compact,
        }
    }
}

/// Encode a binary's inline sites and parameter locations as split BTF on its `.BTF`.
#[derive(clap::Args, Debug)]
pub struct EncodeArgs {
    /// ELF binary with DWARF.
    pub binary: PathBuf,
    /// Encoding.
    #[arg(long, value_enum, default_value = "btf-2026")]
    pub format: FormatArg,
    /// Write the encoding's blob here (`-` for stdout).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Write a copy of BINARY with the blob added as a section (plus `.BTF.extra` with the
    /// FUNC/FUNC_PROTO types for rfc/compact, and `.BTF` when the binary has none).
    #[arg(long)]
    pub into: Option<PathBuf>,
    /// Also write the split BTF holding only standard kinds (FUNC, FUNC_PROTO, missing parameter
    /// types): what bpftool/libbpf without location support accept.
    #[arg(long)]
    pub types: Option<PathBuf>,
    /// Base BTF (raw, or an ELF with `.BTF`). Default: BINARY's `.BTF`, else `pahole -J` output.
    #[arg(long)]
    pub base: Option<PathBuf>,
    /// Write the base BTF used (useful when it was generated with pahole).
    #[arg(long)]
    pub base_out: Option<PathBuf>,
    /// Section name for `--into` (default: `.BTF.inline`, `.BTF.extra` or `.pcmap.inline`).
    #[arg(long)]
    pub section: Option<String>,
    /// Print the sizes of all four encodings (bytes) instead of writing anything.
    #[arg(long)]
    pub sizes: bool,
    /// Machine-readable summary on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Print the records of an inline-site blob in bpftool's raw style.
#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// The blob, or an ELF file carrying it as a section.
    pub file: PathBuf,
    /// Base BTF (raw, or an ELF with `.BTF`). Default: FILE's `.BTF` when FILE is an ELF; for a
    /// raw BTF file without `--base`, FILE itself is dumped as base BTF.
    #[arg(long)]
    pub base: Option<PathBuf>,
    /// The FUNC/FUNC_PROTO split BTF of the rfc and compact encodings (default: FILE's
    /// `.BTF.extra` when FILE is an ELF).
    #[arg(long)]
    pub types: Option<PathBuf>,
    /// Encoding (default: detected from the section name or the blob's header).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Section to read when FILE is an ELF.
    #[arg(long)]
    pub section: Option<String>,
    /// Print the decoded sites (one line per site, then one per parameter) instead of the records.
    #[arg(long)]
    pub sites: bool,
}

fn read(path: &Path) -> Result<MappedFile> {
    MappedFile::open(path).with_context(|| format!("reading {}", path.display()))
}

/// BTF bytes from a raw blob or from an ELF's `.BTF`.
fn btf_bytes(path: &Path) -> Result<Vec<u8>> {
    let data = read(path)?;
    if elf_append::is_elf(&data) {
        return elf_append::section_data(&data, ".BTF")
            .with_context(|| format!("reading {}", path.display()))?
            .map(<[u8]>::to_vec)
            .with_context(|| format!("{} has no .BTF section", path.display()));
    }
    Ok(data.to_vec())
}

/// The base BTF for `binary`: `--base`, else the binary's `.BTF`, else `pahole -J`.
/// Returns the bytes and whether the binary itself carries them.
fn load_base(
    base: Option<&Path>,
    binary_path: &Path,
    binary: &Binary<'_>,
) -> Result<(Vec<u8>, bool)> {
    if let Some(p) = base {
        return Ok((btf_bytes(p)?, false));
    }
    if let Some(b) = elf_append::section_data_of(binary, ".BTF") {
        return Ok((b.to_vec(), true));
    }
    let dir = tempfile::tempdir().context("creating a temporary directory for pahole")?;
    let out = dir.path().join("base.btf");
    let status = Command::new("pahole")
        .arg(format!("--btf_encode_detached={}", out.display()))
        .arg(binary_path)
        .output()
        .context("running pahole to make the base BTF (install `dwarves`, or pass --base)")?;
    if !status.status.success() {
        bail!(
            "pahole failed on {}: {}",
            binary_path.display(),
            String::from_utf8_lossy(&status.stderr).trim()
        );
    }
    Ok((read(&out)?.to_vec(), false))
}

/// Make glibc's malloc use one arena for all threads (`mallopt(M_ARENA_MAX, 1)`). The extractor
/// scans units on worker threads and this thread then converts and frees those scans unit by unit
/// while it builds the encoder's input: with per-thread arenas the freed memory stays in the
/// workers' arenas, where this thread's allocations cannot reuse it (about 50 MB more peak on a
/// kernel image). Must run before the worker threads start; other allocators ignore it.
fn single_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const M_ARENA_MAX: std::ffi::c_int = -8;
        unsafe extern "C" {
            fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
        }
        // SAFETY: mallopt only changes glibc malloc's tuning; M_ARENA_MAX takes any positive
        // value and affects only arenas created afterwards.
        unsafe {
            mallopt(M_ARENA_MAX, 1);
        }
    }
}

pub fn run_encode(args: EncodeArgs) -> Result<()> {
    if !args.sizes && args.output.is_none() && args.into.is_none() && args.types.is_none() {
        bail!("nothing to write: give -o FILE, --into OUT, --types FILE or --sizes");
    }
    single_malloc_arena();
    let file = MappedFile::open(&args.binary)
        .with_context(|| format!("opening {}", args.binary.display()))?;
    let bin = Binary::parse(file.bytes())
        .with_context(|| format!("reading inline sites of {}", args.binary.display()))?;
    let (base_bytes, base_in_binary) = load_base(args.base.as_deref(), &args.binary, &bin)?;
    let base = Btf::parse(&base_bytes).context("parsing the base BTF")?;
    let set = DebugData::dwarf_from_binary(&bin)
        .context("loading the DWARF sections")
        .map(|mut debug| {
            debug.set_release(|bytes| file.release_bytes(bytes));
            debug
        })
        .and_then(|debug| {
            pcmap_inline::btf::site_set(&bin, &debug).context("extracting inline sites")
        })
        .with_context(|| format!("reading inline sites of {}", args.binary.display()))?;

    if args.sizes {
        let mut out = std::io::stdout().lock();
        let mut rows = Vec::new();
        for f in Format::ALL {
            let enc = pcmap_btf::encode(&set, &base, f)
                .with_context(|| format!("encoding as {}", f.name()))?;
            rows.push((f, enc));
        }
        if args.json {
            let v: Vec<_> = rows
                .iter()
                .map(|(f, e)| {
                    serde_json::json!({
                        "format": f.name(), "blob_bytes": e.blob.len(), "types_bytes": e.types.len(),
                        "total_bytes": e.total_size(), "sites": e.stats.sites,
                        "distinct_locations": e.stats.distinct_locations,
                        "distinct_location_lists": e.stats.distinct_location_lists,
                    })
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        } else {
            writeln!(
                out,
                "{:<10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>7}",
                "format", "blob", "types", "total", "sites", "locs", "lists"
            )?;
            for (f, e) in &rows {
                writeln!(
                    out,
                    "{:<10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>7}",
                    f.name(),
                    e.blob.len(),
                    if f.blob_is_btf() { 0 } else { e.types.len() },
                    e.total_size(),
                    e.stats.sites,
                    e.stats.distinct_locations,
                    e.stats.distinct_location_lists
                )?;
            }
        }
        return Ok(());
    }

    let format = Format::from(args.format);
    let enc = pcmap_btf::encode(&set, &base, format)
        .with_context(|| format!("encoding as {}", format.name()))?;
    if let Some(p) = &args.output {
        crate::output::write_atomic(p, |w| Ok(w.write_all(&enc.blob)?))?;
    }
    if let Some(p) = &args.types {
        crate::output::write_atomic(p, |w| Ok(w.write_all(&enc.types)?))?;
    }
    if let Some(p) = &args.base_out {
        crate::output::write_atomic(p, |w| Ok(w.write_all(&base_bytes)?))?;
    }
    if let Some(out) = &args.into {
        let name = args.section.as_deref().unwrap_or(format.section_name());
        let mut secs = Vec::new();
        if !base_in_binary {
            secs.push(NewSection {
                name: ".BTF",
                data: &base_bytes,
                align: 4,
            });
        }
        secs.push(NewSection {
            name,
            data: &enc.blob,
            align: 4,
        });
        if !format.blob_is_btf() {
            secs.push(NewSection {
                name: ".BTF.extra",
                data: &enc.types,
                align: 4,
            });
        }
        let image = elf_append::append_sections_to(&bin, &secs)
            .with_context(|| format!("adding sections to {}", args.binary.display()))?;
        crate::output::write_atomic(out, |w| Ok(w.write_all(&image)?))?;
        let perms = std::fs::metadata(&args.binary)?.permissions();
        std::fs::set_permissions(out, perms)
            .with_context(|| format!("setting permissions of {}", out.display()))?;
    }
    let s = &enc.stats;
    let summary = serde_json::json!({
        "format": format.name(), "sites": s.sites, "sites_outside_sections": s.sites_outside_sections,
        "functions": s.funcs, "functions_from_base": s.funcs_from_base, "types_added": s.types_added,
        "distinct_locations": s.distinct_locations, "distinct_location_lists": s.distinct_location_lists,
        "blob_bytes": enc.blob.len(), "types_bytes": enc.types.len(), "total_bytes": enc.total_size(),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        eprintln!(
            "pcmap: {} sites of {} functions ({} from base BTF) as {}: {} bytes ({} distinct locations, {} location lists){}",
            s.sites,
            s.funcs,
            s.funcs_from_base,
            format.name(),
            enc.total_size(),
            s.distinct_locations,
            s.distinct_location_lists,
            if s.sites_outside_sections > 0 {
                format!(
                    "; {} sites outside code sections skipped",
                    s.sites_outside_sections
                )
            } else {
                String::new()
            }
        );
    }
    // The process ends here: freeing the site set (hundreds of thousands of small allocations
    // on a kernel image) would only cost time.
    std::mem::forget(set);
    Ok(())
}

pub fn run_decode(args: DecodeArgs) -> Result<()> {
    let data = read(&args.file)?;
    let elf = if elf_append::is_elf(&data) {
        Some(Binary::parse(&data).with_context(|| format!("reading {}", args.file.display()))?)
    } else {
        None
    };
    let is_elf = elf.is_some();
    let section = |name: &str| {
        elf.as_ref()
            .and_then(|b| elf_append::section_data_of(b, name))
    };
    let (blob, format): (Vec<u8>, Format) = if is_elf {
        let candidates: Vec<(&str, Option<Format>)> = match &args.section {
            Some(s) => vec![(s.as_str(), args.format.map(Format::from))],
            None if args.format.is_some() => {
                let f = Format::from(args.format.expect("checked"));
                vec![(f.section_name(), Some(f))]
            }
            None => vec![
                (".BTF.inline", Some(Format::Rfc)),
                (".pcmap.inline", Some(Format::Compact)),
                (".BTF.extra", None),
            ],
        };
        let mut found = None;
        for (name, fmt) in candidates {
            if let Some(b) = section(name) {
                let f = args
                    .format
                    .map(Format::from)
                    .or(fmt)
                    .unwrap_or_else(|| detect(b));
                found = Some((b.to_vec(), f));
                break;
            }
        }
        found.with_context(|| {
            format!(
                "{} has no .BTF.inline, .pcmap.inline or .BTF.extra section (use --section)",
                args.file.display()
            )
        })?
    } else {
        let f = args
            .format
            .map(Format::from)
            .unwrap_or_else(|| detect(&data));
        (data.to_vec(), f)
    };
    let base_bytes = match (&args.base, is_elf) {
        (Some(p), _) => btf_bytes(p)?,
        (None, true) => section(".BTF")
            .map(<[u8]>::to_vec)
            .context("give --base: the file has no .BTF section")?,
        (None, false) if format.blob_is_btf() => {
            // No base: FILE is itself base BTF; dump it.
            let btf = Btf::parse(&blob).with_context(|| {
                format!(
                    "parsing {} as base BTF (give --base for split BTF)",
                    args.file.display()
                )
            })?;
            let mut text = String::new();
            pcmap_btf::raw::dump_raw(&btf, &mut text)?;
            std::io::stdout().lock().write_all(text.as_bytes())?;
            return Ok(());
        }
        (None, false) => bail!("give --base BTF (the base the blob was encoded against)"),
    };
    let types_bytes = match (&args.types, format.blob_is_btf()) {
        (_, true) => None,
        (Some(p), false) => Some(btf_bytes(p)?),
        (None, false) if is_elf => section(".BTF.extra").map(<[u8]>::to_vec),
        (None, false) => None,
    };
    let base = Btf::parse(&base_bytes).context("parsing the base BTF")?;
    let types = match &types_bytes {
        Some(t) => Some(Btf::parse_split(t, &base).context("parsing the split types BTF")?),
        None => None,
    };
    let names: &Btf<'_> = types.as_ref().unwrap_or(&base);

    let mut text = String::new();
    if args.sites {
        let sites = pcmap_btf::decode(format, &blob, types_bytes.as_deref(), &base)
            .with_context(|| format!("decoding {} as {}", args.file.display(), format.name()))?;
        dump_sites(&sites, &mut text);
    } else {
        match format {
            Format::Btf2025 | Format::Btf2026 => {
                let split = Btf::parse_split(&blob, &base)
                    .with_context(|| format!("parsing {} as split BTF", args.file.display()))?;
                pcmap_btf::raw::dump_raw(&split, &mut text)?;
            }
            Format::Rfc => {
                if let Some(t) = &types {
                    pcmap_btf::raw::dump_raw(t, &mut text)?;
                }
                dump_rfc(&blob, names, &mut text)
                    .with_context(|| format!("decoding {} as .BTF.inline", args.file.display()))?;
            }
            Format::Compact => {
                if let Some(t) = &types {
                    pcmap_btf::raw::dump_raw(t, &mut text)?;
                }
                dump_compact(&blob, names, &mut text)
                    .with_context(|| format!("decoding {} as compact", args.file.display()))?;
            }
        }
    }
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    Ok(())
}
