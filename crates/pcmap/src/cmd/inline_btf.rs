//! `pcmap inline encode` / `pcmap inline decode`: inline sites and parameter locations as split
//! BTF (the RFC's `.BTF.inline`, the October-2025 and 2026 location kinds, pcmap's compact
//! encoding), and a bpftool-style dump of such blobs.
//!
//! The glue from the DWARF extractor's model (`pcmap-inline`) to the encoders' neutral model
//! (`pcmap_btf::SiteSet`) lives here, including a small gimli walk that describes parameter
//! type DIEs so the encoder can find them in the base BTF.

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use gimli::{AttributeValue, constants as dw};
use object::{Object, ObjectSection, SectionKind};
use pcmap_btf::elf_append::{self, NewSection};
use pcmap_btf::encoding::{compact::CompactBlob, rfc::RfcBlob};
use pcmap_btf::model::FRAME_BASE_REG;
use pcmap_btf::{
    Btf, CodeSection, Format, FuncParam, InlineFunc, Loc, ParamLoc, Site, SiteSet, TypeDesc,
};
use pcmap_inline::{DebugData, Location};
use rustc_hash::FxHashMap;

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

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
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
    Ok(data)
}

/// The base BTF for `binary`: `--base`, else the binary's `.BTF`, else `pahole -J`.
/// Returns the bytes and whether the binary itself carries them.
fn load_base(base: Option<&Path>, binary_path: &Path, binary: &[u8]) -> Result<(Vec<u8>, bool)> {
    if let Some(p) = base {
        return Ok((btf_bytes(p)?, false));
    }
    if let Some(b) = elf_append::section_data(binary, ".BTF")
        .with_context(|| format!("reading {}", binary_path.display()))?
    {
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
    Ok((read(&out)?, false))
}

pub fn run_encode(args: EncodeArgs) -> Result<()> {
    if !args.sizes && args.output.is_none() && args.into.is_none() && args.types.is_none() {
        bail!("nothing to write: give -o FILE, --into OUT, --types FILE or --sizes");
    }
    let file = std::fs::File::open(&args.binary)
        .with_context(|| format!("opening {}", args.binary.display()))?;
    // SAFETY: the file is mapped read-only and not modified while mapped (we write outputs via
    // temporary files and renames).
    let map = unsafe { memmap2::Mmap::map(&file) }
        .with_context(|| format!("mapping {}", args.binary.display()))?;
    let data: &[u8] = &map;
    let (base_bytes, base_in_binary) = load_base(args.base.as_deref(), &args.binary, data)?;
    let base = Btf::parse(&base_bytes).context("parsing the base BTF")?;
    let set = site_set(data)
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
        let image = elf_append::append_sections(data, &secs)
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
    Ok(())
}

/// Build the encoders' input from the binary's DWARF.
fn site_set(data: &[u8]) -> Result<SiteSet> {
    let debug = DebugData::load(data).context("loading the DWARF sections")?;
    let info = pcmap_inline::extract_sites(&debug).context("extracting inline sites")?;
    let file = object::File::parse(data)?;
    let sections: Vec<CodeSection> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .filter(|s| s.size() > 0)
        .filter_map(|s| {
            Some(CodeSection {
                name: s.name().ok()?.to_string(),
                address: s.address(),
                size: s.size(),
            })
        })
        .collect();
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    // The DWARF sections the type walk needs, decompressed once (borrowed when not compressed).
    let mut dwarf_sections = Vec::new();
    for id in [
        gimli::SectionId::DebugAbbrev,
        gimli::SectionId::DebugInfo,
        gimli::SectionId::DebugStr,
        gimli::SectionId::DebugStrOffsets,
        gimli::SectionId::DebugLine,
        gimli::SectionId::DebugLineStr,
        gimli::SectionId::DebugAddr,
        gimli::SectionId::DebugRngLists,
        gimli::SectionId::DebugRanges,
        gimli::SectionId::DebugLocLists,
        gimli::SectionId::DebugLoc,
    ] {
        if let Some(s) = file.section_by_name(id.name()) {
            dwarf_sections.push((
                id,
                s.uncompressed_data()
                    .with_context(|| format!("reading {}", id.name()))?,
            ));
        }
    }
    let mut types = TypeDescriber::new(&dwarf_sections, endian)
        .context("reading DWARF units for parameter types")?;
    let mut func_index: FxHashMap<u32, usize> = FxHashMap::default();
    let mut funcs = Vec::new();
    let mut sites = Vec::with_capacity(info.sites.len());
    for site in &info.sites {
        let Some(address) = site.site_addr else {
            continue;
        };
        let Some(f) = info.functions.get(site.callee as usize) else {
            continue;
        };
        let fi = match func_index.get(&site.callee) {
            Some(&i) => i,
            None => {
                let func = InlineFunc {
                    name: f.name.as_deref().unwrap_or("<unknown>").to_string(),
                    ret: types.describe_opt(f.return_type),
                    params: f
                        .params
                        .iter()
                        .map(|p| FuncParam {
                            name: p.name.as_deref().unwrap_or("").to_string(),
                            ty: types.describe_opt(p.type_die),
                        })
                        .collect(),
                    varargs: f.variadic,
                };
                funcs.push(func);
                func_index.insert(site.callee, funcs.len() - 1);
                funcs.len() - 1
            }
        };
        let params = site
            .params
            .iter()
            .zip(&funcs[fi].params)
            .zip(&f.params)
            .map(|((p, decl), d)| param_loc(&p.location, d.byte_size.unwrap_or(0), &decl.ty))
            .collect();
        sites.push(Site {
            address,
            func: fi,
            params,
        });
    }
    Ok(SiteSet {
        sections,
        funcs,
        sites,
    })
}

fn is_signed(t: &TypeDesc) -> bool {
    match t {
        TypeDesc::Int { signed, .. } | TypeDesc::Enum { signed, .. } => *signed,
        TypeDesc::Typedef { target, .. }
        | TypeDesc::Const(target)
        | TypeDesc::Volatile(target)
        | TypeDesc::Restrict(target) => is_signed(target),
        _ => false,
    }
}

/// The encoders' location for the extractor's location (`None`: no BTF location can express it).
fn param_loc(l: &Location, size: u64, ty: &TypeDesc) -> Option<ParamLoc> {
    let size = u32::try_from(size).unwrap_or(0);
    let signed = is_signed(ty);
    let off = |o: i64| i32::try_from(o).ok();
    let loc = match l {
        Location::Constant { value } => Loc::Const(*value),
        Location::Register { reg } => Loc::Reg(u32::from(*reg)),
        Location::RegisterOffsetValue { reg, offset } => Loc::RegOffset {
            reg: u32::from(*reg),
            offset: off(*offset)?,
        },
        Location::Memory { reg, offset } => Loc::Deref {
            reg: u32::from(*reg),
            offset: off(*offset)?,
        },
        Location::FrameBase {
            offset,
            base: Some(b),
        } => Loc::Deref {
            reg: u32::from(b.reg),
            offset: off(b.offset.checked_add(*offset)?)?,
        },
        Location::FrameBase { offset, base: None } => Loc::Deref {
            reg: FRAME_BASE_REG,
            offset: off(*offset)?,
        },
        Location::Pieces { pieces } => match pieces.as_slice() {
            [a, b] => match (&a.location, &b.location) {
                (Location::Register { reg: ra }, Location::Register { reg: rb }) => {
                    Loc::RegPair(u32::from(*ra), u32::from(*rb))
                }
                _ => return None,
            },
            _ => return None,
        },
        // A value in memory at a fixed address, entry values (the register at entry of the
        // out-of-line caller, not at the site), implicit pointers, parameter references and
        // computed expressions have no BTF location; neither do the three "no location" cases.
        _ => return None,
    };
    Some(ParamLoc { size, signed, loc }.canonical())
}

/// Describes DWARF type DIEs (by `.debug_info` offset) as [`TypeDesc`]s, memoised.
struct TypeDescriber<'a> {
    dwarf: gimli::Dwarf<gimli::EndianSlice<'a, gimli::RunTimeEndian>>,
    units: Vec<(
        u64,
        gimli::Unit<gimli::EndianSlice<'a, gimli::RunTimeEndian>>,
    )>,
    memo: FxHashMap<u64, TypeDesc>,
}

type R<'a> = gimli::EndianSlice<'a, gimli::RunTimeEndian>;

impl<'a> TypeDescriber<'a> {
    fn new(
        sections: &'a [(gimli::SectionId, Cow<'a, [u8]>)],
        endian: gimli::RunTimeEndian,
    ) -> Result<TypeDescriber<'a>> {
        let load = |id: gimli::SectionId| -> Result<R<'a>, gimli::Error> {
            let bytes: &'a [u8] = sections
                .iter()
                .find(|(i, _)| *i == id)
                .map_or(&[][..], |(_, b)| &b[..]);
            Ok(gimli::EndianSlice::new(bytes, endian))
        };
        let dwarf = gimli::Dwarf::load(load)?;
        let mut units = Vec::new();
        let mut iter = dwarf.units();
        while let Some(header) = iter.next()? {
            let Some(off) = header.debug_info_offset() else {
                continue;
            };
            let unit = dwarf.unit(header)?;
            units.push((off.0 as u64, unit));
        }
        units.sort_by_key(|(o, _)| *o);
        Ok(TypeDescriber {
            dwarf,
            units,
            memo: FxHashMap::default(),
        })
    }

    fn describe_opt(&mut self, die: Option<u64>) -> TypeDesc {
        match die {
            Some(d) => self.describe(d, 0),
            None => TypeDesc::Void,
        }
    }

    fn describe(&mut self, die: u64, depth: u32) -> TypeDesc {
        if let Some(t) = self.memo.get(&die) {
            return t.clone();
        }
        let t = self
            .describe_uncached(die, depth)
            .unwrap_or(TypeDesc::Struct {
                name: None,
                size: 0,
            });
        self.memo.insert(die, t.clone());
        t
    }

    fn describe_uncached(&mut self, die: u64, depth: u32) -> Option<TypeDesc> {
        if depth > 24 {
            return None;
        }
        let idx = self
            .units
            .partition_point(|(o, _)| *o <= die)
            .checked_sub(1)?;
        let unit = &self.units[idx].1;
        let uoff = gimli::DebugInfoOffset(die as usize).to_unit_offset(&unit.header)?;
        let entry = unit.entry(uoff).ok()?;
        let name = entry
            .attr_value(dw::DW_AT_name)
            .and_then(|v| self.dwarf.attr_string(unit, v).ok())
            .map(|s| s.to_string_lossy().into_owned());
        let size = entry
            .attr_value(dw::DW_AT_byte_size)
            .and_then(|v| v.udata_value())
            .unwrap_or(0) as u32;
        let target = match entry.attr_value(dw::DW_AT_type) {
            Some(AttributeValue::UnitRef(o)) => {
                Some(o.to_debug_info_offset(&unit.header)?.0 as u64)
            }
            Some(AttributeValue::DebugInfoRef(o)) => Some(o.0 as u64),
            _ => None,
        };
        let tag = entry.tag();
        let encoding = entry
            .attr_value(dw::DW_AT_encoding)
            .and_then(|v| v.udata_value())
            .unwrap_or(0) as u8;
        let mut children_types = Vec::new();
        let mut varargs = false;
        let mut array_len = 0u32;
        if tag == dw::DW_TAG_subroutine_type || tag == dw::DW_TAG_array_type {
            let mut tree = unit.entries_tree(Some(uoff)).ok()?;
            let root = tree.root().ok()?;
            let mut children = root.children();
            let mut first_subrange = true;
            while let Ok(Some(child)) = children.next() {
                let e = child.entry();
                match e.tag() {
                    dw::DW_TAG_formal_parameter => {
                        let t = match e.attr_value(dw::DW_AT_type) {
                            Some(AttributeValue::UnitRef(o)) => {
                                o.to_debug_info_offset(&unit.header).map(|o| o.0 as u64)
                            }
                            Some(AttributeValue::DebugInfoRef(o)) => Some(o.0 as u64),
                            _ => None,
                        };
                        children_types.push(t);
                    }
                    dw::DW_TAG_unspecified_parameters => varargs = true,
                    dw::DW_TAG_subrange_type if first_subrange => {
                        first_subrange = false;
                        if let Some(c) = e.attr_value(dw::DW_AT_count).and_then(|v| v.udata_value())
                        {
                            array_len = c as u32;
                        } else if let Some(u) = e
                            .attr_value(dw::DW_AT_upper_bound)
                            .and_then(|v| v.udata_value())
                        {
                            array_len = u.saturating_add(1) as u32;
                        }
                    }
                    _ => {}
                }
            }
        }
        let inner = |s: &mut Self| match target {
            Some(t) => s.describe(t, depth + 1),
            None => TypeDesc::Void,
        };
        Some(match tag {
            dw::DW_TAG_base_type => match dw::DwAte(encoding) {
                dw::DW_ATE_float => TypeDesc::Float { name: name?, size },
                e => TypeDesc::Int {
                    name: name?,
                    size,
                    signed: matches!(e, dw::DW_ATE_signed | dw::DW_ATE_signed_char),
                    char: matches!(e, dw::DW_ATE_signed_char | dw::DW_ATE_unsigned_char),
                    bool: e == dw::DW_ATE_boolean,
                },
            },
            dw::DW_TAG_pointer_type
            | dw::DW_TAG_reference_type
            | dw::DW_TAG_rvalue_reference_type => TypeDesc::Pointer(Box::new(inner(self))),
            dw::DW_TAG_const_type => TypeDesc::Const(Box::new(inner(self))),
            dw::DW_TAG_volatile_type => TypeDesc::Volatile(Box::new(inner(self))),
            dw::DW_TAG_restrict_type => TypeDesc::Restrict(Box::new(inner(self))),
            dw::DW_TAG_atomic_type => inner(self),
            dw::DW_TAG_typedef => TypeDesc::Typedef {
                name: name?,
                target: Box::new(inner(self)),
            },
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type => TypeDesc::Struct { name, size },
            dw::DW_TAG_union_type => TypeDesc::Union { name, size },
            dw::DW_TAG_enumeration_type => {
                let signed = matches!(inner(self), TypeDesc::Int { signed: true, .. });
                TypeDesc::Enum { name, size, signed }
            }
            dw::DW_TAG_array_type => TypeDesc::Array {
                elem: Box::new(inner(self)),
                len: array_len,
            },
            dw::DW_TAG_subroutine_type => {
                let ret = Box::new(inner(self));
                let params = children_types
                    .into_iter()
                    .map(|t| match t {
                        Some(t) => self.describe(t, depth + 1),
                        None => TypeDesc::Void,
                    })
                    .collect();
                TypeDesc::Function {
                    ret,
                    params,
                    varargs,
                }
            }
            _ => return None,
        })
    }
}

/// Which encoding a raw blob is in: compact by magic, RFC by its header (inline info right after
/// a 24-byte header), otherwise BTF (2026 when it has a layout section).
fn detect(blob: &[u8]) -> Format {
    if blob.starts_with(pcmap_btf::encoding::compact::MAGIC) {
        return Format::Compact;
    }
    let word = |i: usize| {
        blob.get(i..i + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    };
    if word(4) == Some(24) && word(8) == Some(24) {
        return Format::Rfc;
    }
    match pcmap_btf::header::Header::parse(blob) {
        Ok(h) if h.layout.is_some() => Format::Btf2026,
        _ => Format::Btf2025,
    }
}

fn describe_loc(p: &Option<ParamLoc>) -> String {
    let Some(p) = p else {
        return "(none)".to_string();
    };
    let reg = |r: u32| {
        if r == FRAME_BASE_REG {
            "fbreg".to_string()
        } else {
            r.to_string()
        }
    };
    let what = match p.loc {
        Loc::Const(v) => format!("const={v:#x}"),
        Loc::Addr(a) => format!("addr={a:#x}"),
        Loc::Reg(r) => format!("reg={}", reg(r)),
        Loc::RegPair(a, b) => format!("reg={} reg_hi={}", reg(a), reg(b)),
        Loc::RegOffset { reg: r, offset } => format!("reg={} offset={offset}", reg(r)),
        Loc::Deref { reg: r, offset } => format!("deref reg={} offset={offset}", reg(r)),
    };
    format!(
        "size={}{} {what}",
        p.size,
        if p.signed { " signed" } else { "" }
    )
}

pub fn run_decode(args: DecodeArgs) -> Result<()> {
    let data = read(&args.file)?;
    let is_elf = elf_append::is_elf(&data);
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
            if let Some(b) = elf_append::section_data(&data, name)
                .with_context(|| format!("reading {}", args.file.display()))?
            {
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
        (data.clone(), f)
    };
    let base_bytes = match (&args.base, is_elf) {
        (Some(p), _) => btf_bytes(p)?,
        (None, true) => elf_append::section_data(&data, ".BTF")?
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
        (None, false) if is_elf => {
            elf_append::section_data(&data, ".BTF.extra")?.map(<[u8]>::to_vec)
        }
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
        use std::fmt::Write as _;
        for s in &sites {
            let _ = writeln!(
                text,
                "SITE '{}' {}{:#x} vlen={}",
                s.func,
                if s.section.is_empty() {
                    String::new()
                } else {
                    format!("{}+", s.section)
                },
                s.offset,
                s.params.len()
            );
            for p in &s.params {
                let _ = writeln!(text, "\t{}", describe_loc(p));
            }
        }
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

fn func_label(btf: &Btf<'_>, id: u32) -> String {
    btf.record(id)
        .ok()
        .and_then(|r| btf.name_of(&r).ok().flatten())
        .unwrap_or("(anon)")
        .to_string()
}

fn dump_rfc(blob: &[u8], names: &Btf<'_>, out: &mut String) -> Result<()> {
    use std::fmt::Write as _;
    let b = RfcBlob::parse(blob)?;
    let h = b.header;
    let _ = writeln!(
        out,
        "BTF.inline flags={:#x} hdr_len={} inline_info_off={} inline_info_len={} location_off={} location_len={}",
        h.flags,
        h.header_length,
        h.inline_info_offset,
        h.inline_info_length,
        h.location_offset,
        h.location_length
    );
    for s in b.sites() {
        let s = s?;
        let _ = writeln!(
            out,
            "INLINE '{}' type_id={} insn_offset={:#x} vlen={}",
            func_label(names, s.type_id),
            s.type_id,
            s.insn_offset,
            s.param_locations.len()
        );
        for &o in &s.param_locations {
            let loc = if o == 0 { None } else { b.location(o)? };
            let _ = writeln!(out, "\tlocation_off={o} {}", describe_loc(&loc));
        }
    }
    Ok(())
}

fn dump_compact(blob: &[u8], names: &Btf<'_>, out: &mut String) -> Result<()> {
    use std::fmt::Write as _;
    let b = CompactBlob::parse(blob)?;
    for (i, l) in b.locations.iter().enumerate() {
        let _ = writeln!(out, "LOC [{}] {}", i + 1, describe_loc(&Some(*l)));
    }
    for (i, l) in b.lists.iter().enumerate() {
        let ids: Vec<String> = l.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "LOC_LIST [{i}] vlen={} locs={}",
            l.len(),
            ids.join(",")
        );
    }
    for (sec, sites) in &b.sections {
        let _ = writeln!(out, "SECTION '{sec}' vlen={}", sites.len());
        for &(off, v) in sites {
            let (f, l) = b.variants[v as usize];
            let _ = writeln!(
                out,
                "\tfunc_type_id={f} ('{}') loc_list={l} offset={off:#x}",
                func_label(names, f)
            );
        }
    }
    Ok(())
}
