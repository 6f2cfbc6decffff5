//! Output files are written to a temporary file beside the target and renamed into place on
//! success, so a failure never leaves a partial file behind.
//!
//! Two exceptions keep the rename from doing harm: `-` is standard output, and an existing path
//! that is not a regular file (`/dev/null`, a FIFO, `/dev/stdout`) is written in place — renaming
//! a temporary file over `/dev/null` would replace the device with a regular file. Symbolic links
//! are resolved first, so the file they point to is replaced and the link is kept.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// An output file being written: commit it with [`AtomicFile::commit`]; dropping it without
/// committing removes the temporary file and leaves the target untouched.
pub struct AtomicFile {
    target: PathBuf,
    kind: Kind,
}

enum Kind {
    /// A temporary file in the target's directory, renamed over the target on commit.
    Temporary(tempfile::NamedTempFile),
    /// A special file (device, FIFO) written in place.
    InPlace(File),
}

impl AtomicFile {
    /// Start writing `path` (which must not be `-`).
    pub fn create(path: &Path) -> Result<Self> {
        let existing = std::fs::metadata(path).ok();
        if existing.as_ref().is_some_and(|m| !m.is_file()) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            return Ok(AtomicFile {
                target: path.to_path_buf(),
                kind: Kind::InPlace(file),
            });
        }
        let target = if existing.is_some() {
            std::fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))?
        } else {
            path.to_path_buf()
        };
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = tempfile::NamedTempFile::new_in(&dir)
            .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
        Ok(AtomicFile {
            target,
            kind: Kind::Temporary(tmp),
        })
    }

    /// The file to write to.
    pub fn file(&self) -> &File {
        match &self.kind {
            Kind::Temporary(t) => t.as_file(),
            Kind::InPlace(f) => f,
        }
    }

    /// Put the written file in place of the target.
    pub fn commit(self) -> Result<()> {
        match self.kind {
            Kind::Temporary(tmp) => {
                tmp.persist(&self.target).with_context(|| {
                    format!("renaming the temporary file to {}", self.target.display())
                })?;
            }
            Kind::InPlace(_) => {}
        }
        Ok(())
    }
}

/// Create `path` atomically: `fill` writes the whole content into a buffered writer; the file
/// appears under its name only if `fill` and the flush succeed. `-` means standard output.
pub fn write_atomic<F>(path: &Path, fill: F) -> Result<()>
where
    F: FnOnce(&mut dyn Write) -> Result<()>,
{
    if path.as_os_str() == "-" {
        let stdout = std::io::stdout();
        let mut w = BufWriter::with_capacity(1 << 20, stdout.lock());
        fill(&mut w)?;
        w.flush().context("writing to standard output")?;
        return Ok(());
    }
    let out = AtomicFile::create(path)?;
    {
        let mut w = BufWriter::with_capacity(1 << 20, out.file());
        fill(&mut w)?;
        w.flush()
            .with_context(|| format!("writing {}", path.display()))?;
    }
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_regular_files_and_keeps_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn failure_leaves_the_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "old").unwrap();
        let r = write_atomic(&path, |w| {
            w.write_all(b"partial")?;
            anyhow::bail!("input error")
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    #[test]
    fn special_files_are_written_in_place() {
        // /dev/null must stay a character device.
        use std::os::unix::fs::FileTypeExt;
        write_atomic(Path::new("/dev/null"), |w| Ok(w.write_all(b"discarded")?)).unwrap();
        assert!(
            std::fs::metadata("/dev/null")
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }
}
