//! BTF kind numbers and the `info` word.

/// A BTF kind number (bits 24-30 of `btf_type.info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind(pub u8);

#[allow(missing_docs)]
impl Kind {
    pub const UNKN: Kind = Kind(0);
    pub const INT: Kind = Kind(1);
    pub const PTR: Kind = Kind(2);
    pub const ARRAY: Kind = Kind(3);
    pub const STRUCT: Kind = Kind(4);
    pub const UNION: Kind = Kind(5);
    pub const ENUM: Kind = Kind(6);
    pub const FWD: Kind = Kind(7);
    pub const TYPEDEF: Kind = Kind(8);
    pub const VOLATILE: Kind = Kind(9);
    pub const CONST: Kind = Kind(10);
    pub const RESTRICT: Kind = Kind(11);
    pub const FUNC: Kind = Kind(12);
    pub const FUNC_PROTO: Kind = Kind(13);
    pub const VAR: Kind = Kind(14);
    pub const DATASEC: Kind = Kind(15);
    pub const FLOAT: Kind = Kind(16);
    pub const DECL_TAG: Kind = Kind(17);
    pub const TYPE_TAG: Kind = Kind(18);
    pub const ENUM64: Kind = Kind(19);
    /// Location of one parameter (Oct-2025 RFC and 2026 revision).
    pub const LOC_PARAM: Kind = Kind(20);
    /// The parameter locations of one site.
    pub const LOC_PROTO: Kind = Kind(21);
    /// The sites of one code section.
    pub const LOCSEC: Kind = Kind(22);
}

impl Kind {
    /// The name bpftool prints for this kind.
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 23] = [
            "UNKNOWN",
            "INT",
            "PTR",
            "ARRAY",
            "STRUCT",
            "UNION",
            "ENUM",
            "FWD",
            "TYPEDEF",
            "VOLATILE",
            "CONST",
            "RESTRICT",
            "FUNC",
            "FUNC_PROTO",
            "VAR",
            "DATASEC",
            "FLOAT",
            "DECL_TAG",
            "TYPE_TAG",
            "ENUM64",
            "LOC_PARAM",
            "LOC_PROTO",
            "LOCSEC",
        ];
        NAMES.get(self.0 as usize).copied().unwrap_or("UNKNOWN")
    }

    /// Whether this is one of the standard kinds 1-19 that every libbpf since 1.0 understands.
    pub fn is_standard(self) -> bool {
        (1..=19).contains(&self.0)
    }

    /// Fixed payload bytes after the 12-byte `btf_type` and bytes per `vlen` element, for the
    /// standard kinds (`None` for the location kinds and unknown kinds: those need a layout).
    pub fn standard_layout(self) -> Option<(u32, u32)> {
        Some(match self.0 {
            0 => (0, 0),
            1 => (4, 0),
            2 => (0, 0),
            3 => (12, 0),
            4 | 5 => (0, 12),
            6 => (0, 8),
            7..=12 => (0, 0),
            13 => (0, 8),
            14 => (4, 0),
            15 => (0, 12),
            16 => (0, 0),
            17 => (4, 0),
            18 => (0, 0),
            19 => (0, 12),
            _ => return None,
        })
    }
}

/// Build an `info` word: vlen in bits 0-23, kind in bits 24-30, kind_flag in bit 31 (the 2026
/// encoding; for vlen < 65536 and kind < 32 it is bit-identical to the classic one).
pub fn info(kind: Kind, kflag: bool, vlen: u32) -> u32 {
    (u32::from(kflag) << 31) | (u32::from(kind.0 & 0x7f) << 24) | (vlen & 0x00ff_ffff)
}

/// Split an `info` word into (kind, kind_flag, vlen).
pub fn split_info(info: u32) -> (Kind, bool, u32) {
    (
        Kind(((info >> 24) & 0x7f) as u8),
        info >> 31 != 0,
        info & 0x00ff_ffff,
    )
}

/// Linkage of a `FUNC` (its vlen).
pub fn func_linkage_name(linkage: u32) -> &'static str {
    match linkage {
        0 => "static",
        1 => "global",
        2 => "extern",
        _ => "(unknown)",
    }
}

/// Linkage of a `VAR`.
pub fn var_linkage_name(linkage: u32) -> &'static str {
    match linkage {
        0 => "static",
        1 => "global",
        2 => "extern",
        _ => "(unknown)",
    }
}
