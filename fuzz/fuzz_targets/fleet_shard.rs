//! The fleet shard check (`pcmap_shard::shard::inspect`) on arbitrary bytes: a clear error or
//! the shard's description, never a panic. Corpus: shards written by `pcmap-fleet` and damaged
//! copies; `crates/pcmap-shard/tests/fuzz_corpus.rs` replays it in `cargo test`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pcmap_shard::shard::inspect_bytes(data, std::path::Path::new("fuzz-input"));
});
