//! The shard contract, version [`VERSION`]: the Arrow schema of a shard's rows and the keys of its
//! Parquet footer. `docs/fleet-shards.md` documents every column; this module is the code.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// Version of the contract, stored under [`KEY_VERSION`] in every shard's footer.
pub const VERSION: u32 = 1;

/// Footer key: the contract version (decimal).
pub const KEY_VERSION: &str = "pcmap.fleet.version";
/// Footer key: the build-id of the profiled binary (lower-case hex, empty if unknown).
pub const KEY_BUILD_ID: &str = "pcmap.fleet.build_id";
/// Footer key: `true` when the profile was collected on a BOLTed binary.
pub const KEY_BOLTED: &str = "pcmap.fleet.boltedcollection";
/// Footer key: `true` for basic-sample (`no_lbr`) profiles.
pub const KEY_NO_LBR: &str = "pcmap.fleet.no_lbr";

/// Footer key: the sampled events (perf event names, comma-separated; may be empty).
pub const KEY_EVENTS: &str = "pcmap.fleet.events";

/// Rows per Parquet row group: small enough to stream, large enough to compress.
pub const ROW_GROUP_ROWS: usize = 64 * 1024;

/// Record kinds (column `kind`).
pub mod kind {
    /// A branch or fall-through between two locations (an fdata LBR line).
    pub const BRANCH: &str = "branch";
    /// Basic samples at one location (an fdata `no_lbr` line).
    pub const SAMPLE: &str = "sample";
    /// A memory access: instruction location and data location (an fdata `3`/`4`/`5` line).
    pub const MEMORY: &str = "memory";
}

/// Column names, in schema order.
pub mod col {
    pub const KIND: &str = "kind";
    pub const FROM_KIND: &str = "from_kind";
    pub const FROM_NAME: &str = "from_name";
    pub const FROM_OFFSET: &str = "from_offset";
    pub const FROM_ADDRESS: &str = "from_address";
    pub const TO_KIND: &str = "to_kind";
    pub const TO_NAME: &str = "to_name";
    pub const TO_OFFSET: &str = "to_offset";
    pub const TO_ADDRESS: &str = "to_address";
    pub const COUNT: &str = "count";
    pub const MISPREDICTS: &str = "mispredicts";
    pub const BUILD_ID: &str = "build_id";
    pub const BINARY: &str = "binary";
    pub const DSO: &str = "dso";
    pub const HOST: &str = "host";
    pub const COLLECTED_AT: &str = "collected_at";
    pub const BOLTED: &str = "boltedcollection";
}

/// The Arrow type of `collected_at`.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// The schema of version [`VERSION`].
pub fn schema() -> SchemaRef {
    use DataType::{Boolean, Int64, UInt8, Utf8};
    Arc::new(Schema::new(vec![
        Field::new(col::KIND, Utf8, false),
        Field::new(col::FROM_KIND, UInt8, false),
        Field::new(col::FROM_NAME, Utf8, false),
        Field::new(col::FROM_OFFSET, Int64, false),
        Field::new(col::FROM_ADDRESS, Int64, true),
        Field::new(col::TO_KIND, UInt8, true),
        Field::new(col::TO_NAME, Utf8, true),
        Field::new(col::TO_OFFSET, Int64, true),
        Field::new(col::TO_ADDRESS, Int64, true),
        Field::new(col::COUNT, Int64, false),
        Field::new(col::MISPREDICTS, Int64, false),
        Field::new(col::BUILD_ID, Utf8, false),
        Field::new(col::BINARY, Utf8, false),
        Field::new(col::DSO, Utf8, true),
        Field::new(col::HOST, Utf8, false),
        Field::new(col::COLLECTED_AT, timestamp_type(), false),
        Field::new(col::BOLTED, Boolean, false),
    ]))
}
