//! `pcmap`: map machine addresses back to program structure.
//!
//! The binary is thin: every subcommand lives in `cmd/<name>.rs`, parses its own arguments (clap
//! derive), calls the library crates and owns the terminal. Exit codes: 0 success, 1 bad input or
//! any other failure, 2 usage errors (clap's own exit code).

mod cmd;
mod output;
mod progress;

use clap::{Parser, Subcommand};

/// Map machine addresses back to program structure: functions, basic blocks, inlined calls,
/// BOLT input addresses and hot paths.
#[derive(Parser, Debug)]
#[command(name = "pcmap", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Each subcommand's `Args` struct documents itself (its doc comment is the one-line help).
#[derive(Subcommand, Debug)]
enum Command {
    Info(cmd::info::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info(args) => cmd::info::run(args),
    };
    if let Err(err) = result {
        // `{:#}` prints the whole context chain on one line: "reading X: section Y at offset Z: ...".
        eprintln!("pcmap: error: {err:#}");
        std::process::exit(1);
    }
}
