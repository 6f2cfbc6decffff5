//! The basic-block-sections ("cc") profile, version 1, as clang 22 reads it through
//! `-fbasic-block-sections=list=FILE`: writer and reader.
//!
//! ```text
//! v1
//! f <name> [<alias>...]
//! c <bb_id> <bb_id> ...          one line per cluster; the first cluster starts with the entry block
//! g <bb>:<count>,<succ>:<count>,... <bb>:<count>,...     optional CFG with profile counts
//! h <bb>:<hexhash> ...           optional block hashes (for stale-profile matching)
//! ```
//! Clang's reader is strict: fields are separated by exactly one space, a `#` is a comment only
//! at the start of a line (an inline `# ...` is a parse error), and a block ID may appear in only
//! one cluster. The writer refuses input that would break these rules instead of emitting a file
//! clang rejects; the reader applies the same rules so tests can round-trip.

use std::io::{self, Write};

/// One node of a function's optional `g` (CFG) line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CfgNode {
    /// Block ID.
    pub bb_id: u32,
    /// Execution count of the block.
    pub count: u64,
    /// Successor block IDs with edge counts.
    pub successors: Vec<(u32, u64)>,
}

/// The profile of one function.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CcFunction {
    /// The function name, then its aliases (all on the `f` line).
    pub names: Vec<String>,
    /// Clusters of block IDs, one `c` line each.
    pub clusters: Vec<Vec<u32>>,
    /// Optional CFG (`g` line); empty = no line.
    pub cfg: Vec<CfgNode>,
    /// Optional block hashes (`h` line); empty = no line.
    pub hashes: Vec<(u32, u64)>,
}

/// A whole cc profile.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CcProfile {
    /// Functions in file order.
    pub functions: Vec<CcFunction>,
}

/// Why a profile cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CcProfileError {
    /// A function name that clang could not read back (empty, or containing whitespace).
    #[error("function #{index}: name {name:?} is empty or contains whitespace")]
    BadName {
        /// Index of the function in the profile.
        index: usize,
        /// The offending name.
        name: String,
    },
    /// A function without a name or without a cluster.
    #[error("function #{index} ({name}): {what}")]
    Incomplete {
        /// Index of the function in the profile.
        index: usize,
        /// Its first name (or empty).
        name: String,
        /// What is missing.
        what: &'static str,
    },
    /// A block ID listed twice in the clusters of one function (clang: "duplicate basic block id found").
    #[error("function #{index} ({name}): block {bb_id} is listed in more than one place")]
    DuplicateBlock {
        /// Index of the function.
        index: usize,
        /// Its name.
        name: String,
        /// The repeated block ID.
        bb_id: u32,
    },
    /// A syntax error while reading, at `line:column` (1-based).
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was expected.
        message: String,
    },
    /// I/O error from the underlying writer.
    #[error(transparent)]
    Io(#[from] io::Error),
}

fn check(profile: &CcProfile) -> Result<(), CcProfileError> {
    for (index, f) in profile.functions.iter().enumerate() {
        let first = f.names.first().cloned().unwrap_or_default();
        if f.names.is_empty() {
            return Err(CcProfileError::Incomplete {
                index,
                name: first,
                what: "no name",
            });
        }
        for n in &f.names {
            if n.is_empty() || n.chars().any(char::is_whitespace) {
                return Err(CcProfileError::BadName {
                    index,
                    name: n.clone(),
                });
            }
        }
        if f.clusters.is_empty() || f.clusters.iter().any(Vec::is_empty) {
            return Err(CcProfileError::Incomplete {
                index,
                name: first,
                what: "an empty cluster list or cluster",
            });
        }
        let mut seen: Vec<u32> = f.clusters.iter().flatten().copied().collect();
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(CcProfileError::DuplicateBlock {
                index,
                name: first,
                bb_id: w[0],
            });
        }
    }
    Ok(())
}

/// Write `profile` in version 1 syntax. The profile is validated first, so nothing is written
/// when it is invalid.
pub fn write_cc_profile(profile: &CcProfile, w: &mut dyn Write) -> Result<(), CcProfileError> {
    check(profile)?;
    w.write_all(b"v1\n")?;
    for f in &profile.functions {
        w.write_all(b"f")?;
        for n in &f.names {
            write!(w, " {n}")?;
        }
        w.write_all(b"\n")?;
        for c in &f.clusters {
            w.write_all(b"c")?;
            for id in c {
                write!(w, " {id}")?;
            }
            w.write_all(b"\n")?;
        }
        if !f.cfg.is_empty() {
            w.write_all(b"g")?;
            for node in &f.cfg {
                write!(w, " {}:{}", node.bb_id, node.count)?;
                for (s, c) in &node.successors {
                    write!(w, ",{s}:{c}")?;
                }
            }
            w.write_all(b"\n")?;
        }
        if !f.hashes.is_empty() {
            w.write_all(b"h")?;
            for (id, h) in &f.hashes {
                write!(w, " {id}:{h:x}")?;
            }
            w.write_all(b"\n")?;
        }
    }
    Ok(())
}

/// Read a version 1 profile (the subset this crate writes: `v1`, `f`, `c`, `g`, `h`, comment and
/// blank lines; `m`, `p`, `t` and v0 profiles are rejected as unsupported).
pub fn read_cc_profile(text: &str) -> Result<CcProfile, CcProfileError> {
    let mut profile = CcProfile::default();
    let mut saw_version = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |column: usize, message: String| CcProfileError::Syntax {
            line: line_no,
            column,
            message,
        };
        let line = raw.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if !saw_version {
            if line != "v1" {
                return Err(err(1, format!("expected `v1`, found {line:?}")));
            }
            saw_version = true;
            continue;
        }
        let (spec, rest) = match line.split_once(' ') {
            Some((s, r)) => (s, r),
            None => (line, ""),
        };
        // Fields: split on single spaces; an empty field means a double space.
        let mut fields: Vec<(usize, &str)> = Vec::new();
        let mut col = spec.len() + 2;
        if !rest.is_empty() {
            for f in rest.split(' ') {
                if f.is_empty() {
                    return Err(err(col, "empty field (double space)".into()));
                }
                fields.push((col, f));
                col += f.len() + 1;
            }
        }
        let num = |col: usize, s: &str| -> Result<u64, CcProfileError> {
            s.parse::<u64>()
                .map_err(|_| err(col, format!("expected a decimal number, found {s:?}")))
        };
        let id = |col: usize, s: &str| -> Result<u32, CcProfileError> {
            s.parse::<u32>()
                .map_err(|_| err(col, format!("expected a block id, found {s:?}")))
        };
        match spec {
            "f" => {
                if fields.is_empty() {
                    return Err(err(2, "expected a function name".into()));
                }
                profile.functions.push(CcFunction {
                    names: fields.iter().map(|(_, s)| s.to_string()).collect(),
                    ..CcFunction::default()
                });
            }
            "c" | "g" | "h" => {
                let Some(func) = profile.functions.last_mut() else {
                    return Err(err(1, format!("`{spec}` line before any `f` line")));
                };
                match spec {
                    "c" => {
                        let mut cluster = Vec::with_capacity(fields.len());
                        for &(c, s) in &fields {
                            let v = id(c, s)?;
                            if func
                                .clusters
                                .iter()
                                .flatten()
                                .chain(cluster.iter())
                                .any(|&x| x == v)
                            {
                                return Err(err(c, format!("duplicate basic block id {v}")));
                            }
                            cluster.push(v);
                        }
                        if cluster.is_empty() {
                            return Err(err(2, "expected block ids".into()));
                        }
                        func.clusters.push(cluster);
                    }
                    "g" => {
                        for &(c, s) in &fields {
                            let mut node: Option<CfgNode> = None;
                            let mut ccol = c;
                            for part in s.split(',') {
                                let (a, b) = part.split_once(':').ok_or_else(|| {
                                    err(ccol, format!("expected `id:count`, found {part:?}"))
                                })?;
                                let (a, b) = (id(ccol, a)?, num(ccol + a.len() + 1, b)?);
                                match node.as_mut() {
                                    None => {
                                        node = Some(CfgNode {
                                            bb_id: a,
                                            count: b,
                                            successors: Vec::new(),
                                        })
                                    }
                                    Some(n) => n.successors.push((a, b)),
                                }
                                ccol += part.len() + 1;
                            }
                            func.cfg.extend(node);
                        }
                    }
                    _ => {
                        for &(c, s) in &fields {
                            let (a, b) = s.split_once(':').ok_or_else(|| {
                                err(c, format!("expected `id:hash`, found {s:?}"))
                            })?;
                            let h = u64::from_str_radix(b, 16).map_err(|_| {
                                err(c + a.len() + 1, format!("expected a hex hash, found {b:?}"))
                            })?;
                            func.hashes.push((id(c, a)?, h));
                        }
                    }
                }
            }
            other => return Err(err(1, format!("unsupported specifier {other:?}"))),
        }
    }
    if !saw_version {
        return Err(CcProfileError::Syntax {
            line: 1,
            column: 1,
            message: "empty profile (no `v1` line)".into(),
        });
    }
    Ok(profile)
}
