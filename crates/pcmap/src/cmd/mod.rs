//! One module per subcommand; each owns its `Args` and `run`.

pub mod bat;
pub mod bbmap;
pub mod explain;
pub mod heatmap;
pub mod info;
pub mod inline;
pub mod inline_btf;
pub mod merge_fdata;
pub mod perf2bolt;
pub mod propeller;
pub mod report;
pub mod symbolize;
pub mod trace;
