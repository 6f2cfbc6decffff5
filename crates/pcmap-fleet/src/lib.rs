//! Fleet-scale profiles: aggregated BOLT profiles of many hosts as Parquet shards (the contract
//! is `docs/fleet-shards.md`, the code is [`schema`]), written by [`shard::write`] from an fdata
//! profile, checked by [`shard::inspect`], merged and queried by the SQL plans of [`engine`] on
//! Apache DataFusion embedded in the process or on an Apache DataFusion Ballista cluster.
//!
//! The merge is `merge-fdata`'s: records with the same locations have their counts and
//! mispredictions summed (a SQL `GROUP BY`), then the result goes through
//! [`pcmap_profile::merge::merge_fdata`] for the headers and record order and is written with
//! [`pcmap_profile::fdata::write`]. YAML output reads the merged records back onto the binary's
//! functions (`pcmap_perf2bolt::reread::from_fdata`, the one fdata reader for that) and is
//! written by `pcmap-perf2bolt`'s YAML writer.

pub mod engine;
mod error;
pub mod schema;
pub mod shard;

pub use datafusion;
pub use error::{Error, Result};
