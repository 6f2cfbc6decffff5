//! What BOLT's decoding pass over every function of a binary finds, kept between runs.
//!
//! BOLT's model of a function depends on the whole binary: a reference from any function into
//! the middle of another makes a secondary entry point there, and a jump table ends where any
//! other table starts. So perf2bolt decodes every function, profiled or not, before it builds
//! a CFG, and on a large binary with a small profile that pass is most of the work
//! ([`crate::aggregate::Aggregator::prepare`]). Its findings are few and depend only on the
//! binary's bytes: a [`ScanIndex`] keeps them, so that a later run on the same binary (another
//! host's profile, another hour's) skips the pass. It also keeps two findings of function
//! discovery that depend only on the bytes and read much of them: the code addresses the
//! binary's data refers to ([`BoltFunctions::data_references`], from every relocation), and the
//! functions whose padding BOLT rejects ([`BoltFunctions::rejected_paddings`], from the code
//! after every function).
//!
//! The file is little-endian:
//!
//! | field | bytes |
//! |---|---|
//! | magic `PCMAPSCN` | 8 |
//! | format version (4) | 4 |
//! | key: what the file was written for ([`ScanIndex::key`]) | 16 |
//! | number of functions of the model it was made on | 8 |
//! | fingerprint of those functions ([`ScanIndex::fits`]) | 8 |
//! | references, table starts, functions with a table-less indirect jump, data references, functions with rejected padding (start addresses): five lists, each a ULEB128 count and then its values, increasing, as ULEB128 differences from the previous one (the first from 0) | |
//! | the discovered model ([`ScanIndex::discovered`]): a byte 0 without one, else 1 and the model (below) | |
//! | xxh3-64 of every byte before it | 8 |
//!
//! The model ([`Discovered`]; its rejected paddings are the fifth list above), every number a
//! ULEB128:
//! - the function count, then per function its address (as the difference from the previous
//!   one, the first from 0: addresses never decrease), size, maximum size, kind (0 regular, 1
//!   PLT) and name count;
//! - the name count, then per name a tag and its values: 0 and the index of the symbol whose
//!   stored name it is; 1 or 2, the index of a local symbol and its number, for BOLT's name
//!   `name/N` or its alias `name/file/N`; or 3, the length and the UTF-8 bytes of a name of its
//!   own;
//! - the LSDA count, then per LSDA the start of its function (as a difference, never
//!   decreasing) and its address;
//! - the label entry points and the functions with a symbol inside: two lists as above.
//!
//! Decoding checks every field and holds at most one value per input byte.

use pcmap_binary::bolt::{BoltFunctions, Discovered, DiscoveredFunction, FunctionKind, NameRef};
use pcmap_bytes::Cursor;

const MAGIC: &[u8; 8] = b"PCMAPSCN";
const VERSION: u32 = 4;

/// The findings of the decoding pass over every function of a binary ([module](self)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanIndex {
    /// What this index was made for: the caller's key (a hash of the binary, its bytes or its
    /// identity, and of the tool that read it); written to the file and checked when read back.
    pub key: u128,
    /// How many functions the model had ([`BoltFunctions::functions`]).
    functions: u64,
    /// [`fingerprint`] of those functions.
    fingerprint: u64,
    /// The addresses functions refer to that make secondary entry points
    /// ([`BoltFunctions::entry_points`]), increasing.
    pub references: Vec<u64>,
    /// The start of every jump table of the binary, increasing.
    pub table_starts: Vec<u64>,
    /// The functions (indices) with an indirect jump through no jump table, increasing.
    pub tableless_indirect_jumps: Vec<u32>,
    /// The code addresses the binary's data refers to ([`BoltFunctions::data_references`]),
    /// increasing.
    pub data_references: Vec<u64>,
    /// The start addresses of the functions whose padding BOLT rejects
    /// ([`BoltFunctions::rejected_paddings`]), increasing.
    pub rejected_paddings: Vec<u64>,
    /// The model of the functions itself ([`BoltFunctions::discovered`]), when kept: a later
    /// run rebuilds it ([`BoltFunctions::from_discovered`]) instead of discovering the
    /// functions again. Its rejected paddings are [`Self::rejected_paddings`].
    pub discovered: Option<Discovered>,
}

/// A hash of what the decoding pass depends on besides the bytes: the functions of the model
/// (start, size, extent, kind) and whether the binary is in relocation mode. An index made on
/// another model does not fit it.
fn fingerprint(image: &BoltFunctions<'_, '_>) -> u64 {
    fingerprint_of(image.relocation_mode(), image.functions())
}

/// [`fingerprint`] of the functions `functions` found in relocation mode or not: xxh3-64 of the
/// mode's byte, then each function's address, size and maximum size (little-endian) and kind.
fn fingerprint_of(
    relocation_mode: bool,
    functions: &[pcmap_binary::bolt::BoltFunction<'_>],
) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&[u8::from(relocation_mode)]);
    // The same bytes as one update per field, handed over a block at a time: four calls per
    // function cost more than the hashing on a large binary.
    const FIELDS: usize = 25;
    const PER_BLOCK: usize = 128;
    let mut block = [0u8; FIELDS * PER_BLOCK];
    for functions in functions.chunks(PER_BLOCK) {
        for (f, out) in functions.iter().zip(block.chunks_exact_mut(FIELDS)) {
            out[..8].copy_from_slice(&f.address.to_le_bytes());
            out[8..16].copy_from_slice(&f.size.to_le_bytes());
            out[16..24].copy_from_slice(&f.max_size.to_le_bytes());
            out[24] = f.kind as u8;
        }
        h.update(&block[..functions.len() * FIELDS]);
    }
    h.digest()
}

impl ScanIndex {
    /// An index of `image`'s findings, data references and rejected paddings (each list sorted
    /// and without duplicates here).
    pub fn new(
        key: u128,
        image: &BoltFunctions<'_, '_>,
        mut references: Vec<u64>,
        mut table_starts: Vec<u64>,
        mut tableless_indirect_jumps: Vec<u32>,
    ) -> Self {
        for list in [&mut references, &mut table_starts] {
            list.sort_unstable();
            list.dedup();
        }
        tableless_indirect_jumps.sort_unstable();
        tableless_indirect_jumps.dedup();
        ScanIndex {
            key,
            functions: image.functions().len() as u64,
            fingerprint: fingerprint(image),
            references,
            table_starts,
            tableless_indirect_jumps,
            // Sorted and without duplicates already.
            data_references: image.data_references().to_vec(),
            rejected_paddings: image.rejected_paddings().to_vec(),
            discovered: None,
        }
    }

    /// Whether this index was made on `image`'s model of the binary (the same functions, the
    /// same relocation mode). The key says which bytes it was made from; this guards against
    /// a model that depends on more than the bytes.
    pub fn fits(&self, image: &BoltFunctions<'_, '_>) -> bool {
        self.functions == image.functions().len() as u64 && self.fingerprint == fingerprint(image)
    }

    /// Whether function `index` has an indirect jump through no jump table.
    pub fn has_tableless_indirect_jump(&self, index: usize) -> bool {
        u32::try_from(index).is_ok_and(|i| self.tableless_indirect_jumps.binary_search(&i).is_ok())
    }

    /// The index as a file ([module](self)).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            61 + 2 * (self.references.len() + self.table_starts.len())
                + self.tableless_indirect_jumps.len()
                + 3 * self.data_references.len()
                + 3 * self.rejected_paddings.len(),
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&self.functions.to_le_bytes());
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        write_list(&mut out, &self.references);
        write_list(&mut out, &self.table_starts);
        let jumps: Vec<u64> = self
            .tableless_indirect_jumps
            .iter()
            .map(|&i| u64::from(i))
            .collect();
        write_list(&mut out, &jumps);
        write_list(&mut out, &self.data_references);
        write_list(&mut out, &self.rejected_paddings);
        match &self.discovered {
            None => out.push(0),
            Some(model) => {
                out.push(1);
                write_model(&mut out, model);
            }
        }
        let sum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// Read an index written by [`Self::encode`]. Errors name the byte offset and what was
    /// expected there.
    pub fn decode(data: &[u8]) -> crate::Result<Self> {
        let bad =
            |offset: usize, expected: &'static str| crate::Error::ScanIndex { offset, expected };
        let cursor_error = |e: pcmap_bytes::Error, expected| bad(e.offset, expected);
        if data.len() < 8 || &data[..8] != MAGIC {
            return Err(bad(0, "the magic `PCMAPSCN` of a pcmap scan index"));
        }
        let Some(body_len) = data.len().checked_sub(8).filter(|&n| n >= MAGIC.len()) else {
            return Err(bad(data.len(), "a checksum after the magic"));
        };
        let (body, sum) = data.split_at(body_len);
        if xxhash_rust::xxh3::xxh3_64(body).to_le_bytes() != sum {
            return Err(bad(
                body_len,
                "the checksum of the bytes before it (the file is damaged)",
            ));
        }
        let mut c = Cursor::new(body, 0);
        c.skip(8).map_err(|e| cursor_error(e, "the magic"))?;
        let version = c
            .read_u32()
            .map_err(|e| cursor_error(e, "a format version"))?;
        if version != VERSION {
            return Err(bad(8, "format version 4"));
        }
        let key = u128::from_le_bytes(c.array().map_err(|e| cursor_error(e, "a 16-byte key"))?);
        let functions = c
            .read_u64()
            .map_err(|e| cursor_error(e, "a function count"))?;
        let fingerprint = c.read_u64().map_err(|e| cursor_error(e, "a fingerprint"))?;
        let references = read_list(
            &mut c,
            "a list of increasing references (count, then differences)",
        )?;
        let table_starts = read_list(
            &mut c,
            "a list of increasing jump-table starts (count, then differences)",
        )?;
        let jumps_at = c.offset();
        let jumps = read_list(
            &mut c,
            "a list of increasing function indices (count, then differences)",
        )?;
        let tableless_indirect_jumps = jumps
            .into_iter()
            .map(|i| u32::try_from(i).ok().filter(|&i| u64::from(i) < functions))
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(|| bad(jumps_at, "function indices below the function count"))?;
        let data_references = read_list(
            &mut c,
            "a list of increasing data references (count, then differences)",
        )?;
        let rejected_paddings = read_list(
            &mut c,
            "a list of increasing function starts (count, then differences)",
        )?;
        let model_at = c.offset();
        let discovered = match c.read_u8() {
            Ok(0) => None,
            Ok(1) => {
                let mut model = read_model(&mut c)?;
                if model.functions.len() as u64 != functions {
                    return Err(bad(model_at, "a model of as many functions as the index"));
                }
                model.rejected_padding = rejected_paddings.clone();
                Some(model)
            }
            _ => {
                return Err(bad(
                    model_at,
                    "0 (no model of the functions) or 1 (a model)",
                ));
            }
        };
        if !c.is_empty() {
            return Err(bad(c.offset(), "the checksum after the model"));
        }
        Ok(ScanIndex {
            key,
            functions,
            fingerprint,
            references,
            table_starts,
            tableless_indirect_jumps,
            data_references,
            rejected_paddings,
            discovered,
        })
    }
}

/// The key of an index made from the binary `bytes` by the tool `tool` (the caller's identity
/// for the code that makes the index: an index made by another build is not taken): xxh3-128 of
/// both, read in blocks so that the binary's pages need not be mapped.
pub fn key_of(mut bytes: impl std::io::Read, tool: &[u8]) -> std::io::Result<u128> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(tool.len() as u64).to_le_bytes());
    h.update(tool);
    let mut block = vec![0u8; 1 << 20];
    loop {
        match bytes.read(&mut block) {
            Ok(0) => break,
            Ok(n) => h.update(&block[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(h.digest128())
}

/// A count at the cursor of items of at least `least` bytes each: more than the bytes left can
/// hold is damage, so that no list is ever larger than the input. `what` names it in errors.
fn read_count(c: &mut Cursor<'_>, least: usize, what: &'static str) -> crate::Result<usize> {
    let bad = |offset: usize| crate::Error::ScanIndex {
        offset,
        expected: what,
    };
    let at = c.offset();
    let n = c.read_uleb128().map_err(|e| bad(e.offset))?;
    if n > (c.remaining() / least) as u64 {
        return Err(bad(at));
    }
    Ok(n as usize)
}

/// The next value of a sequence kept as differences ([`write_step`]): `previous` plus the
/// ULEB128 at the cursor, with the offset it starts at. Errors name `what` for a number that
/// cannot be read and `overflow` for a sum past 2^64.
fn read_step(
    c: &mut Cursor<'_>,
    previous: u64,
    what: &'static str,
    overflow: &'static str,
) -> crate::Result<(usize, u64)> {
    let bad = |offset: usize, expected| crate::Error::ScanIndex { offset, expected };
    let at = c.offset();
    let delta = c.read_uleb128().map_err(|e| bad(e.offset, what))?;
    let value = previous
        .checked_add(delta)
        .ok_or_else(|| bad(at, overflow))?;
    Ok((at, value))
}

/// Write `value` as its difference from `previous` (a sequence that never decreases), and make
/// it the previous one.
fn write_step(out: &mut Vec<u8>, previous: &mut u64, value: u64) {
    pcmap_bytes::leb128::write_uleb128(out, value.wrapping_sub(*previous));
    *previous = value;
}

/// A list [`write_list`] wrote; `what` names it in errors.
fn read_list(c: &mut Cursor<'_>, what: &'static str) -> crate::Result<Vec<u64>> {
    // Every value takes at least one byte.
    let n = read_count(c, 1, what)?;
    let mut out = Vec::with_capacity(n);
    let mut value = 0u64;
    for k in 0..n {
        let (at, next) = read_step(c, value, what, what)?;
        // Increasing: only the first value may be 0 away from the one before (from 0).
        if k > 0 && next == value {
            return Err(crate::Error::ScanIndex {
                offset: at,
                expected: what,
            });
        }
        value = next;
        out.push(value);
    }
    Ok(out)
}

/// Write `model` ([module](self); its rejected paddings are not written).
fn write_model(out: &mut Vec<u8>, model: &Discovered) {
    use pcmap_bytes::leb128::write_uleb128;
    write_uleb128(out, model.functions.len() as u64);
    let mut previous = 0;
    for f in &model.functions {
        write_step(out, &mut previous, f.address);
        write_uleb128(out, f.size);
        write_uleb128(out, f.max_size);
        out.push(match f.kind {
            FunctionKind::Regular => 0,
            FunctionKind::Plt => 1,
        });
        write_uleb128(out, u64::from(f.names));
    }
    write_uleb128(out, model.names.len() as u64);
    for name in &model.names {
        match name {
            NameRef::Symbol { index } => {
                out.push(0);
                write_uleb128(out, u64::from(*index));
            }
            NameRef::Local {
                index,
                number,
                in_file,
            } => {
                out.push(if *in_file { 2 } else { 1 });
                write_uleb128(out, u64::from(*index));
                write_uleb128(out, *number);
            }
            NameRef::Text(text) => {
                out.push(3);
                write_uleb128(out, text.len() as u64);
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
    write_uleb128(out, model.lsdas.len() as u64);
    let mut previous = 0;
    for &(start, lsda) in &model.lsdas {
        write_step(out, &mut previous, start);
        write_uleb128(out, lsda);
    }
    write_list(out, &model.label_entries);
    write_list(out, &model.symbol_inside);
}

/// A model [`write_model`] wrote (its rejected paddings left empty).
fn read_model(c: &mut Cursor<'_>) -> crate::Result<Discovered> {
    let bad = |offset: usize, expected: &'static str| crate::Error::ScanIndex { offset, expected };
    let uleb = |c: &mut Cursor<'_>, expected: &'static str| {
        c.read_uleb128().map_err(|e| bad(e.offset, expected))
    };
    let n = read_count(c, 5, "a function count the bytes left can hold")?;
    let mut functions = Vec::with_capacity(n);
    let mut address = 0u64;
    for _ in 0..n {
        (_, address) = read_step(
            c,
            address,
            "a function's address",
            "a function address below 2^64",
        )?;
        let size = uleb(c, "a function's size")?;
        let max_size = uleb(c, "a function's maximum size")?;
        let at = c.offset();
        let kind = match c.read_u8() {
            Ok(0) => FunctionKind::Regular,
            Ok(1) => FunctionKind::Plt,
            _ => return Err(bad(at, "a function kind, 0 (regular) or 1 (PLT)")),
        };
        let at = c.offset();
        let names = u32::try_from(uleb(c, "a function's name count")?)
            .map_err(|_| bad(at, "a name count below 2^32"))?;
        functions.push(DiscoveredFunction {
            address,
            size,
            max_size,
            kind,
            names,
        });
    }
    let n = read_count(c, 2, "a name count the bytes left can hold")?;
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.offset();
        let tag = match c.read_u8() {
            Ok(tag @ 0..=3) => tag,
            _ => return Err(bad(at, "a name tag from 0 to 3")),
        };
        let at = c.offset();
        let value = uleb(c, "a symbol index or a name length")?;
        let index = || u32::try_from(value).map_err(|_| bad(at, "a symbol index below 2^32"));
        names.push(match tag {
            0 => NameRef::Symbol { index: index()? },
            1 | 2 => NameRef::Local {
                index: index()?,
                number: uleb(c, "a local symbol's number")?,
                in_file: tag == 2,
            },
            _ => {
                let text = usize::try_from(value)
                    .ok()
                    .and_then(|len| c.bytes(len).ok())
                    .ok_or_else(|| bad(at, "a name length the bytes left can hold"))?;
                let text = std::str::from_utf8(text).map_err(|_| bad(at, "a UTF-8 name"))?;
                NameRef::Text(text.into())
            }
        });
    }
    let n = read_count(c, 2, "an LSDA count the bytes left can hold")?;
    let mut lsdas = Vec::with_capacity(n);
    let mut start = 0u64;
    for _ in 0..n {
        (_, start) = read_step(
            c,
            start,
            "the start of an LSDA's function",
            "a function start below 2^64",
        )?;
        lsdas.push((start, uleb(c, "an LSDA address")?));
    }
    let label_entries = read_list(
        c,
        "a list of increasing label entry points (count, then differences)",
    )?;
    let symbol_inside = read_list(
        c,
        "a list of increasing function starts (count, then differences)",
    )?;
    Ok(Discovered {
        functions,
        names,
        lsdas,
        label_entries,
        symbol_inside,
        rejected_padding: Vec::new(),
    })
}

/// A list of increasing values: its length, then each value's difference from the one before.
fn write_list(out: &mut Vec<u8>, list: &[u64]) {
    pcmap_bytes::leb128::write_uleb128(out, list.len() as u64);
    let mut previous = 0;
    for &v in list {
        write_step(out, &mut previous, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The fingerprint is xxh3 of the bytes its doc names, however they are handed over.
        #[test]
        fn fingerprint_hashes_each_functions_fields(
            functions in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u64>(), any::<bool>()), 0..300),
            relocation_mode in any::<bool>(),
        ) {
            use pcmap_binary::bolt::{BoltFunction, FunctionKind};
            let functions: Vec<BoltFunction<'_>> = functions
                .into_iter()
                .map(|(address, size, max_size, plt)| BoltFunction {
                    names: pcmap_binary::bolt::Names::One("f".into()),
                    address,
                    size,
                    max_size,
                    kind: if plt { FunctionKind::Plt } else { FunctionKind::Regular },
                })
                .collect();
            let mut bytes = vec![u8::from(relocation_mode)];
            for f in &functions {
                bytes.extend_from_slice(&f.address.to_le_bytes());
                bytes.extend_from_slice(&f.size.to_le_bytes());
                bytes.extend_from_slice(&f.max_size.to_le_bytes());
                bytes.push(f.kind as u8);
            }
            prop_assert_eq!(
                fingerprint_of(relocation_mode, &functions),
                xxhash_rust::xxh3::xxh3_64(&bytes)
            );
        }
    }

    fn index(refs: Vec<u64>, starts: Vec<u64>, jumps: Vec<u32>, key: u128) -> ScanIndex {
        with_data(refs, starts, jumps, vec![], vec![], key)
    }

    fn with_data(
        refs: Vec<u64>,
        starts: Vec<u64>,
        jumps: Vec<u32>,
        data: Vec<u64>,
        paddings: Vec<u64>,
        key: u128,
    ) -> ScanIndex {
        let mut i = ScanIndex {
            key,
            functions: u64::from(jumps.iter().max().map_or(0, |m| m + 1)),
            fingerprint: 0x1234_5678,
            references: refs,
            table_starts: starts,
            tableless_indirect_jumps: jumps,
            data_references: data,
            rejected_paddings: paddings,
            discovered: None,
        };
        for l in [
            &mut i.references,
            &mut i.table_starts,
            &mut i.data_references,
            &mut i.rejected_paddings,
        ] {
            l.sort_unstable();
            l.dedup();
        }
        i.tableless_indirect_jumps.sort_unstable();
        i.tableless_indirect_jumps.dedup();
        i
    }

    /// A function of a test model: address, size, maximum size, PLT, and names (symbol index,
    /// tag: 0 the stored name, 1 or 2 a local's numbered name or its alias, 3 the text; number;
    /// text).
    type TestFunction = (u64, u64, u64, bool, Vec<(u32, u8, u64, String)>);

    /// A model of `functions`, LSDAs, label entries and functions with a symbol inside, for
    /// `index` (its function count and rejected paddings).
    fn model(
        index: &mut ScanIndex,
        functions: Vec<TestFunction>,
        lsdas: Vec<(u64, u64)>,
        label_entries: Vec<u64>,
        symbol_inside: Vec<u64>,
    ) {
        let mut functions = functions;
        functions.sort_by_key(|f| f.0);
        let mut m = Discovered {
            lsdas,
            label_entries,
            symbol_inside,
            rejected_padding: index.rejected_paddings.clone(),
            ..Default::default()
        };
        m.lsdas.sort_unstable();
        for l in [&mut m.label_entries, &mut m.symbol_inside] {
            l.sort_unstable();
            l.dedup();
        }
        for (address, size, max_size, plt, names) in functions {
            m.functions.push(DiscoveredFunction {
                address,
                size,
                max_size,
                kind: if plt {
                    FunctionKind::Plt
                } else {
                    FunctionKind::Regular
                },
                names: names.len() as u32,
            });
            m.names.extend(
                names
                    .into_iter()
                    .map(|(index, tag, number, text)| match tag % 4 {
                        0 => NameRef::Symbol { index },
                        tag @ (1 | 2) => NameRef::Local {
                            index,
                            number,
                            in_file: tag == 2,
                        },
                        _ => NameRef::Text(text.into()),
                    }),
            );
        }
        index.functions = m.functions.len() as u64;
        index
            .tableless_indirect_jumps
            .retain(|&j| u64::from(j) < index.functions);
        index.discovered = Some(m);
    }

    proptest! {
        /// Whatever is encoded decodes to the same index, with or without a model.
        #[test]
        fn encode_then_decode_is_identity(
            refs in proptest::collection::vec(any::<u64>(), 0..60),
            starts in proptest::collection::vec(any::<u64>(), 0..60),
            jumps in proptest::collection::vec(any::<u32>(), 0..60),
            data in proptest::collection::vec(any::<u64>(), 0..60),
            paddings in proptest::collection::vec(any::<u64>(), 0..60),
            key in any::<u128>(),
            functions in proptest::option::of(proptest::collection::vec(
                (any::<u64>(), any::<u64>(), any::<u64>(), any::<bool>(),
                 proptest::collection::vec((any::<u32>(), any::<u8>(), any::<u64>(), ".{0,12}"), 0..4)),
                0..40,
            )),
            lsdas in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..20),
            labels in proptest::collection::vec(any::<u64>(), 0..20),
            inside in proptest::collection::vec(any::<u64>(), 0..20),
        ) {
            let mut i = with_data(refs, starts, jumps, data, paddings, key);
            if let Some(functions) = functions {
                model(&mut i, functions, lsdas, labels, inside);
            }
            prop_assert_eq!(ScanIndex::decode(&i.encode()).unwrap(), i);
        }

        /// A file cut short or with one byte changed is refused, never misread.
        #[test]
        fn damage_is_refused(
            refs in proptest::collection::vec(0u64..1 << 40, 1..30),
            cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let mut index =
                with_data(refs, vec![7, 9], vec![1], vec![3, 0x40_1000], vec![0x40_1100], 5);
            let named = |n: &str| vec![(0, 3, 0, n.to_string()), (17, 1, 2, String::new()), (18, 2, 1, String::new())];
            model(
                &mut index,
                vec![(0x40_1000, 16, 32, false, named("f")), (0x40_1020, 0, 0, true, named("g@PLT"))],
                vec![(0x40_1000, 0x40_2000)],
                vec![0x40_1008],
                vec![],
            );
            let bytes = index.encode();
            let short = &bytes[..cut.index(bytes.len())];
            prop_assert!(ScanIndex::decode(short).is_err());
            let mut flipped = bytes.clone();
            flipped[flip.index(bytes.len())] ^= 1 << bit;
            prop_assert!(ScanIndex::decode(&flipped).is_err());
        }
    }

    #[test]
    fn errors_name_the_offset_and_what_was_expected() {
        let e = ScanIndex::decode(b"not an index").unwrap_err().to_string();
        assert!(
            e.contains("byte offset 0x0") && e.contains("PCMAPSCN"),
            "{e}"
        );
        let mut bytes = index(vec![1, 2], vec![], vec![], 0).encode();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        let e = ScanIndex::decode(&bytes).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{:#x}", n - 8)) && e.contains("checksum"),
            "{e}"
        );
    }

    #[test]
    fn key_depends_on_the_bytes_and_the_tool() {
        let k = |bytes: &[u8], tool: &[u8]| key_of(bytes, tool).unwrap();
        let big: Vec<u8> = (0..3 << 20).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(k(&big, b"t"), k(&big, b"t"));
        let mut other = big.clone();
        other[(2 << 20) + 5] ^= 1;
        assert_ne!(k(&big, b"t"), k(&other, b"t"));
        assert_ne!(k(&big, b"t"), k(&big, b"u"));
        // The tool's length is hashed: bytes cannot move between the tool and the binary.
        assert_ne!(k(b"bc", b"a"), k(b"c", b"ab"));
    }

    #[test]
    fn an_empty_index_round_trips() {
        let i = index(vec![], vec![], vec![], 0);
        assert_eq!(i.encode().len(), 58);
        assert_eq!(ScanIndex::decode(&i.encode()).unwrap(), i);
    }

    #[test]
    fn tableless_lookup() {
        let i = index(vec![], vec![], vec![3, 10, 4], 0);
        assert!(i.has_tableless_indirect_jump(3));
        assert!(i.has_tableless_indirect_jump(10));
        assert!(!i.has_tableless_indirect_jump(5));
        assert!(!i.has_tableless_indirect_jump(usize::MAX));
    }
}
