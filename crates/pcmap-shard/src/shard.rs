//! Writing a shard from an fdata profile, and checking a shard against the contract.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder, UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use parquet::arrow::ArrowWriter;
use parquet::arrow::{ARROW_SCHEMA_META_KEY, encode_arrow_schema, parquet_to_arrow_schema};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, FileReader, SerializedFileReader};
use pcmap_profile::fdata::{self, Line, Location, LocationKind};

use crate::footer;
use crate::schema::{self, kind};
use crate::{Error, Result};

/// What a shard says about where its profile comes from (the same on every row).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// GNU build-id of the profiled binary, lower-case hex (empty if unknown).
    pub build_id: String,
    /// The profiled binary's name (as given to perf2bolt).
    pub binary: String,
    /// The shared object the records are in, for a profile of a DSO (`None` for an executable).
    pub dso: Option<String>,
    /// The host the profile was collected on.
    pub host: String,
    /// When the collection ended, microseconds since the Unix epoch (UTC).
    pub collected_at_us: i64,
    /// The sampled perf events (for YAML headers).
    pub events: Vec<String>,
}

/// The fdata digit of a location kind (the `from_kind` / `to_kind` columns).
pub fn kind_digit(k: LocationKind) -> u8 {
    match k {
        LocationKind::Dso => 0,
        LocationKind::Symbol => 1,
        LocationKind::LocalSymbol => 2,
    }
}

/// The location kind of an fdata digit.
pub fn kind_of_digit(d: u8) -> Option<LocationKind> {
    match d {
        0 => Some(LocationKind::Dso),
        1 => Some(LocationKind::Symbol),
        2 => Some(LocationKind::LocalSymbol),
        _ => None,
    }
}

/// Column builders of one row group.
struct Columns {
    kind: StringBuilder,
    from_kind: UInt8Builder,
    from_name: StringBuilder,
    from_offset: Int64Builder,
    from_address: Int64Builder,
    to_kind: UInt8Builder,
    to_name: StringBuilder,
    to_offset: Int64Builder,
    to_address: Int64Builder,
    count: Int64Builder,
    mispredicts: Int64Builder,
    rows: usize,
}

/// A count as the contract's `Int64` (saturating: no profile counts 2^63 events).
fn count64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Columns {
    fn new() -> Self {
        Columns {
            kind: StringBuilder::new(),
            from_kind: UInt8Builder::new(),
            from_name: StringBuilder::new(),
            from_offset: Int64Builder::new(),
            from_address: Int64Builder::new(),
            to_kind: UInt8Builder::new(),
            to_name: StringBuilder::new(),
            to_offset: Int64Builder::new(),
            to_address: Int64Builder::new(),
            count: Int64Builder::new(),
            mispredicts: Int64Builder::new(),
            rows: 0,
        }
    }

    fn push(
        &mut self,
        kind: &str,
        from: &Location<'_>,
        to: Option<&Location<'_>>,
        count: u64,
        mispredicts: u64,
        address: &dyn Fn(&Location<'_>) -> Option<u64>,
    ) {
        self.kind.append_value(kind);
        self.from_kind.append_value(kind_digit(from.kind));
        self.from_name.append_value(from.unescaped_name());
        // Offsets and addresses are 64-bit patterns (two's complement in Int64).
        self.from_offset.append_value(from.offset as i64);
        self.from_address
            .append_option(address(from).map(|a| a as i64));
        match to {
            Some(to) => {
                self.to_kind.append_value(kind_digit(to.kind));
                self.to_name.append_value(to.unescaped_name());
                self.to_offset.append_value(to.offset as i64);
                self.to_address.append_option(address(to).map(|a| a as i64));
            }
            None => {
                self.to_kind.append_null();
                self.to_name.append_null();
                self.to_offset.append_null();
                self.to_address.append_null();
            }
        }
        self.count.append_value(count64(count));
        self.mispredicts.append_value(count64(mispredicts));
        self.rows += 1;
    }

    fn finish(&mut self, origin: &Origin, bolted: bool) -> Result<RecordBatch> {
        let n = self.rows;
        self.rows = 0;
        let repeat = |s: &str| -> ArrayRef {
            let mut b = StringBuilder::with_capacity(n, s.len());
            for _ in 0..n {
                b.append_value(s);
            }
            Arc::new(b.finish())
        };
        let mut dso = StringBuilder::new();
        let mut at = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut bolt = BooleanBuilder::with_capacity(n);
        for _ in 0..n {
            dso.append_option(origin.dso.as_deref());
            at.append_value(origin.collected_at_us);
            bolt.append_value(bolted);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.kind.finish()),
            Arc::new(self.from_kind.finish()),
            Arc::new(self.from_name.finish()),
            Arc::new(self.from_offset.finish()),
            Arc::new(self.from_address.finish()),
            Arc::new(self.to_kind.finish()),
            Arc::new(self.to_name.finish()),
            Arc::new(self.to_offset.finish()),
            Arc::new(self.to_address.finish()),
            Arc::new(self.count.finish()),
            Arc::new(self.mispredicts.finish()),
            repeat(&origin.build_id),
            repeat(&origin.binary),
            Arc::new(dso.finish()),
            repeat(&origin.host),
            Arc::new(at.finish()),
            Arc::new(bolt.finish()),
        ];
        Ok(RecordBatch::try_new(schema::schema(), columns)?)
    }
}

/// Footer key-value pairs of a shard.
fn footer(origin: &Origin, bolted_collection: bool, no_lbr: bool) -> Vec<KeyValue> {
    vec![
        KeyValue::new(schema::KEY_VERSION.into(), schema::VERSION.to_string()),
        KeyValue::new(schema::KEY_BUILD_ID.into(), origin.build_id.clone()),
        KeyValue::new(schema::KEY_BOLTED.into(), bolted_collection.to_string()),
        KeyValue::new(schema::KEY_NO_LBR.into(), no_lbr.to_string()),
        KeyValue::new(schema::KEY_EVENTS.into(), origin.events.join(",")),
    ]
}

/// A shard being written record by record (Parquet, zstd, row groups of
/// [`schema::ROW_GROUP_ROWS`] rows): it holds one row group at a time.
pub struct ShardWriter<W: std::io::Write + Send> {
    parquet: ArrowWriter<W>,
    cols: Columns,
    origin: Origin,
    bolted_collection: bool,
    rows: u64,
}

impl<W: std::io::Write + Send> ShardWriter<W> {
    /// Start a shard of a profile with these headers on `out`.
    pub fn new(out: W, origin: &Origin, bolted_collection: bool, no_lbr: bool) -> Result<Self> {
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(schema::ROW_GROUP_ROWS))
            .set_key_value_metadata(Some(footer(origin, bolted_collection, no_lbr)))
            .build();
        let parquet =
            ArrowWriter::try_new(out, schema::schema(), Some(props)).map_err(Error::Write)?;
        Ok(ShardWriter {
            parquet,
            cols: Columns::new(),
            origin: origin.clone(),
            bolted_collection,
            rows: 0,
        })
    }

    /// Add a record. `address` gives the address in the binary of a location, when known (a
    /// symbol of the binary the profile was aggregated against).
    pub fn push(
        &mut self,
        line: &Line<'_>,
        address: &dyn Fn(&Location<'_>) -> Option<u64>,
    ) -> Result<()> {
        let cols = &mut self.cols;
        match line {
            Line::Branch(b) => cols.push(
                kind::BRANCH,
                &b.from,
                Some(&b.to),
                b.count,
                b.mispreds,
                address,
            ),
            Line::Sample(s) => cols.push(kind::SAMPLE, &s.at, None, s.count, 0, address),
            Line::Mem(m) => cols.push(kind::MEMORY, &m.pc, Some(&m.addr), m.count, 0, address),
        }
        if cols.rows == schema::ROW_GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.rows += self.cols.rows as u64;
        let batch = self.cols.finish(&self.origin, self.bolted_collection)?;
        self.parquet.write(&batch).map_err(Error::Write)
    }

    /// Write the last row group and the footer; returns the number of rows.
    pub fn finish(mut self) -> Result<u64> {
        if self.cols.rows > 0 || self.rows == 0 {
            self.flush()?;
        }
        self.parquet.close().map_err(Error::Write)?;
        Ok(self.rows)
    }
}

/// Write `profile` as a shard to `out` ([`ShardWriter`]). Returns the number of rows.
pub fn write<W: std::io::Write + Send>(
    out: W,
    profile: &fdata::Profile<'_>,
    origin: &Origin,
    address: &dyn Fn(&Location<'_>) -> Option<u64>,
) -> Result<u64> {
    let mut w = ShardWriter::new(out, origin, profile.bolted_collection, profile.is_no_lbr())?;
    for line in &profile.lines {
        w.push(line, address)?;
    }
    w.finish()
}

/// What [`inspect`] learns from a shard's footer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardMeta {
    /// The shard.
    pub path: PathBuf,
    /// Footer build-id.
    pub build_id: String,
    /// Collected on a BOLTed binary.
    pub bolted_collection: bool,
    /// Basic-sample profile.
    pub no_lbr: bool,
    /// Number of rows.
    pub rows: i64,
    /// Sampled events.
    pub events: Vec<String>,
}

/// Check that `path` is a shard of this contract version: readable Parquet footer, the footer
/// keys, and every column with its name and type. Reads the footer only.
pub fn inspect(path: &Path) -> Result<ShardMeta> {
    let file = File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    inspect_reader(file, path)
}

/// [`inspect`] of a shard held in memory (copied once); `path` only names it in errors.
pub fn inspect_bytes(data: &[u8], path: &Path) -> Result<ShardMeta> {
    inspect_reader(bytes::Bytes::copy_from_slice(data), path)
}

/// Walk the Thrift bytes of a `PAR1` footer ([`footer::check`]) before parquet decodes them.
/// Files without a plain footer (too short, encrypted, a length past the start) are left to
/// parquet, whose errors name those cases.
fn check_footer<R: ChunkReader>(data: &R, path: &Path) -> Result<()> {
    let len = data.len();
    if len < 12 {
        return Ok(());
    }
    let read = |start: u64, n: usize| {
        data.get_bytes(start, n).map_err(|source| Error::Parquet {
            path: path.to_path_buf(),
            source,
        })
    };
    let tail = read(len - 8, 8)?;
    if tail[4..] != *b"PAR1" {
        return Ok(());
    }
    let size = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if size + 8 > len {
        return Ok(());
    }
    let start = len - 8 - size;
    let bytes = read(start, size as usize)?;
    footer::check(&bytes, start).map_err(|e| Error::BadShard {
        path: path.to_path_buf(),
        what: e.to_string(),
    })
}

fn inspect_reader<R: ChunkReader + 'static>(data: R, path: &Path) -> Result<ShardMeta> {
    let bad = |what: String| Error::BadShard {
        path: path.to_path_buf(),
        what,
    };
    check_footer(&data, path)?;
    let reader = SerializedFileReader::new(data).map_err(|source| Error::Parquet {
        path: path.to_path_buf(),
        source,
    })?;
    let meta = reader.metadata().file_metadata();
    let kv = meta.key_value_metadata();
    let get = |key: &str| -> Option<&str> {
        kv.and_then(|kv| kv.iter().find(|e| e.key == key))
            .and_then(|e| e.value.as_deref())
    };
    let version = get(schema::KEY_VERSION).ok_or_else(|| {
        bad(format!(
            "not a pcmap fleet shard (no `{}` in the Parquet footer)",
            schema::KEY_VERSION
        ))
    })?;
    if version != schema::VERSION.to_string() {
        return Err(bad(format!(
            "shard schema version {version}, this pcmap reads version {}",
            schema::VERSION
        )));
    }
    let flag = |key: &str| -> Result<bool> {
        match get(key) {
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            other => Err(bad(format!(
                "footer key `{key}` is {other:?}, expected `true` or `false`"
            ))),
        }
    };
    let bolted_collection = flag(schema::KEY_BOLTED)?;
    let no_lbr = flag(schema::KEY_NO_LBR)?;
    let build_id = get(schema::KEY_BUILD_ID).unwrap_or("").to_string();
    let found =
        parquet_to_arrow_schema(meta.schema_descr(), None).map_err(|source| Error::Parquet {
            path: path.to_path_buf(),
            source,
        })?;
    let want = schema::schema();
    for f in want.fields() {
        match found.field_with_name(f.name()) {
            Err(_) => return Err(bad(format!("column `{}` is missing", f.name()))),
            Ok(g) if g.data_type() != f.data_type() => {
                return Err(bad(format!(
                    "column `{}` has type {}, the contract says {}",
                    f.name(),
                    g.data_type(),
                    f.data_type()
                )));
            }
            Ok(_) => {}
        }
    }
    if found.fields().len() != want.fields().len() {
        return Err(bad(format!(
            "{} columns, the contract has {}",
            found.fields().len(),
            want.fields().len()
        )));
    }
    // The Arrow schema a writer may embed (`ARROW:schema`, an IPC flatbuffer) is not decoded:
    // arrow-ipc panics on some malformed ones (found by the `fleet_shard` fuzz target). A shard
    // may carry none (other writers) or exactly the one pcmap writes; anything else is refused
    // here, before an engine decodes it. Column types come from the Parquet schema alone.
    if let Some(embedded) = get(ARROW_SCHEMA_META_KEY)
        && embedded != encode_arrow_schema(&schema::schema())
    {
        return Err(bad(format!(
            "the footer's `{ARROW_SCHEMA_META_KEY}` is not the contract's Arrow schema"
        )));
    }
    Ok(ShardMeta {
        path: path.to_path_buf(),
        build_id,
        bolted_collection,
        no_lbr,
        rows: meta.num_rows(),
        events: get(schema::KEY_EVENTS)
            .unwrap_or("")
            .split(',')
            .filter(|e| !e.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_and_schema_round_trip() {
        let text = b"boltedcollection\n1 a\\ b 10 2 c/f.c/1 20 1 5\n0 [unknown] 0 1 c 0 0 7\n";
        let profile = fdata::parse(text).unwrap();
        let origin = Origin {
            build_id: "abcd".into(),
            binary: "/bin/x".into(),
            dso: None,
            host: "h".into(),
            collected_at_us: 1,
            events: vec!["cycles".into(), "branches".into()],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.parquet");
        let rows = write(File::create(&path).unwrap(), &profile, &origin, &|l| {
            (l.name == "c").then_some(0x1000 + l.offset)
        })
        .unwrap();
        assert_eq!(rows, 2);
        let meta = inspect(&path).unwrap();
        assert_eq!(
            meta,
            ShardMeta {
                path: path.clone(),
                build_id: "abcd".into(),
                bolted_collection: true,
                no_lbr: false,
                rows: 2,
                events: vec!["cycles".into(), "branches".into()],
            }
        );
        // An empty profile still writes a valid (empty) shard.
        let empty = dir.path().join("e.parquet");
        let n = write(
            File::create(&empty).unwrap(),
            &fdata::Profile::default(),
            &origin,
            &|_| None,
        )
        .unwrap();
        assert_eq!(n, 0);
        assert_eq!(inspect(&empty).unwrap().rows, 0);
    }
}
