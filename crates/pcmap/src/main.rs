//! `pcmap`: map machine addresses back to program structure.
//!
//! The binary is thin: every subcommand lives in `cmd/<name>.rs`, parses its own arguments (clap
//! derive), calls the library crates and owns the terminal. Exit codes: 0 success, 1 bad input or
//! any other failure, 2 usage errors (clap's own exit code).

mod cmd;
mod huge_pages;
mod input_paths;
mod inputs;
mod output;
mod progress;
mod scan_cache;

use clap::{CommandFactory, FromArgMatches, Subcommand};

#[global_allocator]
static ALLOCATOR: huge_pages::HugePageHint = huge_pages::HugePageHint;

/// Map machine addresses back to program structure: functions, basic blocks, inlined calls,
/// BOLT input addresses and hot paths.
#[derive(clap::Parser, Debug)]
#[command(name = "pcmap", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Each subcommand's `Args` struct documents itself (its doc comment is the one-line help).
#[derive(Subcommand, Debug)]
enum Command {
    Info(cmd::info::Args),
    Bat(cmd::bat::Args),
    Perf2bolt(cmd::perf2bolt::Args),
    MergeFdata(cmd::merge_fdata::Args),
    Bbmap(cmd::bbmap::Args),
    Propeller(cmd::propeller::Args),
    Inline(cmd::inline::Args),
    Symbolize(cmd::symbolize::Args),
    Explain(cmd::explain::Args),
    Heatmap(cmd::heatmap::Args),
    Report(cmd::report::Args),
    Trace(cmd::trace::Args),
}

fn main() {
    huge_pages::configure_from_env();
    let args = cmd::heatmap::normalize_llvm_options(cmd::symbolize::normalize_llvm_options(
        cmd::perf2bolt::normalize_llvm_options(std::env::args_os().collect()),
    ));
    // `--version` also names the demangler this build links (LLVM's, or the cpp_demangle fallback).
    let long_version = format!(
        "{}\ndemangler: {}",
        env!("CARGO_PKG_VERSION"),
        pcmap_demangle::engine()
    );
    let matches = Cli::command()
        .long_version(&*Box::leak(long_version.into_boxed_str()))
        .get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Info(args) => cmd::info::run(args),
        Command::Bat(args) => cmd::bat::run(args),
        Command::Perf2bolt(args) => cmd::perf2bolt::run(args),
        Command::MergeFdata(args) => cmd::merge_fdata::run(args),
        Command::Bbmap(args) => cmd::bbmap::run(args),
        Command::Propeller(args) => cmd::propeller::run(args),
        Command::Inline(args) => cmd::inline::run(args),
        Command::Symbolize(args) => cmd::symbolize::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Heatmap(args) => cmd::heatmap::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Trace(args) => cmd::trace::run(args),
    };
    if let Err(err) = result {
        // `{:#}` prints the whole context chain on one line: "reading X: section Y at offset Z: ...".
        eprintln!("pcmap: error: {err:#}");
        std::process::exit(1);
    }
}
