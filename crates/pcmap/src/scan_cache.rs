//! `--scan-cache DIR`: the findings of perf2bolt's decoding pass over every function, the
//! binary's data references into code, its rejected paddings and the model of its functions
//! ([`pcmap_perf2bolt::scan_index`]), kept in DIR between runs. A file is named after its key: a
//! hash of the binary's identity or bytes (see [`key`]) and of this pcmap executable, so an index
//! is taken only for the same binary read by the same build. A cache that cannot be read or
//! written costs the pass, never the run: it is reported as a warning.
//!
//! Every new binary and every new build of pcmap makes a new file, so DIR is kept under
//! [`SIZE_LIMIT`]: when a file is written, the files used least recently (read or written:
//! a read touches its file) are removed until the others fit.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use pcmap_binary::MappedFile;
use pcmap_binary::bolt::BoltFunctions;

use anyhow::{Context, Result};
use pcmap_perf2bolt::scan_index::{ScanIndex, key_of};

/// This executable's identity: its version, path, size and modification time (what ccache's
/// `compiler_check = mtime` compares), so that a rebuilt pcmap never takes an index an older
/// build made.
fn tool_identity() -> Vec<u8> {
    let mut id = format!("pcmap {}", env!("CARGO_PKG_VERSION")).into_bytes();
    if let Ok(exe) = std::env::current_exe() {
        id.extend_from_slice(exe.as_os_str().as_encoded_bytes());
        if let Ok(m) = std::fs::metadata(&exe) {
            id.extend_from_slice(&m.len().to_le_bytes());
            if let Ok(t) = m.modified()
                && let Ok(d) = t.duration_since(std::time::UNIX_EPOCH)
            {
                id.extend_from_slice(&d.as_nanos().to_le_bytes());
            }
        }
    }
    id
}

/// How long a file must have been left unchanged before its identity stands for its bytes.
/// Timestamps have a granularity, and a write can land within the same tick as the change a
/// run saw: as git does for "racily clean" files, a file changed this recently is hashed.
const SETTLED: Duration = Duration::from_secs(2);

/// The key of `binary`'s index (`binary` as mapped for this run). When the file was last changed
/// at least [`SETTLED`] ago: a hash of its identity — device, inode, size, modification time and
/// change time, as read from the descriptor that mapped it. Any write to the file, or a new
/// file put in its place, moves the change time (which no program can set back), so a changed
/// binary never finds an earlier index. Otherwise, or where the file system keeps no change
/// time: a hash of its bytes, which costs a read of the whole file (a tenth of a later run's
/// time on a 170 MB binary). `verbose`: say which.
pub fn key(binary: &MappedFile, verbose: bool) -> Result<u128> {
    let tool = tool_identity();
    let path = binary.path();
    if let Some(identity) = settled_identity(binary.metadata(), SystemTime::now()) {
        if verbose {
            eprintln!(
                "pcmap: note: scan cache key of {}: its identity (unchanged for {}s or more)",
                path.display(),
                SETTLED.as_secs()
            );
        }
        // Hashed as the bytes of a tool of another name: an identity never keys like a binary's
        // contents.
        let mut tool = tool;
        tool.extend_from_slice(b"\0keyed by file identity");
        return Ok(key_of(&identity[..], &tool)?);
    }
    if verbose {
        eprintln!(
            "pcmap: note: scan cache key of {}: its bytes (changed in the last {}s, or no change \
             time)",
            path.display(),
            SETTLED.as_secs()
        );
    }
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    key_of(file, &tool).with_context(|| format!("reading {}", path.display()))
}

/// The identity of a file of metadata `m` ([`key`]), when its last change is at least
/// [`SETTLED`] before `now`; `None` for a file changed since, a change in the future (a clock
/// set back) or a file system that reports no change time.
#[cfg(unix)]
fn settled_identity(m: &std::fs::Metadata, now: SystemTime) -> Option<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    if now.duration_since(last_change(m)?).ok()? < SETTLED {
        return None;
    }
    let mut identity = Vec::with_capacity(56);
    for field in [
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime() as u64,
        m.mtime_nsec() as u64,
        m.ctime() as u64,
        m.ctime_nsec() as u64,
    ] {
        identity.extend_from_slice(&field.to_le_bytes());
    }
    Some(identity)
}

/// The later of the modification and change times of a file of metadata `m`; `None` when the
/// file system reports no change time (0) or a time before 1970.
#[cfg(unix)]
fn last_change(m: &std::fs::Metadata) -> Option<SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let at = |seconds: i64, nanos: i64| -> Option<SystemTime> {
        let since_epoch = Duration::new(u64::try_from(seconds).ok()?, u32::try_from(nanos).ok()?);
        SystemTime::UNIX_EPOCH.checked_add(since_epoch)
    };
    if m.ctime() <= 0 {
        return None;
    }
    Some(at(m.mtime(), m.mtime_nsec())?.max(at(m.ctime(), m.ctime_nsec())?))
}

#[cfg(not(unix))]
fn settled_identity(_: &std::fs::Metadata, _: SystemTime) -> Option<Vec<u8>> {
    None
}

fn path_of(dir: &Path, key: u128) -> PathBuf {
    dir.join(format!("{key:032x}.scan"))
}

/// How many bytes of index files a cache directory keeps (1 GiB: two hundred binaries of
/// 200,000 functions).
pub const SIZE_LIMIT: u64 = 1 << 30;

/// Mark `path` as just used (its modification time), so that pruning keeps it longer. A file
/// that cannot be touched (a read-only cache) is left as it is.
fn touch(path: &Path) {
    if let Ok(f) = std::fs::File::options().write(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Remove the index files (`*.scan`) of `dir` used least recently until those left take at
/// most `limit` bytes; `keep` (the file just written) is never removed. Returns the files
/// removed. Files that vanish or cannot be removed meanwhile (another run pruning) are skipped.
fn prune(dir: &Path, limit: u64, keep: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let path = e.path();
            let m = e.metadata().ok()?;
            (m.is_file() && path.extension().is_some_and(|x| x == "scan")).then(|| {
                (
                    m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    m.len(),
                    path,
                )
            })
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    // Oldest first; among equal times, by name, so that the choice does not depend on the
    // directory's order.
    files.sort_by(|a, b| (a.0, &a.2).cmp(&(b.0, &b.2)));
    let mut removed = Vec::new();
    for (_, len, path) in files {
        if total <= limit {
            break;
        }
        if path == keep {
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
            removed.push(path);
        }
    }
    removed
}

/// The index in `dir` for `key`, if there is a good one. A damaged file, or one made for
/// another key, is reported and left for [`store`] to replace. `verbose`: say which file was
/// read.
pub fn load(dir: &Path, key: u128, verbose: bool) -> Option<ScanIndex> {
    let path = path_of(dir, key);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            warn(&path, &e.to_string());
            return None;
        }
    };
    match ScanIndex::decode(&bytes) {
        Ok(index) if index.key == key => {
            if verbose {
                eprintln!("pcmap: note: scan cache {}: read", path.display());
            }
            touch(&path);
            Some(index)
        }
        Ok(index) => {
            warn(&path, &format!("made for key {:032x}", index.key));
            None
        }
        Err(e) => {
            warn(&path, &e.to_string());
            None
        }
    }
}

/// Keep `index`, with the model of the functions of `image` it was made on, in `dir` under
/// `key` (written to a temporary file and renamed). `verbose`: say which file was written.
pub fn store(dir: &Path, key: u128, index: &ScanIndex, image: &BoltFunctions, verbose: bool) {
    let path = path_of(dir, key);
    let mut index = index.clone();
    index.key = key;
    index.discovered = Some(image.discovered());
    let written = std::fs::create_dir_all(dir)
        .with_context(|| format!("creating {}", dir.display()))
        .and_then(|()| {
            crate::output::write_atomic(&path, |w| {
                w.write_all(&index.encode())?;
                Ok(())
            })
        });
    match written {
        Ok(()) => {
            if verbose {
                eprintln!("pcmap: note: scan cache {}: written", path.display());
            }
            for old in prune(dir, SIZE_LIMIT, &path) {
                if verbose {
                    eprintln!(
                        "pcmap: note: scan cache {}: removed (used least recently; the cache \
                         keeps {} MiB)",
                        old.display(),
                        SIZE_LIMIT >> 20
                    );
                }
            }
        }
        Err(e) => eprintln!(
            "pcmap: warning: scan cache {}: not written: {e:#}",
            path.display()
        ),
    }
}

/// Warn that the model of the functions of `binary` kept in its index could not be used.
pub fn warn_model(binary: &Path, what: &str) {
    eprintln!(
        "pcmap: warning: scan cache: the model of the functions of {} kept in its index does \
         not fit: {what}; discovering them again",
        binary.display()
    );
}

fn warn(path: &Path, what: &str) {
    eprintln!(
        "pcmap: warning: scan cache {}: {what}; decoding every function again",
        path.display()
    );
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn pruning_removes_the_files_used_least_recently() {
        let dir = pcmap_testkit::scratch_dir("scan-cache-prune");
        let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s);
        // (name, bytes, last use): d is the file just written, and the oldest.
        let files = [
            ("a.scan", 300, 30),
            ("b.scan", 300, 10),
            ("c.scan", 300, 20),
            ("d.scan", 300, 0),
            ("other.txt", 5000, 0),
        ];
        for (name, len, used) in files {
            let path = dir.join(name);
            std::fs::write(&path, vec![0u8; len]).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(at(used))
                .unwrap();
        }
        let names = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        let keep = dir.join("d.scan");
        // 1,200 bytes of indices: under the limit, nothing goes.
        assert!(prune(&dir, 1200, &keep).is_empty());
        // Over it: b (used longest ago, d being kept), then c.
        assert_eq!(names(prune(&dir, 700, &keep)), ["b.scan", "c.scan"]);
        assert!(dir.join("a.scan").exists() && keep.exists());
        // Files that are not indices are never counted or removed.
        assert!(dir.join("other.txt").exists());
        // A read marks a file as used: touched, a is kept and d (no longer kept) goes.
        touch(&dir.join("a.scan"));
        assert_eq!(names(prune(&dir, 300, &dir.join("x.scan"))), ["d.scan"]);
        assert!(dir.join("a.scan").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn identity_only_for_a_settled_file() {
        let dir = pcmap_testkit::scratch_dir("scan-cache-settled");
        let path = dir.join("bin");
        std::fs::write(&path, b"\x7fELF one").unwrap();
        let m = std::fs::metadata(&path).unwrap();
        let changed = last_change(&m).expect("a file system with change times");
        // Changed less than SETTLED ago, or in the future: hashed instead.
        assert_eq!(settled_identity(&m, changed), None);
        assert_eq!(
            settled_identity(&m, changed + SETTLED - Duration::from_millis(1)),
            None
        );
        assert_eq!(
            settled_identity(&m, changed - Duration::from_secs(60)),
            None
        );
        let settled = settled_identity(&m, changed + SETTLED).expect("settled");
        assert_eq!(
            settled_identity(&m, changed + SETTLED * 100),
            Some(settled.clone())
        );
        // Another size is another identity, whatever the times.
        std::fs::write(&path, b"\x7fELF two, longer").unwrap();
        let m2 = std::fs::metadata(&path).unwrap();
        let other = settled_identity(&m2, last_change(&m2).unwrap() + SETTLED).expect("settled");
        assert_ne!(other, settled);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
