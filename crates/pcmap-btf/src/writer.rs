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
    string_ids: FxHashMap<Vec<u8>, u32>,
    layout: Option<Layout>,
}

impl Default for BtfWriter {
    fn default() -> Self {
        Self::new_base()
    }
}

impl BtfWriter {
    /// A writer for a base BTF (ids from 1, strings starting with "").
    pub fn new_base() -> BtfWriter {
        let mut string_ids = FxHashMap::default();
        string_ids.insert(Vec::new(), 0);
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
        let mut string_ids = FxHashMap::default();
        let mut chain = Some(base);
        while let Some(b) = chain {
            for (off, s) in b.own_string_offsets() {
                string_ids.entry(s.to_vec()).or_insert(off);
            }
            chain = b.base();
        }
        string_ids.entry(Vec::new()).or_insert(0);
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
        if let Some(&off) = self.string_ids.get(s.as_bytes()) {
            return off;
        }
        let off = self.start_str_off + self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        self.string_ids.insert(s.as_bytes().to_vec(), off);
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
