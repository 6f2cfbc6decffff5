//! A small perf.data writer for tests and fixtures: one `cycles` event with `PERF_SAMPLE_IP | TID | TIME
//! | PERIOD | BRANCH_STACK` (optionally with `hw_idx`), COMM/MMAP2/FORK/EXIT records and a `BUILD_ID`
//! feature section.
//!
//! Machines without an LBR-capable PMU cannot record branch stacks, so tests synthesize them here; every
//! file this writer produces is checked against `perf script -F pid,ip,brstack` in the test suite.

use super::{
    BranchEntry, branch_sample_type as bst, feature, record_type as rt, sample_type as st,
};

/// Options for [`Writer::new`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Record `hw_idx` in branch stacks (`PERF_SAMPLE_BRANCH_HW_INDEX`).
    pub hw_idx: bool,
    /// Record branch stacks at all (`PERF_SAMPLE_BRANCH_STACK`).
    pub branch_stack: bool,
    /// `sample_period`.
    pub sample_period: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            hw_idx: false,
            branch_stack: true,
            sample_period: 100_003,
        }
    }
}

/// One sample to write.
#[derive(Clone, Debug, Default)]
pub struct SampleSpec {
    /// Instruction pointer.
    pub ip: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Timestamp (ns).
    pub time: u64,
    /// Period.
    pub period: u64,
    /// Branch stack, newest first.
    pub branches: Vec<BranchEntry>,
    /// `hw_idx` (written only with [`Options::hw_idx`]).
    pub hw_idx: u64,
}

/// Accumulates records, then [`Writer::finish`] lays out the file.
#[derive(Debug)]
pub struct Writer {
    opts: Options,
    data: Vec<u8>,
    build_ids: Vec<(i32, Vec<u8>, Vec<u8>)>,
}

const ATTR_SIZE: usize = 128;
const SAMPLE_ID_ALL: u64 = 1 << 18;

fn push_header(out: &mut Vec<u8>, kind: u32, misc: u16, size: usize) {
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&misc.to_le_bytes());
    out.extend_from_slice(&(size as u16).to_le_bytes());
}

fn padded_name(name: &[u8], align: usize) -> Vec<u8> {
    let mut v = name.to_vec();
    v.push(0);
    while !v.len().is_multiple_of(align) {
        v.push(0);
    }
    v
}

impl Writer {
    /// A writer with `opts`.
    pub fn new(opts: Options) -> Self {
        Writer {
            opts,
            data: Vec::new(),
            build_ids: Vec::new(),
        }
    }

    fn sample_type(&self) -> u64 {
        st::IP
            | st::TID
            | st::TIME
            | st::PERIOD
            | if self.opts.branch_stack {
                st::BRANCH_STACK
            } else {
                0
            }
    }

    fn trailer(&mut self, pid: u32, tid: u32, time: u64) {
        self.data.extend_from_slice(&pid.to_le_bytes());
        self.data.extend_from_slice(&tid.to_le_bytes());
        self.data.extend_from_slice(&time.to_le_bytes());
    }

    /// `PERF_RECORD_COMM` (with `exec` set).
    pub fn comm(&mut self, pid: u32, tid: u32, name: &[u8], time: u64) {
        let n = padded_name(name, 8);
        push_header(&mut self.data, rt::COMM, 1 << 13 | 2, 8 + 8 + n.len() + 16);
        self.data.extend_from_slice(&pid.to_le_bytes());
        self.data.extend_from_slice(&tid.to_le_bytes());
        self.data.extend_from_slice(&n);
        self.trailer(pid, tid, time);
    }

    /// `PERF_RECORD_MMAP2` of an executable mapping (r-x, private).
    #[allow(clippy::too_many_arguments)]
    pub fn mmap2(
        &mut self,
        pid: u32,
        tid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        filename: &[u8],
        time: u64,
    ) {
        let n = padded_name(filename, 8);
        push_header(&mut self.data, rt::MMAP2, 2, 8 + 64 + n.len() + 16);
        for v in [u64::from(pid) | u64::from(tid) << 32, start, len, pgoff] {
            self.data.extend_from_slice(&v.to_le_bytes());
        }
        // maj, min, ino, ino_generation
        self.data.extend_from_slice(&[0u8; 24]);
        self.data.extend_from_slice(&5u32.to_le_bytes()); // PROT_READ | PROT_EXEC
        self.data.extend_from_slice(&2u32.to_le_bytes()); // MAP_PRIVATE
        self.data.extend_from_slice(&n);
        self.trailer(pid, tid, time);
    }

    /// `PERF_RECORD_FORK` or `PERF_RECORD_EXIT`.
    pub fn task(&mut self, exit: bool, pid: u32, ppid: u32, tid: u32, ptid: u32, time: u64) {
        push_header(
            &mut self.data,
            if exit { rt::EXIT } else { rt::FORK },
            0,
            8 + 24 + 16,
        );
        for v in [pid, ppid, tid, ptid] {
            self.data.extend_from_slice(&v.to_le_bytes());
        }
        self.data.extend_from_slice(&time.to_le_bytes());
        self.trailer(pid, tid, time);
    }

    /// `PERF_RECORD_SAMPLE`.
    pub fn sample(&mut self, s: &SampleSpec) {
        let mut size = 8 + 32;
        if self.opts.branch_stack {
            size += 8 + if self.opts.hw_idx { 8 } else { 0 } + 24 * s.branches.len();
        }
        push_header(&mut self.data, rt::SAMPLE, 2, size);
        for v in [
            s.ip,
            u64::from(s.pid) | u64::from(s.tid) << 32,
            s.time,
            s.period,
        ] {
            self.data.extend_from_slice(&v.to_le_bytes());
        }
        if self.opts.branch_stack {
            self.data
                .extend_from_slice(&(s.branches.len() as u64).to_le_bytes());
            if self.opts.hw_idx {
                self.data.extend_from_slice(&s.hw_idx.to_le_bytes());
            }
            for b in &s.branches {
                for v in [b.from, b.to, b.flags] {
                    self.data.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }

    /// An entry of the `BUILD_ID` feature section (user-space file).
    pub fn build_id(&mut self, pid: i32, build_id: &[u8], filename: &[u8]) {
        self.build_ids
            .push((pid, build_id.to_vec(), filename.to_vec()));
    }

    /// Lay out the file: header, attribute (+ one id), data section, feature table, `BUILD_ID`.
    pub fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data.len() + 4096);
        self.write_to(&mut out)
            .expect("writing to a Vec<u8> does not fail");
        out
    }

    /// [`Self::finish`] into `w`, without a second copy of the records (for files of gigabytes).
    pub fn write_to(self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        let attrs_off = 104usize;
        let ids_off = attrs_off + ATTR_SIZE + 16;
        let data_off = ids_off + 8;
        let data_size = self.data.len();
        let mut out = Vec::with_capacity(data_off + 4096);
        out.extend_from_slice(b"PERFILE2");
        for v in [
            104u64,
            (ATTR_SIZE + 16) as u64,
            attrs_off as u64,
            (ATTR_SIZE + 16) as u64,
            data_off as u64,
            data_size as u64,
            0,
            0,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let features: [u64; 4] = [1 << feature::BUILD_ID, 0, 0, 0];
        for f in features {
            out.extend_from_slice(&f.to_le_bytes());
        }
        // perf_event_attr
        let mut attr = vec![0u8; ATTR_SIZE];
        let put =
            |a: &mut Vec<u8>, off: usize, v: u64| a[off..off + 8].copy_from_slice(&v.to_le_bytes());
        attr[0..4].copy_from_slice(&0u32.to_le_bytes()); // PERF_TYPE_HARDWARE
        attr[4..8].copy_from_slice(&(ATTR_SIZE as u32).to_le_bytes());
        put(&mut attr, 8, 0); // PERF_COUNT_HW_CPU_CYCLES
        put(&mut attr, 16, self.opts.sample_period);
        put(&mut attr, 24, self.sample_type());
        put(&mut attr, 32, 0);
        // disabled | inherit | exclude_kernel | mmap | comm | enable_on_exec | task | sample_id_all | mmap2 | comm_exec
        let flags = 1
            | 1 << 1
            | 1 << 5
            | 1 << 8
            | 1 << 9
            | 1 << 12
            | 1 << 13
            | SAMPLE_ID_ALL
            | 1 << 23
            | 1 << 24;
        put(&mut attr, 40, flags);
        if self.opts.branch_stack {
            put(
                &mut attr,
                72,
                bst::USER | bst::ANY | if self.opts.hw_idx { bst::HW_INDEX } else { 0 },
            );
        }
        out.extend_from_slice(&attr);
        out.extend_from_slice(&(ids_off as u64).to_le_bytes());
        out.extend_from_slice(&8u64.to_le_bytes());
        out.extend_from_slice(&1u64.to_le_bytes()); // event id 1
        w.write_all(&out)?;
        w.write_all(&self.data)?;
        let data_end = out.len() + self.data.len();
        out.clear();
        // Feature table (one entry), then the BUILD_ID section.
        let mut bid = Vec::new();
        for (pid, id, name) in &self.build_ids {
            let n = padded_name(name, 64);
            let mut raw = [0u8; 24];
            let len = id.len().min(20);
            raw[..len].copy_from_slice(&id[..len]);
            raw[20] = len as u8;
            push_header(&mut bid, 0, 2 | 1 << 15, 8 + 4 + 24 + n.len());
            bid.extend_from_slice(&pid.to_le_bytes());
            bid.extend_from_slice(&raw);
            bid.extend_from_slice(&n);
        }
        let table_end = data_end + 16;
        out.extend_from_slice(&(table_end as u64).to_le_bytes());
        out.extend_from_slice(&(bid.len() as u64).to_le_bytes());
        out.extend_from_slice(&bid);
        w.write_all(&out)
    }
}
