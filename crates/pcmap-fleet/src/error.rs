//! The crate's one error type.

use std::path::PathBuf;

/// Why a shard could not be written, read or merged, or a query failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A shard that does not follow the contract (`docs/fleet-shards.md`).
    #[error("{}: {what}", path.display())]
    BadShard {
        /// The shard.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// A shard whose Parquet footer or schema cannot be read.
    #[error("{}: not a readable Parquet shard", path.display())]
    Parquet {
        /// The shard.
        path: PathBuf,
        /// The Parquet reader's error.
        #[source]
        source: datafusion::parquet::errors::ParquetError,
    },
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
    /// Writing a shard (Parquet encoder).
    #[error("writing the shard")]
    Write(#[source] datafusion::parquet::errors::ParquetError),
    /// Building record batches.
    #[error("building record batches")]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
    /// The query engine (DataFusion or Ballista) failed.
    #[error("query engine")]
    Engine(#[from] datafusion::error::DataFusionError),
    /// A merged profile the fdata merge rules reject.
    #[error(transparent)]
    Merge(#[from] pcmap_profile::merge::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
