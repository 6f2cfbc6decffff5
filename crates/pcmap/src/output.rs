//! Output files are written to a temporary file beside the target and renamed into place on
//! success, so a failure never leaves a partial file behind.

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

/// Create `path` atomically: `fill` writes the whole content into a buffered writer; the file
/// appears under its name only if `fill` and the flush succeed. `-` means standard output.
#[allow(dead_code)]
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
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    {
        let mut w = BufWriter::with_capacity(1 << 20, tmp.as_file());
        fill(&mut w)?;
        w.flush()
            .with_context(|| format!("writing {}", path.display()))?;
    }
    tmp.persist(path)
        .with_context(|| format!("renaming the temporary file to {}", path.display()))?;
    Ok(())
}
