//! A whole trace in memory: records split per thread, each thread's units interned into a table
//! of distinct units (an instruction or block address with its instruction count, or a gap).

use rustc_hash::FxHashMap;

use crate::format::{self, Format};
use crate::{GapReason, Record, TraceError};

/// A distinct unit of the instruction layer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Unit {
    /// `insns` consecutive instructions starting at `addr` (1 for a single instruction).
    Insn {
        /// Address of the first instruction.
        addr: u64,
        /// Instruction count, at least 1.
        insns: u32,
    },
    /// A gap: never merged with anything, counts no instructions.
    Gap {
        /// Why.
        reason: GapReason,
        /// The source's message.
        message: Option<String>,
    },
}

impl Unit {
    /// Instructions in the unit (0 for a gap).
    pub fn insns(&self) -> u64 {
        match self {
            Unit::Insn { insns, .. } => *insns as u64,
            Unit::Gap { .. } => 0,
        }
    }

    /// The address (0 for a gap).
    pub fn addr(&self) -> u64 {
        match self {
            Unit::Insn { addr, .. } => *addr,
            Unit::Gap { .. } => 0,
        }
    }

    /// Whether this is a gap.
    pub fn is_gap(&self) -> bool {
        matches!(self, Unit::Gap { .. })
    }
}

/// One thread's instruction layer.
#[derive(Debug, Clone, Default)]
pub struct ThreadTrace {
    /// Thread id, if the trace named one.
    pub tid: Option<u64>,
    /// Distinct units, in order of first appearance.
    pub units: Vec<Unit>,
    /// The unit sequence, as indices into `units`.
    pub ids: Vec<u32>,
    /// `(unit index, ns)`: the time of the unit at that index (non-decreasing).
    pub timestamps: Vec<(u64, u64)>,
    /// Total instructions.
    pub insns: u64,
    index: FxHashMap<Unit, u32>,
}

impl ThreadTrace {
    /// An empty thread.
    pub fn new(tid: Option<u64>) -> Self {
        ThreadTrace {
            tid,
            ..Default::default()
        }
    }

    /// Append a unit.
    pub fn push(&mut self, unit: Unit) -> Result<(), String> {
        let n = unit.insns();
        let next = self.units.len();
        let id = match self.index.get(&unit) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(next)
                    .ok()
                    .filter(|&i| i < crate::htr::MAX_DEFS)
                    .ok_or("too many distinct units in one thread")?;
                self.index.insert(unit.clone(), id);
                self.units.push(unit);
                id
            }
        };
        self.ids.push(id);
        self.insns += n;
        Ok(())
    }

    /// Record the time of the next unit.
    pub fn timestamp(&mut self, ns: u64) -> Result<(), String> {
        if let Some(&(_, last)) = self.timestamps.last()
            && ns < last
        {
            return Err(format!(
                "timestamp {ns} ns goes back in time (previous {last} ns in this thread)"
            ));
        }
        let at = self.ids.len() as u64;
        if let Some(l) = self.timestamps.last_mut()
            && l.0 == at
        {
            l.1 = ns;
            return Ok(());
        }
        self.timestamps.push((at, ns));
        Ok(())
    }

    /// The address sequence with gaps as 0 (lldb's instruction layer).
    pub fn addresses(&self) -> Vec<u64> {
        self.ids
            .iter()
            .map(|&i| self.units[i as usize].addr())
            .collect()
    }
}

/// A whole trace: threads in order of first appearance plus header metadata.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// The threads.
    pub threads: Vec<ThreadTrace>,
    /// `key=value` metadata.
    pub meta: Vec<(String, String)>,
    /// The format it was read from.
    pub format: Option<Format>,
}

/// Builds a [`Trace`] from records (usable as a reader sink).
#[derive(Debug, Default)]
pub struct TraceBuilder {
    trace: Trace,
    current: usize,
    by_tid: FxHashMap<Option<u64>, usize>,
}

impl TraceBuilder {
    /// A builder with no threads yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn thread(&mut self) -> &mut ThreadTrace {
        if self.trace.threads.is_empty() {
            self.trace.threads.push(ThreadTrace::new(None));
            self.by_tid.insert(None, 0);
            self.current = 0;
        }
        &mut self.trace.threads[self.current]
    }

    /// Add one record.
    pub fn push(&mut self, record: Record) -> Result<(), String> {
        match record {
            Record::Insn { addr } => self.thread().push(Unit::Insn { addr, insns: 1 }),
            Record::Block { addr, insns } => self.thread().push(Unit::Insn {
                addr,
                insns: insns.max(1),
            }),
            Record::Gap { reason, message } => self.thread().push(Unit::Gap { reason, message }),
            Record::Thread { tid } => {
                // Records before the first @tid that hold nothing are not a thread of their own.
                if self.trace.threads.len() == 1
                    && self.trace.threads[0].tid.is_none()
                    && self.trace.threads[0].ids.is_empty()
                {
                    self.trace.threads.clear();
                    self.by_tid.clear();
                }
                let n = self.trace.threads.len();
                let idx = *self.by_tid.entry(Some(tid)).or_insert(n);
                if idx == n {
                    self.trace.threads.push(ThreadTrace::new(Some(tid)));
                }
                self.current = idx;
                Ok(())
            }
            Record::Timestamp { ns } => self.thread().timestamp(ns),
            Record::Meta { key, value } => {
                self.trace.meta.push((key, value));
                Ok(())
            }
        }
    }

    /// The finished trace.
    pub fn finish(self) -> Trace {
        self.trace
    }
}

impl Trace {
    /// Detect the format of `data` and read it; `file` labels errors.
    pub fn read(data: &[u8], file: &str) -> Result<Trace, TraceError> {
        let mut b = TraceBuilder::new();
        let format = format::read(data, file, &mut |r| b.push(r))?;
        let mut t = b.finish();
        t.format = Some(format);
        Ok(t)
    }

    /// Total instructions over all threads.
    pub fn insns(&self) -> u64 {
        self.threads.iter().map(|t| t.insns).sum()
    }

    /// The records of this trace again (threads one after another), for the writers.
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        let meta = self.meta.iter().map(|(k, v)| Record::Meta {
            key: k.clone(),
            value: v.clone(),
        });
        let threads = self.threads.iter().flat_map(|t| {
            let tid = t.tid.map(|tid| Record::Thread { tid });
            let mut ts = t.timestamps.iter().peekable();
            let body = t.ids.iter().enumerate().flat_map(move |(i, &id)| {
                let mut out = Vec::with_capacity(2);
                while let Some(&&(at, ns)) = ts.peek() {
                    if at > i as u64 {
                        break;
                    }
                    out.push(Record::Timestamp { ns });
                    ts.next();
                }
                out.push(match &t.units[id as usize] {
                    Unit::Insn { addr, insns: 1 } => Record::Insn { addr: *addr },
                    Unit::Insn { addr, insns } => Record::Block {
                        addr: *addr,
                        insns: *insns,
                    },
                    Unit::Gap { reason, message } => Record::Gap {
                        reason: *reason,
                        message: message.clone(),
                    },
                });
                out
            });
            tid.into_iter().chain(body)
        });
        meta.chain(threads)
    }
}
