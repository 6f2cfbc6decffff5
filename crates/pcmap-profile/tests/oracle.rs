//! Differential tests against the real tools: perf2bolt 22 / llvm-bolt 22 (fdata, YAML, pre-aggregated)
//! and `perf script` (perf.data).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use pcmap_profile::perfdata::{BranchEntry, MmapTable, PerfFile, Record, writer};
use pcmap_profile::{fdata, merge, preagg, yaml};
use pcmap_testkit::{run_ok, scratch_dir, tool};

fn roundtrip(path: &Path) -> Vec<u8> {
    let data = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    if path.extension().is_some_and(|e| e == "yaml") {
        let p = yaml::parse(&data).unwrap_or_else(|e| panic!("{}:{e}", path.display()));
        yaml::write(&mut out, &p).unwrap();
    } else {
        let p = fdata::parse(&data).unwrap_or_else(|e| panic!("{}:{e}", path.display()));
        fdata::write(&mut out, &p).unwrap();
    }
    out
}

#[test]
fn every_perf2bolt_and_llvm_bolt_output_roundtrips_byte_for_byte() {
    let c = common::corpus();
    assert!(c.outputs.len() >= 13);
    for (desc, path) in &c.outputs {
        let original = std::fs::read(path).unwrap();
        assert!(
            !original.is_empty() || desc.contains("basic"),
            "{desc}: empty oracle output"
        );
        let written = roundtrip(path);
        assert!(
            written == original,
            "{desc} ({}): written back differently:\n{}",
            path.display(),
            String::from_utf8_lossy(&written)
        );
    }
    // The corpus covers every mode.
    let read = |tag: &str| {
        let (_, p) = c.outputs.iter().find(|(d, _)| d == tag).unwrap();
        std::fs::read(p).unwrap()
    };
    let bat = fdata::parse(&read("perf2bolt --pa BAT fdata"))
        .unwrap()
        .into_owned_check();
    assert!(
        bat.0 && bat.1 > 50,
        "BAT fdata: boltedcollection and records"
    );
    let basic = read("perf2bolt --ba BAT (perf.data) fdata");
    assert!(basic.starts_with(b"boltedcollection\nno_lbr cpu-clock:\n"));
    let y = yaml::parse(&read("perf2bolt --pa BAT yaml")).unwrap();
    assert!(
        y.functions
            .iter()
            .any(|f| f.name.contains('/') && f.blocks.iter().any(|b| b.num_instructions == 0))
    );
}

trait Summary {
    fn into_owned_check(self) -> (bool, usize);
}
impl Summary for fdata::Profile<'_> {
    fn into_owned_check(self) -> (bool, usize) {
        (self.bolted_collection, self.lines.len())
    }
}

#[test]
fn lbr_record_order_matches_perf2bolt() {
    let c = common::corpus();
    for tag in ["perf2bolt --pa fdata", "perf2bolt --pa BAT fdata"] {
        let (_, p) = c.outputs.iter().find(|(d, _)| d == tag).unwrap();
        let data = std::fs::read(p).unwrap();
        let prof = fdata::parse(&data).unwrap();
        let original: Vec<_> = prof.branches().cloned().collect();
        assert!(original.len() > 20, "{tag}");
        let mut shuffled = original.clone();
        shuffled.reverse();
        let n = shuffled.len();
        shuffled.swap(0, n / 2);
        fdata::sort_branches_like_perf2bolt(&mut shuffled);
        assert_eq!(shuffled, original, "{tag}: perf2bolt's record order");
    }
}

fn bolt_profile_stats(bin: &Path, data: &Path, dir: &Path) -> Vec<String> {
    let out = Command::new(tool("llvm-bolt"))
        .arg(bin)
        .arg("-data")
        .arg(data)
        .arg("-o")
        .arg(dir.join("out.bolt"))
        .output()
        .unwrap();
    pcmap_testkit::assert_success(&format!("llvm-bolt -data {}", data.display()), &out);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .filter(|l| l.contains("profile") && !l.contains("pre-processing"))
        .map(str::to_string)
        .collect()
}

#[test]
fn yaml_written_by_pcmap_is_accepted_by_llvm_bolt_with_the_same_statistics() {
    let c = common::corpus();
    let dir = scratch_dir("profile-yaml-bolt");
    for tag in ["perf2bolt --pa yaml", "perf2bolt --pa BAT yaml"] {
        let (_, theirs) = c.outputs.iter().find(|(d, _)| d == tag).unwrap();
        let p = yaml::parse(&std::fs::read(theirs).unwrap()).unwrap();
        let ours = dir.join("ours.yaml");
        let mut buf = Vec::new();
        yaml::write(&mut buf, &p).unwrap();
        std::fs::write(&ours, &buf).unwrap();
        let a = bolt_profile_stats(&c.bin, theirs, &dir);
        let b = bolt_profile_stats(&c.bin, &ours, &dir);
        assert!(
            a.iter().any(|l| l.contains("non-empty execution profile")),
            "{tag}: {a:?}"
        );
        assert_eq!(a, b, "{tag}");
        // A merged profile (the same profile twice: every count doubled) profiles the same functions.
        let (merged, _) = merge::merge_yaml(vec![p.clone(), p.clone()]).unwrap();
        assert_eq!(merged.functions.len(), p.functions.len());
        let doubled: u64 = merged.functions.iter().map(|f| f.exec_count).sum();
        assert_eq!(
            doubled,
            2 * p.functions.iter().map(|f| f.exec_count).sum::<u64>()
        );
        let mut buf = Vec::new();
        yaml::write(&mut buf, &merged).unwrap();
        std::fs::write(&ours, &buf).unwrap();
        let m = bolt_profile_stats(&c.bin, &ours, &dir);
        let profiled = |v: &[String]| {
            v.iter()
                .find(|l| l.contains("non-empty execution profile"))
                .cloned()
        };
        assert_eq!(profiled(&m), profiled(&a), "{tag}: merged");
    }
}

#[test]
fn preaggregated_inputs_parse_serially_and_in_parallel_alike() {
    let c = common::corpus();
    for p in [&c.pa, &c.bolted_pa] {
        let data = std::fs::read(p).unwrap();
        let serial = preagg::parse_all(&data).unwrap();
        assert!(serial.len() > 30);
        let mut out = Vec::new();
        preagg::write(&mut out, &serial).unwrap();
        assert_eq!(out, data, "canonical writer reproduces the generated file");
        let par = preagg::fold_parallel(
            &data,
            Vec::new,
            |v, r| v.push(r),
            |mut a, b| {
                a.extend(b);
                a
            },
        )
        .unwrap();
        assert_eq!(par, serial);
    }
}

/// `perf script -F pid,tid,time,ip` as (pid, tid, time, ip).
fn perf_script_samples(file: &Path) -> Vec<(u32, u32, String, u64)> {
    let out = run_ok(
        Command::new(tool("perf"))
            .args(["script", "-F", "pid,tid,time,ip", "-i"])
            .arg(file),
    );
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            let (pid, tid) = p[0].split_once('/').unwrap();
            (
                pid.parse().unwrap(),
                tid.parse().unwrap(),
                p[1].trim_end_matches(':').to_string(),
                u64::from_str_radix(p[2], 16).unwrap(),
            )
        })
        .collect()
}

fn our_samples(file: &Path) -> Vec<(u32, u32, String, u64)> {
    let data = std::fs::read(file).unwrap();
    let f = PerfFile::parse(&data).unwrap();
    let mut v = Vec::new();
    f.for_each_sample(|s| {
        let t = s.time.unwrap();
        v.push((
            s.pid.unwrap(),
            s.tid.unwrap(),
            format!("{}.{:06}", t / 1_000_000_000, t % 1_000_000_000 / 1000),
            s.ip.unwrap(),
        ));
    })
    .unwrap();
    v
}

#[test]
fn recorded_perf_data_decodes_to_perf_scripts_samples() {
    let c = common::corpus();
    for p in [&c.perf_data, &c.perf_data_z, &c.bolted_perf_data] {
        let mut theirs = perf_script_samples(p);
        assert!(theirs.len() > 100, "{}: too few samples", p.display());
        let mut ours = our_samples(p);
        assert_eq!(ours.len(), theirs.len(), "{}", p.display());
        // perf script reorders samples by time across the per-CPU buffers (its ordered-events
        // queue); the walker yields them in file order, which differs once the process moved
        // between CPUs. Compare the sorted lists: the same samples, each with its pid, tid, time, ip.
        ours.sort();
        theirs.sort();
        let first = ours.iter().zip(&theirs).position(|(a, b)| a != b);
        assert!(
            ours == theirs,
            "{}: samples differ, first at #{first:?}: pcmap {:?} vs perf script {:?}",
            p.display(),
            first.map(|i| &ours[i]),
            first.map(|i| &theirs[i])
        );
    }
    // Attributes and event name.
    let data = std::fs::read(&c.perf_data_z).unwrap();
    let f = PerfFile::parse(&data).unwrap();
    assert_eq!(f.event_name(0), "cpu-clock");
    assert!(f.has_feature(pcmap_profile::perfdata::feature::COMPRESSED));
}

#[test]
fn mmap_table_maps_samples_to_the_binary_like_perf() {
    let c = common::corpus();
    let data = std::fs::read(&c.perf_data).unwrap();
    let f = PerfFile::parse(&data).unwrap();
    let id = common::build_id(&c.bin);
    let id_bytes: Vec<u8> = (0..id.len() / 2)
        .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert!(
        f.build_ids.iter().any(|b| b.build_id_hex() == id),
        "perf.data lists the fixture's build-id"
    );
    let table = MmapTable::from_file(&f).unwrap();
    let maps = table.mappings_of(&f, Some(&id_bytes), c.bin.as_os_str().as_encoded_bytes());
    assert!(!maps.is_empty());
    // Samples in the binary: compare with perf script's dso attribution.
    let out = run_ok(
        Command::new(tool("perf"))
            .args(["script", "-F", "ip,dso", "--full-source-path", "-i"])
            .arg(&c.perf_data),
    );
    let name = c.bin.file_name().unwrap().to_str().unwrap();
    let theirs = out.lines().filter(|l| l.contains(name)).count();
    // perf attributes each sample with the mappings in force at the sample's time; records are
    // written per CPU buffer, so a sample can come before the MMAP2 that maps it in file order.
    // Observe every mapping first, then attribute (the fixture's process never execs again).
    let mut ours = 0;
    let mut table = MmapTable::default();
    f.for_each_record(|r| {
        table.observe(r);
        true
    })
    .unwrap();
    f.for_each_record(|r| {
        if let Record::Sample(s) = r
            && table
                .find(s.pid.unwrap(), s.ip.unwrap())
                .is_some_and(|m| m.filename.ends_with(name.as_bytes()))
        {
            ours += 1;
        }
        true
    })
    .unwrap();
    assert!(theirs > 50);
    assert_eq!(ours, theirs);
}

/// `perf script -F pid,ip,brstack` as (pid, ip, [(from, to, flag char, cycles)]).
type ScriptBranchSample = (u32, u64, Vec<(u64, u64, char, u16)>);

fn perf_script_brstack(file: &Path) -> Vec<ScriptBranchSample> {
    let out = run_ok(
        Command::new(tool("perf"))
            .args(["script", "-F", "pid,ip,brstack", "-i"])
            .arg(file),
    );
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let pid = it.next().unwrap().parse().unwrap();
            let ip = u64::from_str_radix(it.next().unwrap(), 16).unwrap();
            let br = it
                .map(|e| {
                    let f: Vec<&str> = e.split('/').collect();
                    let h = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
                    (
                        h(f[0]),
                        h(f[1]),
                        f[2].chars().next().unwrap(),
                        f[5].parse().unwrap(),
                    )
                })
                .collect();
            (pid, ip, br)
        })
        .collect()
}

#[test]
fn writer_branch_stacks_decode_like_perf_script() {
    let c = common::corpus();
    let syms = common::symbols(&c.bin);
    let (work, size) = syms["work"];
    let id = common::build_id(&c.bin);
    let id_bytes: Vec<u8> = (0..id.len() / 2)
        .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let dir = scratch_dir("profile-perf-writer");
    for hw_idx in [false, true] {
        let mut rng = common::Lcg(if hw_idx { 7 } else { 3 });
        let mut w = writer::Writer::new(writer::Options {
            hw_idx,
            ..Default::default()
        });
        let path_bytes = c.bin.as_os_str().as_encoded_bytes();
        w.comm(4242, 4242, b"profile-p1", 1_000);
        let (start, len, pgoff) = common::text_mapping(&c.bin);
        w.mmap2(4242, 4242, start, len, pgoff, path_bytes, 1_001);
        w.build_id(4242, &id_bytes, path_bytes);
        let mut expected = Vec::new();
        for i in 0..200u64 {
            let depth = rng.below(33) as usize;
            let branches: Vec<BranchEntry> = (0..depth)
                .map(|_| {
                    let m = rng.below(3);
                    BranchEntry {
                        from: work + rng.below(size),
                        to: work + rng.below(size),
                        flags: BranchEntry::make_flags(
                            m == 1,
                            m == 2,
                            false,
                            false,
                            rng.below(1000) as u16,
                            0,
                        ),
                    }
                })
                .collect();
            let ip = work + rng.below(size);
            expected.push((4242u32, ip, branches.clone()));
            w.sample(&writer::SampleSpec {
                ip,
                pid: 4242,
                tid: 4242,
                time: 2_000 + i,
                period: 1,
                branches,
                hw_idx: i,
            });
        }
        let file = dir.join(format!("synthetic-{hw_idx}.perf.data"));
        std::fs::write(&file, w.finish()).unwrap();

        // Oracle: perf script.
        let theirs = perf_script_brstack(&file);
        assert_eq!(theirs.len(), expected.len());
        for ((pid, ip, br), (epid, eip, ebr)) in theirs.iter().zip(&expected) {
            assert_eq!((pid, ip), (epid, eip));
            let e: Vec<_> = ebr
                .iter()
                .map(|b| {
                    (
                        b.from,
                        b.to,
                        if b.mispredicted() {
                            'M'
                        } else if b.predicted() {
                            'P'
                        } else {
                            '-'
                        },
                        b.cycles(),
                    )
                })
                .collect();
            assert_eq!(br, &e);
        }
        // Our decoder agrees with perf script.
        let data = std::fs::read(&file).unwrap();
        let f = PerfFile::parse(&data).unwrap();
        assert_eq!(f.attrs[0].branch_hw_index(), hw_idx);
        let mut ours = Vec::new();
        f.for_each_sample(|s| {
            let bs = s.branch_stack.unwrap();
            assert_eq!(bs.hw_idx.is_some(), hw_idx);
            let br: Vec<_> = bs
                .iter()
                .map(|b| {
                    (
                        b.from,
                        b.to,
                        if b.mispredicted() {
                            'M'
                        } else if b.predicted() {
                            'P'
                        } else {
                            '-'
                        },
                        b.cycles(),
                    )
                })
                .collect();
            ours.push((s.pid.unwrap(), s.ip.unwrap(), br));
        })
        .unwrap();
        assert_eq!(ours, theirs);
        // perf2bolt reads the branch stacks too.
        let log = run_ok(
            Command::new(tool("perf2bolt"))
                .arg("-p")
                .arg(&file)
                .arg("-o")
                .arg(dir.join("syn.fdata"))
                .arg(&c.bin),
        );
        let entries: usize = expected.iter().map(|e| e.2.len()).sum();
        assert!(
            log.contains(&format!(
                "read {} samples and {entries} brstack entries",
                expected.len()
            )),
            "{log}"
        );
    }
}

#[test]
fn basic_sample_fdata_totals_match_our_sample_walk() {
    // perf2bolt --ba writes one line per sampled (function, offset). The per-function totals must equal
    // the samples our walker finds inside each function's address range (fixed-address binary).
    let c = common::corpus();
    let (_, p) = c
        .outputs
        .iter()
        .find(|(d, _)| d == "perf2bolt --ba (perf.data) fdata")
        .unwrap();
    let data = std::fs::read(p).unwrap();
    let prof = fdata::parse(&data).unwrap();
    assert_eq!(
        prof.no_lbr
            .as_deref()
            .map(|v| v.iter().map(|s| s.as_ref()).collect::<Vec<_>>()),
        Some(vec!["cpu-clock:"])
    );
    let theirs: BTreeMap<String, u64> = prof.samples().fold(BTreeMap::new(), |mut m, s| {
        let name = s.at.unescaped_name();
        *m.entry(name.split('/').next().unwrap().to_string())
            .or_default() += s.count;
        m
    });
    let syms = common::symbols(&c.bin);
    let perf = std::fs::read(&c.perf_data).unwrap();
    let f = PerfFile::parse(&perf).unwrap();
    let mut ours: BTreeMap<String, u64> = BTreeMap::new();
    f.for_each_sample(|s| {
        let ip = s.ip.unwrap();
        if let Some((name, _)) = syms.iter().find(|(_, v)| ip >= v.0 && ip < v.0 + v.1) {
            *ours.entry(name.clone()).or_default() += 1;
        }
    })
    .unwrap();
    assert!(theirs.get("work").copied().unwrap_or(0) > 10);
    assert_eq!(ours, theirs);
}
