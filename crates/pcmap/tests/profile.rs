//! `pcmap merge-fdata` against LLVM's `merge-fdata` and perf2bolt, and located errors for malformed
//! profiles.

#[path = "../../pcmap-profile/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use pcmap_testkit::{run, run_ok, scratch_dir, tool};

fn pcmap(args: &[&std::ffi::OsStr]) -> Output {
    run(Command::new(env!("CARGO_BIN_EXE_pcmap")).args(args))
}

fn lines_multiset(text: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        *m.entry(l.to_string()).or_default() += 1;
    }
    m
}

fn output_of<'c>(c: &'c common::Corpus, tag: &str) -> &'c Path {
    &c.outputs.iter().find(|(d, _)| d == tag).unwrap().1
}

#[test]
fn merge_fdata_matches_llvm_merge_fdata() {
    let c = common::corpus();
    let dir = scratch_dir("profile-merge-fdata");
    let cases: [&[&Path]; 4] = [
        &[&c.instr_fdata, output_of(c, "perf2bolt --pa fdata")],
        &[
            output_of(c, "perf2bolt --pa BAT fdata"),
            output_of(c, "perf2bolt --pa BAT fdata"),
        ],
        &[
            output_of(c, "perf2bolt --ba (perf.data) fdata"),
            output_of(c, "perf2bolt --pa --ba fdata"),
        ],
        &[
            output_of(c, "perf2bolt --ba BAT (perf.data) fdata"),
            output_of(c, "perf2bolt --pa --ba BAT fdata"),
        ],
    ];
    for inputs in cases {
        let theirs = run_ok(Command::new(tool("merge-fdata")).args(inputs));
        let out = dir.join("merged.fdata");
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["merge-fdata".as_ref(), "-o".as_ref(), out.as_os_str()];
        args.extend(inputs.iter().map(|p| p.as_os_str()));
        let o = pcmap(&args);
        pcmap_testkit::assert_success(&format!("pcmap {args:?}"), &o);
        let ours = std::fs::read_to_string(&out).unwrap();
        // merge-fdata prints records in hash order: compare as multisets, headers first.
        assert_eq!(lines_multiset(&ours), lines_multiset(&theirs), "{inputs:?}");
        let head = |s: &str| {
            s.lines()
                .take_while(|l| !l.starts_with(|c: char| c.is_ascii_digit()))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(head(&ours), head(&theirs));
    }
}

#[test]
fn merge_fdata_refuses_mixing_bolted_and_plain_profiles_like_llvm() {
    let c = common::corpus();
    let plain = output_of(c, "perf2bolt --pa fdata");
    let bolted = output_of(c, "perf2bolt --pa BAT fdata");
    let theirs = run(Command::new(tool("merge-fdata")).arg(plain).arg(bolted));
    assert!(
        !theirs.status.success(),
        "merge-fdata {} {} was expected to refuse mixing; it exited {} with\n{}",
        plain.display(),
        bolted.display(),
        theirs.status,
        String::from_utf8_lossy(&theirs.stdout)
    );
    let dir = scratch_dir("profile-merge-mixed");
    let out = dir.join("never.fdata");
    let o = pcmap(&[
        "merge-fdata".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        plain.as_os_str(),
        bolted.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("boltedcollection"), "{err}");
    assert!(!out.exists(), "no partial output");
}

#[test]
fn merge_yaml_matches_llvm_merge_fdata_layout_and_sums_every_entry() {
    let c = common::corpus();
    let dir = scratch_dir("profile-merge-yaml");
    for inputs in [
        vec![
            output_of(c, "perf2bolt --pa yaml"),
            output_of(c, "perf2bolt --pa yaml"),
            output_of(c, "perf2bolt --pa yaml"),
        ],
        vec![
            output_of(c, "perf2bolt --pa BAT yaml"),
            output_of(c, "perf2bolt --pa BAT yaml"),
        ],
        vec![
            output_of(c, "perf2bolt --pa --ba yaml"),
            output_of(c, "perf2bolt --ba (perf.data) yaml"),
        ],
    ] {
        let theirs = run_ok(Command::new(tool("merge-fdata")).args(&inputs));
        let out = dir.join("merged.yaml");
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["merge-fdata".as_ref(), "-o".as_ref(), out.as_os_str()];
        args.extend(inputs.iter().map(|p| p.as_os_str()));
        let o = pcmap(&args);
        pcmap_testkit::assert_success(&format!("pcmap {args:?}"), &o);
        let ours = std::fs::read_to_string(&out).unwrap();
        if ours == theirs {
            continue;
        }
        // The one known difference: merge-fdata keys a block's call sites by offset and successors by index
        // only, so when several share an offset/index (indirect calls, BAT profiles) it does not sum all of
        // them. pcmap sums every entry. So: (1) our writer reproduces merge-fdata's layout
        // exactly from its own document, (2) our counts are the exact sums, (3) the documents differ only
        // in call-site counts.
        use pcmap_profile::yaml;
        let a = yaml::parse(ours.as_bytes()).unwrap();
        let b = yaml::parse(theirs.as_bytes()).unwrap();
        let mut rewritten = Vec::new();
        yaml::write_with(&mut rewritten, &b, &yaml::WriteOptions::MERGE_FDATA).unwrap();
        assert_eq!(
            String::from_utf8(rewritten).unwrap(),
            theirs,
            "layout identical to merge-fdata's"
        );
        let single = yaml::parse(&std::fs::read(inputs[0]).unwrap()).unwrap();
        let n = inputs.len() as u64;
        for fa in &a.functions {
            let fs = single.functions.iter().find(|f| f.name == fa.name).unwrap();
            assert_eq!(fa.exec_count, n * fs.exec_count);
            for (ba, bs) in fa.blocks.iter().zip(&fs.blocks) {
                assert_eq!(ba.exec_count, n * bs.exec_count);
                for (ca, cs) in ba.calls.iter().zip(&bs.calls) {
                    assert_eq!(
                        (ca.count, ca.mispreds),
                        (n * cs.count, n * cs.mispreds),
                        "{}: call sites summed",
                        fa.name
                    );
                }
                for (sa, ss) in ba.successors.iter().zip(&bs.successors) {
                    assert_eq!(
                        (sa.count, sa.mispreds),
                        (n * ss.count, n * ss.mispreds),
                        "{}: successors summed",
                        fa.name
                    );
                }
            }
        }
        let zero_calls = |mut p: yaml::Profile| {
            for f in &mut p.functions {
                for b in &mut f.blocks {
                    for c in &mut b.calls {
                        c.count = 0;
                        c.mispreds = 0;
                    }
                    for s in &mut b.successors {
                        s.count = 0;
                        s.mispreds = 0;
                    }
                }
            }
            p
        };
        assert_eq!(
            zero_calls(a),
            zero_calls(b),
            "{inputs:?}: merged YAML differs beyond call-site and successor counts"
        );
    }
    // Profiles of the same function with different hashes (perf2bolt's vs llvm-bolt's fdata conversion of
    // the instrumentation profile): both tools refuse.
    let (a, b) = (output_of(c, "perf2bolt --pa yaml"), &c.instr_yaml);
    let theirs = run(Command::new(tool("merge-fdata")).arg(a).arg(b));
    let out = dir.join("never.yaml");
    let o = pcmap(&[
        "merge-fdata".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        a.as_os_str(),
        b.as_os_str(),
    ]);
    let their_err = String::from_utf8_lossy(&theirs.stderr);
    if their_err.contains("mismatch") {
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("mismatch"));
        assert!(!out.exists());
    } else {
        pcmap_testkit::assert_success("pcmap merge-fdata (perf2bolt accepted the inputs)", &o);
    }
}

#[test]
fn merged_preaggregated_profile_gives_perf2bolt_the_same_fdata() {
    // Merging pre-aggregated files must not change what perf2bolt makes of them: the merged file and the
    // concatenation of the inputs produce the same fdata.
    let c = common::corpus();
    let dir = scratch_dir("profile-merge-preagg");
    let pa = std::fs::read_to_string(&c.pa).unwrap();
    let (a, b) = pa.split_at(pa.len() / 2);
    let cut = a.rfind('\n').unwrap() + 1;
    let (first, second) = (&pa[..cut], format!("{}{}", &a[cut..], b));
    let pa1 = dir.join("one.pa");
    let pa2 = dir.join("two.pa");
    std::fs::write(&pa1, format!("{first}{first}")).unwrap();
    std::fs::write(&pa2, &second).unwrap();
    let concat = dir.join("concat.pa");
    std::fs::write(&concat, format!("{first}{first}{second}")).unwrap();
    let merged = dir.join("merged.pa");
    let o = pcmap(&[
        "merge-fdata".as_ref(),
        "--format".as_ref(),
        "preagg".as_ref(),
        "-o".as_ref(),
        merged.as_os_str(),
        pa1.as_os_str(),
        pa2.as_os_str(),
    ]);
    pcmap_testkit::assert_success("pcmap merge-fdata --format preagg", &o);
    assert!(std::fs::metadata(&merged).unwrap().len() < std::fs::metadata(&concat).unwrap().len());
    let p2b = |input: &Path, out: &Path| {
        run_ok(
            Command::new(tool("perf2bolt"))
                .arg("--pa")
                .arg("-p")
                .arg(input)
                .arg("-o")
                .arg(out)
                .arg(&c.bin),
        );
        std::fs::read_to_string(out).unwrap()
    };
    let x = p2b(&merged, &dir.join("m.fdata"));
    let y = p2b(&concat, &dir.join("c.fdata"));
    assert!(x.lines().count() > 20);
    assert_eq!(x, y);
}

#[test]
fn malformed_profiles_give_located_errors_where_perf2bolt_also_fails() {
    let c = common::corpus();
    let dir = scratch_dir("profile-malformed");
    // (pre-aggregated text, expected "line:column" in our message)
    let cases = [
        ("E cycles\nB 401000 401010 1 0\nX 1 2\n", "3:1"),
        ("B 401000 0x401010 1 0\n", "1:10"),
        ("B 401000 401010 1\n", "1:18"),
        ("B 401000 401010 1 0 5\n", "1:21"),
        ("S 40100g 5\n", "1:3"),
        ("S 401000 5x\n", "1:10"),
        ("E a b\n", "1:5"),
        ("S 1ffffffffffffffff 1\n", "1:3"),
        ("S a:b:401000 1\n", "1:3"),
    ];
    for (i, (text, pos)) in cases.iter().enumerate() {
        let f = dir.join(format!("bad{i}.pa"));
        std::fs::write(&f, text).unwrap();
        let p2b = run(Command::new(tool("perf2bolt"))
            .arg("--pa")
            .arg("-p")
            .arg(&f)
            .arg("-o")
            .arg(dir.join("x.fdata"))
            .arg(&c.bin));
        assert!(
            !p2b.status.success() || String::from_utf8_lossy(&p2b.stderr).contains("Error reading"),
            "perf2bolt accepts {text:?}"
        );
        let o = pcmap(&[
            "merge-fdata".as_ref(),
            "--format".as_ref(),
            "preagg".as_ref(),
            "-o".as_ref(),
            dir.join("out.pa").as_os_str(),
            f.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{text:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}:{pos}: expected", f.display()))
                || err.contains(&format!("{}:{pos}: missing", f.display())),
            "{text:?}: {err}"
        );
    }
    // fdata and YAML: llvm-bolt rejects these too; ours name the place.
    let fdata_cases = [
        ("1 main 3fg 0 x 12 4 5\n", "1:8"),
        ("1 main 3f 0 x 12 4\n", "1:19"),
        ("9 main 3f 0 x 12 4 5\n", "1:1"),
    ];
    for (i, (text, pos)) in fdata_cases.iter().enumerate() {
        let f = dir.join(format!("bad{i}.fdata"));
        std::fs::write(&f, text).unwrap();
        let bolt = run(Command::new(tool("llvm-bolt"))
            .arg(&c.bin)
            .arg("-data")
            .arg(&f)
            .arg("-o")
            .arg(dir.join("x.bolt")));
        let log = String::from_utf8_lossy(&bolt.stderr).into_owned()
            + &String::from_utf8_lossy(&bolt.stdout);
        assert!(
            !bolt.status.success() || log.contains("rror"),
            "llvm-bolt accepts {text:?}: {log}"
        );
        let o = pcmap(&[
            "merge-fdata".as_ref(),
            "-o".as_ref(),
            dir.join("out.fdata").as_os_str(),
            f.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}:{pos}:", f.display())),
            "{text:?}: {err}"
        );
    }
    let yaml_bad = "---\nheader:\n  profile-version: 1\n  binary-name: x\n  profile-flags: [ lbr ]\nfunctions:\n  - name: f\n    fid: 1\n    hash: 0xZZ\n    exec: 0\n    nblocks: 1\n";
    let f = dir.join("bad.yaml");
    std::fs::write(&f, yaml_bad).unwrap();
    let o = pcmap(&[
        "merge-fdata".as_ref(),
        "-o".as_ref(),
        dir.join("out.yaml").as_os_str(),
        f.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{}:9:11:", f.display())) && err.contains("hash"),
        "{err}"
    );
    let theirs = run(Command::new(tool("merge-fdata")).arg(&f));
    assert!(
        !theirs.status.success(),
        "merge-fdata {} was expected to refuse the file; it exited {} with\n{}",
        f.display(),
        theirs.status,
        String::from_utf8_lossy(&theirs.stdout)
    );
}
