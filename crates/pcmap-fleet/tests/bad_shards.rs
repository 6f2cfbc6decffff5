//! Bad shards: truncated, another schema version, wrong column types, not Parquet, and shards of
//! two builds without a build-id filter. Each fails with the file named and leaves no output.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use pcmap_fleet::datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use pcmap_fleet::datafusion::arrow::datatypes::{DataType, Field, Schema};
use pcmap_fleet::datafusion::parquet::arrow::ArrowWriter;
use pcmap_fleet::datafusion::parquet::file::metadata::KeyValue;
use pcmap_fleet::datafusion::parquet::file::properties::WriterProperties;
use pcmap_fleet::schema;
use pcmap_testkit as tk;

fn fleet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcmap-fleet"))
}

const FDATA: &str = "1 main 10 1 main 20 1 5\n1 main 24 1 work 0 0 7\n0 [unknown] 0 1 work 0 0 2\n";

/// A valid shard of FDATA with build-id `id`.
fn shard(dir: &Path, name: &str, id: &str) -> PathBuf {
    let fdata = dir.join(format!("{name}.fdata"));
    std::fs::write(&fdata, FDATA).unwrap();
    let out = dir.join(format!("{name}.parquet"));
    tk::run_ok(
        fleet()
            .arg("convert")
            .arg(&fdata)
            .arg("-o")
            .arg(&out)
            .args(["--build-id", id, "--host", name, "--collected-at", "0"]),
    );
    out
}

/// A Parquet file with one column `count` of strings and the given footer version.
fn foreign(path: &Path, version: &str, column: &str, ty: DataType) {
    let schema = Arc::new(Schema::new(vec![Field::new(column, ty.clone(), false)]));
    let col: ArrayRef = match ty {
        DataType::Utf8 => Arc::new(StringArray::from(vec!["1"])),
        _ => unreachable!(),
    };
    let batch = RecordBatch::try_new(schema.clone(), vec![col]).unwrap();
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![
            KeyValue::new(schema::KEY_VERSION.into(), version.to_string()),
            KeyValue::new(schema::KEY_BOLTED.into(), "false".to_string()),
            KeyValue::new(schema::KEY_NO_LBR.into(), "false".to_string()),
        ]))
        .build();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// `pcmap-fleet merge INPUTS -o OUT` fails, names `culprit` and `expect`, and writes no OUT.
fn fails(dir: &Path, inputs: &[&Path], culprit: &Path, expect: &str) {
    let out = dir.join("out.fdata");
    let _ = std::fs::remove_file(&out);
    let r = tk::run(fleet().arg("merge").args(inputs).arg("-o").arg(&out));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{}: {stderr}", culprit.display());
    assert!(
        stderr.contains(&culprit.display().to_string()) && stderr.contains(expect),
        "{}: expected {expect:?} in {stderr}",
        culprit.display()
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.exists(), "{}: output left behind", culprit.display());
}

#[test]
fn bad_shards_are_named_and_leave_no_output() {
    let dir = tk::scratch_dir("fleet-bad-shards");
    let good = shard(&dir, "good", "aa01");
    // A good merge first: the fdata merge of one shard is the shard's records.
    let out = dir.join("good.fdata");
    tk::run_ok(fleet().arg("merge").arg(&good).arg("-o").arg(&out));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "1 main 10 1 main 20 1 5\n1 main 24 1 work 0 0 7\n0 [unknown] 0 1 work 0 0 2\n"
    );

    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.join("truncated.parquet");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    fails(
        &dir,
        &[&good, &truncated],
        &truncated,
        "not a readable Parquet shard",
    );

    let text = dir.join("text.parquet");
    std::fs::write(&text, FDATA).unwrap();
    fails(&dir, &[&good, &text], &text, "not a readable Parquet shard");

    let v2 = dir.join("v2.parquet");
    foreign(&v2, "2", "count", DataType::Utf8);
    fails(&dir, &[&good, &v2], &v2, "shard schema version 2");

    let types = dir.join("types.parquet");
    foreign(&types, "1", "count", DataType::Utf8);
    fails(&dir, &[&good, &types], &types, "column `kind` is missing");

    let other_build = shard(&dir, "other", "bb02");
    fails(&dir, &[&good, &other_build], &other_build, "build-id");
    // With a filter, the other build's shard is skipped.
    let out = dir.join("filtered.fdata");
    tk::run_ok(
        fleet()
            .arg("merge")
            .args([&good, &other_build])
            .args(["--build-id", "AA01"])
            .arg("-o")
            .arg(&out),
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "1 main 10 1 main 20 1 5\n1 main 24 1 work 0 0 7\n0 [unknown] 0 1 work 0 0 2\n"
    );
}

#[test]
fn wrong_column_type_is_named() {
    // A shard whose columns are all there but `count` is text: built from a real shard's schema.
    let dir = tk::scratch_dir("fleet-bad-types");
    let good = shard(&dir, "good", "aa01");
    let want = schema::schema();
    let fields: Vec<Field> = want
        .fields()
        .iter()
        .map(|f| {
            if f.name() == schema::col::COUNT {
                Field::new(f.name(), DataType::Utf8, false)
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    let bad_schema = Arc::new(Schema::new(fields));
    let cols: Vec<ArrayRef> = bad_schema
        .fields()
        .iter()
        .map(|f| pcmap_fleet::datafusion::arrow::array::new_null_array(f.data_type(), 0))
        .collect();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(
            bad_schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        )),
        cols,
    )
    .unwrap();
    let path = dir.join("types.parquet");
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![
            KeyValue::new(schema::KEY_VERSION.into(), "1".to_string()),
            KeyValue::new(schema::KEY_BOLTED.into(), "false".to_string()),
            KeyValue::new(schema::KEY_NO_LBR.into(), "false".to_string()),
        ]))
        .build();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch.schema(),
        Some(props),
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    fails(&dir, &[&good, &path], &path, "column `count` has type Utf8");
}
