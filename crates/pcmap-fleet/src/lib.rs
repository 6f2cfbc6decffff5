//! Fleet-scale profiles: aggregated BOLT profiles of many hosts as Parquet shards (the contract
//! is `docs/fleet-shards.md`; its code, the shard writer and the shard check are the
//! `pcmap-shard` crate, re-exported as [`schema`] and [`shard`]), merged and queried by the SQL plans of [`engine`] on
//! Apache DataFusion embedded in the process or on an Apache DataFusion Ballista cluster.
//!
//! The merge is `merge-fdata`'s: records with the same locations have their counts and
//! mispredictions summed (a SQL `GROUP BY`) and ordered as pcmap writes fdata (perf2bolt's record
//! order, an `ORDER BY` of the same plan), so the engine does all the work in bounded memory
//! (its grouping and sorting spill to disk past a memory limit) and the client formats each
//! batch as it arrives ([`engine::merge_stream`]), with
//! [`pcmap_profile::fdata::write_line`] or [`shard::ShardWriter`]. YAML output reads the merged
//! records back onto the binary's functions (`pcmap_perf2bolt::reread::from_fdata`, the one
//! fdata reader for that) and is written by `pcmap-perf2bolt`'s YAML writer.

pub mod engine;
mod error;

pub use pcmap_shard::{schema, shard};

pub use datafusion;
pub use error::{Error, Result};
