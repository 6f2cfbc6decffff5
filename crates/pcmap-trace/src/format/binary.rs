//! "PCMTRACE", the compact binary trace format (little-endian, streamable, chunk-parallel).
//!
//! ```text
//! header (32 bytes): magic "PCMTRACE", u16 version = 1, u16 flags (bit 0 blocks, bit 1 timestamps),
//!                    u16 e_machine (62 = x86-64), u16 header_len, u64 insn_count (0 = unknown),
//!                    u64 index_offset (0 = no trailer index)
//! records:           LEB128 key, tag = key & 3, v = key >> 2
//!   tag 0 INSN       addr = prev + unzigzag(v); prev = addr
//!   tag 1 BLOCK      the same address rule, then LEB128 instruction count (>= 1)
//!   tag 2 GAP        v = reason (0 filtered, 1 decode error, 2 lost data, 3 tracing disabled)
//!   tag 3 META       v = kind: 0 TID (LEB128 tid), 1 TS (LEB128 ns delta from the previous TS),
//!                    2 SYNC (prev = 0 and the TS base = 0: a decoder can start here),
//!                    3 END (LEB128 total instruction count, checked)
//! trailer index:     u64 count, then count x (u64 byte_offset, u64 record_index, u64 insn_index),
//!                    one per SYNC, byte_offset relative to the file start
//! ```
//!
//! pcmap's writer emits a SYNC at least every 1 MiB and repeats the current TID right after each
//! SYNC, so every chunk between SYNCs can be decoded on its own ([`PcmTrace::chunks`]).
//! The key is a LEB128 of up to 66 bits (a 64-bit zigzag delta shifted by the 2-bit tag), so
//! any address jump is encodable.

use std::io::{self, Seek, SeekFrom, Write};
use std::ops::Range;

use super::Sink;
use crate::{GapReason, Record, TraceError};

/// The file magic.
pub const MAGIC: &[u8; 8] = b"PCMTRACE";
/// The format version this crate reads and writes.
pub const VERSION: u16 = 1;
/// Header size written by this crate.
pub const HEADER_LEN: u16 = 32;
/// Header flag: the file contains BLOCK records.
pub const FLAG_BLOCKS: u16 = 1;
/// Header flag: the file contains TS records.
pub const FLAG_TIMESTAMPS: u16 = 2;
/// The writer emits a SYNC when this many bytes have been written since the last one.
pub const SYNC_INTERVAL: u64 = 1 << 20;

const TAG_INSN: u64 = 0;
const TAG_BLOCK: u64 = 1;
const TAG_GAP: u64 = 2;
const TAG_META: u64 = 3;
const META_TID: u64 = 0;
const META_TS: u64 = 1;
const META_SYNC: u64 = 2;
const META_END: u64 = 3;

/// The fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Format version.
    pub version: u16,
    /// `FLAG_*` bits.
    pub flags: u16,
    /// ELF machine of the traced code (62 = x86-64).
    pub e_machine: u16,
    /// Length of the header; records start here.
    pub header_len: u16,
    /// Total instructions, 0 if unknown.
    pub insn_count: u64,
    /// Offset of the trailer index, 0 if none.
    pub index_offset: u64,
}

/// One entry of the trailer index: where a SYNC record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncPoint {
    /// Byte offset of the SYNC record from the file start.
    pub byte_offset: u64,
    /// Number of records before it.
    pub record_index: u64,
    /// Number of instructions before it.
    pub insn_index: u64,
}

/// A decoded record without allocation (the binary format carries no gap messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawRecord {
    /// One instruction.
    Insn(u64),
    /// `insns` consecutive instructions at an address.
    Block(u64, u32),
    /// A gap.
    Gap(GapReason),
    /// Thread switch.
    Thread(u64),
    /// Absolute timestamp in ns.
    Timestamp(u64),
    /// A sync point (address base reset).
    Sync,
    /// End of records with the writer's instruction total.
    End(u64),
}

/// A parsed PCMTRACE file borrowed from its bytes.
#[derive(Debug, Clone)]
pub struct PcmTrace<'data> {
    data: &'data [u8],
    file: String,
    /// The header.
    pub header: Header,
    records: Range<usize>,
    /// The trailer index (empty if the file has none).
    pub index: Vec<SyncPoint>,
}

fn u16_at(d: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([d[o], d[o + 1]])
}

fn u64_at(d: &[u8], o: usize) -> Option<u64> {
    let b: [u8; 8] = d.get(o..o.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

impl<'data> PcmTrace<'data> {
    /// Parse the header and trailer index of `data`; `file` labels errors.
    pub fn parse(data: &'data [u8], file: &str) -> Result<Self, TraceError> {
        let err = |off: u64, field: &'static str, m: &str| TraceError::binary(file, off, field, m);
        if data.len() < 32 {
            return Err(err(0, "header", "file shorter than the 32-byte header"));
        }
        if &data[..8] != MAGIC {
            return Err(err(0, "magic", "expected \"PCMTRACE\""));
        }
        let header = Header {
            version: u16_at(data, 8),
            flags: u16_at(data, 10),
            e_machine: u16_at(data, 12),
            header_len: u16_at(data, 14),
            insn_count: u64_at(data, 16).unwrap_or(0),
            index_offset: u64_at(data, 24).unwrap_or(0),
        };
        if header.version != VERSION {
            return Err(err(
                8,
                "version",
                &format!("unsupported version {} (expected 1)", header.version),
            ));
        }
        let start = header.header_len as usize;
        if start < 32 || start > data.len() {
            return Err(err(
                14,
                "header_len",
                &format!("header_len {} outside 32..={}", start, data.len()),
            ));
        }
        let mut end = data.len();
        let mut index = Vec::new();
        if header.index_offset != 0 {
            let io = usize::try_from(header.index_offset)
                .ok()
                .filter(|&o| o >= start && o <= data.len())
                .ok_or_else(|| err(24, "index_offset", "index offset outside the file"))?;
            let count =
                u64_at(data, io).ok_or_else(|| err(io as u64, "index count", "truncated index"))?;
            let avail = ((data.len() - io - 8) / 24) as u64;
            if count > avail {
                return Err(err(
                    io as u64,
                    "index count",
                    &format!("{count} entries but room for {avail}"),
                ));
            }
            index.reserve(count as usize);
            for i in 0..count as usize {
                let o = io + 8 + i * 24;
                let p = SyncPoint {
                    byte_offset: u64_at(data, o).unwrap_or(0),
                    record_index: u64_at(data, o + 8).unwrap_or(0),
                    insn_index: u64_at(data, o + 16).unwrap_or(0),
                };
                let in_range = p.byte_offset >= start as u64 && p.byte_offset < io as u64;
                let ordered = index
                    .last()
                    .is_none_or(|q: &SyncPoint| q.byte_offset < p.byte_offset);
                if !in_range || !ordered {
                    return Err(err(
                        o as u64,
                        "index entry",
                        "sync offset outside the records or out of order",
                    ));
                }
                index.push(p);
            }
            end = io;
        }
        Ok(PcmTrace {
            data,
            file: file.to_string(),
            header,
            records: start..end,
            index,
        })
    }

    /// The byte range of all records.
    pub fn record_range(&self) -> Range<usize> {
        self.records.clone()
    }

    /// The record byte ranges between consecutive SYNC points (the whole range if there is no
    /// index). Each range starts at a SYNC (or at the first record) and decodes on its own.
    pub fn chunks(&self) -> Vec<Range<usize>> {
        let mut cuts: Vec<usize> = vec![self.records.start];
        for p in &self.index {
            let o = p.byte_offset as usize;
            if o > *cuts.last().unwrap_or(&0) {
                cuts.push(o);
            }
        }
        cuts.push(self.records.end);
        cuts.windows(2)
            .filter(|w| w[0] < w[1])
            .map(|w| w[0]..w[1])
            .collect()
    }

    /// A decoder over a byte range returned by [`chunks`](Self::chunks) or [`record_range`](Self::record_range).
    pub fn decoder(&self, range: Range<usize>) -> Decoder<'data, '_> {
        Decoder {
            data: self.data,
            pos: range.start,
            end: range.end.min(self.data.len()),
            prev: 0,
            ts: 0,
            file: &self.file,
        }
    }

    /// Decode every record into `sink`, checking the END total if present.
    pub fn read_all(&self, sink: &mut Sink<'_>) -> Result<(), TraceError> {
        let mut dec = self.decoder(self.record_range());
        let mut insns: u64 = 0;
        let mut tid = None;
        while let Some((off, rec)) = dec.next_record()? {
            let record = match rec {
                RawRecord::Insn(addr) => {
                    insns += 1;
                    Record::Insn { addr }
                }
                RawRecord::Block(addr, n) => {
                    insns += n as u64;
                    Record::Block { addr, insns: n }
                }
                RawRecord::Gap(reason) => Record::Gap {
                    reason,
                    message: None,
                },
                // The writer repeats the current thread after each SYNC; report switches only.
                RawRecord::Thread(t) if tid == Some(t) => continue,
                RawRecord::Thread(t) => {
                    tid = Some(t);
                    Record::Thread { tid: t }
                }
                RawRecord::Timestamp(ns) => Record::Timestamp { ns },
                RawRecord::Sync => continue,
                RawRecord::End(total) => {
                    if total != insns {
                        return Err(TraceError::binary(
                            &self.file,
                            off,
                            "END total",
                            format!("END says {total} instructions but the records hold {insns}"),
                        ));
                    }
                    continue;
                }
            };
            sink(record).map_err(|m| TraceError::binary(&self.file, off, "record", m))?;
        }
        Ok(())
    }
}

/// A decoder over a byte range of records.
pub struct Decoder<'data, 'f> {
    data: &'data [u8],
    pos: usize,
    end: usize,
    prev: u64,
    ts: u64,
    file: &'f str,
}

impl Decoder<'_, '_> {
    /// Read an LEB128 value of at most 64 bits.
    #[inline]
    fn leb(&mut self, field: &'static str) -> Result<u64, TraceError> {
        let start = self.pos;
        let data = &self.data[..self.end.min(self.data.len())];
        pcmap_bytes::leb128::read_uleb128(data, &mut self.pos).map_err(|e| {
            let message = match e {
                pcmap_bytes::ErrorKind::LebOverflow { .. } => "LEB128 overflows 64 bits",
                _ => "truncated LEB128",
            };
            TraceError::binary(self.file, start as u64, field, message)
        })
    }

    /// Read the record key: an LEB128 of up to 66 bits, returned as (tag, v).
    #[inline]
    fn key(&mut self) -> Result<(u64, u64), TraceError> {
        // Fast path: a one-byte key.
        if let Some(&b) = self.data.get(self.pos)
            && self.pos < self.end
            && b < 0x80
        {
            self.pos += 1;
            return Ok(((b & 3) as u64, (b >> 2) as u64));
        }
        let start = self.pos;
        let data = &self.data[..self.end.min(self.data.len())];
        let err = |message| TraceError::binary(self.file, start as u64, "record key", message);
        let result = match pcmap_bytes::leb128::read_uleb128_u128(data, &mut self.pos) {
            Ok(_) if self.pos - start > 10 => return Err(err("key longer than 10 bytes")),
            Ok(v) => v,
            Err(pcmap_bytes::ErrorKind::LebOverflow { .. }) => {
                return Err(err("key longer than 10 bytes"));
            }
            Err(_) => return Err(err("truncated LEB128")),
        };
        let v = result >> 2;
        if v > u64::MAX as u128 {
            return Err(err("key value exceeds 66 bits"));
        }
        Ok(((result & 3) as u64, v as u64))
    }

    /// Decode the next record if it is an INSN with a one-byte key (the common case: a short
    /// forward step), without the general path's bookkeeping; `None` otherwise.
    #[inline(always)]
    pub fn next_short_insn(&mut self) -> Option<u64> {
        if self.pos >= self.end {
            return None;
        }
        let b = *self.data.get(self.pos)?;
        if b & 0x83 != 0 {
            return None;
        }
        self.pos += 1;
        self.prev = self.prev.wrapping_add(unzigzag((b >> 2) as u64));
        Some(self.prev)
    }

    /// The byte offset of the next record.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Decode the next record with its byte offset; `None` at the end of the range.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<(u64, RawRecord)>, TraceError> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let off = self.pos as u64;
        let (tag, v) = self.key()?;
        let rec = match tag {
            TAG_INSN => {
                self.prev = self.prev.wrapping_add(unzigzag(v));
                RawRecord::Insn(self.prev)
            }
            TAG_BLOCK => {
                self.prev = self.prev.wrapping_add(unzigzag(v));
                let n = self.leb("block instruction count")?;
                let n = u32::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(|| {
                    TraceError::binary(
                        self.file,
                        off,
                        "block instruction count",
                        format!("{n} is not in 1..=2^32-1"),
                    )
                })?;
                RawRecord::Block(self.prev, n)
            }
            TAG_GAP => RawRecord::Gap(GapReason::from_code(v)),
            _ => match v {
                META_TID => RawRecord::Thread(self.leb("tid")?),
                META_TS => {
                    let d = self.leb("timestamp delta")?;
                    self.ts = self.ts.checked_add(d).ok_or_else(|| {
                        TraceError::binary(
                            self.file,
                            off,
                            "timestamp delta",
                            "timestamp overflows 64 bits",
                        )
                    })?;
                    RawRecord::Timestamp(self.ts)
                }
                META_SYNC => {
                    self.prev = 0;
                    self.ts = 0;
                    RawRecord::Sync
                }
                META_END => RawRecord::End(self.leb("END total")?),
                k => {
                    return Err(TraceError::binary(
                        self.file,
                        off,
                        "META kind",
                        format!("unknown META kind {k}"),
                    ));
                }
            },
        };
        Ok(Some((off, rec)))
    }
}

#[inline]
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> u64 {
    (v >> 1) ^ (v & 1).wrapping_neg()
}

use pcmap_bytes::leb128::write_uleb128_u128 as put_leb;

/// Writes a PCMTRACE file. The header's instruction count and index offset are patched in by
/// [`finish`](Self::finish), which is why the output must be seekable.
pub struct BinaryWriter<W: Write + Seek> {
    out: W,
    buf: Vec<u8>,
    written: u64,
    since_sync: u64,
    sync_interval: u64,
    prev: u64,
    last_ts: Option<u64>,
    tid: Option<u64>,
    flags: u16,
    e_machine: u16,
    records: u64,
    insns: u64,
    index: Vec<SyncPoint>,
}

impl<W: Write + Seek> BinaryWriter<W> {
    /// Start a file for code of ELF machine `e_machine` (62 for x86-64).
    pub fn new(mut out: W, e_machine: u16) -> io::Result<Self> {
        out.write_all(&[0u8; HEADER_LEN as usize])?;
        Ok(BinaryWriter {
            out,
            buf: Vec::with_capacity(1 << 16),
            written: HEADER_LEN as u64,
            since_sync: 0,
            sync_interval: SYNC_INTERVAL,
            prev: 0,
            last_ts: None,
            tid: None,
            flags: 0,
            e_machine,
            records: 0,
            insns: 0,
            index: Vec::new(),
        })
    }

    /// Emit SYNC records every `bytes` bytes instead of every [`SYNC_INTERVAL`] (smaller chunks
    /// split the work finer; tests use it to exercise chunk stitching).
    pub fn with_sync_interval(mut self, bytes: u64) -> Self {
        self.sync_interval = bytes.max(1);
        self
    }

    fn key(&mut self, tag: u64, v: u64) {
        put_leb(&mut self.buf, ((v as u128) << 2) | tag as u128);
    }

    fn end_record(&mut self, start_len: usize) -> io::Result<()> {
        self.records += 1;
        self.since_sync += (self.buf.len() - start_len) as u64;
        if self.buf.len() >= 1 << 16 {
            self.out.write_all(&self.buf)?;
            self.written += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    fn maybe_sync(&mut self) -> io::Result<()> {
        if self.since_sync < self.sync_interval {
            return Ok(());
        }
        self.index.push(SyncPoint {
            byte_offset: self.written + self.buf.len() as u64,
            record_index: self.records,
            insn_index: self.insns,
        });
        let start = self.buf.len();
        self.key(TAG_META, META_SYNC);
        self.prev = 0;
        self.last_ts = None;
        self.end_record(start)?;
        self.since_sync = 0;
        if let Some(tid) = self.tid {
            let start = self.buf.len();
            self.key(TAG_META, META_TID);
            put_leb(&mut self.buf, tid as u128);
            self.end_record(start)?;
        }
        Ok(())
    }

    fn addr_delta(&mut self, addr: u64) -> u64 {
        let d = zigzag(addr.wrapping_sub(self.prev) as i64);
        self.prev = addr;
        d
    }

    /// Write one record (metadata records are not representable and are skipped; gap messages
    /// are dropped: the binary format keeps only the reason).
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        self.maybe_sync()?;
        let start = self.buf.len();
        match *record {
            Record::Insn { addr } => {
                let d = self.addr_delta(addr);
                self.key(TAG_INSN, d);
                self.insns += 1;
            }
            Record::Block { addr, insns } => {
                let d = self.addr_delta(addr);
                self.key(TAG_BLOCK, d);
                put_leb(&mut self.buf, insns.max(1) as u128);
                self.flags |= FLAG_BLOCKS;
                self.insns += insns.max(1) as u64;
            }
            Record::Gap { reason, .. } => self.key(TAG_GAP, reason.code()),
            Record::Thread { tid } => {
                self.tid = Some(tid);
                self.key(TAG_META, META_TID);
                put_leb(&mut self.buf, tid as u128);
            }
            Record::Timestamp { ns } => {
                let base = self.last_ts.unwrap_or(0);
                if ns < base {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("timestamp {ns} is before the previous one ({base})"),
                    ));
                }
                self.key(TAG_META, META_TS);
                put_leb(&mut self.buf, (ns - base) as u128);
                self.last_ts = Some(ns);
                self.flags |= FLAG_TIMESTAMPS;
            }
            Record::Meta { .. } => return Ok(()),
        }
        self.end_record(start)
    }

    /// Write the END record and the trailer index, patch the header, and return the output.
    pub fn finish(mut self) -> io::Result<W> {
        let start = self.buf.len();
        self.key(TAG_META, META_END);
        put_leb(&mut self.buf, self.insns as u128);
        self.end_record(start)?;
        self.out.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        let index_offset = self.written;
        let mut idx = Vec::with_capacity(8 + self.index.len() * 24);
        idx.extend_from_slice(&(self.index.len() as u64).to_le_bytes());
        for p in &self.index {
            idx.extend_from_slice(&p.byte_offset.to_le_bytes());
            idx.extend_from_slice(&p.record_index.to_le_bytes());
            idx.extend_from_slice(&p.insn_index.to_le_bytes());
        }
        self.out.write_all(&idx)?;
        let mut header = Vec::with_capacity(32);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&self.flags.to_le_bytes());
        header.extend_from_slice(&self.e_machine.to_le_bytes());
        header.extend_from_slice(&HEADER_LEN.to_le_bytes());
        header.extend_from_slice(&self.insns.to_le_bytes());
        header.extend_from_slice(&index_offset.to_le_bytes());
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&header)?;
        self.out.seek(SeekFrom::End(0))?;
        self.out.flush()?;
        Ok(self.out)
    }
}
