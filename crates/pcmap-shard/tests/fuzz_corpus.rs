//! Replays the committed corpus of the `fleet_shard` fuzz target (`fuzz/corpus/fleet_shard/`)
//! through the shard check, as `pcmap-fuzz`'s corpus test does for the other targets: every
//! input must give a shard description or an error naming the input, never a panic; the valid
//! shards among the seeds must pass.

use std::path::{Path, PathBuf};

#[test]
fn fleet_shard_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/fleet_shard");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 4, "{}: corpus too small", dir.display());
    let mut valid = 0;
    for input in &inputs {
        let data = std::fs::read(input).unwrap();
        match pcmap_shard::shard::inspect_bytes(&data, input) {
            Ok(meta) => {
                assert!(meta.rows >= 0, "{}", input.display());
                valid += 1;
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(&input.display().to_string()),
                    "{}: error does not name the input: {msg}",
                    input.display()
                );
            }
        }
    }
    assert!(valid > 0, "no valid shard among the seeds");
}

/// Every input the fuzz target found that kept parquet's Thrift reader busy for seconds
/// (booleans it skips without reading a byte, found through lists, maps, a row group and a
/// 16-bit field id) or made it ask for gigabytes (schema elements declaring more children than
/// the schema has) is refused by pcmap's footer walk before parquet decodes it.
#[test]
fn hostile_footers_are_refused_before_parquet_decodes_them() {
    for name in [
        "timeout-field-id-16-bits",
        "timeout-footer-skip",
        "timeout-map-of-bool-lists",
        "timeout-row-group-skip",
        "oom-schema-children",
        "oom-schema-children-2",
        "oom-schema-children-3",
    ] {
        let input = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/fleet_shard")
            .join(name);
        let data = std::fs::read(&input).unwrap();
        let msg = pcmap_shard::shard::inspect_bytes(&data, &input)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("malformed Parquet footer at byte offset"),
            "{msg}"
        );
    }
}
