//! `pcmap merge-fdata`: LLVM `merge-fdata` for fdata and YAML profiles, plus pre-aggregated files.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pcmap_binary::MappedFile;
use pcmap_profile::{fdata, merge, preagg, yaml};

use crate::output::write_atomic;

/// Merge fdata, YAML or pre-aggregated profiles (sums counts; LLVM merge-fdata's rules)
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input profiles; directories are searched recursively, comma-separated lists are split
    #[arg(required = true, value_delimiter = ',')]
    inputs: Vec<PathBuf>,
    /// Write the merged profile to FILE (`-` = standard output)
    #[arg(short = 'o', long = "output", value_name = "FILE", default_value = "-")]
    output: PathBuf,
    /// Input format; `auto` decides from the first input (`---` = YAML, a record letter = pre-aggregated)
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    format: Format,
    /// Print the merged functions with their counts to stderr (YAML inputs)
    #[arg(long, value_enum, default_value_t = PrintKind::None)]
    print: PrintKind,
    /// Do not write the merged profile
    #[arg(short = 'q')]
    quiet: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Auto,
    Fdata,
    Yaml,
    Preagg,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum PrintKind {
    None,
    Exec,
    Branches,
}

fn map(path: &Path) -> Result<MappedFile> {
    MappedFile::open(path).with_context(|| format!("opening {}", path.display()))
}

fn detect(data: &[u8]) -> Format {
    if data.starts_with(b"---\n") || data.starts_with(b"--- ") || data.starts_with(b"header:") {
        return Format::Yaml;
    }
    let first = data.iter().copied().find(|b| !b.is_ascii_whitespace());
    let second = data
        .iter()
        .copied()
        .skip_while(|b| b.is_ascii_whitespace())
        .nth(1);
    match (first, second) {
        (Some(b'E' | b'S' | b'T' | b'R' | b'B' | b'F' | b'f' | b'r'), Some(b' ' | b'\t')) => {
            Format::Preagg
        }
        _ => Format::Fdata,
    }
}

pub fn run(args: Args) -> Result<()> {
    let inputs = crate::input_paths::expand(&args.inputs, &|p| p.is_file(), "no input files")?;
    let maps: Vec<MappedFile> = inputs.iter().map(|p| map(p)).collect::<Result<_>>()?;
    let format = match args.format {
        Format::Auto => detect(&maps[0]),
        f => f,
    };
    let out = if args.quiet {
        None
    } else {
        Some(args.output.as_path())
    };
    match format {
        Format::Yaml => {
            let mut profiles = Vec::with_capacity(maps.len());
            for (p, m) in inputs.iter().zip(&maps) {
                profiles.push(yaml::parse(m).map_err(|e| anyhow::anyhow!("{}:{e}", p.display()))?);
            }
            let (merged, warnings) =
                merge::merge_yaml(profiles).map_err(|e| anyhow::anyhow!("{e}"))?;
            for w in warnings {
                eprintln!("pcmap: warning: {w}");
            }
            if let Some(o) = out {
                // merge-fdata's yaml::Output wraps flow collections at column 70; so do we.
                write_atomic(o, |w| {
                    Ok(yaml::write_with(
                        w,
                        &merged,
                        &yaml::WriteOptions::MERGE_FDATA,
                    )?)
                })?;
            }
            print_functions(&merged, args.print);
            eprintln!(
                "Data for {} unique objects successfully merged.",
                merged.functions.len()
            );
        }
        Format::Fdata => {
            let mut profiles = Vec::with_capacity(maps.len());
            for (p, m) in inputs.iter().zip(&maps) {
                if detect(m) == Format::Yaml {
                    bail!("{}: cannot mix YAML and legacy formats", p.display());
                }
                profiles.push(fdata::parse(m).map_err(|e| anyhow::anyhow!("{}:{e}", p.display()))?);
            }
            let merged = merge::merge_fdata(&profiles).map_err(|e| {
                let idx = match &e {
                    merge::Error::MixedMode { index, .. } => *index,
                    _ => 0,
                };
                anyhow::anyhow!("{}: {e}", inputs[idx].display())
            })?;
            if let Some(o) = out {
                write_atomic(o, |w| Ok(fdata::write(w, &merged)?))?;
            }
            eprintln!("Profile from {} files merged.", inputs.len());
        }
        Format::Preagg => {
            let mut merger = merge::PreAggMerger::new();
            for (p, m) in inputs.iter().zip(&maps) {
                let part = preagg::fold_parallel(
                    m,
                    merge::PreAggMerger::new,
                    |acc, r| acc.add(r),
                    |mut a, b| {
                        a.absorb(b);
                        a
                    },
                )
                .map_err(|e| anyhow::anyhow!("{}:{e}", p.display()))?;
                merger.absorb(part);
            }
            let records = merger.finish();
            if let Some(o) = out {
                write_atomic(o, |w| Ok(preagg::write(w, &records)?))?;
            }
            eprintln!(
                "Pre-aggregated profile from {} files merged ({} records).",
                inputs.len(),
                records.len()
            );
        }
        Format::Auto => unreachable!("resolved above"),
    }
    Ok(())
}

fn print_functions(p: &yaml::Profile, kind: PrintKind) {
    if kind == PrintKind::None {
        return;
    }
    let mut list: Vec<(u64, &str)> = p
        .functions
        .iter()
        .map(|f| {
            let n = match kind {
                PrintKind::Exec => f.exec_count,
                _ => f
                    .blocks
                    .iter()
                    .flat_map(|b| &b.successors)
                    .map(|s| s.count)
                    .sum(),
            };
            (n, f.name.as_str())
        })
        .collect();
    list.sort_by(|a, b| b.cmp(a));
    eprintln!(
        "Functions sorted by {} count:",
        if kind == PrintKind::Exec {
            "execution"
        } else {
            "total branch"
        }
    );
    for (n, name) in list {
        eprintln!("{name} : {n}");
    }
}
