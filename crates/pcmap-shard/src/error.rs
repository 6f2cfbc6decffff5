//! The crate's one error type.

use std::path::PathBuf;

/// Why a shard could not be written or is not a shard of the contract.
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
        source: parquet::errors::ParquetError,
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
    /// Writing a shard (Parquet encoder).
    #[error("writing the shard")]
    Write(#[source] parquet::errors::ParquetError),
    /// Building record batches.
    #[error("building record batches")]
    Arrow(#[from] arrow_schema::ArrowError),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
