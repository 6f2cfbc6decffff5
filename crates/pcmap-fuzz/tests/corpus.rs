//! Replays every committed fuzz input (`fuzz/corpus/<target>/*`, minimized corpora and the inputs
//! of crashes found and fixed) through the target's body, so `cargo test` on the stable toolchain
//! guards them: a panic here names the target and the input file.

use std::path::PathBuf;

fn corpus_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

#[test]
fn every_target_has_a_committed_corpus() {
    for (name, _) in pcmap_fuzz::TARGETS {
        let dir = corpus_root().join(name);
        let n = std::fs::read_dir(&dir)
            .map(|d| d.count())
            .unwrap_or_else(|e| {
                panic!("no corpus for fuzz target {name} at {}: {e}", dir.display())
            });
        assert!(
            n > 0,
            "the corpus of fuzz target {name} ({}) is empty",
            dir.display()
        );
    }
}

#[test]
fn committed_corpora_replay_without_panics() {
    let mut replayed = 0;
    for (name, body) in pcmap_fuzz::TARGETS {
        let Ok(dir) = std::fs::read_dir(corpus_root().join(name)) else {
            continue;
        };
        let mut inputs: Vec<PathBuf> = dir.map(|e| e.unwrap().path()).collect();
        inputs.sort();
        for input in inputs {
            let data = std::fs::read(&input).unwrap();
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(
                outcome.is_ok(),
                "fuzz target {name} panicked on {}",
                input.display()
            );
            replayed += 1;
        }
    }
    assert!(replayed > 0, "no corpus input was replayed");
}
