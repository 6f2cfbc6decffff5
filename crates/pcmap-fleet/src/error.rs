//! The crate's one error type.

use std::path::PathBuf;

/// Why a shard could not be written, read or merged, or a query failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A shard that cannot be read or written, or does not follow the contract.
    #[error(transparent)]
    Shard(#[from] pcmap_shard::Error),
    /// Reading a shard failed.
    #[error("{}: cannot read", path.display())]
    Io {
        /// The shard.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// Shards that cannot be merged together (different builds, `boltedcollection` with plain,
    /// LBR with basic samples).
    #[error("{}: {what}", path.display())]
    Mixed {
        /// The first shard that disagrees with the first one.
        path: PathBuf,
        /// What differs.
        what: String,
    },
    /// A memory limit too small for the engine to work in.
    #[error(
        "a memory limit of {limit} bytes is too small: the engine needs at least {} MiB to group and sort",
        crate::engine::MIN_MEMORY_LIMIT >> 20
    )]
    MemoryLimit {
        /// The limit asked for, in bytes.
        limit: usize,
    },
    /// No shard to read (after the build-id filter).
    #[error("no shard to read{0}")]
    NoShards(&'static str),
    /// A location in the query result that the fdata model cannot hold.
    #[error("merged record {row}: {what}")]
    BadRecord {
        /// Row of the result.
        row: usize,
        /// What is wrong.
        what: String,
    },
    /// Building record batches.
    #[error("building record batches")]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
    /// The query engine (DataFusion or Ballista) failed.
    #[error("query engine")]
    Engine(#[from] datafusion::error::DataFusionError),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
