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
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
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
        /// Memory the plan's operators may hold, in bytes; past it aggregation and sorting spill
        /// to temporary files (`None`: unbounded).
        memory_limit: Option<usize>,
    },
    /// A Ballista cluster: the scheduler's `HOST:PORT`. Shard paths must be readable by every
    /// executor at the same path.
    Ballista {
        /// `HOST:PORT` of the scheduler.
        scheduler: String,
    },
}

/// The smallest memory limit the embedded engine takes: below it, the grouping and sorting
/// cannot hold even the batches they must merge.
pub const MIN_MEMORY_LIMIT: usize = 32 << 20;

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
        Engine::Embedded {
            partitions,
            memory_limit,
        } => {
            let mut config = SessionConfig::new();
            if *partitions > 0 {
                config = config.with_target_partitions(*partitions);
            }
            let mut runtime = RuntimeEnvBuilder::new();
            if let Some(limit) = memory_limit {
                if *limit < MIN_MEMORY_LIMIT {
                    return Err(Error::MemoryLimit { limit: *limit });
                }
                // The fair pool shares the limit among the spilling operators (the grouping and
                // the sort of a merge), so that each spills instead of failing the plan.
                runtime = runtime.with_memory_pool(Arc::new(FairSpillPool::new(*limit)));
                // Each sort partition keeps this much back to merge its spilled runs (10 MB by
                // default): a share of the limit, so that small limits still leave room to work.
                let options = config.options_mut();
                options.execution.sort_spill_reservation_bytes = options
                    .execution
                    .sort_spill_reservation_bytes
                    .min(*limit / 8);
            }
            Ok(SessionContext::new_with_config_rt(
                config,
                runtime.build_arc()?,
            ))
        }
        Engine::Ballista { scheduler } => {
            use ballista::prelude::SessionContextExt;
            Ok(SessionContext::remote(&format!("df://{scheduler}")).await?)
        }
    }
}

/// Check every shard's footer and contract ([`shard::inspect`]); errors name the file.
pub fn inspect_all(paths: &[PathBuf]) -> Result<Vec<ShardMeta>> {
    paths
        .iter()
        .map(|p| shard::inspect(p).map_err(Error::from))
        .collect()
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

/// The merge plan: `merge-fdata`'s sum of counts and mispredictions per pair of locations, in
/// the record order pcmap's fdata writer uses (perf2bolt 22's; see `merge_order`), so that the
/// engine sorts (spilling when it must) and the client only formats rows as they arrive.
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
        "SELECT {keys}, \"{m}\", \"{c}\" FROM (SELECT {keys}, SUM(\"{m}\") AS \"{m}\", \
         SUM(\"{c}\") AS \"{c}\" FROM {TABLE}{cond} GROUP BY {keys}) ORDER BY {order}",
        m = col::MISPREDICTS,
        c = col::COUNT,
        order = merge_order(),
    )
}

/// The `ORDER BY` list of [`merge_sql`]: branch records first, then samples, then memory
/// records. Branches are grouped by function — the source's name, or the target's for an entry
/// from outside the binary (a DSO location) — with groups in byte order of the names as fdata
/// writes them (escaped), and a function's own branches before the entries from outside; inside
/// a group, and for samples and memory records, by source then target location, a location
/// ordering DSO names before symbols, then by escaped name, offset (unsigned) and kind. This is
/// [`pcmap_profile::fdata::sort_branches_like_perf2bolt`]'s order, which a test checks.
fn merge_order() -> String {
    // fdata escapes: a blank or a backslash is preceded by a backslash (`chr(92)`: no SQL string
    // literal has to spell one).
    let escaped = |c: &str| {
        format!("replace(replace(\"{c}\", chr(92), chr(92) || chr(92)), ' ', chr(92) || ' ')")
    };
    let (kind, fk, tk) = (col::KIND, col::FROM_KIND, col::TO_KIND);
    let rank = format!(
        "CASE \"{kind}\" WHEN '{}' THEN 0 WHEN '{}' THEN 1 ELSE 2 END",
        kind::BRANCH,
        kind::SAMPLE
    );
    let external = format!("(\"{kind}\" = '{}' AND \"{fk}\" = 0)", kind::BRANCH);
    let group = format!(
        "CASE WHEN {external} THEN {} WHEN \"{kind}\" = '{}' THEN {} ELSE '' END",
        escaped(col::TO_NAME),
        kind::BRANCH,
        escaped(col::FROM_NAME)
    );
    // Offsets are u64 bit patterns in Int64: negative values are the upper half.
    let location = |k: &str, n: &str, o: &str| {
        format!(
            "\"{k}\" <> 0, {}, \"{o}\" < 0, \"{o}\", \"{k}\"",
            escaped(n)
        )
    };
    format!(
        "{rank}, {group}, {external}, {}, {}",
        location(fk, col::FROM_NAME, col::FROM_OFFSET),
        location(tk, col::TO_NAME, col::TO_OFFSET)
    )
}

/// Register `paths` on `engine`, run `sql` and return its result as a stream of batches.
pub async fn query_stream(
    engine: &Engine,
    paths: &[PathBuf],
    sql: &str,
) -> Result<SendableRecordBatchStream> {
    let ctx = context(engine).await?;
    register(&ctx, paths).await?;
    Ok(ctx.sql(sql).await?.execute_stream().await?)
}

/// Run `sql` over `paths` on `engine` and collect the result.
pub async fn query(engine: &Engine, paths: &[PathBuf], sql: &str) -> Result<Vec<RecordBatch>> {
    let ctx = context(engine).await?;
    register(&ctx, paths).await?;
    Ok(ctx.sql(sql).await?.collect().await?)
}

/// What the merged profile's header says, known from the shards' footers before the plan runs.
#[derive(Clone, Debug)]
pub struct MergeHeader {
    /// The shards read.
    pub shards: Vec<ShardMeta>,
    /// The sampled events of the shards, first occurrence order.
    pub events: Vec<String>,
    /// The shards were collected on a BOLTed binary (fdata `boltedcollection`).
    pub bolted_collection: bool,
    /// The shards hold basic samples (fdata `no_lbr`).
    pub no_lbr: bool,
}

impl MergeHeader {
    /// Write the fdata header lines (like `merge-fdata`, the `no_lbr` line names no event).
    pub fn write_fdata_header<W: std::io::Write + ?Sized>(&self, w: &mut W) -> std::io::Result<()> {
        let no_events: &[String] = &[];
        fdata::write_header(w, self.bolted_collection, self.no_lbr.then_some(no_events))
    }
}

/// A merge under way: its header, and its records as the engine produces them, in
/// [`merge_sql`]'s order. Reading it holds one batch at a time; the engine bounds the rest.
pub struct MergeStream {
    /// The merged profile's header.
    pub header: MergeHeader,
    batches: SendableRecordBatchStream,
    rows: usize,
}

impl MergeStream {
    /// Call `each` with every merged record, in order; returns how many there were. Errors of
    /// `each` stop the merge and are returned.
    pub async fn for_each_line<E>(
        &mut self,
        mut each: impl FnMut(&Line<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<usize, E>
    where
        E: From<Error>,
    {
        while let Some(batch) = self.batches.next().await {
            let batch = batch.map_err(Error::from)?;
            for_each_row_line(&batch, self.rows, &mut each)?;
            self.rows += batch.num_rows();
        }
        Ok(self.rows)
    }
}

/// Start merging the shards `paths` (checked first; errors name the file) on `engine`.
pub async fn merge_stream(
    engine: &Engine,
    paths: &[PathBuf],
    filter: &Filter,
) -> Result<MergeStream> {
    let metas = inspect_all(paths)?;
    let chosen = select(&metas, filter)?;
    let files: Vec<PathBuf> = chosen.iter().map(|m| m.path.clone()).collect();
    let mut events: Vec<String> = Vec::new();
    for m in &chosen {
        for e in &m.events {
            if !events.contains(e) {
                events.push(e.clone());
            }
        }
    }
    let header = MergeHeader {
        bolted_collection: chosen[0].bolted_collection,
        no_lbr: chosen[0].no_lbr,
        shards: chosen.into_iter().cloned().collect(),
        events,
    };
    let batches = query_stream(engine, &files, &merge_sql(filter)).await?;
    Ok(MergeStream {
        header,
        batches,
        rows: 0,
    })
}

/// A merge collected in memory (for outputs that need every record at once: YAML and
/// pre-aggregated text, which go back onto the binary's functions).
#[derive(Debug)]
pub struct Merged {
    /// The merged profile, in [`merge_sql`]'s order.
    pub profile: fdata::Profile<'static>,
    /// The shards read.
    pub shards: Vec<ShardMeta>,
    /// The sampled events of the shards, first occurrence order.
    pub events: Vec<String>,
}

/// Merge the shards `paths` (checked first; errors name the file) on `engine`, in memory.
pub async fn merge(engine: &Engine, paths: &[PathBuf], filter: &Filter) -> Result<Merged> {
    let mut stream = merge_stream(engine, paths, filter).await?;
    let mut lines = Vec::new();
    stream
        .for_each_line(|l: &Line<'_>| -> Result<()> {
            lines.push(l.clone().into_owned());
            Ok(())
        })
        .await?;
    let MergeHeader {
        shards,
        events,
        bolted_collection,
        no_lbr,
    } = stream.header;
    Ok(Merged {
        profile: fdata::Profile {
            bolted_collection,
            no_lbr: no_lbr.then(Vec::new),
            lines,
        },
        shards,
        events,
    })
}

/// The location in row `r` of a kind, a name and an offset column; names are borrowed unless
/// they need fdata escapes.
fn row_location<'a>(
    k: &datafusion::arrow::array::UInt8Array,
    n: &'a datafusion::arrow::array::StringArray,
    o: &datafusion::arrow::array::Int64Array,
    r: usize,
) -> std::result::Result<Location<'a>, &'static str> {
    if k.is_null(r) || n.is_null(r) || o.is_null(r) {
        return Err("missing location");
    }
    Ok(Location {
        kind: shard::kind_of_digit(k.value(r)).ok_or("location kind")?,
        name: fdata::escape_name(n.value(r)),
        // Offsets are stored as 64-bit patterns.
        offset: o.value(r) as u64,
    })
}

/// Call `each` with the fdata line of every row of `b` (the columns of [`merge_sql`]); `base` is
/// the first row's number in the whole result, for errors. Names are borrowed from the batch
/// unless they need fdata escapes.
fn for_each_row_line<E: From<Error>>(
    b: &RecordBatch,
    base: usize,
    each: &mut impl FnMut(&Line<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    // The engine may hand strings as views and narrow types: cast once per batch.
    let text = |i: usize| cast(b.column(i), &DataType::Utf8).map_err(Error::from);
    let int = |i: usize| cast(b.column(i), &DataType::Int64).map_err(Error::from);
    let byte = |i: usize| cast(b.column(i), &DataType::UInt8).map_err(Error::from);
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
        let loc = |k, n, o| row_location(k, n, o, r).map_err(bad);
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
            other => return Err(bad(&format!("unknown record kind {other:?}")).into()),
        };
        each(&line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::Origin;
    use pcmap_profile::fdata::LocationKind;
    use proptest::prelude::*;

    /// Names that exercise the order: fdata escapes (blank, backslash) sort differently escaped
    /// than plain (`\ ` > `!`), a prefix, bytes above ASCII.
    const NAMES: &[&str] = &["a", "a b", "a!", "a\\c", "ab", "[unknown]", "é", "f/x.c/1"];
    const OFFSETS: &[u64] = &[
        0,
        1,
        0x10,
        0x7fff_ffff_ffff_ffff,
        0x8000_0000_0000_0000,
        u64::MAX,
    ];

    fn location() -> impl Strategy<Value = Location<'static>> {
        (0..3u8, 0..NAMES.len(), 0..OFFSETS.len()).prop_map(|(k, n, o)| Location {
            kind: shard::kind_of_digit(k).unwrap(),
            name: fdata::escape_name(NAMES[n]).into_owned().into(),
            offset: OFFSETS[o],
        })
    }

    fn lbr_line() -> impl Strategy<Value = Line<'static>> {
        prop_oneof![
            (location(), location(), 0..3u64, 1..9u64).prop_map(|(from, to, mispreds, count)| {
                Line::Branch(BranchRecord {
                    from,
                    to,
                    mispreds,
                    count,
                })
            }),
            (location(), location(), 1..9u64).prop_map(|(pc, addr, count)| Line::Mem(MemRecord {
                pc,
                addr,
                count
            })),
        ]
    }

    fn sample_line() -> impl Strategy<Value = Line<'static>> {
        (location(), 1..9u64).prop_map(|(at, count)| Line::Sample(SampleRecord { at, count }))
    }

    /// Write each profile as a shard, merge them on the embedded engine, and compare with the
    /// in-memory fdata merge (whose branch order is perf2bolt's, checked against perf2bolt 22 in
    /// pcmap-profile and pcmap-perf2bolt).
    fn merged_like_merge_fdata(
        profiles: Vec<fdata::Profile<'static>>,
        memory: Option<usize>,
    ) -> String {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin {
            build_id: "ab".into(),
            host: "h".into(),
            ..Origin::default()
        };
        let mut paths = Vec::new();
        for (i, p) in profiles.iter().enumerate() {
            let path = dir.path().join(format!("{i}.parquet"));
            shard::write(std::fs::File::create(&path).unwrap(), p, &origin, &|_| None).unwrap();
            paths.push(path);
        }
        let engine = Engine::Embedded {
            partitions: 2,
            memory_limit: memory,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let merged = rt
            .block_on(merge(&engine, &paths, &Filter::default()))
            .unwrap();
        let expected = pcmap_profile::merge::merge_fdata(&profiles).unwrap();
        assert_eq!(merged.profile.bolted_collection, expected.bolted_collection);
        assert_eq!(merged.profile.is_no_lbr(), expected.is_no_lbr());
        assert_eq!(merged.profile.lines, expected.lines);
        // The plan's operators and their metrics (spills, rows), for the caller to look at.
        let explain = format!("EXPLAIN ANALYZE {}", merge_sql(&Filter::default()));
        let batches = rt.block_on(query(&engine, &paths, &explain)).unwrap();
        datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn lbr_merge_order_is_merge_fdata_order(
            a in proptest::collection::vec(lbr_line(), 0..40),
            b in proptest::collection::vec(lbr_line(), 1..40),
        ) {
            let profile = |lines| fdata::Profile { bolted_collection: false, no_lbr: None, lines };
            merged_like_merge_fdata(vec![profile(a), profile(b)], None);
        }

        #[test]
        fn sample_merge_order_is_merge_fdata_order(
            a in proptest::collection::vec(sample_line(), 1..40),
            b in proptest::collection::vec(sample_line(), 0..40),
        ) {
            let profile = |lines| fdata::Profile { bolted_collection: true, no_lbr: Some(Vec::new()), lines };
            merged_like_merge_fdata(vec![profile(a), profile(b)], None);
        }
    }

    /// Under the smallest memory limit (below what grouping and sorting 120,000 rows need) the
    /// plan spills — the test checks the operators' spill counts — and gives the same records in
    /// the same order.
    #[test]
    fn merge_spills_under_a_small_memory_limit() {
        let mut lines = Vec::new();
        for i in 0..60_000u64 {
            let name = format!("f{}", i % 3001);
            lines.push(Line::Branch(BranchRecord {
                from: Location {
                    kind: LocationKind::Symbol,
                    name: name.clone().into(),
                    offset: i % 977,
                },
                to: Location {
                    kind: LocationKind::Symbol,
                    name: format!("g{}", i % 13).into(),
                    offset: i % 7,
                },
                mispreds: i % 2,
                count: 1 + i % 5,
            }));
        }
        let p = fdata::Profile {
            bolted_collection: false,
            no_lbr: None,
            lines,
        };
        let plan = merged_like_merge_fdata(vec![p.clone(), p], Some(MIN_MEMORY_LIMIT));
        let spills: u64 = plan
            .match_indices("spill_count=")
            .map(|(i, m)| {
                let rest = &plan[i + m.len()..];
                let end = rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
                rest[..end].parse::<u64>().unwrap_or(0)
            })
            .sum();
        assert!(spills > 0, "the plan did not spill:\n{plan}");
    }
}
