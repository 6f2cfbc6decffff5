//! The zero-copy record walker over the data section.

use super::{Bytes, Error, ErrorKind, PerfFile, err, record_type as rt, sample_type as st};
use super::{branch_sample_type, read_format};

/// The `sample_id` trailer of non-sample records (present when `sample_id_all` is set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SampleId {
    /// Process id.
    pub pid: Option<u32>,
    /// Thread id.
    pub tid: Option<u32>,
    /// Timestamp.
    pub time: Option<u64>,
    /// Event id.
    pub id: Option<u64>,
    /// CPU.
    pub cpu: Option<u32>,
}

/// One branch-stack entry (`perf_branch_entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BranchEntry {
    /// Branch source address.
    pub from: u64,
    /// Branch target address.
    pub to: u64,
    /// The flag bit field: mispred:1, predicted:1, in_tx:1, abort:1, cycles:16, type:4, spec:2, ...
    pub flags: u64,
}

impl BranchEntry {
    /// The branch was mispredicted.
    pub fn mispredicted(&self) -> bool {
        self.flags & 1 != 0
    }
    /// The branch was predicted.
    pub fn predicted(&self) -> bool {
        self.flags & 2 != 0
    }
    /// In a transaction.
    pub fn in_tx(&self) -> bool {
        self.flags & 4 != 0
    }
    /// Transaction abort.
    pub fn abort(&self) -> bool {
        self.flags & 8 != 0
    }
    /// Cycle count since the previous branch (0 = unknown).
    pub fn cycles(&self) -> u16 {
        (self.flags >> 4) as u16
    }
    /// Branch type (`PERF_BR_*`, 0 = unknown).
    pub fn branch_type(&self) -> u8 {
        ((self.flags >> 20) & 0xf) as u8
    }

    /// Encode the flag bits from their parts (for writers and tests).
    pub fn make_flags(
        mispredicted: bool,
        predicted: bool,
        in_tx: bool,
        abort: bool,
        cycles: u16,
        branch_type: u8,
    ) -> u64 {
        u64::from(mispredicted)
            | u64::from(predicted) << 1
            | u64::from(in_tx) << 2
            | u64::from(abort) << 3
            | u64::from(cycles) << 4
            | u64::from(branch_type & 0xf) << 20
    }
}

/// A sample's branch stack, borrowed from the record; entries are decoded on access (newest first, as
/// the hardware records them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BranchStack<'a> {
    /// `hw_idx` when the attribute has `PERF_SAMPLE_BRANCH_HW_INDEX`.
    pub hw_idx: Option<u64>,
    entries: &'a [u8],
}

impl<'a> BranchStack<'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len() / 24
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entry `i` (0 = newest).
    pub fn get(&self, i: usize) -> Option<BranchEntry> {
        let e = self
            .entries
            .get(i.checked_mul(24)?..i.checked_mul(24)? + 24)?;
        let w = |k: usize| u64::from_le_bytes(e[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]));
        Some(BranchEntry {
            from: w(0),
            to: w(1),
            flags: w(2),
        })
    }

    /// The entries, newest first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = BranchEntry> + 'a {
        self.entries.chunks_exact(24).map(|e| {
            let w = |k: usize| u64::from_le_bytes(e[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]));
            BranchEntry {
                from: w(0),
                to: w(1),
                flags: w(2),
            }
        })
    }
}

/// A `PERF_RECORD_SAMPLE`, with the fields the attribute's `sample_type` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample<'a> {
    /// Index of the attribute (event) in [`PerfFile::attrs`].
    pub attr_index: usize,
    /// The record header's `misc` (cpumode in the low 3 bits: 1 kernel, 2 user).
    pub misc: u16,
    /// `PERF_SAMPLE_IP`.
    pub ip: Option<u64>,
    /// `PERF_SAMPLE_TID`: process id.
    pub pid: Option<u32>,
    /// `PERF_SAMPLE_TID`: thread id.
    pub tid: Option<u32>,
    /// `PERF_SAMPLE_TIME`.
    pub time: Option<u64>,
    /// `PERF_SAMPLE_ADDR` (data address for memory events).
    pub addr: Option<u64>,
    /// `PERF_SAMPLE_ID` / `IDENTIFIER`.
    pub id: Option<u64>,
    /// `PERF_SAMPLE_STREAM_ID`.
    pub stream_id: Option<u64>,
    /// `PERF_SAMPLE_CPU`.
    pub cpu: Option<u32>,
    /// `PERF_SAMPLE_PERIOD`.
    pub period: Option<u64>,
    /// `PERF_SAMPLE_CALLCHAIN`: raw `u64` ips (decode with [`Sample::callchain`]).
    callchain: &'a [u8],
    /// `PERF_SAMPLE_BRANCH_STACK`.
    pub branch_stack: Option<BranchStack<'a>>,
}

impl Sample<'_> {
    /// The call chain addresses (including perf's context markers), if recorded.
    pub fn callchain(&self) -> impl Iterator<Item = u64> + '_ {
        self.callchain
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
    }
}

/// `PERF_RECORD_MMAP` or `PERF_RECORD_MMAP2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mmap<'a> {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Start address.
    pub start: u64,
    /// Length.
    pub len: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// File name.
    pub filename: &'a [u8],
    /// Build-id (MMAP2 with `PERF_RECORD_MISC_MMAP_BUILD_ID`).
    pub build_id: Option<&'a [u8]>,
    /// MMAP2 protection bits.
    pub prot: Option<u32>,
    /// Executable mapping (`misc` lacks `PERF_RECORD_MISC_MMAP_DATA`).
    pub executable: bool,
    /// MMAP2 rather than MMAP.
    pub is_mmap2: bool,
    /// Trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_FORK` / `PERF_RECORD_EXIT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskEvent {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Thread id.
    pub tid: u32,
    /// Parent thread id.
    pub ptid: u32,
    /// Timestamp.
    pub time: u64,
    /// Trailer.
    pub sample_id: SampleId,
}

/// One decoded record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// A sample.
    Sample(Sample<'a>),
    /// An MMAP or MMAP2 record.
    Mmap(Mmap<'a>),
    /// `PERF_RECORD_COMM`.
    Comm {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// Command name.
        name: &'a [u8],
        /// Set by exec (`PERF_RECORD_MISC_COMM_EXEC`).
        exec: bool,
        /// Trailer.
        sample_id: SampleId,
    },
    /// `PERF_RECORD_FORK`.
    Fork(TaskEvent),
    /// `PERF_RECORD_EXIT`.
    Exit(TaskEvent),
    /// `PERF_RECORD_LOST`.
    Lost {
        /// Event id.
        id: u64,
        /// Number of lost records.
        lost: u64,
        /// Trailer.
        sample_id: SampleId,
    },
    /// `PERF_RECORD_LOST_SAMPLES`.
    LostSamples {
        /// Number of lost samples.
        lost: u64,
    },
    /// Any other record, undecoded.
    Other {
        /// Record type.
        kind: u32,
        /// Header `misc`.
        misc: u16,
        /// Body after the 8-byte header.
        body: &'a [u8],
    },
}

/// Upper bound on decompressed bytes per compressed record (perf's chunks are at most the mmap size).
const MAX_DECOMPRESSED_PER_RECORD: usize = 256 << 20;

pub(super) fn walk(
    file: &PerfFile<'_>,
    f: &mut dyn FnMut(&Record<'_>) -> bool,
) -> Result<(), Error> {
    let range = file.data_section.range(file.data.len(), "data section")?;
    walk_range(file, range, None, f)
}

/// [`walk`] over the records in `range` of the file (which must start and end at record
/// boundaries, see [`split`]); with `only`, other record types are skipped undecoded (records
/// inside compressed chunks are always decoded).
pub(super) fn walk_range(
    file: &PerfFile<'_>,
    range: std::ops::Range<usize>,
    only: Option<&[u32]>,
    f: &mut dyn FnMut(&Record<'_>) -> bool,
) -> Result<(), Error> {
    let data = file.data;
    let mut at = range.start;
    let mut z = Decompressor::default();
    while at < range.end {
        let (kind, size) = record_header(data, at, range.end)?;
        let rec = &data[at..at + size];
        match kind {
            rt::COMPRESSED | rt::COMPRESSED2 => {
                let payload = if kind == rt::COMPRESSED2 {
                    let b = Bytes {
                        data: rec,
                        base: at,
                    };
                    let n = b.u64(8, "compressed record")? as usize;
                    b.slice(16, n, "compressed record payload")?
                } else {
                    &rec[8..]
                };
                z.feed(payload, at)?;
                let mut stop = false;
                let mut pos = 0;
                let out = &z.out;
                while pos + 8 <= out.len() {
                    let size = u16::from_le_bytes([out[pos + 6], out[pos + 7]]) as usize;
                    if size < 8 {
                        return Err(err(
                            at,
                            ErrorKind::Invalid {
                                what: "record size in compressed chunk",
                                value: size as u64,
                            },
                        ));
                    }
                    if pos + size > out.len() {
                        break;
                    }
                    let r = decode(file, &out[pos..pos + size], at)?;
                    pos += size;
                    if !f(&r) {
                        stop = true;
                        break;
                    }
                }
                z.out.drain(..pos);
                if stop {
                    return Ok(());
                }
                at += size;
            }
            rt::AUXTRACE => {
                let b = Bytes {
                    data: rec,
                    base: at,
                };
                let aux = b.u64(8, "auxtrace record")?;
                let aux = usize::try_from(aux)
                    .map_err(|_| err(at, ErrorKind::Truncated("auxtrace data")))?;
                let r = decode(file, rec, at)?;
                if !f(&r) {
                    return Ok(());
                }
                at = at
                    .checked_add(size)
                    .and_then(|a| a.checked_add(aux))
                    .filter(|&a| a <= range.end)
                    .ok_or_else(|| err(at, ErrorKind::Truncated("auxtrace data")))?;
            }
            _ => {
                if only.is_none_or(|k| k.contains(&kind)) {
                    let r = decode(file, rec, at)?;
                    if !f(&r) {
                        return Ok(());
                    }
                }
                at += size;
            }
        }
    }
    if !z.out.is_empty() {
        return Err(err(
            at,
            ErrorKind::Truncated("record inside compressed data"),
        ));
    }
    Ok(())
}

/// The type and size of the record at `at`, checked to be a whole record before `end`.
fn record_header(data: &[u8], at: usize, end: usize) -> Result<(u32, usize), Error> {
    let hdr = Bytes { data, base: 0 };
    if at + 8 > end {
        return Err(err(at, ErrorKind::Truncated("record header")));
    }
    let kind = hdr.u32(at, "record header")?;
    let size = hdr.u16(at + 6, "record header")? as usize;
    if size < 8 {
        return Err(err(
            at + 6,
            ErrorKind::Invalid {
                what: "record size",
                value: size as u64,
            },
        ));
    }
    if at + size > end {
        return Err(err(at, ErrorKind::Truncated("record")));
    }
    Ok((kind, size))
}

/// Cut the data section into about `parts` ranges of similar size that start and end at record
/// boundaries, reading record headers only, and decoding on the way the records whose type is in
/// `only` (for `f`); `done` gets each range once its headers have been read. `None` when the
/// records cannot be read in pieces (compressed records continue one zstd stream across
/// records; `f` may have seen some records by then). Errors as [`walk`] reports them.
pub(super) fn split(
    file: &PerfFile<'_>,
    parts: usize,
    only: &[u32],
    f: &mut dyn FnMut(&Record<'_>),
    done: &dyn Fn(std::ops::Range<usize>),
) -> Result<Option<Vec<std::ops::Range<usize>>>, Error> {
    let data = file.data;
    let range = file.data_section.range(data.len(), "data section")?;
    let target = (range.len() / parts.max(1)).max(1);
    let mut out = Vec::with_capacity(parts + 1);
    let mut start = range.start;
    let mut at = range.start;
    let hdr = Bytes { data, base: 0 };
    while at < range.end {
        let (kind, size) = record_header(data, at, range.end)?;
        let mut next = at + size;
        match kind {
            rt::COMPRESSED | rt::COMPRESSED2 => return Ok(None),
            rt::AUXTRACE => {
                let aux = hdr.u64(at + 8, "auxtrace record")?;
                next = usize::try_from(aux)
                    .ok()
                    .and_then(|a| next.checked_add(a))
                    .filter(|&a| a <= range.end)
                    .ok_or_else(|| err(at, ErrorKind::Truncated("auxtrace data")))?;
            }
            _ if only.contains(&kind) => f(&decode(file, &data[at..at + size], at)?),
            _ => {}
        }
        at = next;
        if at - start >= target {
            done(start..at);
            out.push(start..at);
            start = at;
        }
    }
    if start < range.end || out.is_empty() {
        done(start..range.end);
        out.push(start..range.end);
    }
    Ok(Some(out))
}

/// Streaming zstd state across `PERF_RECORD_COMPRESSED` records: perf compresses the record stream as one
/// zstd stream that is flushed (not ended) per record, so records continue across chunks and the decoder
/// must keep its state (libzstd's streaming decoder; a frame-at-a-time decoder cannot release the bytes of
/// an unfinished frame's window).
#[derive(Default)]
struct Decompressor {
    dec: Option<zstd::stream::raw::Decoder<'static>>,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl Decompressor {
    fn feed(&mut self, payload: &[u8], at: usize) -> Result<(), Error> {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        let zerr = |e: std::io::Error| err(at, ErrorKind::Decompress(e.to_string()));
        if self.dec.is_none() {
            self.dec = Some(zstd::stream::raw::Decoder::new().map_err(zerr)?);
            self.buf = vec![0u8; 1 << 20];
        }
        let Some(dec) = self.dec.as_mut() else {
            return Ok(());
        };
        let start_len = self.out.len();
        let mut input = InBuffer::around(payload);
        loop {
            let mut output = OutBuffer::around(&mut self.buf[..]);
            dec.run(&mut input, &mut output).map_err(zerr)?;
            let n = output.pos();
            self.out.extend_from_slice(&self.buf[..n]);
            if self.out.len() - start_len > MAX_DECOMPRESSED_PER_RECORD {
                return Err(err(
                    at,
                    ErrorKind::Decompress("decompressed chunk larger than 256 MiB".into()),
                ));
            }
            if input.pos() >= payload.len() && n < self.buf.len() {
                return Ok(());
            }
            if n == 0 && input.pos() >= payload.len() {
                return Ok(());
            }
        }
    }
}

/// Find the attribute of a sample / record.
fn attr_for_sample(file: &PerfFile<'_>, body: &[u8], at: usize) -> Result<usize, Error> {
    if file.attrs.len() == 1 {
        return Ok(0);
    }
    let a0 = &file.attrs[0];
    let b = Bytes {
        data: body,
        base: at + 8,
    };
    let id = if a0.sample_type & st::IDENTIFIER != 0 {
        b.u64(0, "sample identifier")?
    } else if a0.sample_type & st::ID != 0 {
        let pos = [st::IP, st::TID, st::TIME, st::ADDR]
            .iter()
            .filter(|&&x| a0.sample_type & x != 0)
            .count()
            * 8;
        b.u64(pos, "sample id")?
    } else {
        return Ok(0);
    };
    file.attr_index_for_id(id)
        .ok_or_else(|| err(at, ErrorKind::UnknownId(id)))
}

fn attr_for_other(file: &PerfFile<'_>, body: &[u8]) -> usize {
    if file.attrs.len() == 1 {
        return 0;
    }
    let a0 = &file.attrs[0];
    if a0.sample_id_all() && a0.sample_type & st::IDENTIFIER != 0 && body.len() >= 8 {
        let id = u64::from_le_bytes(body[body.len() - 8..].try_into().unwrap_or([0; 8]));
        return file.attr_index_for_id(id).unwrap_or(0);
    }
    0
}

fn sample_id(file: &PerfFile<'_>, body: &[u8], at: usize) -> Result<SampleId, Error> {
    let attr = &file.attrs[attr_for_other(file, body)];
    let n = attr.sample_id_size();
    if n == 0 {
        return Ok(SampleId::default());
    }
    let start = body
        .len()
        .checked_sub(n)
        .ok_or_else(|| err(at, ErrorKind::Truncated("sample_id trailer")))?;
    let b = Bytes {
        data: &body[start..],
        base: at + 8 + start,
    };
    let mut s = SampleId::default();
    let mut p = 0;
    let t = attr.sample_type;
    if t & st::TID != 0 {
        s.pid = Some(b.u32(p, "sample_id")?);
        s.tid = Some(b.u32(p + 4, "sample_id")?);
        p += 8;
    }
    if t & st::TIME != 0 {
        s.time = Some(b.u64(p, "sample_id")?);
        p += 8;
    }
    if t & st::ID != 0 {
        s.id = Some(b.u64(p, "sample_id")?);
        p += 8;
    }
    if t & st::STREAM_ID != 0 {
        p += 8;
    }
    if t & st::CPU != 0 {
        s.cpu = Some(b.u32(p, "sample_id")?);
        p += 8;
    }
    if t & st::IDENTIFIER != 0 {
        s.id = Some(b.u64(p, "sample_id")?);
    }
    Ok(s)
}

fn cstr(b: &[u8]) -> &[u8] {
    &b[..memchr::memchr(0, b).unwrap_or(b.len())]
}

fn decode<'a>(file: &PerfFile<'_>, rec: &'a [u8], at: usize) -> Result<Record<'a>, Error> {
    let kind = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
    let misc = u16::from_le_bytes([rec[4], rec[5]]);
    let body = &rec[8..];
    let b = Bytes {
        data: body,
        base: at + 8,
    };
    Ok(match kind {
        rt::SAMPLE => Record::Sample(decode_sample(file, body, misc, at)?),
        rt::MMAP | rt::MMAP2 => {
            let sid = sample_id(file, body, at)?;
            let trailer = file.attrs[attr_for_other(file, body)].sample_id_size();
            let end = body.len().saturating_sub(trailer);
            let (build_id, prot, name_at) = if kind == rt::MMAP2 {
                let bid = if misc & (1 << 14) != 0 {
                    let n = (b.slice(32, 1, "mmap2 build-id size")?[0] as usize).min(20);
                    Some(b.slice(36, n, "mmap2 build-id")?)
                } else {
                    None
                };
                (bid, Some(b.u32(56, "mmap2 prot")?), 64)
            } else {
                (None, None, 32)
            };
            let name = body
                .get(name_at..end.max(name_at))
                .ok_or_else(|| err(at, ErrorKind::Truncated("mmap file name")))?;
            Record::Mmap(Mmap {
                pid: b.u32(0, "mmap")?,
                tid: b.u32(4, "mmap")?,
                start: b.u64(8, "mmap")?,
                len: b.u64(16, "mmap")?,
                pgoff: b.u64(24, "mmap")?,
                filename: cstr(name),
                build_id,
                prot,
                executable: misc & (1 << 13) == 0,
                is_mmap2: kind == rt::MMAP2,
                sample_id: sid,
            })
        }
        rt::COMM => Record::Comm {
            pid: b.u32(0, "comm")?,
            tid: b.u32(4, "comm")?,
            name: cstr(body.get(8..).unwrap_or(&[])),
            exec: misc & (1 << 13) != 0,
            sample_id: sample_id(file, body, at)?,
        },
        rt::FORK | rt::EXIT => {
            let t = TaskEvent {
                pid: b.u32(0, "task event")?,
                ppid: b.u32(4, "task event")?,
                tid: b.u32(8, "task event")?,
                ptid: b.u32(12, "task event")?,
                time: b.u64(16, "task event")?,
                sample_id: sample_id(file, body, at)?,
            };
            if kind == rt::FORK {
                Record::Fork(t)
            } else {
                Record::Exit(t)
            }
        }
        rt::LOST => Record::Lost {
            id: b.u64(0, "lost")?,
            lost: b.u64(8, "lost")?,
            sample_id: sample_id(file, body, at)?,
        },
        rt::LOST_SAMPLES => Record::LostSamples {
            lost: b.u64(0, "lost samples")?,
        },
        _ => Record::Other { kind, misc, body },
    })
}

fn decode_sample<'a>(
    file: &PerfFile<'_>,
    body: &'a [u8],
    misc: u16,
    at: usize,
) -> Result<Sample<'a>, Error> {
    let attr_index = attr_for_sample(file, body, at)?;
    let attr = &file.attrs[attr_index];
    let t = attr.sample_type;
    let b = Bytes {
        data: body,
        base: at + 8,
    };
    let mut p = 0usize;
    let mut s = Sample {
        attr_index,
        misc,
        ip: None,
        pid: None,
        tid: None,
        time: None,
        addr: None,
        id: None,
        stream_id: None,
        cpu: None,
        period: None,
        callchain: &[],
        branch_stack: None,
    };
    let next = |p: &mut usize| -> Result<u64, Error> {
        let v = b.u64(*p, "sample")?;
        *p += 8;
        Ok(v)
    };
    if t & st::IDENTIFIER != 0 {
        s.id = Some(next(&mut p)?);
    }
    if t & st::IP != 0 {
        s.ip = Some(next(&mut p)?);
    }
    if t & st::TID != 0 {
        let v = next(&mut p)?;
        s.pid = Some(v as u32);
        s.tid = Some((v >> 32) as u32);
    }
    if t & st::TIME != 0 {
        s.time = Some(next(&mut p)?);
    }
    if t & st::ADDR != 0 {
        s.addr = Some(next(&mut p)?);
    }
    if t & st::ID != 0 {
        s.id = Some(next(&mut p)?);
    }
    if t & st::STREAM_ID != 0 {
        s.stream_id = Some(next(&mut p)?);
    }
    if t & st::CPU != 0 {
        s.cpu = Some(next(&mut p)? as u32);
    }
    if t & st::PERIOD != 0 {
        s.period = Some(next(&mut p)?);
    }
    if t & st::READ != 0 {
        let rf = attr.read_format;
        let per_value =
            1 + usize::from(rf & read_format::ID != 0) + usize::from(rf & read_format::LOST != 0);
        let times = usize::from(rf & read_format::TOTAL_TIME_ENABLED != 0)
            + usize::from(rf & read_format::TOTAL_TIME_RUNNING != 0);
        let words = if rf & read_format::GROUP != 0 {
            let nr = next(&mut p)?;
            let nr = usize::try_from(nr)
                .ok()
                .filter(|&n| n <= body.len() / 8)
                .ok_or_else(|| {
                    err(
                        at,
                        ErrorKind::Invalid {
                            what: "read group size",
                            value: nr,
                        },
                    )
                })?;
            times + nr * per_value
        } else {
            per_value + times
        };
        p = p
            .checked_add(words * 8)
            .filter(|&e| e <= body.len())
            .ok_or_else(|| err(at, ErrorKind::Truncated("sample read values")))?;
    }
    if t & st::CALLCHAIN != 0 {
        let nr = next(&mut p)?;
        let n = usize::try_from(nr)
            .ok()
            .and_then(|n| n.checked_mul(8))
            .ok_or_else(|| {
                err(
                    at,
                    ErrorKind::Invalid {
                        what: "callchain length",
                        value: nr,
                    },
                )
            })?;
        s.callchain = b.slice(p, n, "sample callchain")?;
        p += n;
    }
    if t & st::RAW != 0 {
        let n = b.u32(p, "sample raw size")? as usize;
        b.slice(p + 4, n, "sample raw data")?;
        p += 4 + n;
    }
    if t & st::BRANCH_STACK != 0 {
        let nr = next(&mut p)?;
        let hw_idx = if attr.branch_sample_type & branch_sample_type::HW_INDEX != 0 {
            Some(next(&mut p)?)
        } else {
            None
        };
        let n = usize::try_from(nr)
            .ok()
            .and_then(|n| n.checked_mul(24))
            .ok_or_else(|| {
                err(
                    at,
                    ErrorKind::Invalid {
                        what: "branch stack length",
                        value: nr,
                    },
                )
            })?;
        let entries = b.slice(p, n, "sample branch stack")?;
        p += n;
        if attr.branch_sample_type & branch_sample_type::COUNTERS != 0 {
            p += n / 3;
        }
        s.branch_stack = Some(BranchStack { hw_idx, entries });
    }
    // Later fields (regs, user stack, weight, ...) are not needed; the record size bounds them.
    let _ = p;
    Ok(s)
}
