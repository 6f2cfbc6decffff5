//! Inline-site encodings: the RFC's `.BTF.inline` (April 2025), the October-2025 location kinds,
//! the 2026 revision, and pcmap's compact encoding. All four share the split BTF that gives every
//! inlined function a `FUNC` + `FUNC_PROTO` (or reuses the base's FUNC for partially inlined ones).

pub mod btf2025;
pub mod btf2026;
pub mod compact;
pub mod rfc;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::model::{CodeSection, DecodedSite, ParamLoc, SiteSet};
use crate::reader::Btf;
use crate::resolve::TypeResolver;
use crate::writer::BtfWriter;

/// One of the encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Treyer's `.BTF.inline` RFC layout (April 2025).
    Rfc,
    /// Maguire's October-2025 kinds: 8-byte LOC_PARAM, LOC_PROTO -> FUNC_PROTO, 16-byte btf_loc.
    Btf2025,
    /// The 2026 revision: variable-length LOC_PARAM, 12-byte btf_loc -> FUNC, layout section.
    Btf2026,
    /// pcmap's compact encoding (sorted, delta-coded sites over deduplicated location tuples).
    Compact,
}

impl Format {
    /// All formats.
    pub const ALL: [Format; 4] = [
        Format::Rfc,
        Format::Btf2025,
        Format::Btf2026,
        Format::Compact,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Rfc => "rfc",
            Format::Btf2025 => "btf-2025",
            Format::Btf2026 => "btf-2026",
            Format::Compact => "compact",
        }
    }

    /// Default ELF section name for the blob.
    pub fn section_name(self) -> &'static str {
        match self {
            Format::Rfc => ".BTF.inline",
            Format::Btf2025 | Format::Btf2026 => ".BTF.extra",
            Format::Compact => ".pcmap.inline",
        }
    }

    /// Whether the blob is split BTF itself (else it refers to a separate split BTF of types).
    pub fn blob_is_btf(self) -> bool {
        matches!(self, Format::Btf2025 | Format::Btf2026)
    }

    /// What this encoding keeps of a parameter location (`None`: cannot be represented, stored
    /// as "no location"). Decoding returns exactly this for every encoded location.
    pub fn project(self, p: Option<ParamLoc>) -> Option<ParamLoc> {
        let p = p?.canonical();
        match self {
            Format::Compact => Some(p),
            Format::Btf2026 => btf2026::project(p),
            Format::Btf2025 => btf2025::project(p),
            Format::Rfc => rfc::project(p),
        }
    }
}

/// Counts gathered while encoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodeStats {
    /// Sites written.
    pub sites: usize,
    /// Sites dropped because no code section contains their address (or the offset exceeds 32 bits).
    pub sites_outside_sections: usize,
    /// Distinct inlined functions referenced.
    pub funcs: usize,
    /// Of those, functions whose FUNC comes from the base (partially inlined).
    pub funcs_from_base: usize,
    /// Standard types added to the split BTF (FUNC, FUNC_PROTO, types the base lacks).
    pub types_added: u32,
    /// Distinct parameter locations after dedup.
    pub distinct_locations: usize,
    /// Distinct per-site location lists after dedup.
    pub distinct_location_lists: usize,
}

/// The output of an encoder.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// Which encoding.
    pub format: Format,
    /// The encoding's blob: split BTF with location kinds (btf-2025/2026), the `.BTF.inline` blob
    /// (rfc) or the compact blob.
    pub blob: Vec<u8>,
    /// Split BTF with only standard kinds (FUNC/FUNC_PROTO and missing parameter types): what
    /// libbpf/bpftool without location support accept. For btf-2025/2026 its types are the
    /// blob's first types, with the same ids.
    pub types: Vec<u8>,
    /// Counts.
    pub stats: EncodeStats,
}

impl Encoded {
    /// Bytes the encoding adds to a binary (blob plus, when separate, the types).
    pub fn total_size(&self) -> usize {
        if self.format.blob_is_btf() {
            self.blob.len()
        } else {
            self.blob.len() + self.types.len()
        }
    }
}

/// A site ready for an encoder: section, offset, FUNC id, projected parameter locations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreparedSite {
    pub section: usize,
    pub offset: u32,
    pub address: u64,
    pub func: usize,
    pub params: Vec<Option<ParamLoc>>,
}

/// Shared first stage: types of every referenced function, sites sorted by (section, offset).
pub(crate) struct Prepared {
    pub writer: BtfWriter,
    /// Per function of the set: (FUNC id, FUNC_PROTO id), if referenced.
    pub func_ids: Vec<Option<(u32, u32)>>,
    pub sites: Vec<PreparedSite>,
    pub stats: EncodeStats,
}

pub(crate) fn prepare(set: &SiteSet, base: &Btf<'_>, format: Format) -> Result<Prepared> {
    let mut writer = BtfWriter::new_split(base);
    let mut resolver = TypeResolver::new(base)?;
    let mut stats = EncodeStats::default();
    let mut func_ids = vec![None; set.funcs.len()];
    let mut sections: Vec<(usize, &CodeSection)> = set.sections.iter().enumerate().collect();
    sections.sort_by_key(|(_, s)| s.address);
    let mut sites = Vec::with_capacity(set.sites.len());
    for site in &set.sites {
        let f = set
            .funcs
            .get(site.func)
            .ok_or_else(|| Error::Unrepresentable {
                field: "site.func",
                message: format!(
                    "site at {:#x} refers to function #{} of {}",
                    site.address,
                    site.func,
                    set.funcs.len()
                ),
            })?;
        let pos = sections.partition_point(|(_, s)| s.address <= site.address);
        let sec = pos
            .checked_sub(1)
            .map(|i| sections[i])
            .filter(|(_, s)| site.address - s.address < s.size.max(1));
        let Some((sec_idx, sec)) = sec else {
            stats.sites_outside_sections += 1;
            continue;
        };
        let Ok(offset) = u32::try_from(site.address - sec.address) else {
            stats.sites_outside_sections += 1;
            continue;
        };
        if func_ids[site.func].is_none() {
            let (id, proto, from_base) = resolver.func(f, base, &mut writer)?;
            func_ids[site.func] = Some((id, proto));
            stats.funcs += 1;
            stats.funcs_from_base += usize::from(from_base);
        }
        sites.push(PreparedSite {
            section: sec_idx,
            offset,
            address: site.address,
            func: site.func,
            params: site.params.iter().map(|p| format.project(*p)).collect(),
        });
    }
    sites.sort_by_key(|s| (s.section, s.offset, s.func));
    stats.sites = sites.len();
    stats.types_added = writer.own_type_count();
    Ok(Prepared {
        writer,
        func_ids,
        sites,
        stats,
    })
}

/// Deduplication of locations and location lists (first-use order).
#[derive(Debug, Default)]
pub(crate) struct Dedup<K: std::hash::Hash + Eq + Clone> {
    pub index: FxHashMap<K, usize>,
    pub items: Vec<K>,
}

impl<K: std::hash::Hash + Eq + Clone> Dedup<K> {
    pub fn new() -> Self {
        Dedup {
            index: FxHashMap::default(),
            items: Vec::new(),
        }
    }
    pub fn insert(&mut self, k: &K) -> usize {
        if let Some(&i) = self.index.get(k) {
            return i;
        }
        let i = self.items.len();
        self.items.push(k.clone());
        self.index.insert(k.clone(), i);
        i
    }
}

/// Encode `set` in `format` as split BTF on `base`.
pub fn encode(set: &SiteSet, base: &Btf<'_>, format: Format) -> Result<Encoded> {
    let prepared = prepare(set, base, format)?;
    match format {
        Format::Rfc => rfc::encode(prepared, set),
        Format::Btf2025 => btf2025::encode(prepared, set),
        Format::Btf2026 => btf2026::encode(prepared, set),
        Format::Compact => compact::encode(prepared, set),
    }
}

/// Decode the sites of a blob. `types` is the separate split BTF of the rfc and compact
/// encodings (ignored for the BTF encodings, whose blob is split BTF on `base`).
pub fn decode(
    format: Format,
    blob: &[u8],
    types: Option<&[u8]>,
    base: &Btf<'_>,
) -> Result<Vec<DecodedSite>> {
    match format {
        Format::Btf2025 | Format::Btf2026 => {
            let btf = Btf::parse_split(blob, base)?;
            crate::encoding::btf2026::decode_any(&btf)
        }
        Format::Rfc | Format::Compact => {
            let split;
            let names: &Btf<'_> = match types {
                Some(t) => {
                    split = Btf::parse_split(t, base)?;
                    &split
                }
                None => base,
            };
            if format == Format::Rfc {
                rfc::decode(blob, names)
            } else {
                compact::decode(blob, names)
            }
        }
    }
}

/// LOCSEC name for a code section: `inline.text` for `.text`.
pub(crate) fn locsec_name(section: &str) -> String {
    if section.starts_with('.') {
        format!("inline{section}")
    } else {
        format!("inline.{section}")
    }
}

/// Code section name from a LOCSEC name.
pub(crate) fn section_of_locsec(name: &str) -> String {
    match name.strip_prefix("inline") {
        Some(rest) if rest.starts_with('.') => rest.to_string(),
        _ => name.to_string(),
    }
}

/// Name of a FUNC (or, for the October-2025 LOCSEC, the name string).
pub(crate) fn func_name(btf: &Btf<'_>, func_id: u32, offset: usize) -> Result<String> {
    let rec = btf
        .record(func_id)
        .map_err(|_| Error::invalid("func type id", offset, format!("{func_id} does not exist")))?;
    if rec.kind() != crate::kind::Kind::FUNC {
        return Err(Error::invalid(
            "func type id",
            offset,
            format!("[{func_id}] is {}, not FUNC", rec.kind().name()),
        ));
    }
    Ok(btf.name_of(&rec)?.unwrap_or("").to_string())
}
