//! `perf.data` (file mode, little-endian): header, event attributes, feature sections and a zero-copy
//! record walker.
//!
//! The header, attribute and feature-section parsing is hand-written (~300 lines) instead of using
//! `linux-perf-data`: the walker needs every attribute field that decides the sample layout
//! (`sample_type`, `read_format`, `branch_sample_type`, `sample_regs_*`, `sample_id_all`) and must run
//! over a borrowed memory map without copying records, which that crate's reader does not do
//! (`linux-perf-data` serves as an independent oracle in the tests instead). Samples are decoded lazily:
//! branch stacks stay a borrowed slice until iterated.
//!
//! * [`PerfFile::parse`] reads the header, attributes ([`EventAttr`]), build-ids ([`BuildIdEntry`]) and
//!   event names.
//! * [`PerfFile::for_each_record`] walks the data section, including records inside zstd-compressed
//!   `PERF_RECORD_COMPRESSED`/`COMPRESSED2` chunks, handing each [`Record`] to a callback.
//! * [`MmapTable`] follows MMAP/MMAP2/FORK records to tell which file an address of a process
//!   belongs to (`perf script`'s `dso` attribution). Mapping a profile to one binary's link-time
//!   addresses is [`events`](crate::events)' job.
//! * [`writer`] writes small perf.data files with branch stacks for tests (checked with `perf script`).

mod records;
pub mod writer;

use std::collections::HashMap;

pub use records::{BranchEntry, BranchStack, Mmap, Record, Sample, SampleId, TaskEvent};

/// `PERF_SAMPLE_*` bits of `sample_type`.
pub mod sample_type {
    #![allow(missing_docs)]
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const WEIGHT: u64 = 1 << 14;
    pub const DATA_SRC: u64 = 1 << 15;
    pub const IDENTIFIER: u64 = 1 << 16;
    pub const TRANSACTION: u64 = 1 << 17;
    pub const REGS_INTR: u64 = 1 << 18;
    pub const PHYS_ADDR: u64 = 1 << 19;
    pub const AUX: u64 = 1 << 20;
    pub const CGROUP: u64 = 1 << 21;
    pub const DATA_PAGE_SIZE: u64 = 1 << 22;
    pub const CODE_PAGE_SIZE: u64 = 1 << 23;
    pub const WEIGHT_STRUCT: u64 = 1 << 24;
}

/// `PERF_SAMPLE_BRANCH_*` bits of `branch_sample_type` that matter for decoding (plus common filters).
pub mod branch_sample_type {
    #![allow(missing_docs)]
    pub const USER: u64 = 1 << 0;
    pub const KERNEL: u64 = 1 << 1;
    pub const HV: u64 = 1 << 2;
    pub const ANY: u64 = 1 << 3;
    pub const ANY_CALL: u64 = 1 << 4;
    pub const ANY_RETURN: u64 = 1 << 5;
    pub const IND_CALL: u64 = 1 << 6;
    pub const NO_FLAGS: u64 = 1 << 14;
    pub const NO_CYCLES: u64 = 1 << 15;
    pub const TYPE_SAVE: u64 = 1 << 16;
    /// The sample carries `hw_idx` before the entries.
    pub const HW_INDEX: u64 = 1 << 17;
    /// The sample carries `u64 counters[nr]` after the entries (kernel 6.8+).
    pub const COUNTERS: u64 = 1 << 19;
}

/// `PERF_FORMAT_*` bits of `read_format`.
pub mod read_format {
    #![allow(missing_docs)]
    pub const TOTAL_TIME_ENABLED: u64 = 1 << 0;
    pub const TOTAL_TIME_RUNNING: u64 = 1 << 1;
    pub const ID: u64 = 1 << 2;
    pub const GROUP: u64 = 1 << 3;
    pub const LOST: u64 = 1 << 4;
}

/// `PERF_RECORD_*` record types.
pub mod record_type {
    #![allow(missing_docs)]
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const THROTTLE: u32 = 5;
    pub const UNTHROTTLE: u32 = 6;
    pub const FORK: u32 = 7;
    pub const READ: u32 = 8;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const LOST_SAMPLES: u32 = 13;
    pub const HEADER_ATTR: u32 = 64;
    pub const FINISHED_ROUND: u32 = 68;
    pub const AUXTRACE: u32 = 71;
    pub const COMPRESSED: u32 = 81;
    pub const FINISHED_INIT: u32 = 82;
    pub const COMPRESSED2: u32 = 83;
}

/// Feature-section bit numbers (`HEADER_*`).
pub mod feature {
    #![allow(missing_docs)]
    pub const BUILD_ID: u32 = 2;
    pub const HOSTNAME: u32 = 3;
    pub const CMDLINE: u32 = 11;
    pub const EVENT_DESC: u32 = 12;
    pub const COMPRESSED: u32 = 27;
}

/// A perf.data decoding error with the byte offset where it happened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("perf.data offset {offset:#x}: {kind}")]
pub struct Error {
    /// Byte offset in the file (or, inside a compressed chunk, of that chunk's record).
    pub offset: u64,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// What went wrong while decoding perf.data.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Not a `PERFILE2` file (or a big-endian one, which is not supported).
    #[error("not a little-endian perf.data file (bad magic)")]
    BadMagic,
    /// A structure extends past the end of the file or its section.
    #[error("truncated {0}")]
    Truncated(&'static str),
    /// A field has an impossible value.
    #[error("invalid {what}: {value}")]
    Invalid {
        /// Which field.
        what: &'static str,
        /// The value found.
        value: u64,
    },
    /// A sample refers to an event id that no attribute declares.
    #[error("sample with unknown event id {0}")]
    UnknownId(u64),
    /// A zstd-compressed record does not decompress.
    #[error("zstd decompression failed: {0}")]
    Decompress(String),
}

pub(crate) fn err(offset: usize, kind: ErrorKind) -> Error {
    Error {
        offset: offset as u64,
        kind,
    }
}

/// Bounds-checked little-endian reads over a byte slice.
#[derive(Clone, Copy)]
pub(crate) struct Bytes<'a> {
    pub(crate) data: &'a [u8],
    /// File offset of `data[0]`, for error messages.
    pub(crate) base: usize,
}

impl<'a> Bytes<'a> {
    pub(crate) fn u64(&self, at: usize, what: &'static str) -> Result<u64, Error> {
        let b = self
            .data
            .get(at..at.wrapping_add(8))
            .ok_or_else(|| err(self.base + at, ErrorKind::Truncated(what)))?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }

    pub(crate) fn u32(&self, at: usize, what: &'static str) -> Result<u32, Error> {
        let b = self
            .data
            .get(at..at.wrapping_add(4))
            .ok_or_else(|| err(self.base + at, ErrorKind::Truncated(what)))?;
        Ok(u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
    }

    pub(crate) fn u16(&self, at: usize, what: &'static str) -> Result<u16, Error> {
        let b = self
            .data
            .get(at..at.wrapping_add(2))
            .ok_or_else(|| err(self.base + at, ErrorKind::Truncated(what)))?;
        Ok(u16::from_le_bytes(b.try_into().unwrap_or([0; 2])))
    }

    pub(crate) fn slice(
        &self,
        at: usize,
        len: usize,
        what: &'static str,
    ) -> Result<&'a [u8], Error> {
        let end = at
            .checked_add(len)
            .ok_or_else(|| err(self.base + at, ErrorKind::Truncated(what)))?;
        self.data
            .get(at..end)
            .ok_or_else(|| err(self.base + at, ErrorKind::Truncated(what)))
    }
}

/// A `(offset, size)` file section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Section {
    /// File offset.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

impl Section {
    fn read(b: &Bytes<'_>, at: usize, what: &'static str) -> Result<Self, Error> {
        Ok(Section {
            offset: b.u64(at, what)?,
            size: b.u64(at + 8, what)?,
        })
    }

    fn range(&self, file_len: usize, what: &'static str) -> Result<std::ops::Range<usize>, Error> {
        let start = usize::try_from(self.offset).map_err(|_| err(0, ErrorKind::Truncated(what)))?;
        let size = usize::try_from(self.size).map_err(|_| err(0, ErrorKind::Truncated(what)))?;
        let end = start
            .checked_add(size)
            .filter(|&e| e <= file_len)
            .ok_or_else(|| err(start, ErrorKind::Truncated(what)))?;
        Ok(start..end)
    }
}

/// The decoding-relevant fields of one `perf_event_attr`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct EventAttr {
    /// `type` (`PERF_TYPE_HARDWARE` = 0, `SOFTWARE` = 1, ...).
    pub kind: u32,
    /// `config` (event within the type; e.g. cpu-clock = software 0).
    pub config: u64,
    /// `sample_period` or `sample_freq` (see [`EventAttr::freq`]).
    pub sample_period: u64,
    /// `sample_type` (`sample_type::*`).
    pub sample_type: u64,
    /// `read_format` (`read_format::*`).
    pub read_format: u64,
    /// The flag bit field (`disabled`, `inherit`, ..., `sample_id_all` = bit 18).
    pub flags: u64,
    /// `branch_sample_type` (`branch_sample_type::*`).
    pub branch_sample_type: u64,
    /// `sample_regs_user` mask.
    pub sample_regs_user: u64,
    /// `sample_regs_intr` mask.
    pub sample_regs_intr: u64,
    /// Event ids that belong to this attribute.
    pub ids: Vec<u64>,
    /// Event name from the `EVENT_DESC` feature section, if present.
    pub name: Option<String>,
}

impl EventAttr {
    /// `attr.sample_id_all`: non-sample records carry a [`SampleId`] trailer.
    pub fn sample_id_all(&self) -> bool {
        self.flags & (1 << 18) != 0
    }

    /// `attr.freq`: `sample_period` is a frequency.
    pub fn freq(&self) -> bool {
        self.flags & (1 << 10) != 0
    }

    /// Whether branch stacks carry `hw_idx`.
    pub fn branch_hw_index(&self) -> bool {
        self.branch_sample_type & branch_sample_type::HW_INDEX != 0
    }

    /// Size in bytes of the [`SampleId`] trailer of non-sample records.
    pub fn sample_id_size(&self) -> usize {
        if !self.sample_id_all() {
            return 0;
        }
        let st = self.sample_type;
        [
            sample_type::TID,
            sample_type::TIME,
            sample_type::ID,
            sample_type::STREAM_ID,
            sample_type::CPU,
            sample_type::IDENTIFIER,
        ]
        .iter()
        .filter(|&&b| st & b != 0)
        .count()
            * 8
    }

    fn parse(b: &Bytes<'_>, at: usize, attr_size: usize) -> Result<Self, Error> {
        let a = Bytes {
            data: b.slice(at, attr_size, "event attribute")?,
            base: b.base + at,
        };
        let size = a.u32(4, "attr.size")? as usize;
        let field = |off: usize| -> Result<u64, Error> {
            if off + 8 <= size.min(attr_size) {
                a.u64(off, "event attribute")
            } else {
                Ok(0)
            }
        };
        Ok(EventAttr {
            kind: a.u32(0, "attr.type")?,
            config: field(8)?,
            sample_period: field(16)?,
            sample_type: field(24)?,
            read_format: field(32)?,
            flags: field(40)?,
            branch_sample_type: field(72)?,
            sample_regs_user: field(80)?,
            sample_regs_intr: field(96)?,
            ids: Vec::new(),
            name: None,
        })
    }
}

/// One entry of the `BUILD_ID` feature section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildIdEntry {
    /// Process id (-1 for the kernel and for files seen in any process).
    pub pid: i32,
    /// `misc` of the record (cpumode: kernel/user).
    pub misc: u16,
    /// The build-id bytes (usually 20).
    pub build_id: Vec<u8>,
    /// The file name.
    pub filename: Vec<u8>,
}

impl BuildIdEntry {
    /// The build-id as lower-case hex.
    pub fn build_id_hex(&self) -> String {
        hex(&self.build_id)
    }
}

/// Lower-case hexadecimal of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A parsed perf.data file: header, attributes and feature sections; the data section is walked on
/// demand with [`PerfFile::for_each_record`].
#[derive(Debug)]
pub struct PerfFile<'data> {
    data: &'data [u8],
    /// The data section.
    pub data_section: Section,
    /// Event attributes, in file order.
    pub attrs: Vec<EventAttr>,
    /// Feature bits present (`adds_features`).
    pub features: [u64; 4],
    /// Feature sections by bit number.
    pub feature_sections: HashMap<u32, Section>,
    /// Build-ids from the `BUILD_ID` feature section.
    pub build_ids: Vec<BuildIdEntry>,
    id_to_attr: HashMap<u64, usize>,
}

const MAGIC: &[u8; 8] = b"PERFILE2";
const HEADER_SIZE: usize = 104;

impl<'data> PerfFile<'data> {
    /// Parse the header, attributes and feature sections of `data` (the whole file).
    pub fn parse(data: &'data [u8]) -> Result<Self, Error> {
        let b = Bytes { data, base: 0 };
        if data.len() < 8 || &data[..8] != MAGIC {
            return Err(err(0, ErrorKind::BadMagic));
        }
        let header_size = b.u64(8, "file header")?;
        if header_size < HEADER_SIZE as u64 {
            return Err(err(
                8,
                ErrorKind::Invalid {
                    what: "header size",
                    value: header_size,
                },
            ));
        }
        let attr_size = b.u64(16, "file header")?;
        let attrs_sec = Section::read(&b, 24, "file header")?;
        let data_section = Section::read(&b, 40, "file header")?;
        let mut features = [0u64; 4];
        for (i, f) in features.iter_mut().enumerate() {
            *f = b.u64(72 + i * 8, "file header")?;
        }
        data_section.range(data.len(), "data section")?;

        // Attributes: perf_event_attr followed by the ids section.
        if !(64 + 16..=4096).contains(&attr_size) {
            return Err(err(
                16,
                ErrorKind::Invalid {
                    what: "attribute entry size",
                    value: attr_size,
                },
            ));
        }
        let attr_size = attr_size as usize;
        let arange = attrs_sec.range(data.len(), "attribute section")?;
        let count = arange.len() / attr_size;
        let mut attrs = Vec::with_capacity(count);
        let mut id_to_attr = HashMap::new();
        for i in 0..count {
            let at = arange.start + i * attr_size;
            let mut attr = EventAttr::parse(&b, at, attr_size - 16)?;
            let ids = Section::read(&b, at + attr_size - 16, "attribute ids")?;
            let r = ids.range(data.len(), "attribute ids")?;
            attr.ids = r
                .clone()
                .step_by(8)
                .filter(|o| o + 8 <= r.end)
                .map(|o| b.u64(o, "attribute ids"))
                .collect::<Result<_, _>>()?;
            for &id in &attr.ids {
                id_to_attr.insert(id, i);
            }
            attrs.push(attr);
        }
        if attrs.is_empty() {
            return Err(err(
                arange.start,
                ErrorKind::Truncated("attribute section (no attributes)"),
            ));
        }

        // Feature sections follow the data section, one per set bit.
        let mut feature_sections = HashMap::new();
        let mut at = (data_section.offset + data_section.size) as usize;
        for bit in 0..256u32 {
            if features[(bit / 64) as usize] & (1 << (bit % 64)) != 0 {
                let s = Section::read(&b, at, "feature section table")?;
                feature_sections.insert(bit, s);
                at += 16;
            }
        }
        let mut file = PerfFile {
            data,
            data_section,
            attrs,
            features,
            feature_sections,
            build_ids: Vec::new(),
            id_to_attr,
        };
        file.build_ids = file.parse_build_ids()?;
        file.parse_event_desc()?;
        Ok(file)
    }

    /// The whole file.
    pub fn bytes(&self) -> &'data [u8] {
        self.data
    }

    /// Whether feature `bit` is present.
    pub fn has_feature(&self, bit: u32) -> bool {
        bit < 256 && self.features[(bit / 64) as usize] & (1 << (bit % 64)) != 0
    }

    /// The bytes of feature section `bit`, if present.
    pub fn feature(&self, bit: u32) -> Result<Option<&'data [u8]>, Error> {
        match self.feature_sections.get(&bit) {
            None => Ok(None),
            Some(s) => Ok(Some(
                &self.data[s.range(self.data.len(), "feature section")?],
            )),
        }
    }

    fn parse_build_ids(&self) -> Result<Vec<BuildIdEntry>, Error> {
        let Some(s) = self.feature_sections.get(&feature::BUILD_ID) else {
            return Ok(Vec::new());
        };
        let r = s.range(self.data.len(), "BUILD_ID feature")?;
        let b = Bytes {
            data: &self.data[r.clone()],
            base: r.start,
        };
        let mut out = Vec::new();
        let mut at = 0;
        while at + 8 <= b.data.len() {
            let misc = b.u16(at + 4, "build-id record")?;
            let size = b.u16(at + 6, "build-id record")? as usize;
            if size < 36 {
                return Err(err(
                    b.base + at,
                    ErrorKind::Invalid {
                        what: "build-id record size",
                        value: size as u64,
                    },
                ));
            }
            let rec = b.slice(at, size, "build-id record")?;
            let pid = i32::from_le_bytes([rec[8], rec[9], rec[10], rec[11]]);
            let raw = &rec[12..36];
            // PERF_RECORD_MISC_BUILD_ID_SIZE: the size byte follows the 20 id bytes.
            let len = if misc & (1 << 15) != 0 {
                (raw[20] as usize).min(20)
            } else {
                20
            };
            let name = &rec[36..];
            let end = memchr::memchr(0, name).unwrap_or(name.len());
            out.push(BuildIdEntry {
                pid,
                misc,
                build_id: raw[..len].to_vec(),
                filename: name[..end].to_vec(),
            });
            at += size;
        }
        Ok(out)
    }

    fn parse_event_desc(&mut self) -> Result<(), Error> {
        let Some(s) = self.feature_sections.get(&feature::EVENT_DESC).copied() else {
            return Ok(());
        };
        let r = s.range(self.data.len(), "EVENT_DESC feature")?;
        let b = Bytes {
            data: &self.data[r.clone()],
            base: r.start,
        };
        let nr = b.u32(0, "EVENT_DESC")? as usize;
        let attr_size = b.u32(4, "EVENT_DESC")? as usize;
        let mut at: usize = 8;
        for i in 0..nr.min(self.attrs.len()) {
            at = at
                .checked_add(attr_size)
                .ok_or_else(|| err(b.base, ErrorKind::Truncated("EVENT_DESC")))?;
            let nr_ids = b.u32(at, "EVENT_DESC")? as usize;
            let len = b.u32(at + 4, "EVENT_DESC")? as usize;
            let name = b.slice(at + 8, len, "EVENT_DESC name")?;
            let end = memchr::memchr(0, name).unwrap_or(name.len());
            self.attrs[i].name = Some(String::from_utf8_lossy(&name[..end]).into_owned());
            at = nr_ids
                .checked_mul(8)
                .and_then(|n| n.checked_add(len))
                .and_then(|n| n.checked_add(at + 8))
                .ok_or_else(|| err(b.base + at, ErrorKind::Truncated("EVENT_DESC")))?;
        }
        Ok(())
    }

    /// The attribute a sample or record with event `id` belongs to.
    pub fn attr_index_for_id(&self, id: u64) -> Option<usize> {
        self.id_to_attr.get(&id).copied()
    }

    /// Walk every record of the data section in file order, decompressing zstd chunks; `f` returns
    /// `false` to stop early.
    pub fn for_each_record(&self, mut f: impl FnMut(&Record<'_>) -> bool) -> Result<(), Error> {
        records::walk(self, &mut f)
    }

    /// The byte range of the data section (the records) in the file.
    pub fn data_range(&self) -> Result<std::ops::Range<usize>, Error> {
        self.data_section.range(self.data.len(), "data section")
    }

    /// [`PerfFile::for_each_record`] over `range` of the file (one of [`PerfFile::split`]'s
    /// pieces), decoding only records of the types in `only` when given.
    pub fn for_each_record_in(
        &self,
        range: std::ops::Range<usize>,
        only: Option<&[u32]>,
        mut f: impl FnMut(&Record<'_>) -> bool,
    ) -> Result<(), Error> {
        records::walk_range(self, range, only, &mut f)
    }

    /// The data section cut into about `parts` byte ranges at record boundaries, to read in
    /// parallel with [`PerfFile::for_each_record_in`], reading only record headers — except for
    /// the records whose type is in `only`, which are decoded for `f` on the way. `done` gets
    /// each range once its headers have been read (to release its pages). `None` when the file
    /// holds compressed records (one zstd stream across records: read it in one piece; `f` may
    /// have seen some records by then).
    pub fn split(
        &self,
        parts: usize,
        only: &[u32],
        mut f: impl FnMut(&Record<'_>),
        done: &dyn Fn(std::ops::Range<usize>),
    ) -> Result<Option<Vec<std::ops::Range<usize>>>, Error> {
        records::split(self, parts, only, &mut f, done)
    }

    /// The samples only (convenience over [`PerfFile::for_each_record`]).
    pub fn for_each_sample(&self, mut f: impl FnMut(&Sample<'_>)) -> Result<(), Error> {
        self.for_each_record(|r| {
            if let Record::Sample(s) = r {
                f(s);
            }
            true
        })
    }

    /// The event name of attribute `i`: `EVENT_DESC` name, else a name derived from type/config
    /// (`cycles`, `instructions`, `cpu-clock`, `task-clock`, ...), else `type:config`.
    pub fn event_name(&self, i: usize) -> String {
        let Some(a) = self.attrs.get(i) else {
            return String::new();
        };
        if let Some(n) = &a.name {
            return n.clone();
        }
        let known = match (a.kind, a.config) {
            (0, 0) => "cycles",
            (0, 1) => "instructions",
            (0, 2) => "cache-references",
            (0, 3) => "cache-misses",
            (0, 4) => "branches",
            (0, 5) => "branch-misses",
            (1, 0) => "cpu-clock",
            (1, 1) => "task-clock",
            _ => "",
        };
        if known.is_empty() {
            format!("{}:{}", a.kind, a.config)
        } else {
            format!("{known}{}", event_modifiers(a.flags))
        }
    }
}

/// The modifiers perf appends to an event name it derives from the attribute
/// (`evsel__add_modifiers`): the privilege levels counted (`k`, `u`, `h`) when any is excluded,
/// `p`s for the precision, and `H`/`G` when host or guest counting differs from the default;
/// `:cycles:uh` for a user-only hardware event. Empty when there is none.
fn event_modifiers(flags: u64) -> String {
    let bit = |n: u32| flags & (1 << n) != 0;
    let (exclude_user, exclude_kernel, exclude_hv) = (bit(4), bit(5), bit(6));
    let precise = (flags >> 15) & 3;
    let (exclude_host, exclude_guest) = (bit(19), bit(20));
    let mut m = String::new();
    let mut guest_default = false;
    if exclude_kernel || exclude_user || exclude_hv {
        for (excluded, c) in [
            (exclude_kernel, 'k'),
            (exclude_user, 'u'),
            (exclude_hv, 'h'),
        ] {
            if !excluded {
                m.push(c);
            }
        }
        guest_default = true;
    }
    if precise > 0 {
        m.push_str(&"ppp"[..precise as usize]);
        guest_default = true;
    }
    if exclude_host || exclude_guest == guest_default {
        if !exclude_host {
            m.push('H');
        }
        if !exclude_guest {
            m.push('G');
        }
    }
    if m.is_empty() { m } else { format!(":{m}") }
}

/// One executable mapping of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmapEntry {
    /// Process id.
    pub pid: u32,
    /// Start address.
    pub start: u64,
    /// Length.
    pub len: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// Mapped file name.
    pub filename: Vec<u8>,
    /// Build-id carried by MMAP2 (when perf recorded with build-ids in mmap events).
    pub build_id: Option<Vec<u8>>,
}

impl MmapEntry {
    /// Whether `addr` falls inside the mapping.
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr - self.start < self.len
    }

    /// The file offset that `addr` maps (apply the ELF segment table to get a virtual address).
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.pgoff)
    }

    /// The file name's last path component.
    pub fn basename(&self) -> &[u8] {
        crate::events::basename(&self.filename)
    }
}

/// Executable mappings per process, built from MMAP/MMAP2 records; FORK copies the parent's mappings,
/// as perf2bolt does.
#[derive(Clone, Debug, Default)]
pub struct MmapTable {
    by_pid: HashMap<u32, Vec<MmapEntry>>,
}

impl MmapTable {
    /// Build the table from all records of `file`.
    pub fn from_file(file: &PerfFile<'_>) -> Result<Self, Error> {
        let mut t = MmapTable::default();
        file.for_each_record(|r| {
            t.observe(r);
            true
        })?;
        Ok(t)
    }

    /// Update the table with one record (MMAP/MMAP2 with executable mappings, FORK).
    pub fn observe(&mut self, r: &Record<'_>) {
        match r {
            Record::Mmap(m) if m.executable => {
                self.by_pid.entry(m.pid).or_default().push(MmapEntry {
                    pid: m.pid,
                    start: m.start,
                    len: m.len,
                    pgoff: m.pgoff,
                    filename: m.filename.to_vec(),
                    build_id: m.build_id.map(<[u8]>::to_vec),
                });
            }
            Record::Fork(t) if t.pid != t.ppid => {
                if let Some(parent) = self.by_pid.get(&t.ppid).cloned() {
                    let child = parent.into_iter().map(|mut e| {
                        e.pid = t.pid;
                        e
                    });
                    self.by_pid.entry(t.pid).or_default().extend(child);
                }
            }
            _ => {}
        }
    }

    /// The newest mapping of `pid` that contains `addr`.
    pub fn find(&self, pid: u32, addr: u64) -> Option<&MmapEntry> {
        self.by_pid
            .get(&pid)?
            .iter()
            .rev()
            .find(|e| e.contains(addr))
    }

    /// All mappings of a binary, picked by name as the branch-event pipeline picks them
    /// ([`events::binary_mappings`](crate::events::binary_mappings)): the binary's file name, or
    /// the name the file's build-id list gives its build-id.
    pub fn mappings_of<'t>(
        &'t self,
        file: &PerfFile<'_>,
        build_id: Option<&[u8]>,
        name: &[u8],
    ) -> Vec<&'t MmapEntry> {
        let names: Vec<&[u8]> = self
            .by_pid
            .values()
            .flatten()
            .map(|e| e.basename())
            .collect();
        let Some(name) = crate::events::name_to_use(file, build_id, name, &names) else {
            return Vec::new();
        };
        let mut out: Vec<&MmapEntry> = self
            .by_pid
            .values()
            .flatten()
            .filter(|e| e.basename() == name.as_slice())
            .collect();
        out.sort_by_key(|e| (e.pid, e.start));
        out
    }
}
