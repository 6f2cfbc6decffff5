//! `--scan-cache DIR`: the findings of perf2bolt's decoding pass over every function, the
//! binary's data references into code and its rejected paddings
//! ([`pcmap_perf2bolt::scan_index`]), kept in DIR between runs. A file is named after its key: a
//! hash of the binary's bytes and of this pcmap executable, so an index is taken only for the
//! same binary read by the same build. A cache that cannot be read or written costs the pass,
//! never the run: it is reported as a warning.

use std::path::{Path, PathBuf};

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

/// The key of `binary`'s index.
pub fn key(binary: &Path) -> Result<u128> {
    let file =
        std::fs::File::open(binary).with_context(|| format!("opening {}", binary.display()))?;
    key_of(file, &tool_identity()).with_context(|| format!("reading {}", binary.display()))
}

fn path_of(dir: &Path, key: u128) -> PathBuf {
    dir.join(format!("{key:032x}.scan"))
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

/// Keep `index` in `dir` under `key` (written to a temporary file and renamed). `verbose`: say
/// which file was written.
pub fn store(dir: &Path, key: u128, index: &ScanIndex, verbose: bool) {
    let path = path_of(dir, key);
    let mut index = index.clone();
    index.key = key;
    let written = std::fs::create_dir_all(dir)
        .with_context(|| format!("creating {}", dir.display()))
        .and_then(|()| {
            crate::output::write_atomic(&path, |w| {
                w.write_all(&index.encode())?;
                Ok(())
            })
        });
    match written {
        Ok(()) if verbose => eprintln!("pcmap: note: scan cache {}: written", path.display()),
        Ok(()) => {}
        Err(e) => eprintln!(
            "pcmap: warning: scan cache {}: not written: {e:#}",
            path.display()
        ),
    }
}

fn warn(path: &Path, what: &str) {
    eprintln!(
        "pcmap: warning: scan cache {}: {what}; decoding every function again",
        path.display()
    );
}
