//! Decoder for the content of one map section, exactly as strict as llvm-readobj 22
//! (`decodeBBAddrMapImpl`): versions 2 to 5, per-function features, 32-bit limits on IDs,
//! offsets, sizes and counts, metadata and feature bits checked, and every error fatal for the
//! whole section. The legacy layouts (versions 0/1, the unversioned LLVM 12 map and the `.bb_info`
//! proposal) are decoded only when [`DecodeOptions::legacy`] asks for them.

use crate::model::{
    BbEntry, BbRange, BlockMetadata, Features, FunctionMap, Layout, PgoAnalysis, PgoBbEntry,
    PgoSuccessor,
};

/// Byte order of the file the section comes from (the workspace's one byte-order type).
pub use pcmap_bytes::Endian;

/// Which layouts beyond LLVM 22's versions 2-5 the decoder accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LegacyMode {
    /// Versions 2-5 only, as llvm-readobj 22.
    #[default]
    Strict,
    /// Also versions 0 (offsets from the function start) and 1 (offsets from the end of the
    /// previous block); both have no block IDs (the index is the ID) and no features.
    Versions0And1,
    /// The whole section is the unversioned LLVM 12 `.bb_addr_map` layout.
    Unversioned,
    /// The whole section is the `.bb_info` proposal's layout (entry block without offset).
    BbInfoProposal,
}

/// Parameters of a decode: what the file header says plus the legacy option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodeOptions {
    /// File byte order (addresses, the v5 feature field and hashes).
    pub endian: Endian,
    /// Address size in bytes: 8 for ELF64, 4 for ELF32.
    pub address_size: u8,
    /// Legacy layouts to accept.
    pub legacy: LegacyMode,
}

impl DecodeOptions {
    /// Strict options for a 64-bit little-endian file.
    pub const ELF64LE: DecodeOptions = DecodeOptions {
        endian: Endian::Little,
        address_size: 8,
        legacy: LegacyMode::Strict,
    };
}

/// The field being read when decoding failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Field {
    Version,
    Feature,
    NumBBRanges,
    Address,
    NumBlocks,
    Id,
    Offset,
    NumCallsites,
    CallsiteEndOffset,
    Size,
    Metadata,
    Hash,
    FuncEntryCount,
    Frequency,
    PostLinkFrequency,
    NumSuccessors,
    SuccessorId,
    Probability,
    PostLinkProbability,
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// A fixed-size field runs past the end of the section.
    #[error("unexpected end of data")]
    UnexpectedEnd,
    /// A ULEB128 runs past the end of the section.
    #[error("malformed uleb128, extends past end")]
    LebExtendsPastEnd,
    /// A ULEB128 has payload bits beyond bit 63.
    #[error("uleb128 too big for uint64")]
    LebTooBig,
    /// A ULEB128 exceeds the width of the field it encodes.
    #[error("ULEB128 value {value:#x} exceeds UINT{bits}_MAX")]
    ValueTooLarge {
        /// The decoded value.
        value: u64,
        /// Width of the field.
        bits: u8,
    },
    /// A version other than the accepted ones.
    #[error("unsupported SHT_LLVM_BB_ADDR_MAP version: {0}")]
    UnsupportedVersion(u8),
    /// Undefined feature bits.
    #[error("invalid encoding for BBAddrMap::Features: {0:#x}")]
    InvalidFeatures(u16),
    /// A feature used below the version that introduced it.
    #[error(
        "version should be >= {min} for SHT_LLVM_BB_ADDR_MAP when {feature} is enabled: version = {version} feature = {features}"
    )]
    FeatureNeedsVersion {
        /// Name of the feature.
        feature: &'static str,
        /// Version that introduced it.
        min: u8,
        /// The record's version.
        version: u8,
        /// The record's feature field.
        features: u16,
    },
    /// Undefined metadata bits.
    #[error("invalid encoding for BBEntry::Metadata: {0:#x}")]
    InvalidMetadata(u32),
    /// `MultiBBRange` with a range count of zero.
    #[error("invalid zero number of BB ranges")]
    ZeroRanges,
    /// In a relocatable object, an address field without a relocation.
    #[error("failed to get relocation data")]
    MissingRelocation,
}

/// A decode failure with the byte offset (within the section) and the field being read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} (field {field} at section offset {offset:#x})")]
pub struct DecodeError {
    /// Offset of the field within the section content.
    pub offset: u64,
    /// The field being read.
    pub field: Field,
    /// The failure.
    pub kind: DecodeErrorKind,
}

/// Resolves the value of an address field. For linked files the field holds the address; for
/// relocatable objects it comes from the relocation at that offset of the section.
pub trait AddressResolver {
    /// `field_offset` is the field's offset within the section, `stored` the value in the field.
    fn resolve(&self, field_offset: u64, stored: u64) -> Result<u64, DecodeErrorKind>;
}

/// The field holds the address (executables and shared objects).
#[derive(Debug, Clone, Copy, Default)]
pub struct StoredAddress;

impl AddressResolver for StoredAddress {
    #[inline]
    fn resolve(&self, _field_offset: u64, stored: u64) -> Result<u64, DecodeErrorKind> {
        Ok(stored)
    }
}

/// The shared byte cursor, with LLVM's field names and error kinds.
struct Cursor<'data> {
    inner: pcmap_bytes::Cursor<'data>,
}

impl<'data> Cursor<'data> {
    #[inline]
    fn pos(&self) -> usize {
        self.inner.pos()
    }

    #[inline]
    fn err(&self, at: usize, field: Field, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            offset: at as u64,
            field,
            kind,
        }
    }

    #[cold]
    fn bytes_err(field: Field, e: pcmap_bytes::Error) -> DecodeError {
        let kind = match e.kind {
            pcmap_bytes::ErrorKind::UnexpectedEnd { .. } => DecodeErrorKind::UnexpectedEnd,
            pcmap_bytes::ErrorKind::LebPastEnd => DecodeErrorKind::LebExtendsPastEnd,
            pcmap_bytes::ErrorKind::LebOverflow { .. } => DecodeErrorKind::LebTooBig,
        };
        DecodeError {
            offset: e.offset as u64,
            field,
            kind,
        }
    }

    #[inline]
    fn uleb(&mut self, field: Field) -> Result<u64, DecodeError> {
        self.inner
            .read_uleb128()
            .map_err(|e| Self::bytes_err(field, e))
    }

    /// `readULEB128As<uint32_t>`.
    #[inline]
    fn uleb32(&mut self, field: Field) -> Result<u32, DecodeError> {
        let at = self.pos();
        let v = self.uleb(field)?;
        u32::try_from(v).map_err(|_| {
            self.err(
                at,
                field,
                DecodeErrorKind::ValueTooLarge { value: v, bits: 32 },
            )
        })
    }

    fn u8(&mut self, field: Field) -> Result<u8, DecodeError> {
        self.inner.read_u8().map_err(|e| Self::bytes_err(field, e))
    }

    fn u16(&mut self, field: Field) -> Result<u16, DecodeError> {
        self.inner.read_u16().map_err(|e| Self::bytes_err(field, e))
    }

    fn u64(&mut self, field: Field) -> Result<u64, DecodeError> {
        self.inner.read_u64().map_err(|e| Self::bytes_err(field, e))
    }

    fn address<R: AddressResolver + ?Sized>(
        &mut self,
        size: u8,
        resolver: &R,
    ) -> Result<u64, DecodeError> {
        let at = self.pos();
        let stored = if size == 4 {
            let v = self.inner.read_u32();
            u64::from(v.map_err(|e| Self::bytes_err(Field::Address, e))?)
        } else {
            self.u64(Field::Address)?
        };
        resolver
            .resolve(at as u64, stored)
            .map_err(|k| self.err(at, Field::Address, k))
    }
}

/// One decoded block record, borrowed from the decoder for the duration of a visitor call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRecord<'a> {
    /// Block ID.
    pub id: u32,
    /// Offset from the range's base address (absolute, not the encoded delta).
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// Metadata bits (already validated).
    pub metadata: BlockMetadata,
    /// Callsite end offsets relative to the block start.
    pub callsite_end_offsets: &'a [u32],
    /// Block hash (0 without `BBHash`).
    pub hash: u64,
}

/// Receives the fields of a map in file order as they are decoded, so consumers that only need
/// a flat view (the block index, statistics) decode without any per-function allocation.
///
/// Call order per function: `function`, then for each range `range` followed by its `block`s,
/// then (iff the features have a PGO bit) `pgo_function` and for each PGO block `pgo_block`
/// followed by its `pgo_successor`s, and finally `function_end`. After a decode error the visitor
/// may have seen a partial function.
pub trait MapVisitor {
    /// A function record starts.
    fn function(&mut self, layout: Layout, features: Features);
    /// A range starts.
    fn range(&mut self, base_address: u64, num_blocks: u32);
    /// A block of the current range.
    fn block(&mut self, block: &BlockRecord<'_>);
    /// The function's PGO record starts (`func_entry_count` is 0 without `FuncEntryCount`).
    fn pgo_function(&mut self, _func_entry_count: u64) {}
    /// The PGO record of the next block.
    fn pgo_block(&mut self, _frequency: u64, _post_link_frequency: u32) {}
    /// A successor of the current PGO block.
    fn pgo_successor(&mut self, _successor: PgoSuccessor) {}
    /// The function record is complete.
    fn function_end(&mut self) {}
}

/// Builds one [`FunctionMap`] per function record.
#[derive(Debug, Default)]
struct FunctionBuilder {
    current: Option<FunctionMap>,
}

impl MapVisitor for FunctionBuilder {
    fn function(&mut self, layout: Layout, features: Features) {
        self.current = Some(FunctionMap {
            layout,
            features,
            ranges: Vec::new(),
            pgo: None,
        });
    }
    fn range(&mut self, base_address: u64, num_blocks: u32) {
        if let Some(f) = &mut self.current {
            f.ranges.push(BbRange {
                base_address,
                num_blocks,
                entries: Vec::new(),
            });
        }
    }
    fn block(&mut self, b: &BlockRecord<'_>) {
        if let Some(r) = self.current.as_mut().and_then(|f| f.ranges.last_mut()) {
            r.entries.push(BbEntry {
                id: b.id,
                offset: b.offset,
                size: b.size,
                metadata: b.metadata,
                callsite_end_offsets: b.callsite_end_offsets.to_vec(),
                hash: b.hash,
            });
        }
    }
    fn pgo_function(&mut self, func_entry_count: u64) {
        if let Some(f) = &mut self.current {
            f.pgo = Some(PgoAnalysis {
                func_entry_count,
                bb_entries: Vec::new(),
            });
        }
    }
    fn pgo_block(&mut self, frequency: u64, post_link_frequency: u32) {
        if let Some(p) = self.current.as_mut().and_then(|f| f.pgo.as_mut()) {
            p.bb_entries.push(PgoBbEntry {
                frequency,
                post_link_frequency,
                successors: Vec::new(),
            });
        }
    }
    fn pgo_successor(&mut self, s: PgoSuccessor) {
        if let Some(b) = self
            .current
            .as_mut()
            .and_then(|f| f.pgo.as_mut())
            .and_then(|p| p.bb_entries.last_mut())
        {
            b.successors.push(s);
        }
    }
}

/// Lazy reader over the function records of one map section.
///
/// Iterating yields one [`FunctionMap`] per record; the first error ends the iteration (as in
/// llvm-readobj, an error anywhere invalidates the whole section, so callers that need readobj's
/// behaviour should use [`decode_section`] or [`visit_section`]).
pub struct BbAddrMapReader<'data, 'r, R: AddressResolver + ?Sized> {
    cur: Cursor<'data>,
    options: DecodeOptions,
    resolver: &'r R,
    failed: bool,
    callsites: Vec<u32>,
}

impl<'data, 'r, R: AddressResolver + ?Sized> BbAddrMapReader<'data, 'r, R> {
    /// A reader over `data` (the section content, decompressed).
    pub fn new(data: &'data [u8], options: DecodeOptions, resolver: &'r R) -> Self {
        BbAddrMapReader {
            cur: Cursor {
                inner: pcmap_bytes::Cursor::new(data, 0).with_endian(options.endian),
            },
            options,
            resolver,
            failed: false,
            callsites: Vec::new(),
        }
    }

    /// Offset of the next record in the section.
    pub fn position(&self) -> usize {
        self.cur.pos()
    }

    /// Whether all records have been read (or an error ended the reading).
    pub fn is_done(&self) -> bool {
        self.failed || self.cur.inner.is_empty()
    }

    /// Decode the next function record into `v`.
    pub fn visit_next<V: MapVisitor + ?Sized>(&mut self, v: &mut V) -> Result<(), DecodeError> {
        let r = self.visit_function(v);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn visit_function<V: MapVisitor + ?Sized>(&mut self, v: &mut V) -> Result<(), DecodeError> {
        let c = &mut self.cur;
        let addr_size = self.options.address_size;
        match self.options.legacy {
            LegacyMode::Unversioned | LegacyMode::BbInfoProposal => {
                let layout = if self.options.legacy == LegacyMode::Unversioned {
                    Layout::Unversioned
                } else {
                    Layout::BbInfoProposal
                };
                return decode_unversioned(c, addr_size, self.resolver, layout, v);
            }
            _ => {}
        }
        let version_at = c.pos();
        let version = c.u8(Field::Version)?;
        let legacy_ok = self.options.legacy == LegacyMode::Versions0And1;
        if version > 5 || (version < 2 && !legacy_ok) {
            return Err(c.err(
                version_at,
                Field::Version,
                DecodeErrorKind::UnsupportedVersion(version),
            ));
        }
        let feature_at = c.pos();
        let raw_features = if version < 5 {
            u16::from(c.u8(Field::Feature)?)
        } else {
            c.u16(Field::Feature)?
        };
        if raw_features & !Features::ALL != 0 {
            return Err(c.err(
                feature_at,
                Field::Feature,
                DecodeErrorKind::InvalidFeatures(raw_features),
            ));
        }
        let features = Features(raw_features);
        let needs = |feature: &'static str, min: u8| DecodeErrorKind::FeatureNeedsVersion {
            feature,
            min,
            version,
            features: raw_features,
        };
        if version < 2 && raw_features != 0 {
            return Err(c.err(feature_at, Field::Feature, needs("PGO features", 2)));
        }
        if features.callsite_end_offsets() && version < 3 {
            return Err(c.err(
                feature_at,
                Field::Feature,
                needs("callsite offsets feature", 3),
            ));
        }
        if features.bb_hash() && version < 4 {
            return Err(c.err(
                feature_at,
                Field::Feature,
                needs("basic block hash feature", 4),
            ));
        }
        if features.post_link_cfg() && version < 5 {
            return Err(c.err(
                feature_at,
                Field::Feature,
                needs("post link cfg feature", 5),
            ));
        }
        v.function(Layout::Versioned(version), features);

        let num_ranges = if features.multi_bb_range() {
            let at = c.pos();
            let n = c.uleb32(Field::NumBBRanges)?;
            if n == 0 {
                return Err(c.err(at, Field::NumBBRanges, DecodeErrorKind::ZeroRanges));
            }
            n
        } else {
            1
        };
        let mut total_entries: u32 = 0;
        let callsites = &mut self.callsites;
        for _ in 0..num_ranges {
            let base_address = c.address(addr_size, self.resolver)?;
            let num_blocks = c.uleb32(Field::NumBlocks)?;
            v.range(base_address, num_blocks);
            if features.omit_bb_entries() {
                continue;
            }
            let mut prev_end: u32 = 0;
            for index in 0..num_blocks {
                let id = if version >= 2 {
                    c.uleb32(Field::Id)?
                } else {
                    index
                };
                let offset_field = c.uleb32(Field::Offset)?;
                callsites.clear();
                let mut last_callsite_end: u32 = 0;
                if features.callsite_end_offsets() {
                    let n = c.uleb32(Field::NumCallsites)?;
                    for _ in 0..n {
                        let delta = c.uleb32(Field::CallsiteEndOffset)?;
                        last_callsite_end = last_callsite_end.wrapping_add(delta);
                        callsites.push(last_callsite_end);
                    }
                }
                let size = c.uleb32(Field::Size)?.wrapping_add(last_callsite_end);
                let md_at = c.pos();
                let md = c.uleb32(Field::Metadata)?;
                let hash = if features.bb_hash() {
                    c.u64(Field::Hash)?
                } else {
                    0
                };
                if md & !BlockMetadata::ALL != 0 {
                    return Err(c.err(
                        md_at,
                        Field::Metadata,
                        DecodeErrorKind::InvalidMetadata(md),
                    ));
                }
                let offset = if version >= 1 {
                    let o = offset_field.wrapping_add(prev_end);
                    prev_end = o.wrapping_add(size);
                    o
                } else {
                    offset_field
                };
                v.block(&BlockRecord {
                    id,
                    offset,
                    size,
                    metadata: BlockMetadata(md),
                    callsite_end_offsets: callsites,
                    hash,
                });
            }
            total_entries = total_entries.wrapping_add(num_blocks);
        }

        if features.has_pgo_analysis() {
            let func_entry_count = if features.func_entry_count() {
                c.uleb(Field::FuncEntryCount)?
            } else {
                0
            };
            v.pgo_function(func_entry_count);
            if features.has_pgo_analysis_bb_data() {
                for _ in 0..total_entries {
                    let frequency = if features.bb_freq() {
                        c.uleb(Field::Frequency)?
                    } else {
                        0
                    };
                    let post_link_frequency = if features.post_link_cfg() {
                        c.uleb32(Field::PostLinkFrequency)?
                    } else {
                        0
                    };
                    v.pgo_block(frequency, post_link_frequency);
                    if features.br_prob() {
                        let n = c.uleb(Field::NumSuccessors)?;
                        for _ in 0..n {
                            let id = c.uleb32(Field::SuccessorId)?;
                            let probability = c.uleb32(Field::Probability)?;
                            let post_link_frequency = if features.post_link_cfg() {
                                c.uleb32(Field::PostLinkProbability)?
                            } else {
                                0
                            };
                            v.pgo_successor(PgoSuccessor {
                                id,
                                probability,
                                post_link_frequency,
                            });
                        }
                    }
                }
            }
        }
        v.function_end();
        Ok(())
    }
}

fn decode_unversioned<R: AddressResolver + ?Sized, V: MapVisitor + ?Sized>(
    c: &mut Cursor<'_>,
    addr_size: u8,
    resolver: &R,
    layout: Layout,
    v: &mut V,
) -> Result<(), DecodeError> {
    let base_address = c.address(addr_size, resolver)?;
    let num_blocks = c.uleb32(Field::NumBlocks)?;
    v.function(layout, Features(0));
    v.range(base_address, num_blocks);
    for index in 0..num_blocks {
        let offset = if layout == Layout::BbInfoProposal && index == 0 {
            0
        } else {
            c.uleb32(Field::Offset)?
        };
        let size = c.uleb32(Field::Size)?;
        let md_at = c.pos();
        let md = c.uleb32(Field::Metadata)?;
        if md & !BlockMetadata::ALL != 0 {
            return Err(c.err(md_at, Field::Metadata, DecodeErrorKind::InvalidMetadata(md)));
        }
        v.block(&BlockRecord {
            id: index,
            offset,
            size,
            metadata: BlockMetadata(md),
            callsite_end_offsets: &[],
            hash: 0,
        });
    }
    v.function_end();
    Ok(())
}

impl<R: AddressResolver + ?Sized> Iterator for BbAddrMapReader<'_, '_, R> {
    type Item = Result<FunctionMap, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.cur.inner.is_empty() {
            return None;
        }
        let mut b = FunctionBuilder::default();
        Some(
            self.visit_next(&mut b)
                .map(|()| b.current.expect("a decoded function")),
        )
    }
}

/// Decode a whole section; any error rejects the section, as llvm-readobj does.
pub fn decode_section<R: AddressResolver + ?Sized>(
    data: &[u8],
    options: DecodeOptions,
    resolver: &R,
) -> Result<Vec<FunctionMap>, DecodeError> {
    BbAddrMapReader::new(data, options, resolver).collect()
}

/// Decode a whole section into `visitor` without building [`FunctionMap`]s; any error rejects
/// the section, as llvm-readobj does.
pub fn visit_section<R: AddressResolver + ?Sized, V: MapVisitor + ?Sized>(
    data: &[u8],
    options: DecodeOptions,
    resolver: &R,
    visitor: &mut V,
) -> Result<(), DecodeError> {
    let mut reader = BbAddrMapReader::new(data, options, resolver);
    while !reader.is_done() {
        reader.visit_next(visitor)?;
    }
    Ok(())
}
