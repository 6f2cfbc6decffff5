//! BTF writer: base or split blobs, standard and location kinds, optional layout section.

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::header::{HEADER_LEN_LAYOUT, HEADER_LEN_V1, Header};
use crate::kind::{Kind, info};
use crate::layout::Layout;
use crate::reader::Btf;

/// Builds a BTF blob type by type. Strings are deduplicated (against the base too, for split BTF).
#[derive(Debug, Clone)]
pub struct BtfWriter {
    start_id: u32,
    start_str_off: u32,
    nr_types: u32,
    types: Vec<u8>,
    strings: Vec<u8>,
    string_ids: StringIndex,
    layout: Option<Layout>,
}

/// String offsets by content, without an allocation per string: the strings' bytes live in one
/// pool, and a hash of the bytes leads to a chain of candidates (nearly always one) compared
/// against the pool. A split writer indexes every string of its base (over a hundred thousand
/// for a kernel's BTF); one small vector per string made that a large share of encoding time.
#[derive(Debug, Clone, Default)]
struct StringIndex {
    pool: Vec<u8>,
    /// (start in `pool`, length, string offset) per string.
    entries: Vec<(usize, u32, u32)>,
    /// The next entry with the same hash (`u32::MAX`: none).
    next: Vec<u32>,
    /// The first entry of each hash.
    heads: FxHashMap<u64, u32>,
}

impl StringIndex {
    fn hash(s: &[u8]) -> u64 {
        use std::hash::Hasher;
        let mut h = rustc_hash::FxHasher::default();
        h.write(s);
        h.write_usize(s.len());
        h.finish()
    }

    fn get(&self, s: &[u8]) -> Option<u32> {
        let mut i = *self.heads.get(&Self::hash(s))?;
        loop {
            let &(start, len, off) = self.entries.get(i as usize)?;
            if self.pool.get(start..start + len as usize) == Some(s) {
                return Some(off);
            }
            i = *self.next.get(i as usize)?;
        }
    }

    /// Record `s` at `off` unless it is already known (the first offset wins).
    fn insert(&mut self, s: &[u8], off: u32) {
        let hash = Self::hash(s);
        let head = self.heads.get(&hash).copied();
        let mut i = head.unwrap_or(u32::MAX);
        while let Some(&(start, len, _)) = self.entries.get(i as usize) {
            if self.pool.get(start..start + len as usize) == Some(s) {
                return;
            }
            i = self.next.get(i as usize).copied().unwrap_or(u32::MAX);
        }
        let Ok(id) = u32::try_from(self.entries.len()) else {
            return;
        };
        // BTF string sections are addressed by u32 offsets, so lengths fit.
        self.entries.push((self.pool.len(), s.len() as u32, off));
        self.pool.extend_from_slice(s);
        self.next.push(head.unwrap_or(u32::MAX));
        self.heads.insert(hash, id);
    }
}

impl Default for BtfWriter {
    fn default() -> Self {
        Self::new_base()
    }
}

impl BtfWriter {
    /// A writer for a base BTF (ids from 1, strings starting with "").
    pub fn new_base() -> BtfWriter {
        let mut string_ids = StringIndex::default();
        string_ids.insert(b"", 0);
        BtfWriter {
            start_id: 1,
            start_str_off: 0,
            nr_types: 0,
            types: Vec::new(),
            strings: vec![0],
            string_ids,
            layout: None,
        }
    }

    /// A writer for split BTF on `base`: ids continue after the base's last id; strings already
    /// in the base (or its own bases) are referenced there, as libbpf does.
    pub fn new_split(base: &Btf<'_>) -> BtfWriter {
        let mut string_ids = StringIndex::default();
        let mut chain = Some(base);
        while let Some(b) = chain {
            string_ids.pool.reserve(b.own_strings_len());
            for (off, s) in b.own_string_offsets() {
                string_ids.insert(s, off);
            }
            chain = b.base();
        }
        string_ids.insert(b"", 0);
        BtfWriter {
            start_id: base.type_count(),
            start_str_off: base.start_str_off() + base.own_strings_len() as u32,
            nr_types: 0,
            types: Vec::new(),
            strings: Vec::new(),
            string_ids,
            layout: None,
        }
    }

    /// Emit a layout section (and a 32-byte header).
    pub fn set_layout(&mut self, layout: Option<Layout>) {
        self.layout = layout;
    }

    /// The id the next type will get.
    pub fn next_id(&self) -> u32 {
        self.start_id + self.nr_types
    }

    /// Number of types added so far.
    pub fn own_type_count(&self) -> u32 {
        self.nr_types
    }

    /// Offset of `s` in the string space, adding it when new.
    pub fn add_str(&mut self, s: &str) -> u32 {
        if let Some(off) = self.string_ids.get(s.as_bytes()) {
            return off;
        }
        let off = self.start_str_off + self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        self.string_ids.insert(s.as_bytes(), off);
        off
    }

    /// Offset of an optional name (0 for none).
    pub fn add_name(&mut self, s: Option<&str>) -> u32 {
        match s {
            Some(s) if !s.is_empty() => self.add_str(s),
            _ => 0,
        }
    }

    /// Append a raw record: `btf_type` plus payload words. Returns the new id.
    pub fn add_raw(
        &mut self,
        name_off: u32,
        kind: Kind,
        kflag: bool,
        vlen: u32,
        size_or_type: u32,
        payload: &[u32],
    ) -> Result<u32> {
        if vlen > 0x00ff_ffff {
            return Err(Error::Unrepresentable {
                field: "btf_type.info vlen",
                message: format!("{vlen} exceeds 24 bits"),
            });
        }
        let id = self.next_id();
        if id == u32::MAX {
            return Err(Error::Unrepresentable {
                field: "type id",
                message: "too many types".into(),
            });
        }
        for w in [name_off, info(kind, kflag, vlen), size_or_type]
            .iter()
            .chain(payload)
        {
            self.types.extend_from_slice(&w.to_le_bytes());
        }
        self.nr_types += 1;
        Ok(id)
    }

    /// `INT`: `encoding` bits SIGNED 1, CHAR 2, BOOL 4.
    pub fn add_int(&mut self, name: &str, size: u32, encoding: u32, bits: u32) -> Result<u32> {
        let n = self.add_str(name);
        self.add_raw(
            n,
            Kind::INT,
            false,
            0,
            size,
            &[(encoding << 24) | (bits & 0xff)],
        )
    }

    /// `PTR`, `TYPEDEF`, `VOLATILE`, `CONST`, `RESTRICT`, `TYPE_TAG`: a name (or none) and a target.
    pub fn add_ref(&mut self, kind: Kind, name: Option<&str>, target: u32) -> Result<u32> {
        let n = self.add_name(name);
        self.add_raw(n, kind, false, 0, target, &[])
    }

    /// `ARRAY`.
    pub fn add_array(&mut self, elem: u32, index: u32, nelems: u32) -> Result<u32> {
        self.add_raw(0, Kind::ARRAY, false, 0, 0, &[elem, index, nelems])
    }

    /// `STRUCT`/`UNION` without members (opaque, sized).
    pub fn add_opaque_composite(
        &mut self,
        kind: Kind,
        name: Option<&str>,
        size: u32,
    ) -> Result<u32> {
        let n = self.add_name(name);
        self.add_raw(n, kind, false, 0, size, &[])
    }

    /// `ENUM` without enumerators.
    pub fn add_empty_enum(&mut self, name: Option<&str>, size: u32, signed: bool) -> Result<u32> {
        let n = self.add_name(name);
        self.add_raw(n, Kind::ENUM, signed, 0, size, &[])
    }

    /// `FWD` (`union_` selects `union`).
    pub fn add_fwd(&mut self, name: &str, union_: bool) -> Result<u32> {
        let n = self.add_str(name);
        self.add_raw(n, Kind::FWD, union_, 0, 0, &[])
    }

    /// `FLOAT`.
    pub fn add_float(&mut self, name: &str, size: u32) -> Result<u32> {
        let n = self.add_str(name);
        self.add_raw(n, Kind::FLOAT, false, 0, size, &[])
    }

    /// `FUNC_PROTO`: return type and (name, type) parameters; `varargs` appends `{0, 0}`.
    pub fn add_func_proto(
        &mut self,
        ret: u32,
        params: &[(Option<&str>, u32)],
        varargs: bool,
    ) -> Result<u32> {
        let mut words = Vec::with_capacity(params.len() * 2 + 2);
        for (name, ty) in params {
            words.push(self.add_name(*name));
            words.push(*ty);
        }
        if varargs {
            words.extend([0, 0]);
        }
        self.add_raw(
            0,
            Kind::FUNC_PROTO,
            false,
            (words.len() / 2) as u32,
            ret,
            &words,
        )
    }

    /// `FUNC` with `linkage` (0 static, 1 global, 2 extern).
    pub fn add_func(&mut self, name: &str, proto: u32, linkage: u32) -> Result<u32> {
        let n = self.add_str(name);
        self.add_raw(n, Kind::FUNC, false, linkage, proto, &[])
    }

    /// Serialise: header, types, layout (if set, 4-byte aligned), strings.
    pub fn finish(&self) -> Vec<u8> {
        let hdr_len = if self.layout.is_some() {
            HEADER_LEN_LAYOUT
        } else {
            HEADER_LEN_V1
        };
        let type_len = self.types.len() as u32;
        let mut layout_bytes = Vec::new();
        if let Some(l) = &self.layout {
            l.write(&mut layout_bytes);
        }
        let layout_off = type_len; // types are a multiple of 4
        let str_off = layout_off + layout_bytes.len() as u32;
        let header = Header {
            version: 1,
            flags: 0,
            hdr_len,
            type_off: 0,
            type_len,
            str_off,
            str_len: self.strings.len() as u32,
            layout: self
                .layout
                .as_ref()
                .map(|_| (layout_off, layout_bytes.len() as u32)),
            big_endian: false,
        };
        let mut out = Vec::with_capacity(
            hdr_len as usize + self.types.len() + layout_bytes.len() + self.strings.len(),
        );
        header.write(&mut out);
        out.extend_from_slice(&self.types);
        out.extend_from_slice(&layout_bytes);
        out.extend_from_slice(&self.strings);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_index_keeps_the_first_offset_and_compares_contents() {
        let mut idx = StringIndex::default();
        idx.insert(b"", 0);
        idx.insert(b"int", 1);
        idx.insert(b"int", 9);
        idx.insert(b"in", 5);
        idx.insert(b"tint", 12);
        assert_eq!(idx.get(b""), Some(0));
        assert_eq!(idx.get(b"int"), Some(1));
        assert_eq!(idx.get(b"in"), Some(5));
        assert_eq!(idx.get(b"tint"), Some(12));
        assert_eq!(idx.get(b"nt"), None);
        assert_eq!(idx.get(b"int\0"), None);
    }

    #[test]
    fn add_str_deduplicates() {
        let mut w = BtfWriter::new_base();
        let a = w.add_str("alpha");
        let b = w.add_str("beta");
        assert_eq!(w.add_str("alpha"), a);
        assert_eq!(w.add_str("beta"), b);
        assert_eq!(w.add_str(""), 0);
        assert_ne!(a, b);
    }
}
