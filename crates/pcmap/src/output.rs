//! Output files are written so that a failure — an error, a full disk, or the process being
//! killed — never leaves a partial file behind and never damages the file already at that path.
//!
//! On Linux the content goes to an unnamed file in the target's directory (`O_TMPFILE`): it has no
//! name until the very end, when it is linked under a temporary name and renamed over the target,
//! so even `SIGKILL` leaves nothing behind. Where unnamed files are not available (other systems,
//! file systems without `O_TMPFILE`, no `/proc`), a named temporary file beside the target is used
//! and removed on error.
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
    /// An unnamed file (`O_TMPFILE`) in the target's directory, linked and renamed on commit.
    Unnamed { file: File, dir: PathBuf },
    /// A temporary file in the target's directory, renamed over the target on commit.
    Temporary(tempfile::NamedTempFile),
    /// A special file (device, FIFO) written in place.
    InPlace(File),
}

/// An unnamed file in `dir`, or `None` where the system or file system has no `O_TMPFILE` or
/// `/proc/self/fd` (needed to give it a name at the end).
#[cfg(target_os = "linux")]
fn unnamed_file_in(dir: &Path) -> Option<std::io::Result<File>> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    if !Path::new("/proc/self/fd").is_dir() {
        return None;
    }
    match openat(
        CWD,
        dir,
        OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    ) {
        Ok(fd) => Some(Ok(File::from(fd))),
        // No O_TMPFILE on this kernel or file system: fall back to a named temporary file.
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL) => {
            None
        }
        Err(e) => Some(Err(e.into())),
    }
}

#[cfg(not(target_os = "linux"))]
fn unnamed_file_in(_dir: &Path) -> Option<std::io::Result<File>> {
    None
}

/// Give the unnamed `file` a temporary name in `dir` and rename it over `target`.
#[cfg(target_os = "linux")]
fn link_unnamed(file: &File, dir: &Path, target: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;

    use rustix::fs::{AtFlags, CWD, linkat};
    let source = format!("/proc/self/fd/{}", file.as_raw_fd());
    let stem = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for attempt in 0u32.. {
        let name = dir.join(format!(".{stem}.pcmap-{}-{attempt}", std::process::id()));
        match linkat(CWD, source.as_str(), CWD, &name, AtFlags::SYMLINK_FOLLOW) {
            Ok(()) => {
                return std::fs::rename(&name, target).inspect_err(|_| {
                    let _ = std::fs::remove_file(&name);
                });
            }
            Err(rustix::io::Errno::EXIST) if attempt < 1000 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    unreachable!("the loop returns")
}

#[cfg(not(target_os = "linux"))]
fn link_unnamed(_file: &File, _dir: &Path, _target: &Path) -> std::io::Result<()> {
    unreachable!("unnamed files are only made on Linux")
}

impl AtomicFile {
    /// Start writing `path` (which must not be `-`).
    pub fn create(path: &Path) -> Result<Self> {
        let existing = std::fs::metadata(path).ok();
        if existing.as_ref().is_some_and(|m| m.is_dir()) {
            anyhow::bail!(
                "the output path {} is a directory: give the name of a file to write",
                path.display()
            );
        }
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
        let creating = || {
            format!(
                "creating {} (in directory {})",
                path.display(),
                dir.display()
            )
        };
        if let Some(file) = unnamed_file_in(&dir) {
            let file = file.with_context(creating)?;
            return Ok(AtomicFile {
                target,
                kind: Kind::Unnamed { file, dir },
            });
        }
        let tmp = tempfile::NamedTempFile::new_in(&dir).with_context(creating)?;
        Ok(AtomicFile {
            target,
            kind: Kind::Temporary(tmp),
        })
    }

    /// The file to write to.
    pub fn file(&self) -> &File {
        match &self.kind {
            Kind::Unnamed { file, .. } => file,
            Kind::Temporary(t) => t.as_file(),
            Kind::InPlace(f) => f,
        }
    }

    /// Put the written file in place of the target.
    pub fn commit(self) -> Result<()> {
        let target = self.target;
        match self.kind {
            Kind::Unnamed { file, dir } => link_unnamed(&file, &dir, &target)
                .with_context(|| format!("putting the new file in place of {}", target.display())),
            Kind::Temporary(tmp) => tmp
                .persist(&target)
                .map(drop)
                .with_context(|| format!("renaming the temporary file to {}", target.display())),
            Kind::InPlace(_) => Ok(()),
        }
    }
}

/// Add the output path to an I/O error (a full disk, a file-size limit); other errors (bad input
/// found while producing the output) already say what they are about.
fn in_output(e: anyhow::Error, path: &Path) -> anyhow::Error {
    if e.downcast_ref::<std::io::Error>().is_some() {
        e.context(format!("writing {}", path.display()))
    } else {
        e
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
        fill(&mut w).map_err(|e| in_output(e, path))?;
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
