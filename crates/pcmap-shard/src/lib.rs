//! The fleet profile contract (`docs/fleet-shards.md`): aggregated BOLT profiles of many hosts
//! as Parquet shards. [`schema`] is the contract in code (columns, footer keys, version),
//! [`shard::ShardWriter`] writes a shard record by record from fdata lines, and
//! [`shard::inspect`] checks a shard's footer and schema against the contract before any engine
//! reads it.
//!
//! This crate needs only the `parquet` and `arrow` crates, not a query engine, so the shard
//! check can be fuzzed (`fuzz/fuzz_targets/fleet_shard.rs`) without linking DataFusion;
//! `pcmap-fleet` runs the plans over shards.

mod error;
mod footer;
pub mod schema;
pub mod shard;

pub use error::{Error, Result};
