//! Encoder for the same layouts the decoder reads: SHT_LLVM_BB_ADDR_MAP versions 0-5 (so tests
//! can build maps byte for byte as LLVM writes them) and the unversioned `.bb_info` layouts.

use crate::decode::Endian;
use crate::model::{BlockMetadata, Features, FunctionMap, Layout};
use pcmap_bytes::leb128::write_uleb128;

/// Byte order and address size of the target file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EncodeOptions {
    /// File byte order.
    pub endian: Endian,
    /// 8 for ELF64, 4 for ELF32.
    pub address_size: u8,
}

impl EncodeOptions {
    /// 64-bit little-endian.
    pub const ELF64LE: EncodeOptions = EncodeOptions {
        endian: Endian::Little,
        address_size: 8,
    };
}

/// A function record that cannot be written in its declared layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// Version outside 0-5.
    #[error("cannot encode version {0}")]
    Version(u8),
    /// Feature bits undefined or not allowed in this version or layout.
    #[error("features {features:#x} cannot be encoded in layout {layout:?}")]
    Features {
        /// The feature field.
        features: u16,
        /// The layout.
        layout: Layout,
    },
    /// Metadata with undefined bits.
    #[error("invalid block metadata {0:#x}")]
    Metadata(u32),
    /// Range count not 1 without `MultiBBRange`, or zero with it.
    #[error("{0} ranges cannot be encoded with features {1:#x}")]
    RangeCount(usize, u16),
    /// `num_blocks` differs from the number of block records.
    #[error("range {range} declares {declared} blocks but has {actual} records")]
    BlockCount {
        /// Range index.
        range: usize,
        /// `num_blocks`.
        declared: u32,
        /// `entries.len()`.
        actual: usize,
    },
    /// The PGO map does not match the features or the block count.
    #[error("PGO analysis does not match the features or the number of blocks")]
    Pgo,
    /// A legacy layout requires block IDs equal to block indexes.
    #[error("block {index} has ID {id}, but this layout encodes the index as the ID")]
    ImplicitId {
        /// Block index.
        index: usize,
        /// Its ID.
        id: u32,
    },
    /// The `.bb_info` proposal layout omits the entry offset, which must then be 0.
    #[error("the entry block's offset must be 0 in the .bb_info proposal layout")]
    EntryOffset,
}

/// Where an address field was written, so a relocatable-object writer can add a relocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressField {
    /// Offset of the field in the section.
    pub offset: u64,
    /// The address written (or to be relocated).
    pub address: u64,
}

fn put_address(out: &mut Vec<u8>, o: EncodeOptions, a: u64, fields: &mut Vec<AddressField>) {
    fields.push(AddressField {
        offset: out.len() as u64,
        address: a,
    });
    match (o.address_size, o.endian) {
        (4, Endian::Little) => out.extend_from_slice(&(a as u32).to_le_bytes()),
        (4, Endian::Big) => out.extend_from_slice(&(a as u32).to_be_bytes()),
        (_, Endian::Little) => out.extend_from_slice(&a.to_le_bytes()),
        (_, Endian::Big) => out.extend_from_slice(&a.to_be_bytes()),
    }
}

/// Append the record of `f` to `out`; returns the address fields written.
pub fn encode_function(
    f: &FunctionMap,
    o: EncodeOptions,
    out: &mut Vec<u8>,
) -> Result<Vec<AddressField>, EncodeError> {
    let mut fields = Vec::new();
    let features = f.features;
    let bad_features = || EncodeError::Features {
        features: features.0,
        layout: f.layout,
    };
    for (i, r) in f.ranges.iter().enumerate() {
        for e in &r.entries {
            if e.metadata.0 & !BlockMetadata::ALL != 0 {
                return Err(EncodeError::Metadata(e.metadata.0));
            }
        }
        if !features.omit_bb_entries() && r.num_blocks as usize != r.entries.len() {
            return Err(EncodeError::BlockCount {
                range: i,
                declared: r.num_blocks,
                actual: r.entries.len(),
            });
        }
    }
    let version = match f.layout {
        Layout::Versioned(v) => v,
        Layout::Unversioned | Layout::BbInfoProposal => {
            if features.0 != 0 || f.pgo.is_some() {
                return Err(bad_features());
            }
            if f.ranges.len() != 1 {
                return Err(EncodeError::RangeCount(f.ranges.len(), 0));
            }
            let r = &f.ranges[0];
            put_address(out, o, r.base_address, &mut fields);
            write_uleb128(out, u64::from(r.num_blocks));
            for (index, e) in r.entries.iter().enumerate() {
                if e.id as usize != index {
                    return Err(EncodeError::ImplicitId { index, id: e.id });
                }
                if f.layout == Layout::BbInfoProposal && index == 0 {
                    if e.offset != 0 {
                        return Err(EncodeError::EntryOffset);
                    }
                } else {
                    write_uleb128(out, u64::from(e.offset));
                }
                write_uleb128(out, u64::from(e.size));
                write_uleb128(out, u64::from(e.metadata.0));
            }
            return Ok(fields);
        }
    };
    if version > 5 {
        return Err(EncodeError::Version(version));
    }
    if features.0 & !Features::ALL != 0
        || (version < 2 && features.0 != 0)
        || (features.0 != 0 && features.min_version() > version)
    {
        return Err(bad_features());
    }
    if features.multi_bb_range() {
        if f.ranges.is_empty() {
            return Err(EncodeError::RangeCount(0, features.0));
        }
    } else if f.ranges.len() != 1 {
        return Err(EncodeError::RangeCount(f.ranges.len(), features.0));
    }
    let total: usize = if features.omit_bb_entries() {
        0
    } else {
        f.num_entries()
    };
    match &f.pgo {
        None if features.has_pgo_analysis() => return Err(EncodeError::Pgo),
        Some(_) if !features.has_pgo_analysis() => return Err(EncodeError::Pgo),
        Some(p) if features.has_pgo_analysis_bb_data() && p.bb_entries.len() != total => {
            return Err(EncodeError::Pgo);
        }
        Some(p) if !features.has_pgo_analysis_bb_data() && !p.bb_entries.is_empty() => {
            return Err(EncodeError::Pgo);
        }
        _ => {}
    }

    out.push(version);
    if version >= 5 {
        match o.endian {
            Endian::Little => out.extend_from_slice(&features.0.to_le_bytes()),
            Endian::Big => out.extend_from_slice(&features.0.to_be_bytes()),
        }
    } else {
        out.push(features.0 as u8);
    }
    if features.multi_bb_range() {
        write_uleb128(out, f.ranges.len() as u64);
    }
    for r in &f.ranges {
        put_address(out, o, r.base_address, &mut fields);
        write_uleb128(out, u64::from(r.num_blocks));
        if features.omit_bb_entries() {
            continue;
        }
        let mut prev_end: u32 = 0;
        for (index, e) in r.entries.iter().enumerate() {
            if version >= 2 {
                write_uleb128(out, u64::from(e.id));
            } else if e.id as usize != index {
                return Err(EncodeError::ImplicitId { index, id: e.id });
            }
            let offset_field = if version >= 1 {
                e.offset.wrapping_sub(prev_end)
            } else {
                e.offset
            };
            write_uleb128(out, u64::from(offset_field));
            let mut last: u32 = 0;
            if features.callsite_end_offsets() {
                write_uleb128(out, e.callsite_end_offsets.len() as u64);
                for &cs in &e.callsite_end_offsets {
                    write_uleb128(out, u64::from(cs.wrapping_sub(last)));
                    last = cs;
                }
            }
            write_uleb128(out, u64::from(e.size.wrapping_sub(last)));
            write_uleb128(out, u64::from(e.metadata.0));
            if features.bb_hash() {
                match o.endian {
                    Endian::Little => out.extend_from_slice(&e.hash.to_le_bytes()),
                    Endian::Big => out.extend_from_slice(&e.hash.to_be_bytes()),
                }
            }
            prev_end = e.offset.wrapping_add(e.size);
        }
    }
    if let Some(p) = &f.pgo {
        if features.func_entry_count() {
            write_uleb128(out, p.func_entry_count);
        }
        if features.has_pgo_analysis_bb_data() {
            for b in &p.bb_entries {
                if features.bb_freq() {
                    write_uleb128(out, b.frequency);
                }
                if features.post_link_cfg() {
                    write_uleb128(out, u64::from(b.post_link_frequency));
                }
                if features.br_prob() {
                    write_uleb128(out, b.successors.len() as u64);
                    for s in &b.successors {
                        write_uleb128(out, u64::from(s.id));
                        write_uleb128(out, u64::from(s.probability));
                        if features.post_link_cfg() {
                            write_uleb128(out, u64::from(s.post_link_frequency));
                        }
                    }
                }
            }
        }
    }
    Ok(fields)
}

/// Encode a whole section: the records of `functions` back to back.
pub fn encode_section(
    functions: &[FunctionMap],
    o: EncodeOptions,
) -> Result<(Vec<u8>, Vec<AddressField>), EncodeError> {
    let mut out = Vec::new();
    let mut fields = Vec::new();
    for f in functions {
        fields.extend(encode_function(f, o, &mut out)?);
    }
    Ok((out, fields))
}
