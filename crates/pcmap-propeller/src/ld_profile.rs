//! The linker symbol-ordering file (`ld.lld --symbol-ordering-file=FILE`): one symbol per line,
//! in the order the sections that define them should be placed.
//!
//! For a function laid out with basic-block sections the symbols are `name` (the cluster with
//! the entry block), `name.__part.<i>` (cluster `i` of the cc profile, `i >= 1`) and `name.cold`
//! (the blocks no cluster lists). Only symbols that will exist are written: lld warns about
//! every listed symbol it cannot find.

use std::io::{self, Write};

/// A symbol name that cannot be written as a line of the ordering file.
#[derive(Debug, thiserror::Error)]
pub enum LdProfileError {
    /// An empty name or one with whitespace.
    #[error("symbol #{index}: {name:?} is empty or contains whitespace")]
    BadSymbol {
        /// Position in the list.
        index: usize,
        /// The name.
        name: String,
    },
    /// I/O error from the underlying writer.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The symbol of cluster `cluster` of function `name` (`name` itself for cluster 0).
pub fn cluster_symbol(name: &str, cluster: usize) -> String {
    if cluster == 0 {
        name.to_string()
    } else {
        format!("{name}.__part.{cluster}")
    }
}

/// The symbol of the cold part of function `name`.
pub fn cold_symbol(name: &str) -> String {
    format!("{name}.cold")
}

/// Write the symbols, one per line. Validated first: nothing is written on error.
pub fn write_ld_profile(symbols: &[String], w: &mut dyn Write) -> Result<(), LdProfileError> {
    if let Some((index, name)) = symbols
        .iter()
        .enumerate()
        .find(|(_, s)| s.is_empty() || s.chars().any(char::is_whitespace))
    {
        return Err(LdProfileError::BadSymbol {
            index,
            name: name.clone(),
        });
    }
    for s in symbols {
        w.write_all(s.as_bytes())?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Read an ordering file: one symbol per line, surrounding whitespace trimmed, blank lines skipped.
pub fn read_ld_profile(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}
