//! `pcmap propeller`: Propeller layout profiles (clang cc profile + lld symbol order) from a
//! binary built with `-fbasic-block-address-map` and a branch profile.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use pcmap_perf2bolt::preagg::PreAggregated;
use pcmap_propeller::builder::CfgBuilder;
use pcmap_propeller::input;
use pcmap_propeller::{
    LayoutScore, PropellerOptions, SkipReason, cc_profile, generate_with_calls, ld_profile,
};

use crate::output::write_atomic;

/// Generate Propeller layout profiles: a cc profile for clang's -fbasic-block-sections=list= and a
/// symbol order for lld's --symbol-ordering-file
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Binary built with -fbasic-block-address-map (the one the profile was recorded on)
    pub binary: PathBuf,
    /// Branch profile: perf.data with branch stacks, BOLT's fdata or YAML profile of this binary
    /// (as perf2bolt writes them), or with --pa perf2bolt's pre-aggregated format (`T`/`B`/`F`
    /// records); the format is recognised from the content. Repeat the option or separate paths
    /// with commas to use several profiles (formats may be mixed); their records are merged
    /// before layout
    #[arg(short = 'p', long = "profile", value_name = "PROFILE", required = true,
          value_delimiter = ',', action = clap::ArgAction::Append)]
    pub profiles: Vec<PathBuf>,
    /// Number of profiles read in parallel (0 = one per hardware thread)
    #[arg(long = "perfdata-jobs", value_name = "N", default_value_t = 4)]
    pub perfdata_jobs: usize,
    /// Profiles that are not perf.data, fdata or BOLT YAML are pre-aggregated text (as
    /// `perf2bolt --pa` reads; addresses are the binary's virtual addresses)
    #[arg(long)]
    pub pa: bool,
    /// Output: the basic-block-sections profile for clang (`-fbasic-block-sections=list=FILE`)
    #[arg(long = "cc-profile", value_name = "CC.txt")]
    pub cc_profile: PathBuf,
    /// Output: the symbol order for the linker (`-Wl,--symbol-ordering-file=FILE`)
    #[arg(long = "ld-profile", value_name = "LD.txt")]
    pub ld_profile: PathBuf,
    /// Print the ext-TSP score and the estimated taken branches before and after (whole program,
    /// per cluster count, and per hot function), and the record statistics
    #[arg(long)]
    pub verbose: bool,
    /// Also write a `g` line (block and edge counts) per function in the cc profile
    #[arg(long)]
    pub emit_cfg: bool,
    /// Also write an `h` line (block hashes) per function when the map has hashes (-mllvm -emit-bb-hash)
    #[arg(long)]
    pub emit_hashes: bool,
    /// Propeller's `split_functions`: move never-executed blocks to `.cold` parts
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value_t = true, action = clap::ArgAction::Set)]
    pub split_functions: bool,
    /// Same as --split-functions=false
    #[arg(long)]
    pub no_split: bool,
    /// Propeller's `call_chain_clustering`: order functions (or, with inter-function reordering,
    /// chains) along their hottest calls; otherwise by density only
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value_t = true, action = clap::ArgAction::Set)]
    pub call_chain_clustering: bool,
    /// Same as --call-chain-clustering=false
    #[arg(long)]
    pub no_call_chain_clustering: bool,
    /// Propeller's `chain_split`: let ext-TSP cut a chain in two to insert another between the halves
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value_t = true, action = clap::ArgAction::Set)]
    pub chain_split: bool,
    /// Propeller's `chain_split_threshold`: longest chain (in blocks) that may be cut
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub chain_split_threshold: usize,
    /// Propeller's `reorder_hot_blocks`: order the hot blocks with ext-TSP (otherwise they keep
    /// their original order)
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value_t = true, action = clap::ArgAction::Set)]
    pub reorder_hot_blocks: bool,
    /// Propeller's `inter_function_reordering`: lay out the hot blocks of all functions together,
    /// so a function's hot code may become several clusters (`name.__part.N`) placed next to the
    /// code they call; kept only when it scores better than one cluster per function
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          default_value_t = false, action = clap::ArgAction::Set)]
    pub inter_function_reordering: bool,
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

    let stderr = std::io::stderr();
    let mut err = stderr.lock();
    let bin = pcmap_binary::Binary::parse(file.bytes())
        .with_context(|| format!("reading {}", args.binary.display()))?;
    // Every profile is read through the one shared reader and merged before layout.
    let opts = pcmap_profile::events::PerfOptions {
        ignore_build_id: true,
        ..Default::default()
    };
    let pa = args.pa;
    let inputs = crate::inputs::read_profiles(
        &bin,
        &args.binary,
        &args.profiles,
        args.perfdata_jobs,
        &opts,
        &|path, data| match crate::inputs::detect_profile(data) {
            Some(kind) => Ok(kind),
            None if pa => Ok(crate::inputs::ProfileKind::PreAggregated),
            None => bail!(
                "{}: not a perf.data file, fdata or BOLT YAML; pass --pa for pre-aggregated records",
                path.display()
            ),
        },
    )?;
    let (samples, without): (u64, u64) = inputs
        .iter()
        .filter_map(|(_, s)| s.as_ref())
        .fold((0, 0), |(a, b), s| {
            (a + s.total_samples, b + s.samples_without_branch_stack)
        });
    if without > 0 {
        writeln!(
            err,
            "pcmap: warning: {without} of {samples} samples have no branch stack (record with `perf record -b` or `-j any,u`)"
        )?;
    }
    let merged = PreAggregated::merge(inputs.into_iter().map(|(p, _)| p));
    let mut sink = input::BuilderSink::new(&builder);
    merged.replay(&mut sink);
    drop(merged);
    let fold = sink.finish();
    let profile_names = args
        .profiles
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
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
        bail!("{profile_names}: no branch or fall-through records{ignored}");
    }
    if stats.mapped_records() == 0 {
        bail!(
            "{}: none of its {} branch/fall-through records has an address in a basic block of {} \
             ({} functions, {} blocks): the profile is stale or was recorded on another binary",
            profile_names,
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

    let (program, block_calls) = builder.finish_with_calls(fold.acc);
    let mut opts = PropellerOptions {
        emit_cfg: args.emit_cfg,
        emit_hashes: args.emit_hashes,
        inter_function_reordering: args.inter_function_reordering,
        ..PropellerOptions::default()
    };
    opts.layout.split_functions = args.split_functions && !args.no_split;
    opts.layout.reorder_blocks = args.reorder_hot_blocks;
    opts.layout.ext_tsp.chain_split_threshold = if args.chain_split {
        args.chain_split_threshold
    } else {
        0
    };
    opts.order.call_chain_clustering = args.call_chain_clustering && !args.no_call_chain_clustering;
    let result = generate_with_calls(&program, &block_calls, &opts);
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
            profile_names,
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
        let sm = &result.summary;
        let line = |what: &str, l: &LayoutScore| -> String {
            let clusters = l
                .clusters
                .iter()
                .map(|(c, n)| format!("{n} with {c}"))
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "layout {what}: ext-TSP score {:.1}, estimated taken branches {} (functions by cluster count: {clusters})",
                l.score, l.taken_branches
            )
        };
        writeln!(err, "{}", line("before", &sm.before))?;
        writeln!(
            err,
            "{}{}",
            line("after, one cluster per function", &sm.one_cluster),
            if sm.chose_several { "" } else { " [written]" }
        )?;
        if let Some(several) = &sm.several_clusters {
            writeln!(
                err,
                "{}{}",
                line("after, inter-function reordering", several),
                if sm.chose_several {
                    " [written]"
                } else {
                    " [not better: one cluster per function written]"
                }
            )?;
        }
        for lf in &result.functions {
            let f = &program.functions[lf.function];
            let l = &lf.layout;
            let hot: usize = l.clusters.iter().map(Vec::len).sum();
            writeln!(
                err,
                "{}: ext-TSP score {:.1} -> {:.1} ({:+.1}%), {} hot blocks in {} clusters, {} cold",
                f.name,
                l.score_before,
                l.score_after,
                if l.score_before > 0.0 {
                    (l.score_after / l.score_before - 1.0) * 100.0
                } else {
                    0.0
                },
                hot,
                l.clusters.len(),
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
