//! The SQL plans over shards, run on Apache DataFusion in the process ([`Engine::Embedded`]) or on
//! an Apache DataFusion Ballista cluster ([`Engine::Ballista`]). Shards are registered as one
//! listing table, `shards`, whose scan streams row groups: no plan loads whole shards.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt8Type};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::{SessionConfig, SessionContext};
use pcmap_profile::fdata::{self, BranchRecord, Line, Location, MemRecord, SampleRecord};

use crate::schema::{self, col, kind};
use crate::shard::{self, ShardMeta};
use crate::{Error, Result};

/// Where plans run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    /// DataFusion in this process, with this many partitions (0 = one per core).
    Embedded {
        /// Target partitions.
        partitions: usize,
    },
    /// A Ballista cluster: the scheduler's `HOST:PORT`. Shard paths must be readable by every
    /// executor at the same path.
    Ballista {
        /// `HOST:PORT` of the scheduler.
        scheduler: String,
    },
}

/// The table name shards are registered under in SQL.
pub const TABLE: &str = "shards";

/// Which records a merge reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only shards of this build-id (required when shards of several builds are given).
    pub build_id: Option<String>,
    /// Only these hosts (empty = all).
    pub hosts: Vec<String>,
    /// Only collections at or after this time (microseconds since the epoch, UTC).
    pub since_us: Option<i64>,
    /// Only collections before this time (microseconds since the epoch, UTC).
    pub until_us: Option<i64>,
}

/// A session of `engine`.
pub async fn context(engine: &Engine) -> Result<SessionContext> {
    match engine {
        Engine::Embedded { partitions } => {
            let mut config = SessionConfig::new();
            if *partitions > 0 {
                config = config.with_target_partitions(*partitions);
            }
            Ok(SessionContext::new_with_config(config))
        }
        Engine::Ballista { scheduler } => {
            use ballista::prelude::SessionContextExt;
            Ok(SessionContext::remote(&format!("df://{scheduler}")).await?)
        }
    }
}

/// Check every shard's footer and contract ([`shard::inspect`]); errors name the file.
pub fn inspect_all(paths: &[PathBuf]) -> Result<Vec<ShardMeta>> {
    paths.iter().map(|p| shard::inspect(p)).collect()
}

/// The shards a merge reads: those of `filter.build_id` (all, when it is `None` and every shard
/// has the same build-id), refusing to mix `boltedcollection` with plain profiles and LBR with
/// basic-sample profiles (as `merge-fdata` does).
pub fn select<'a>(metas: &'a [ShardMeta], filter: &Filter) -> Result<Vec<&'a ShardMeta>> {
    let chosen: Vec<&ShardMeta> = match &filter.build_id {
        Some(id) => metas.iter().filter(|m| &m.build_id == id).collect(),
        None => {
            if let Some(first) = metas.first()
                && let Some(other) = metas.iter().find(|m| m.build_id != first.build_id)
            {
                return Err(Error::Mixed {
                    path: other.path.clone(),
                    what: format!(
                        "build-id {:?} differs from {:?} of {}; choose one with a build-id filter",
                        other.build_id,
                        first.build_id,
                        first.path.display()
                    ),
                });
            }
            metas.iter().collect()
        }
    };
    let Some(first) = chosen.first() else {
        return Err(Error::NoShards(if filter.build_id.is_some() {
            " with that build-id"
        } else {
            ""
        }));
    };
    for m in &chosen {
        if m.bolted_collection != first.bolted_collection {
            return Err(Error::Mixed {
                path: m.path.clone(),
                what: "cannot mix profile with and without boltedcollection".into(),
            });
        }
        if m.no_lbr != first.no_lbr {
            return Err(Error::Mixed {
                path: m.path.clone(),
                what: "cannot mix profile with and without no_lbr".into(),
            });
        }
    }
    Ok(chosen)
}

/// Register `paths` as table [`TABLE`] in `ctx` with the contract's schema.
pub async fn register(ctx: &SessionContext, paths: &[PathBuf]) -> Result<()> {
    let urls = paths
        .iter()
        .map(|p| {
            let abs = std::path::absolute(p).map_err(|source| Error::Io {
                path: p.clone(),
                source,
            })?;
            Ok(ListingTableUrl::parse(abs.to_string_lossy())?)
        })
        .collect::<Result<Vec<_>>>()?;
    let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension("");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .with_schema(schema::schema());
    ctx.register_table(TABLE, Arc::new(ListingTable::try_new(config)?))?;
    Ok(())
}

/// A SQL string literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The merge plan: `merge-fdata`'s sum of counts and mispredictions per pair of locations.
pub fn merge_sql(filter: &Filter) -> String {
    let keys = [
        col::KIND,
        col::FROM_KIND,
        col::FROM_NAME,
        col::FROM_OFFSET,
        col::TO_KIND,
        col::TO_NAME,
        col::TO_OFFSET,
    ]
    .map(|c| format!("\"{c}\""))
    .join(", ");
    let mut conds = Vec::new();
    if let Some(id) = &filter.build_id {
        conds.push(format!("\"{}\" = {}", col::BUILD_ID, literal(id)));
    }
    if !filter.hosts.is_empty() {
        let list: Vec<String> = filter.hosts.iter().map(|h| literal(h)).collect();
        conds.push(format!("\"{}\" IN ({})", col::HOST, list.join(", ")));
    }
    let at = format!("arrow_cast(\"{}\", 'Int64')", col::COLLECTED_AT);
    if let Some(t) = filter.since_us {
        conds.push(format!("{at} >= {t}"));
    }
    if let Some(t) = filter.until_us {
        conds.push(format!("{at} < {t}"));
    }
    let cond = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    format!(
        "SELECT {keys}, SUM(\"{m}\") AS \"{m}\", SUM(\"{c}\") AS \"{c}\" FROM {TABLE}{cond} GROUP BY {keys}",
        m = col::MISPREDICTS,
        c = col::COUNT,
    )
}

/// Run `sql` over `paths` on `engine` and collect the result.
pub async fn query(engine: &Engine, paths: &[PathBuf], sql: &str) -> Result<Vec<RecordBatch>> {
    let ctx = context(engine).await?;
    register(&ctx, paths).await?;
    Ok(ctx.sql(sql).await?.collect().await?)
}

/// The result of a merge.
#[derive(Debug)]
pub struct Merged {
    /// The merged profile, in `merge-fdata`'s record order (see [`pcmap_profile::merge`]).
    pub profile: fdata::Profile<'static>,
    /// The shards read.
    pub shards: Vec<ShardMeta>,
    /// The sampled events of the shards, first occurrence order.
    pub events: Vec<String>,
}

/// Merge the shards `paths` (checked first; errors name the file) on `engine`.
pub async fn merge(engine: &Engine, paths: &[PathBuf], filter: &Filter) -> Result<Merged> {
    let metas = inspect_all(paths)?;
    let chosen = select(&metas, filter)?;
    let files: Vec<PathBuf> = chosen.iter().map(|m| m.path.clone()).collect();
    let bolted_collection = chosen[0].bolted_collection;
    let no_lbr = chosen[0].no_lbr;
    let mut events: Vec<String> = Vec::new();
    for m in &chosen {
        for e in &m.events {
            if !events.contains(e) {
                events.push(e.clone());
            }
        }
    }
    let shards: Vec<ShardMeta> = chosen.into_iter().cloned().collect();
    let batches = query(engine, &files, &merge_sql(filter)).await?;
    let mut lines = Vec::new();
    for b in &batches {
        rows_to_lines(b, &mut lines)?;
    }
    let summed = fdata::Profile {
        bolted_collection,
        no_lbr: no_lbr.then(Vec::new),
        lines,
    };
    // The SQL plan summed; the fdata merge adds the headers and merge-fdata's record order.
    let profile = pcmap_profile::merge::merge_fdata(&[summed])?;
    Ok(Merged {
        profile,
        shards,
        events,
    })
}

/// Turn merged rows (the columns of [`merge_sql`]) into fdata lines.
fn rows_to_lines(b: &RecordBatch, out: &mut Vec<Line<'static>>) -> Result<()> {
    let text = |i: usize| cast(b.column(i), &DataType::Utf8);
    let int = |i: usize| cast(b.column(i), &DataType::Int64);
    let byte = |i: usize| cast(b.column(i), &DataType::UInt8);
    let (kinds, from_kind, from_name, from_off) = (text(0)?, byte(1)?, text(2)?, int(3)?);
    let (to_kind, to_name, to_off) = (byte(4)?, text(5)?, int(6)?);
    let (mispreds, counts) = (int(7)?, int(8)?);
    let kinds = kinds.as_string::<i32>();
    let from_kind = from_kind.as_primitive::<UInt8Type>();
    let from_name = from_name.as_string::<i32>();
    let from_off = from_off.as_primitive::<Int64Type>();
    let to_kind = to_kind.as_primitive::<UInt8Type>();
    let to_name = to_name.as_string::<i32>();
    let to_off = to_off.as_primitive::<Int64Type>();
    let mispreds = mispreds.as_primitive::<Int64Type>();
    let counts = counts.as_primitive::<Int64Type>();
    let base = out.len();
    for r in 0..b.num_rows() {
        let bad = |what: &str| Error::BadRecord {
            row: base + r,
            what: what.to_string(),
        };
        let num = |a: &datafusion::arrow::array::Int64Array, what: &str| -> Result<u64> {
            if a.is_null(r) || a.value(r) < 0 {
                return Err(bad(what));
            }
            Ok(a.value(r) as u64)
        };
        let loc = |k: &datafusion::arrow::array::UInt8Array,
                   n: &datafusion::arrow::array::StringArray,
                   o: &datafusion::arrow::array::Int64Array|
         -> Result<Location<'static>> {
            if k.is_null(r) || n.is_null(r) || o.is_null(r) {
                return Err(bad("missing location"));
            }
            Ok(Location {
                kind: shard::kind_of_digit(k.value(r)).ok_or_else(|| bad("location kind"))?,
                name: fdata::escape_name(n.value(r)).into_owned().into(),
                // Offsets are stored as 64-bit patterns.
                offset: o.value(r) as u64,
            })
        };
        let count = num(counts, "count is negative or missing")?;
        let line = match kinds.value(r) {
            kind::BRANCH => Line::Branch(BranchRecord {
                from: loc(from_kind, from_name, from_off)?,
                to: loc(to_kind, to_name, to_off)?,
                mispreds: num(mispreds, "mispredicts is negative or missing")?,
                count,
            }),
            kind::SAMPLE => Line::Sample(SampleRecord {
                at: loc(from_kind, from_name, from_off)?,
                count,
            }),
            kind::MEMORY => Line::Mem(MemRecord {
                pc: loc(from_kind, from_name, from_off)?,
                addr: loc(to_kind, to_name, to_off)?,
                count,
            }),
            other => return Err(bad(&format!("unknown record kind {other:?}"))),
        };
        out.push(line);
    }
    Ok(())
}
