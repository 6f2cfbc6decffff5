//! `pcmap propeller`: Propeller layout profiles (clang cc profile + lld symbol order) from a
//! binary built with `-fbasic-block-address-map` and a branch profile.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use pcmap_propeller::builder::CfgBuilder;
use pcmap_propeller::input;
use pcmap_propeller::{PropellerOptions, SkipReason, cc_profile, generate, ld_profile};

use crate::output::write_atomic;

/// Generate Propeller layout profiles: a cc profile for clang's -fbasic-block-sections=list= and a
/// symbol order for lld's --symbol-ordering-file
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Binary built with -fbasic-block-address-map (the one the profile was recorded on)
    pub binary: PathBuf,
    /// Branch profile: perf.data with branch stacks, or with --pa perf2bolt's pre-aggregated format (`T`/`B`/`F` records)
    #[arg(short = 'p', long = "profile")]
    pub profile: PathBuf,
    /// The profile is pre-aggregated text (as `perf2bolt --pa` reads; addresses are the binary's virtual addresses)
    #[arg(long)]
    pub pa: bool,
    /// Output: the basic-block-sections profile for clang (`-fbasic-block-sections=list=FILE`)
    #[arg(long = "cc-profile", value_name = "CC.txt")]
    pub cc_profile: PathBuf,
    /// Output: the symbol order for the linker (`-Wl,--symbol-ordering-file=FILE`)
    #[arg(long = "ld-profile", value_name = "LD.txt")]
    pub ld_profile: PathBuf,
    /// Print the ext-TSP score before and after for every hot function, and the record statistics
    #[arg(long)]
    pub verbose: bool,
    /// Also write a `g` line (block and edge counts) per function in the cc profile
    #[arg(long)]
    pub emit_cfg: bool,
    /// Also write an `h` line (block hashes) per function when the map has hashes (-mllvm -emit-bb-hash)
    #[arg(long)]
    pub emit_hashes: bool,
    /// Keep never-executed blocks in the function body (no `.cold` parts)
    #[arg(long)]
    pub no_split: bool,
    /// Do not cluster functions along calls (order them by density only)
    #[arg(long)]
    pub no_call_chain_clustering: bool,
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

pub fn run(args: Args) -> Result<()> {
    let file = pcmap_binary::MappedFile::open(&args.binary)
        .with_context(|| format!("opening {}", args.binary.display()))?;
    let (functions, summary) = input::map_functions(file.bytes())
        .with_context(|| format!("reading {}", args.binary.display()))?;
    let builder = CfgBuilder::new(&functions)
        .with_context(|| format!("indexing {}", args.binary.display()))?;

    let profile = pcmap_binary::MappedFile::open(&args.profile)
        .with_context(|| format!("opening {}", args.profile.display()))?;
    let stderr = std::io::stderr();
    let mut err = stderr.lock();
    let fold = if args.pa {
        input::fold_preaggregated(&builder, profile.bytes())
            .with_context(|| format!("reading {}", args.profile.display()))?
    } else {
        if !profile.bytes().starts_with(b"PERFILE2") {
            bail!(
                "{}: not a perf.data file; pass --pa for pre-aggregated records",
                args.profile.display()
            );
        }
        let bin = pcmap_binary::Binary::parse(file.bytes())
            .with_context(|| format!("reading {}", args.binary.display()))?;
        let name = args.binary.to_string_lossy().into_owned();
        let perf = input::fold_perf_data(&builder, &bin, name.as_bytes(), profile.bytes())
            .with_context(|| format!("reading {}", args.profile.display()))?;
        if perf.samples_without_branch_stack > 0 {
            writeln!(
                err,
                "pcmap: warning: {} of {} samples have no branch stack (record with `perf record -b` or `-j any,u`)",
                perf.samples_without_branch_stack, perf.samples
            )?;
        }
        input::PreaggregatedFold {
            acc: perf.acc,
            ignored: input::IgnoredRecords::default(),
        }
    };
    let stats = fold.acc.stats.clone();
    if stats.records() == 0 {
        let ignored = if fold.ignored.samples + fold.ignored.events > 0 {
            format!(
                " ({} sample and {} event records carry no branch information)",
                fold.ignored.samples, fold.ignored.events
            )
        } else {
            String::new()
        };
        bail!(
            "{}: no branch or fall-through records{ignored}",
            args.profile.display()
        );
    }
    if stats.mapped_records() == 0 {
        bail!(
            "{}: none of its {} branch/fall-through records has an address in a basic block of {} \
             ({} functions, {} blocks): the profile is stale or was recorded on another binary",
            args.profile.display(),
            stats.records(),
            args.binary.display(),
            summary.functions,
            summary.blocks
        );
    }
    if stats.branches_unmapped > 0 {
        writeln!(
            err,
            "pcmap: warning: {} of {} branch records ({:.1}%) have neither end in a basic block of the binary",
            stats.branches_unmapped,
            stats.branches,
            pct(stats.branches_unmapped, stats.branches)
        )?;
    }
    let bad_ft = stats.fall_throughs_unmapped + stats.fall_throughs_invalid;
    if bad_ft > 0 {
        writeln!(
            err,
            "pcmap: warning: {} of {} fall-through ranges ({:.1}%) do not match the binary ({} outside its blocks, \
             {} impossible on its code): stale profile?",
            bad_ft,
            stats.fall_throughs,
            pct(bad_ft, stats.fall_throughs),
            stats.fall_throughs_unmapped,
            stats.fall_throughs_invalid
        )?;
    }
    if summary.unnamed > 0 {
        writeln!(
            err,
            "pcmap: warning: {} functions of the map have no symbol and were left out",
            summary.unnamed
        )?;
    }
    if fold.ignored.samples > 0 {
        writeln!(
            err,
            "pcmap: warning: ignored {} sample (`S`) records: they carry no branch information",
            fold.ignored.samples
        )?;
    }

    let program = builder.finish(fold.acc);
    let mut opts = PropellerOptions {
        emit_cfg: args.emit_cfg,
        emit_hashes: args.emit_hashes,
        ..PropellerOptions::default()
    };
    opts.layout.split_functions = !args.no_split;
    opts.order.call_chain_clustering = !args.no_call_chain_clustering;
    let result = generate(&program, &opts);
    for reason in [
        SkipReason::DuplicateBlockIds,
        SkipReason::UnwritableName,
        SkipReason::AmbiguousName,
    ] {
        let n = result.skipped.iter().filter(|(_, r)| *r == reason).count();
        if n > 0 {
            let why = match reason {
                SkipReason::DuplicateBlockIds => "repeat a block ID (cloned blocks)",
                SkipReason::UnwritableName => "have a name with whitespace",
                SkipReason::AmbiguousName => {
                    "share their name with another hot function (build with -funique-internal-linkage-names)"
                }
            };
            writeln!(
                err,
                "pcmap: warning: {n} hot functions left out because they {why}"
            )?;
        }
    }
    if result.functions.is_empty() {
        bail!(
            "{}: no function of {} was executed according to the profile ({} records mapped): nothing to lay out",
            args.profile.display(),
            args.binary.display(),
            stats.mapped_records()
        );
    }
    let cc = result.cc_profile(&program, args.emit_cfg, args.emit_hashes);
    let ld = result.ld_symbols(&program);
    write_atomic(&args.cc_profile, |w| {
        cc_profile::write_cc_profile(&cc, w).context("writing the cc profile")?;
        Ok(())
    })?;
    write_atomic(&args.ld_profile, |w| {
        ld_profile::write_ld_profile(&ld, w).context("writing the ld profile")?;
        Ok(())
    })?;

    if args.verbose {
        writeln!(
            err,
            "map: {} functions, {} blocks; records: {} branches ({} intra-function, {} calls, {} returns, {} other \
             inter-function, {} from outside, {} to outside, {} unmapped), {} fall-throughs ({} valid, {} unmapped, \
             {} invalid)",
            summary.functions,
            summary.blocks,
            stats.branches,
            stats.intra_branches,
            stats.calls,
            stats.returns,
            stats.inter_function_jumps,
            stats.branches_from_outside,
            stats.branches_to_outside,
            stats.branches_unmapped,
            stats.fall_throughs,
            stats.fall_throughs_valid,
            stats.fall_throughs_unmapped,
            stats.fall_throughs_invalid
        )?;
        for lf in &result.functions {
            let f = &program.functions[lf.function];
            let l = &lf.layout;
            let hot: usize = l.clusters.iter().map(Vec::len).sum();
            writeln!(
                err,
                "{}: ext-TSP score {:.1} -> {:.1} ({:+.1}%), {} hot blocks, {} cold",
                f.name,
                l.score_before,
                l.score_after,
                if l.score_before > 0.0 {
                    (l.score_after / l.score_before - 1.0) * 100.0
                } else {
                    0.0
                },
                hot,
                l.cold.len()
            )?;
        }
    }
    let cold: usize = result.functions.iter().map(|f| f.layout.cold.len()).sum();
    let hot: usize = result
        .functions
        .iter()
        .map(|f| f.layout.hot_order().count())
        .sum();
    writeln!(
        err,
        "pcmap: {} hot functions ({} hot blocks, {} cold) written to {} and {} ({} symbols)",
        result.functions.len(),
        hot,
        cold,
        args.cc_profile.display(),
        args.ld_profile.display(),
        ld.len()
    )?;
    Ok(())
}
