//! Input paths as `merge-fdata`-style tools take them: files as given, directories searched
//! recursively in sorted order. Shared with `pcmap-fleet` (included there with `#[path]`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// `inputs` with each directory replaced by the files under it that `keep` accepts (recursively,
/// sorted); a path that is neither a file nor a directory is an error, and so is an empty
/// result (`none` says what was expected).
pub fn expand(
    inputs: &[PathBuf],
    keep: &dyn Fn(&Path) -> bool,
    none: &str,
) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) -> Result<()> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading directory {}", dir.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("reading directory {}", dir.display()))?;
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, keep, out)?;
            } else if keep(&p) {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            walk(p, keep, &mut out)?;
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            bail!("{}: no such file or directory", p.display());
        }
    }
    if out.is_empty() {
        bail!("{none}");
    }
    Ok(out)
}
