//! `pcmap-fleet` against the oracles: merging shards written from N pre-aggregated profiles gives
//! the fdata of `merge-fdata` 22 over perf2bolt 22's N outputs and of perf2bolt 22 on the
//! concatenated profile (plain and BOLTed binaries), and the YAML of perf2bolt 22 on the
//! concatenated profile; the merge written as pre-aggregated records gives merge-fdata's fdata
//! again through perf2bolt 22; pre-aggregated profiles converted to shards merge back to
//! perf2bolt 22's fdata; DuckDB reads the shards and finds the same totals per function; bad
//! shards fail with the file named and leave no output.

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_testkit as tk;

const NO_PIE: &[&str] = &[
    "-O2",
    "-fno-pie",
    "-no-pie",
    "-Wl,--emit-relocs",
    "-pthread",
];
const SPLIT_EH: &[&str] = &[
    "--enable-bat",
    "-reorder-blocks=ext-tsp",
    "-split-functions",
    "-split-all-cold",
    "-split-eh",
];

fn fleet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcmap-fleet"))
}

/// Sorted lines.
fn lines(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = s.lines().collect();
    v.sort_unstable();
    v
}

/// Generated profiles of `bin`, perf2bolt 22's and merge-fdata 22's outputs, and one shard per
/// profile written by `pcmap-fleet perf2bolt`.
struct Fixture {
    dir: PathBuf,
    bin: PathBuf,
    shards: Vec<PathBuf>,
    shard_dir: PathBuf,
    /// merge-fdata 22 over perf2bolt 22's fdata of each profile.
    merge_fdata: String,
    /// perf2bolt 22 on the concatenated profile: fdata and YAML.
    concat_fdata: String,
    concat_yaml: String,
}

fn fixture(bin: &Path, tag: &str, seeds: &[u64]) -> Fixture {
    let dir = tk::scratch_dir(&format!("fleet-{tag}"));
    let shard_dir = dir.join("shards");
    std::fs::create_dir_all(&shard_dir).unwrap();
    let funcs = support::disassemble(bin);
    let mut profiles = Vec::new();
    let mut concat = String::new();
    let mut singles = Vec::new();
    let mut shards = Vec::new();
    for (i, &seed) in seeds.iter().enumerate() {
        let text = support::generate(&funcs, 3000, seed, false);
        let p = dir.join(format!("prof-{i}.pa"));
        std::fs::write(&p, &text).unwrap();
        concat.push_str(&text);
        let (fdata, _) = support::perf2bolt(bin, &p, &dir.join(format!("p2b-{i}.fdata")), &[]);
        assert!(
            fdata.lines().count() > 50,
            "{tag}: perf2bolt wrote too little"
        );
        singles.push(dir.join(format!("p2b-{i}.fdata")));
        let shard = shard_dir.join(format!("host{i}.parquet"));
        tk::run_ok(
            fleet()
                .arg("perf2bolt")
                .arg(bin)
                .arg("--pa")
                .arg("-p")
                .arg(&p)
                .arg("-o")
                .arg(&shard)
                .args(["--host", &format!("host{i}")])
                .args(["--collected-at", &format!("{}", 1_700_000_000 + i * 3600)]),
        );
        shards.push(shard);
        profiles.push(p);
    }
    let merged = dir.join("merge-fdata.fdata");
    tk::run_ok(
        Command::new(tk::tool("merge-fdata"))
            .args(&singles)
            .arg("-o")
            .arg(&merged),
    );
    let concat_path = dir.join("concat.pa");
    std::fs::write(&concat_path, concat).unwrap();
    let yaml = dir.join("concat.yaml");
    let (concat_fdata, _) = support::perf2bolt(
        bin,
        &concat_path,
        &dir.join("concat.fdata"),
        &["-w", yaml.to_str().unwrap()],
    );
    Fixture {
        bin: bin.to_path_buf(),
        shards,
        shard_dir,
        merge_fdata: std::fs::read_to_string(merged).unwrap(),
        concat_fdata,
        concat_yaml: std::fs::read_to_string(yaml).unwrap(),
        dir,
    }
}

fn merge(args: &[&std::ffi::OsStr], out: &Path) -> String {
    tk::run_ok(fleet().arg("merge").args(args).arg("-o").arg(out));
    std::fs::read_to_string(out).unwrap()
}

fn check_merge(f: &Fixture, tag: &str) {
    let out = f.dir.join("fleet.fdata");
    let ours = merge(&[f.shard_dir.as_os_str()], &out);
    assert_eq!(
        lines(&ours),
        lines(&f.merge_fdata),
        "{tag}: fleet merge vs merge-fdata 22 ({})",
        f.dir.display()
    );
    assert_eq!(
        lines(&ours),
        lines(&f.concat_fdata),
        "{tag}: fleet merge vs perf2bolt 22 on the concatenated profile ({})",
        f.dir.display()
    );
    // One partition or several: the same bytes.
    let one = merge(
        &[
            f.shard_dir.as_os_str(),
            "--partitions".as_ref(),
            "1".as_ref(),
        ],
        &f.dir.join("fleet-1.fdata"),
    );
    assert_eq!(one, ours, "{tag}: --partitions 1");
    // The smallest memory limit the engine takes (the unit tests of pcmap-fleet's engine show it
    // spilling there on larger inputs): the same bytes.
    let limited = merge(
        &[
            f.shard_dir.as_os_str(),
            "--memory-limit".as_ref(),
            "32M".as_ref(),
        ],
        &f.dir.join("fleet-limited.fdata"),
    );
    assert_eq!(limited, ours, "{tag}: --memory-limit 32M");
    let r = tk::run(fleet().arg("merge").arg(&f.shard_dir).args([
        "--memory-limit",
        "1M",
        "-o",
        f.dir.join("never.fdata").to_str().unwrap(),
    ]));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        r.status.code() == Some(1)
            && stderr.contains("too small")
            && !f.dir.join("never.fdata").exists(),
        "{tag}: a memory limit below the engine's minimum is refused: {} {stderr}",
        r.status
    );
    let r = tk::run(fleet().arg("merge").arg(&f.shard_dir).args([
        "--memory-limit",
        "lots",
        "-o",
        f.dir.join("never.fdata").to_str().unwrap(),
    ]));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        r.status.code() == Some(2)
            && stderr.contains("512M")
            && !f.dir.join("never.fdata").exists(),
        "{tag}: a bad --memory-limit is a usage error: {} {stderr}",
        r.status
    );
    // Merging a merged shard with nothing else is the identity.
    let shard = f.dir.join("merged.parquet");
    tk::run_ok(
        fleet().arg("merge").arg("-o").arg(&shard).args(
            [
                f.shard_dir.as_os_str(),
                "--format".as_ref(),
                "parquet".as_ref(),
            ]
            .iter(),
        ),
    );
    let again = merge(&[shard.as_os_str()], &f.dir.join("again.fdata"));
    assert_eq!(again, ours, "{tag}: merge of the merged shard");
    // YAML: perf2bolt 22's on the concatenated profile, byte for byte.
    let yaml = merge(
        &[
            f.shard_dir.as_os_str(),
            "--format".as_ref(),
            "yaml".as_ref(),
            "--binary".as_ref(),
            f.bin.as_os_str(),
        ],
        &f.dir.join("fleet.yaml"),
    );
    assert_eq!(
        yaml,
        f.concat_yaml,
        "{tag}: YAML vs perf2bolt 22 -w on the concatenated profile ({})",
        f.dir.display()
    );
    // Filters: one host is that host's shard alone; a time window selects by collection time.
    let host1 = merge(
        &[f.shard_dir.as_os_str(), "--host".as_ref(), "host1".as_ref()],
        &f.dir.join("host1.fdata"),
    );
    let single = merge(&[f.shards[1].as_os_str()], &f.dir.join("single1.fdata"));
    assert_eq!(host1, single, "{tag}: --host host1");
    let window = merge(
        &[
            f.shard_dir.as_os_str(),
            "--since".as_ref(),
            "1700003600".as_ref(),
            "--until".as_ref(),
            "2023-11-15T00:13:20Z".as_ref(),
        ],
        &f.dir.join("window.fdata"),
    );
    assert_eq!(window, single, "{tag}: --since/--until");
    if f.merge_fdata.starts_with("boltedcollection") {
        // Offsets of the input binary have no address in the BOLTed one: no pre-aggregated output.
        let out = f.dir.join("bolted.pa");
        let r = tk::run(fleet().arg("merge").arg(&f.shard_dir).args([
            "--format".as_ref(),
            "preagg".as_ref(),
            "--binary".as_ref(),
            f.bin.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]));
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(
            r.status.code() == Some(1) && stderr.contains("boltedcollection") && !out.exists(),
            "{tag}: pre-aggregated output of a boltedcollection merge must be refused: {} {stderr}",
            r.status
        );
    } else {
        check_preagg_and_conversions(f, tag);
    }
    eprintln!(
        "{tag}: {} shards, {} merged records equal to merge-fdata 22 and perf2bolt 22; YAML equal",
        f.shards.len(),
        ours.lines().count()
    );
}

/// The merge as pre-aggregated records, converted by perf2bolt 22 (`--pa`), gives merge-fdata
/// 22's fdata; a pre-aggregated profile converted to a shard merges to perf2bolt 22's fdata of it;
/// perf2bolt 22's YAML converted to a shard merges back to that YAML.
fn check_preagg_and_conversions(f: &Fixture, tag: &str) {
    let pa = f.dir.join("merged.pa");
    tk::run_ok(fleet().arg("merge").arg(&f.shard_dir).args([
        "--format".as_ref(),
        "preagg".as_ref(),
        "--binary".as_ref(),
        f.bin.as_os_str(),
        "-o".as_ref(),
        pa.as_os_str(),
    ]));
    let (again, _) = support::perf2bolt(&f.bin, &pa, &f.dir.join("merged-pa.fdata"), &[]);
    assert_eq!(
        lines(&again),
        lines(&f.merge_fdata),
        "{tag}: perf2bolt 22 --pa on the merged pre-aggregated records vs merge-fdata 22 ({})",
        f.dir.display()
    );

    // perf2bolt 22's YAML of a profile a program could produce, converted to a shard (by
    // `convert` and by `perf2bolt -p`), merges back to that YAML byte for byte. (The fixture's
    // profiles also hold branches no program makes — a call landing in the middle of another
    // function — whose YAML call counts exceed the callee's `exec`; no set of records gives
    // such a YAML back.)
    let realistic = f.dir.join("realistic.pa");
    std::fs::write(
        &realistic,
        support::generate_realistic(&support::disassemble(&f.bin), 4000, 86),
    )
    .unwrap();
    let yaml_in = f.dir.join("realistic.yaml");
    support::perf2bolt(&f.bin, &realistic, &yaml_in, &["--profile-format=yaml"]);
    let yaml_text = std::fs::read_to_string(&yaml_in).unwrap();
    assert!(
        yaml_text.matches("cnt:").count() > 100,
        "{tag}: perf2bolt 22 wrote too little YAML ({})",
        yaml_in.display()
    );
    let converted = f.dir.join("from-yaml.parquet");
    tk::run_ok(
        fleet()
            .arg("convert")
            .arg(&yaml_in)
            .arg("--binary")
            .arg(&f.bin)
            .arg("-o")
            .arg(&converted),
    );
    let aggregated = f.dir.join("from-yaml-p2b.parquet");
    tk::run_ok(
        fleet()
            .arg("perf2bolt")
            .arg(&f.bin)
            .arg("-p")
            .arg(&yaml_in)
            .arg("-o")
            .arg(&aggregated),
    );
    for shard in [&converted, &aggregated] {
        let yaml = merge(
            &[
                shard.as_os_str(),
                "--format".as_ref(),
                "yaml".as_ref(),
                "--binary".as_ref(),
                f.bin.as_os_str(),
            ],
            &shard.with_extension("yaml"),
        );
        assert_eq!(
            yaml,
            yaml_text,
            "{tag}: perf2bolt 22's YAML -> {} -> YAML ({})",
            shard.display(),
            f.dir.display()
        );
    }
    // Without the binary the blocks mean nothing: refused, the file named, no shard.
    let refused = f.dir.join("from-yaml-nobinary.parquet");
    let r = tk::run(fleet().arg("convert").arg(&yaml_in).arg("-o").arg(&refused));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        r.status.code() == Some(1)
            && stderr.contains("realistic.yaml")
            && stderr.contains("needs --binary")
            && !refused.exists(),
        "{tag}: YAML conversion without --binary must be refused: {} {stderr}",
        r.status
    );

    let pa_shard = f.dir.join("from-pa.parquet");
    tk::run_ok(
        fleet()
            .arg("convert")
            .arg(f.dir.join("prof-0.pa"))
            .args(["--pa", "--binary"])
            .arg(&f.bin)
            .arg("-o")
            .arg(&pa_shard),
    );
    let fdata = merge(&[pa_shard.as_os_str()], &f.dir.join("from-pa.fdata"));
    let p2b = std::fs::read_to_string(f.dir.join("p2b-0.fdata")).unwrap();
    assert_eq!(
        lines(&fdata),
        lines(&p2b),
        "{tag}: pre-aggregated profile converted to a shard vs perf2bolt 22 ({})",
        f.dir.display()
    );
}

fn eh_binary() -> PathBuf {
    tk::build("perf2bolt-eh", &["perf2bolt/eh.cpp"], NO_PIE)
}

#[test]
fn merge_equals_merge_fdata_and_perf2bolt() {
    let f = fixture(&eh_binary(), "plain", &[81, 82, 83]);
    check_merge(&f, "plain");
}

#[test]
fn merge_of_bolted_binary_profiles_equals_merge_fdata() {
    let bolted = tk::bolt_with_instrumentation(&eh_binary(), &["40"], SPLIT_EH);
    let f = fixture(&bolted, "bolted", &[84, 85]);
    assert!(f.merge_fdata.starts_with("boltedcollection\n"));
    check_merge(&f, "bolted");
}

/// Per-function totals of fdata branch lines (source function; target for entries from unknown
/// code, as perf2bolt groups them).
fn fdata_totals(fdata: &str) -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    for l in fdata.lines().filter(|l| !l.starts_with("boltedcollection")) {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f.len(), 8, "simple names only: {l}");
        *m.entry(f[1].to_string()).or_default() += f[7].parse::<u64>().unwrap();
    }
    m
}

#[test]
fn duckdb_reads_the_shards() {
    let f = fixture(&eh_binary(), "duckdb", &[91, 92]);
    let py = r#"
import duckdb, sys
rows = duckdb.sql(f"SELECT from_name, SUM(count) FROM read_parquet('{sys.argv[1]}/*.parquet') WHERE kind = 'branch' GROUP BY 1 ORDER BY 1").fetchall()
for name, n in rows:
    print(f"{name} {n}")
"#;
    let out = tk::run_ok(Command::new("python3").arg("-c").arg(py).arg(&f.shard_dir));
    let duck: std::collections::BTreeMap<String, u64> = out
        .lines()
        .map(|l| {
            let (n, c) = l.rsplit_once(' ').unwrap();
            (n.to_string(), c.parse().unwrap())
        })
        .collect();
    let expected = fdata_totals(&f.merge_fdata);
    assert!(expected.len() > 5);
    assert_eq!(duck, expected, "DuckDB totals vs merge-fdata 22's fdata");
}

#[test]
fn query_totals_per_function() {
    let f = fixture(&eh_binary(), "query", &[93, 94]);
    let out = tk::run_ok(
        fleet()
            .arg("query")
            .arg("SELECT from_name, SUM(count) AS n FROM shards WHERE kind = 'branch' GROUP BY from_name ORDER BY from_name")
            .arg(&f.shard_dir)
            .args(["--format", "csv"]),
    );
    let got: std::collections::BTreeMap<String, u64> = out
        .lines()
        .skip(1)
        .map(|l| {
            let (n, c) = l.rsplit_once(',').unwrap();
            (n.to_string(), c.parse().unwrap())
        })
        .collect();
    assert_eq!(got, fdata_totals(&f.merge_fdata), "query vs merge-fdata 22");
    let json = tk::run_ok(
        fleet()
            .arg("query")
            .arg("SELECT host, SUM(count) AS n FROM shards GROUP BY host ORDER BY host")
            .arg(&f.shard_dir)
            .args(["--format", "json"]),
    );
    assert!(
        json.contains("\"host\":\"host0\"") && json.contains("\"host\":\"host1\""),
        "{json}"
    );
    let table = tk::run_ok(
        fleet()
            .arg("query")
            .arg("SELECT COUNT(*) AS records FROM shards")
            .arg(&f.shard_dir),
    );
    assert!(table.contains("| records |"), "{table}");
}
