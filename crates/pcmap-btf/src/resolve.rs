//! Finding BTF ids for [`TypeDesc`]s: reuse the base's types (by name for named types, by target
//! for pointers and qualifiers), add what the base lacks to the split BTF, deduplicated.

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::kind::Kind;
use crate::model::{InlineFunc, TypeDesc};
use crate::reader::Btf;
use crate::writer::BtfWriter;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Ref(u8, u32),
    Array(u32, u32),
    Proto(u32, Vec<(String, u32)>, bool),
    Func(String, u32),
    Opaque(u8, u32, bool),
}

/// Maps type descriptions to ids of a base BTF plus the split BTF being written.
#[derive(Debug, Default)]
pub struct TypeResolver {
    ids: FxHashMap<Key, u32>,
    /// Named types: by name, then (kind, id) per kind. Looked up by `&str`, so resolving a type
    /// the base already has allocates nothing (a `(kind, String)` key cost a string per lookup).
    named: FxHashMap<String, Vec<(u8, u32)>>,
    /// Base FUNCs by name: (FUNC id, number of prototype parameters).
    base_funcs: FxHashMap<String, (u32, u32)>,
    index_type: Option<u32>,
}

impl TypeResolver {
    /// Index the types of `base` (and of its own bases).
    pub fn new(base: &Btf<'_>) -> Result<TypeResolver> {
        let mut r = TypeResolver::default();
        let mut chain = Some(base);
        let mut btfs = Vec::new();
        while let Some(b) = chain {
            btfs.push(b);
            chain = b.base();
        }
        for b in btfs.into_iter().rev() {
            for rec in b.own_records() {
                let rec = rec?;
                let kind = rec.kind();
                let name = b.name_of(&rec)?;
                let named_kind = match kind {
                    Kind::INT | Kind::FLOAT | Kind::TYPEDEF | Kind::STRUCT | Kind::UNION => {
                        Some(kind.0)
                    }
                    Kind::ENUM | Kind::ENUM64 => Some(Kind::ENUM.0),
                    Kind::FWD if rec.kflag() => Some(Kind::UNION.0),
                    Kind::FWD => Some(Kind::STRUCT.0),
                    _ => None,
                };
                if let (Some(k), Some(n)) = (named_kind, name) {
                    // The first definition wins; a FWD never shadows a full definition.
                    r.named_insert(k, n, rec.id);
                    if kind == Kind::INT && n == "__ARRAY_SIZE_TYPE__" {
                        r.index_type = Some(rec.id);
                    }
                    continue;
                }
                let key = match (kind, name.map(str::to_owned)) {
                    (Kind::PTR | Kind::CONST | Kind::VOLATILE | Kind::RESTRICT, _) => {
                        Key::Ref(kind.0, rec.size_or_type)
                    }
                    (Kind::ARRAY, _) => Key::Array(rec.fixed_word(0), rec.fixed_word(2)),
                    (Kind::FUNC, Some(n)) => {
                        let nparams = b.record(rec.size_or_type).map(|p| p.vlen()).unwrap_or(0);
                        r.base_funcs.entry(n).or_insert((rec.id, nparams));
                        continue;
                    }
                    _ => continue,
                };
                r.ids.entry(key).or_insert(rec.id);
            }
        }
        Ok(r)
    }

    fn named_get(&self, kind: u8, name: &str) -> Option<u32> {
        self.named
            .get(name)?
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|&(_, id)| id)
    }

    /// Record a named type unless one of that kind and name is known (the first wins).
    fn named_insert(&mut self, kind: u8, name: &str, id: u32) {
        match self.named.get_mut(name) {
            Some(v) => {
                if !v.iter().any(|(k, _)| *k == kind) {
                    v.push((kind, id));
                }
            }
            None => {
                self.named.insert(name.to_owned(), vec![(kind, id)]);
            }
        }
    }

    fn get_or_add_named(
        &mut self,
        kind: u8,
        name: &str,
        add: impl FnOnce(&mut BtfWriter) -> Result<u32>,
        w: &mut BtfWriter,
    ) -> Result<u32> {
        if let Some(id) = self.named_get(kind, name) {
            return Ok(id);
        }
        let id = add(w)?;
        self.named_insert(kind, name, id);
        Ok(id)
    }

    fn get_or_add(
        &mut self,
        key: Key,
        add: impl FnOnce(&mut BtfWriter) -> Result<u32>,
        w: &mut BtfWriter,
    ) -> Result<u32> {
        if let Some(&id) = self.ids.get(&key) {
            return Ok(id);
        }
        let id = add(w)?;
        self.ids.insert(key, id);
        Ok(id)
    }

    /// The id of `ty`, adding types to `w` when the base has none.
    pub fn resolve(&mut self, ty: &TypeDesc, w: &mut BtfWriter) -> Result<u32> {
        Ok(match ty {
            TypeDesc::Void => 0,
            TypeDesc::Int {
                name,
                size,
                signed,
                char,
                bool,
            } => {
                let enc = u32::from(*signed) | (u32::from(*char) << 1) | (u32::from(*bool) << 2);
                let s = *size;
                self.get_or_add_named(
                    Kind::INT.0,
                    name,
                    |w| w.add_int(name, s, enc, s.saturating_mul(8).min(128)),
                    w,
                )?
            }
            TypeDesc::Float { name, size } => {
                let s = *size;
                self.get_or_add_named(Kind::FLOAT.0, name, |w| w.add_float(name, s), w)?
            }
            TypeDesc::Struct { name, size } | TypeDesc::Union { name, size } => {
                let kind = if matches!(ty, TypeDesc::Struct { .. }) {
                    Kind::STRUCT
                } else {
                    Kind::UNION
                };
                match name {
                    Some(n) => {
                        self.get_or_add_named(kind.0, n, |w| w.add_fwd(n, kind == Kind::UNION), w)?
                    }
                    None => {
                        let s = *size;
                        self.get_or_add(
                            Key::Opaque(kind.0, s, false),
                            |w| w.add_opaque_composite(kind, None, s),
                            w,
                        )?
                    }
                }
            }
            TypeDesc::Enum { name, size, signed } => {
                let (s, sg) = (*size, *signed);
                match name {
                    Some(n) => self.get_or_add_named(
                        Kind::ENUM.0,
                        n,
                        |w| w.add_empty_enum(Some(n), s, sg),
                        w,
                    )?,
                    None => self.get_or_add(
                        Key::Opaque(Kind::ENUM.0, s, sg),
                        |w| w.add_empty_enum(None, s, sg),
                        w,
                    )?,
                }
            }
            TypeDesc::Typedef { name, target } => {
                if let Some(id) = self.named_get(Kind::TYPEDEF.0, name) {
                    return Ok(id);
                }
                let t = self.resolve(target, w)?;
                let id = w.add_ref(Kind::TYPEDEF, Some(name), t)?;
                self.named_insert(Kind::TYPEDEF.0, name, id);
                id
            }
            TypeDesc::Pointer(t)
            | TypeDesc::Const(t)
            | TypeDesc::Volatile(t)
            | TypeDesc::Restrict(t) => {
                let kind = match ty {
                    TypeDesc::Pointer(_) => Kind::PTR,
                    TypeDesc::Const(_) => Kind::CONST,
                    TypeDesc::Volatile(_) => Kind::VOLATILE,
                    _ => Kind::RESTRICT,
                };
                let target = self.resolve(t, w)?;
                self.get_or_add(
                    Key::Ref(kind.0, target),
                    |w| w.add_ref(kind, None, target),
                    w,
                )?
            }
            TypeDesc::Array { elem, len } => {
                let e = self.resolve(elem, w)?;
                let index = match self.index_type {
                    Some(i) => i,
                    None => {
                        let i = w.add_int("__ARRAY_SIZE_TYPE__", 4, 0, 32)?;
                        self.index_type = Some(i);
                        i
                    }
                };
                let n = *len;
                self.get_or_add(Key::Array(e, n), |w| w.add_array(e, index, n), w)?
            }
            TypeDesc::Function {
                ret,
                params,
                varargs,
            } => {
                let r = self.resolve(ret, w)?;
                let mut ps = Vec::with_capacity(params.len());
                for p in params {
                    ps.push((String::new(), self.resolve(p, w)?));
                }
                self.proto(r, ps, *varargs, w)?
            }
        })
    }

    fn proto(
        &mut self,
        ret: u32,
        params: Vec<(String, u32)>,
        varargs: bool,
        w: &mut BtfWriter,
    ) -> Result<u32> {
        let key = Key::Proto(ret, params.clone(), varargs);
        self.get_or_add(
            key,
            |w| {
                let ps: Vec<(Option<&str>, u32)> = params
                    .iter()
                    .map(|(n, t)| (Some(n.as_str()).filter(|s| !s.is_empty()), *t))
                    .collect();
                w.add_func_proto(ret, &ps, varargs)
            },
            w,
        )
    }

    /// The `FUNC` id for an inlined function: the base's FUNC of that name when its prototype has
    /// the same number of parameters (a partially inlined function), otherwise a new static FUNC
    /// with a FUNC_PROTO whose parameter types are resolved against the base. Returns
    /// (FUNC id, FUNC_PROTO id, whether it came from the base).
    pub fn func(
        &mut self,
        f: &InlineFunc,
        base: &Btf<'_>,
        w: &mut BtfWriter,
    ) -> Result<(u32, u32, bool)> {
        if let Some(&(id, n)) = self.base_funcs.get(&f.name)
            && n as usize == f.params.len() + usize::from(f.varargs)
        {
            let proto = base.record(id)?.size_or_type;
            return Ok((id, proto, true));
        }
        let ret = self.resolve(&f.ret, w)?;
        let mut ps = Vec::with_capacity(f.params.len());
        for p in &f.params {
            ps.push((p.name.clone(), self.resolve(&p.ty, w)?));
        }
        let proto = self.proto(ret, ps, f.varargs, w)?;
        let name = f.name.clone();
        let id = self.get_or_add(
            Key::Func(f.name.clone(), proto),
            |w| w.add_func(&name, proto, 0),
            w,
        )?;
        Ok((id, proto, false))
    }
}
