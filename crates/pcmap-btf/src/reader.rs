//! Zero-copy BTF reader: header, type records, strings, layout section; split BTF over a base.

use crate::error::{Cursor, Error, Result};
use crate::header::Header;
use crate::kind::{Kind, split_info};
use crate::layout::Layout;

/// Which revision of the location kinds (20-22) a blob carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocFlavor {
    /// October 2025 RFC: 8-byte `btf_loc_param`, 16-byte `btf_loc`. Assumed without a layout section.
    Oct2025,
    /// 2026 revision: variable-length `LOC_PARAM`, 12-byte `btf_loc`. Announced by a layout section
    /// that describes kind 20.
    Rev2026,
}

/// A BTF blob (base or split) over borrowed bytes. Type records are indexed once (one `u32` per
/// type) and decoded on access.
#[derive(Debug, Clone)]
pub struct Btf<'a> {
    header: Header,
    types: &'a [u8],
    types_at: usize,
    strings: &'a [u8],
    strings_at: usize,
    layout: Option<Layout>,
    offsets: Vec<u32>,
    start_id: u32,
    start_str_off: u32,
    base: Option<&'a Btf<'a>>,
    flavor: LocFlavor,
}

/// One type record: the 12-byte `btf_type` and its kind-specific payload.
#[derive(Debug, Clone, Copy)]
pub struct TypeRecord<'a> {
    /// Type id.
    pub id: u32,
    /// Byte offset of the record in its blob.
    pub offset: usize,
    /// `name_off`.
    pub name_off: u32,
    /// `info` word.
    pub info: u32,
    /// `size` or `type`, depending on the kind.
    pub size_or_type: u32,
    /// Fixed part of the payload (`info_sz` bytes).
    pub fixed: &'a [u8],
    /// The `vlen` elements (`vlen * elem_sz` bytes).
    pub elems: &'a [u8],
    /// Bytes per element.
    pub elem_sz: usize,
    big_endian: bool,
}

impl<'a> TypeRecord<'a> {
    /// The kind.
    pub fn kind(&self) -> Kind {
        split_info(self.info).0
    }
    /// `kind_flag`.
    pub fn kflag(&self) -> bool {
        split_info(self.info).1
    }
    /// `vlen` (24 bits).
    pub fn vlen(&self) -> u32 {
        split_info(self.info).2
    }
    fn word_of(&self, bytes: &[u8], i: usize) -> u32 {
        let b = i.checked_mul(4).and_then(|s| bytes.get(s..s + 4));
        match b {
            Some(b) => {
                let a: [u8; 4] = b.try_into().expect("4 bytes");
                if self.big_endian {
                    u32::from_be_bytes(a)
                } else {
                    u32::from_le_bytes(a)
                }
            }
            None => 0,
        }
    }
    /// Word `i` of the fixed payload (0 when absent; the parser checked the record's length).
    pub fn fixed_word(&self, i: usize) -> u32 {
        self.word_of(self.fixed, i)
    }
    /// Number of elements actually present.
    pub fn elem_count(&self) -> usize {
        self.elems.len().checked_div(self.elem_sz).unwrap_or(0)
    }
    /// Word `w` of element `i`.
    pub fn elem_word(&self, i: usize, w: usize) -> u32 {
        let start = i.saturating_mul(self.elem_sz);
        match self.elems.get(start..start.saturating_add(self.elem_sz)) {
            Some(e) => self.word_of(e, w),
            None => 0,
        }
    }
    /// The words of element `i`.
    pub fn elem_words(&self, i: usize) -> impl Iterator<Item = u32> + '_ {
        (0..self.elem_sz / 4).map(move |w| self.elem_word(i, w))
    }
}

impl<'a> Btf<'a> {
    /// Parse a base BTF blob.
    pub fn parse(data: &'a [u8]) -> Result<Btf<'a>> {
        Self::parse_inner(data, None)
    }

    /// Parse a split BTF blob whose ids and string offsets continue those of `base`.
    pub fn parse_split(data: &'a [u8], base: &'a Btf<'a>) -> Result<Btf<'a>> {
        Self::parse_inner(data, Some(base))
    }

    fn parse_inner(data: &'a [u8], base: Option<&'a Btf<'a>>) -> Result<Btf<'a>> {
        let header = Header::parse(data)?;
        let hl = header.hdr_len as usize;
        let section = |off: u32, len: u32, field: &'static str| -> Result<(&'a [u8], usize)> {
            let start = hl.checked_add(off as usize);
            let end = start.and_then(|s| s.checked_add(len as usize));
            match (start, end) {
                (Some(s), Some(e)) if e <= data.len() => Ok((&data[s..e], s)),
                _ => Err(Error::invalid(
                    field,
                    8,
                    format!(
                        "section [{off:#x}, +{len:#x}) after the header lies outside the {}-byte blob",
                        data.len()
                    ),
                )),
            }
        };
        let (types, types_at) = section(
            header.type_off,
            header.type_len,
            "btf_header.type_off/type_len",
        )?;
        if !header.type_off.is_multiple_of(4) {
            return Err(Error::invalid(
                "btf_header.type_off",
                8,
                format!("{} is not 4-byte aligned", header.type_off),
            ));
        }
        let (strings, strings_at) =
            section(header.str_off, header.str_len, "btf_header.str_off/str_len")?;
        if let Some(&last) = strings.last()
            && last != 0
        {
            return Err(Error::invalid(
                "string section",
                strings_at + strings.len() - 1,
                "does not end with NUL",
            ));
        }
        if base.is_none() && strings.first().is_some_and(|&b| b != 0) {
            return Err(Error::invalid(
                "string section",
                strings_at,
                "base BTF strings must start with an empty string",
            ));
        }
        let layout = match header.layout {
            Some((off, len)) => {
                let (bytes, at) = section(off, len, "btf_header.layout_off/layout_len")?;
                Some(Layout::parse(bytes, at, header.big_endian)?)
            }
            None => None,
        };
        let (start_id, start_str_off) = match base {
            Some(b) => (
                b.type_count(),
                b.start_str_off
                    .checked_add(b.strings.len() as u32)
                    .ok_or_else(|| Error::invalid("base strings", 0, "string offsets overflow"))?,
            ),
            None => (1, 0),
        };
        let effective_layout = layout
            .as_ref()
            .or_else(|| base.and_then(|b| b.effective_layout()));
        let flavor = match effective_layout.and_then(|l| l.get(Kind::LOC_PARAM)) {
            Some(_) => LocFlavor::Rev2026,
            None => LocFlavor::Oct2025,
        };
        let mut btf = Btf {
            header,
            types,
            types_at,
            strings,
            strings_at,
            layout: None,
            offsets: Vec::new(),
            start_id,
            start_str_off,
            base,
            flavor,
        };
        let mut pos = 0usize;
        while pos < types.len() {
            let id = start_id as u64 + btf.offsets.len() as u64;
            let (fixed, elem, vlen) = btf.record_shape(pos, id, effective_layout)?;
            let len = elem
                .checked_mul(vlen)
                .and_then(|v| v.checked_add(12 + fixed))
                .ok_or_else(|| {
                    Error::invalid("btf_type.info", types_at + pos + 4, "record size overflows")
                })?;
            if pos + len > types.len() {
                return Err(Error::Truncated {
                    field: "btf_type payload",
                    offset: types_at + pos,
                    needed: len,
                    available: types.len() - pos,
                });
            }
            btf.offsets.push(pos as u32);
            pos += len;
        }
        if (start_id as u64 + btf.offsets.len() as u64) > u32::MAX as u64 {
            return Err(Error::invalid("type section", types_at, "too many types"));
        }
        btf.layout = layout;
        Ok(btf)
    }

    /// (fixed payload bytes, bytes per element, vlen) of the record at `pos` of the type section.
    fn record_shape(
        &self,
        pos: usize,
        id: u64,
        layout: Option<&Layout>,
    ) -> Result<(usize, usize, usize)> {
        let mut c = Cursor::new(self.types, self.types_at, self.header.big_endian);
        c.set_pos(pos);
        c.bytes(4, "btf_type.name_off")?;
        let info = c.u32("btf_type.info")?;
        c.bytes(4, "btf_type.size_or_type")?;
        let (kind, _, vlen) = split_info(info);
        let shape = match kind.standard_layout() {
            Some(s) => s,
            None => match layout.and_then(|l| l.get(kind)) {
                Some(k) => (k.info_sz as u32, k.elem_sz as u32),
                None => match kind {
                    Kind::LOC_PARAM => (8, 0),
                    Kind::LOC_PROTO => (0, 4),
                    Kind::LOCSEC => (0, 16),
                    _ => {
                        return Err(Error::invalid(
                            "btf_type.info",
                            self.types_at + pos + 4,
                            format!(
                                "type [{id}] has kind {} that neither this reader nor a layout section describes",
                                kind.0
                            ),
                        ));
                    }
                },
            },
        };
        Ok((shape.0 as usize, shape.1 as usize, vlen as usize))
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }
    /// The blob's own layout section, if any.
    pub fn layout(&self) -> Option<&Layout> {
        self.layout.as_ref()
    }
    /// Own layout, else the base's.
    pub fn effective_layout(&self) -> Option<&Layout> {
        self.layout
            .as_ref()
            .or_else(|| self.base.and_then(|b| b.effective_layout()))
    }
    /// Revision of the location kinds.
    pub fn loc_flavor(&self) -> LocFlavor {
        self.flavor
    }
    /// The base, for split BTF.
    pub fn base(&self) -> Option<&'a Btf<'a>> {
        self.base
    }
    /// First type id of this blob (1 for base BTF).
    pub fn start_id(&self) -> u32 {
        self.start_id
    }
    /// First string offset of this blob (0 for base BTF).
    pub fn start_str_off(&self) -> u32 {
        self.start_str_off
    }
    /// Number of ids including void and the base's types (libbpf's `btf__type_cnt`).
    pub fn type_count(&self) -> u32 {
        self.start_id + self.offsets.len() as u32
    }
    /// Number of types in this blob alone.
    pub fn own_type_count(&self) -> usize {
        self.offsets.len()
    }
    /// Length of the own string section.
    pub fn own_strings_len(&self) -> usize {
        self.strings.len()
    }
    /// The raw own string section.
    pub fn own_strings(&self) -> &'a [u8] {
        self.strings
    }

    /// The record of type `id` (looked up in the base when below [`Self::start_id`]).
    pub fn record(&self, id: u32) -> Result<TypeRecord<'a>> {
        if id < self.start_id {
            return match self.base {
                Some(b) => b.record(id),
                None => Err(Error::invalid(
                    "type id",
                    0,
                    format!("{id} is void or out of range"),
                )),
            };
        }
        let idx = (id - self.start_id) as usize;
        let pos = *self.offsets.get(idx).ok_or_else(|| {
            Error::invalid(
                "type id",
                0,
                format!("{id} is out of range (last id {})", self.type_count() - 1),
            )
        })? as usize;
        let mut c = Cursor::new(self.types, self.types_at, self.header.big_endian);
        c.set_pos(pos);
        let name_off = c.u32("btf_type.name_off")?;
        let info = c.u32("btf_type.info")?;
        let size_or_type = c.u32("btf_type.size_or_type")?;
        let (fixed, elem_sz, vlen) = self.record_shape(pos, id as u64, self.effective_layout())?;
        let fixed_bytes = c.bytes(fixed, "btf_type payload")?;
        let elems = c.bytes(elem_sz * vlen, "btf_type elements")?;
        Ok(TypeRecord {
            id,
            offset: self.types_at + pos,
            name_off,
            info,
            size_or_type,
            fixed: fixed_bytes,
            elems,
            elem_sz,
            big_endian: self.header.big_endian,
        })
    }

    /// This blob's own records, in id order.
    pub fn own_records(&self) -> impl Iterator<Item = Result<TypeRecord<'a>>> + '_ {
        (0..self.offsets.len() as u32).map(move |i| self.record(self.start_id + i))
    }

    /// The string at `off` (in the base when below [`Self::start_str_off`]).
    pub fn string(&self, off: u32) -> Result<&'a str> {
        if off < self.start_str_off {
            return match self.base {
                Some(b) => b.string(off),
                None => Err(Error::invalid(
                    "name_off",
                    0,
                    format!("{off} is out of range"),
                )),
            };
        }
        let rel = (off - self.start_str_off) as usize;
        if rel == 0 && self.strings.is_empty() {
            return Ok("");
        }
        let rest = self
            .strings
            .get(rel..)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| {
                Error::invalid(
                    "name_off",
                    self.strings_at,
                    format!("{off} is beyond the string section"),
                )
            })?;
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end])
            .map_err(|_| Error::invalid("string", self.strings_at + rel, "not UTF-8"))
    }

    /// The name of a record, `None` for offset 0.
    pub fn name_of(&self, rec: &TypeRecord<'_>) -> Result<Option<&'a str>> {
        if rec.name_off == 0 {
            return Ok(None);
        }
        self.string(rec.name_off)
            .map(|s| if s.is_empty() { None } else { Some(s) })
    }

    /// Every string of the own section with its (global) offset.
    pub fn own_string_offsets(&self) -> impl Iterator<Item = (u32, &'a [u8])> + '_ {
        let mut pos = 0usize;
        std::iter::from_fn(move || {
            if pos >= self.strings.len() {
                return None;
            }
            let rest = &self.strings[pos..];
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            let at = pos;
            pos += end + 1;
            Some((self.start_str_off + at as u32, &rest[..end]))
        })
    }
}
