//! Memory-mapped input files.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A read-only memory map of a file. [`crate::Binary::parse`] borrows its bytes, so nothing
/// is copied: sections, symbol names and instruction bytes are slices of the map.
///
/// The file must not be truncated while it is mapped (that would be undefined behaviour for any
/// mmap reader); pcmap only maps inputs it reads.
#[derive(Debug)]
pub struct MappedFile {
    path: PathBuf,
    map: Option<memmap2::Mmap>,
}

impl MappedFile {
    /// Map `path` read-only. An empty file maps to an empty slice.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the map is read-only and pcmap never writes to its inputs; the documented
            // hazard (another process truncating the file) is shared by every mmap-based reader.
            Some(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
        };
        Ok(MappedFile { path, map })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// The path the file was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::ops::Deref for MappedFile {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}
