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
    /// The file's metadata when it was mapped (from the descriptor that mapped it).
    metadata: std::fs::Metadata,
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
        let metadata = file.metadata().map_err(io)?;
        let len = metadata.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the map is read-only and pcmap never writes to its inputs; the documented
            // hazard (another process truncating the file) is shared by every mmap-based reader.
            Some(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
        };
        Ok(MappedFile {
            path,
            map,
            metadata,
        })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Tell the kernel the map will be read front to back (`MADV_SEQUENTIAL`: read ahead
    /// aggressively, drop pages behind). Only a hint; failures are ignored.
    pub fn advise_sequential(&self) {
        if let Some(map) = &self.map {
            let _ = map.advise(memmap2::Advice::Sequential);
        }
    }

    /// Drop the pages of `range` (byte offsets in the file) from this process's resident set
    /// (`MADV_DONTNEED`) once they have been read; touching them again re-reads the file. Lets
    /// a streaming reader of a huge file keep its memory small. Only a hint; failures and
    /// out-of-range requests are ignored.
    pub fn release(&self, range: std::ops::Range<usize>) {
        let Some(map) = &self.map else { return };
        if range.start >= range.end || range.end > map.len() {
            return;
        }
        // SAFETY: the map is a read-only shared file mapping, never written through: DONTNEED only
        // drops clean page-cache pages from this process, and reading them again yields the file's
        // bytes, so no reference into the map observes a change.
        let _ = unsafe {
            map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                range.start,
                range.end - range.start,
            )
        };
    }

    /// [`Self::release`] the whole pages of `bytes`, when they are part of this map (bytes
    /// elsewhere, such as a decompressed copy of a section, are ignored). Only pages wholly
    /// inside `bytes` go: a neighbouring page may still be in use (if it is not, keeping it costs
    /// at most a page at each end).
    pub fn release_bytes(&self, bytes: &[u8]) {
        const PAGE: usize = 4096;
        let map = self.bytes().as_ptr() as usize;
        let Some(start) = (bytes.as_ptr() as usize).checked_sub(map) else {
            return;
        };
        let end = start + bytes.len();
        if end > self.bytes().len() {
            return;
        }
        let (first, last) = (start.div_ceil(PAGE) * PAGE, end / PAGE * PAGE);
        if first < last {
            self.release(first..last);
        }
    }

    /// The path the file was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's metadata as it was when mapped, read from the descriptor that mapped it (not
    /// from the path, which may name another file by now).
    pub fn metadata(&self) -> &std::fs::Metadata {
        &self.metadata
    }
}

impl std::ops::Deref for MappedFile {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::MappedFile;

    /// Released pages read back as the file's bytes (the kernel faults them in again), whole
    /// or partial pages alike; bytes that are not part of the map are ignored.
    #[test]
    fn released_pages_read_back_unchanged() {
        let path = std::env::temp_dir().join(format!(
            "pcmap-mapped-release-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let data: Vec<u8> = (0..5 * 4096u32 + 123)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let file = MappedFile::open(&path).unwrap();
        assert!(file.bytes() == &data[..]);
        file.release_bytes(&file.bytes()[100..4 * 4096 + 5]);
        assert!(file.bytes() == &data[..], "after releasing part of the map");
        file.release_bytes(file.bytes());
        file.release_bytes(&data);
        file.release(0..file.bytes().len());
        file.release(0..usize::MAX);
        assert!(file.bytes() == &data[..], "after releasing the whole map");
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }
}
