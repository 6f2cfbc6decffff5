//! The records every trace reader yields.

/// Why a trace has a gap (the reason codes of the PCMTRACE `GAP` record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GapReason {
    /// Instructions were filtered out on purpose (e.g. outside the main executable).
    Filtered,
    /// The decoder failed (an Intel PT decode error, an unparsable record).
    DecodeError,
    /// Trace data was lost (buffer overflow).
    LostData,
    /// Tracing was switched off for a while.
    TracingDisabled,
    /// A reason code this version does not know.
    Other(u64),
}

impl GapReason {
    /// The PCMTRACE reason code.
    pub fn code(self) -> u64 {
        match self {
            GapReason::Filtered => 0,
            GapReason::DecodeError => 1,
            GapReason::LostData => 2,
            GapReason::TracingDisabled => 3,
            GapReason::Other(c) => c,
        }
    }

    /// The reason for a PCMTRACE reason code.
    pub fn from_code(code: u64) -> Self {
        match code {
            0 => GapReason::Filtered,
            1 => GapReason::DecodeError,
            2 => GapReason::LostData,
            3 => GapReason::TracingDisabled,
            c => GapReason::Other(c),
        }
    }

    /// A short human-readable name.
    pub fn name(self) -> String {
        match self {
            GapReason::Filtered => "filtered".into(),
            GapReason::DecodeError => "decode error".into(),
            GapReason::LostData => "lost data".into(),
            GapReason::TracingDisabled => "tracing disabled".into(),
            GapReason::Other(c) => format!("gap reason {c}"),
        }
    }
}

/// One record of a trace, whatever its source format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// One executed instruction at `addr`.
    Insn {
        /// Load address.
        addr: u64,
    },
    /// `insns` consecutive instructions starting at `addr` (a translation block, a basic block).
    Block {
        /// Load address of the first instruction.
        addr: u64,
        /// Number of instructions, at least 1.
        insns: u32,
    },
    /// A gap: decode error, lost data, filtered code. Never merged with anything.
    Gap {
        /// Why.
        reason: GapReason,
        /// The source's message, if it had one.
        message: Option<String>,
    },
    /// The following records belong to thread `tid`.
    Thread {
        /// Thread id.
        tid: u64,
    },
    /// Time in nanoseconds of the next record.
    Timestamp {
        /// Nanoseconds (absolute).
        ns: u64,
    },
    /// A `key=value` metadata item (text header lines `# key=value`).
    Meta {
        /// Key.
        key: String,
        /// Value.
        value: String,
    },
}
