//! The oracle corpus shared by the profile-format tests: a small C fixture, its BOLT instrumentation
//! profile, a BOLTed copy with BAT, pre-aggregated profiles for both, `perf record -e cpu-clock` runs and
//! the fdata/YAML files perf2bolt 22 and llvm-bolt 22 write for all of them. Everything is cached under
//! `target/pcmap-fixtures/` by `pcmap_testkit::derive`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_testkit::{build, derive, derived, run_ok, tool};

pub struct Corpus {
    pub bin: PathBuf,
    pub bolted: PathBuf,
    pub instr_fdata: PathBuf,
    pub instr_yaml: PathBuf,
    pub pa: PathBuf,
    pub bolted_pa: PathBuf,
    pub perf_data: PathBuf,
    pub perf_data_z: PathBuf,
    pub bolted_perf_data: PathBuf,
    /// (description, file) of every fdata/YAML file written by perf2bolt / llvm-bolt.
    pub outputs: Vec<(String, PathBuf)>,
}

/// Function symbols (name -> (address, size)) from `llvm-nm -S`.
pub fn symbols(bin: &Path) -> HashMap<String, (u64, u64)> {
    let out = run_ok(
        Command::new(tool("llvm-nm"))
            .args(["-S", "--defined-only"])
            .arg(bin),
    );
    let mut m = HashMap::new();
    for l in out.lines() {
        let p: Vec<&str> = l.split_whitespace().collect();
        if p.len() == 4 && (p[2] == "t" || p[2] == "T") {
            let a = u64::from_str_radix(p[0], 16).unwrap();
            let s = u64::from_str_radix(p[1], 16).unwrap();
            m.insert(p[3].to_string(), (a, s));
        }
    }
    m
}

/// The kernel's mapping of the executable `PT_LOAD` segment: (start, len, pgoff), page-aligned.
pub fn text_mapping(bin: &Path) -> (u64, u64, u64) {
    let out = run_ok(Command::new(tool("llvm-readelf")).arg("-lW").arg(bin));
    let l = out
        .lines()
        .find(|l| l.trim_start().starts_with("LOAD") && l.contains("R E"))
        .expect("executable segment");
    let f: Vec<&str> = l.split_whitespace().collect();
    let h = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let (off, vaddr, filesz) = (h(f[1]), h(f[2]), h(f[4]));
    let start = vaddr & !0xfff;
    let end = (vaddr + filesz + 0xfff) & !0xfff;
    (start, end - start, off & !0xfff)
}

pub fn build_id(bin: &Path) -> String {
    let out = run_ok(Command::new(tool("llvm-readelf")).arg("-n").arg(bin));
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("build-id")
        .trim()
        .to_string()
}

fn perf2bolt(bin: &Path, input: &Path, extra: &[&str], out: &Path) {
    run_ok(
        Command::new(tool("perf2bolt"))
            .arg("-p")
            .arg(input)
            .args(extra)
            .arg("-o")
            .arg(out)
            .arg(bin),
    );
}

/// A deterministic pseudo-random generator (no extra dependency).
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// The corpus, built once per test binary.
pub fn corpus() -> &'static Corpus {
    static CORPUS: std::sync::OnceLock<Corpus> = std::sync::OnceLock::new();
    CORPUS.get_or_init(make_corpus)
}

fn make_corpus() -> Corpus {
    let bin = build(
        "profile-p1",
        &["profile/p1.c"],
        &[
            "-O2",
            "-fno-pie",
            "-no-pie",
            "-Wl,--emit-relocs",
            "-Wl,--build-id=sha1",
        ],
    );
    let bolt = tool("llvm-bolt");
    // Instrumentation: exact edge counts without a PMU.
    let instr_fdata = derive(&derived(&bin, "instr.fdata"), |tmp| {
        let ibin = derived(&bin, "instr");
        run_ok(
            Command::new(&bolt)
                .arg(&bin)
                .args(["-instrument", "-o"])
                .arg(&ibin)
                .arg(format!("--instrumentation-file={}", tmp.display())),
        );
        run_ok(Command::new(&ibin).arg("200000"));
    });
    // BOLTed binary with BAT, and llvm-bolt's fdata->YAML conversion of the instrumentation profile.
    let bolt_opts = [
        "--enable-bat",
        "-reorder-blocks=ext-tsp",
        "-reorder-functions=cdsort",
        "-split-functions",
        "-split-all-cold",
    ];
    let bolted = derive(&derived(&bin, "bolt"), |tmp| {
        run_ok(
            Command::new(&bolt)
                .arg(&bin)
                .arg("-data")
                .arg(&instr_fdata)
                .arg("-o")
                .arg(tmp)
                .args(bolt_opts),
        );
    });
    let instr_yaml = derive(&derived(&bin, "instr.yaml"), |tmp| {
        let scratch = tmp.with_extension("bin");
        run_ok(
            Command::new(&bolt)
                .arg(&bin)
                .arg("-data")
                .arg(&instr_fdata)
                .arg("-o")
                .arg(&scratch)
                .args(bolt_opts)
                .arg("-w")
                .arg(tmp),
        );
        let _ = std::fs::remove_file(&scratch);
    });
    // Pre-aggregated profile of the input binary: every instrumented edge as a B record, plus T/F/S/X records.
    let pa = derive(&derived(&bin, "pa.txt"), |tmp| {
        let s = symbols(&bin);
        let text = std::fs::read_to_string(&instr_fdata).unwrap();
        let mut out = String::from("E cycles\n");
        for l in text.lines() {
            let p: Vec<&str> = l.split(' ').collect();
            if p.len() == 8 && p[0] == "1" && p[3] == "1" {
                let (a, b) = (
                    p[1].split('/').next().unwrap(),
                    p[4].split('/').next().unwrap(),
                );
                if let (Some(fa), Some(fb)) = (s.get(a), s.get(b)) {
                    let from = fa.0 + u64::from_str_radix(p[2], 16).unwrap();
                    let to = fb.0 + u64::from_str_radix(p[5], 16).unwrap();
                    out += &format!("B {from:x} {to:x} {} {}\n", p[7], p[6]);
                }
            }
        }
        let w = s["work"].0;
        out += &format!(
            "T {:x} {:x} {:x} 5\nS {:x} 7\nF {:x} {:x} 3\nB X:7f0000001000 {w:x} 1 0\n",
            w + 0x37,
            w + 0x3e,
            w + 0x41,
            w + 0x37,
            w + 0x3e,
            w + 0x41
        );
        std::fs::write(tmp, out).unwrap();
    });
    // Pre-aggregated profile in the BOLTed binary's addresses (translated back through BAT by perf2bolt).
    let bolted_pa = derive(&derived(&bin, "bolt.pa.txt"), |tmp| {
        let s = symbols(&bolted);
        let mut names: Vec<&String> = s.iter().filter(|(_, v)| v.1 > 4).map(|(k, _)| k).collect();
        names.sort();
        let mut rng = Lcg(1);
        let mut out = String::from("E cycles\n");
        for _ in 0..300 {
            let a = s[names[rng.below(names.len() as u64) as usize]];
            let b = s[names[rng.below(names.len() as u64) as usize]];
            out += &format!(
                "B {:x} {:x} {} {}\n",
                a.0 + rng.below(a.1),
                b.0 + rng.below(b.1),
                1 + rng.below(99),
                rng.below(3)
            );
        }
        for _ in 0..100 {
            let a = s[names[rng.below(names.len() as u64) as usize]];
            out += &format!("S {:x} {}\n", a.0 + rng.below(a.1), 1 + rng.below(99));
        }
        std::fs::write(tmp, out).unwrap();
    });
    let record = |target: &Path, tag: &str, z: bool| {
        derive(&derived(target, tag), |tmp| {
            let mut c = Command::new(tool("perf"));
            c.args(["record", "-q", "-e", "cpu-clock"]);
            if z {
                c.arg("-z");
            }
            c.arg("-o").arg(tmp).arg("--").arg(target).arg("20000000");
            run_ok(&mut c);
        })
    };
    let perf_data = record(&bin, "perf.data", false);
    let perf_data_z = record(&bin, "perfz.data", true);
    let bolted_perf_data = record(&bolted, "perf.data", false);

    let mut outputs = vec![
        (
            "instrumentation fdata (llvm-bolt -instrument)".to_string(),
            instr_fdata.clone(),
        ),
        ("llvm-bolt -data instr.fdata -w".into(), instr_yaml.clone()),
    ];
    let mut add = |desc: &str, tag: &str, f: &dyn Fn(&Path)| {
        let p = derive(&derived(&bin, tag), f);
        outputs.push((desc.to_string(), p));
    };
    add("perf2bolt --pa fdata", "pa.fdata", &|t| {
        perf2bolt(&bin, &pa, &["--pa"], t)
    });
    add("perf2bolt --pa yaml", "pa.yaml", &|t| {
        perf2bolt(&bin, &pa, &["--pa", "--profile-format=yaml"], t)
    });
    add("perf2bolt --pa --ba fdata", "pa-basic.fdata", &|t| {
        perf2bolt(&bin, &pa, &["--pa", "--ba"], t)
    });
    add("perf2bolt --pa --ba yaml", "pa-basic.yaml", &|t| {
        perf2bolt(&bin, &pa, &["--pa", "--ba", "--profile-format=yaml"], t)
    });
    add("perf2bolt --pa BAT fdata", "bolt.pa.fdata", &|t| {
        perf2bolt(&bolted, &bolted_pa, &["--pa"], t)
    });
    add("perf2bolt --pa BAT yaml", "bolt.pa.yaml", &|t| {
        perf2bolt(&bolted, &bolted_pa, &["--pa", "--profile-format=yaml"], t)
    });
    add(
        "perf2bolt --pa --ba BAT fdata",
        "bolt.pa-basic.fdata",
        &|t| perf2bolt(&bolted, &bolted_pa, &["--pa", "--ba"], t),
    );
    add("perf2bolt --ba (perf.data) fdata", "ba.fdata", &|t| {
        perf2bolt(&bin, &perf_data, &["--ba"], t)
    });
    add("perf2bolt --ba (perf.data) yaml", "ba.yaml", &|t| {
        perf2bolt(&bin, &perf_data, &["--ba", "--profile-format=yaml"], t)
    });
    add(
        "perf2bolt --ba BAT (perf.data) fdata",
        "bolt.ba.fdata",
        &|t| perf2bolt(&bolted, &bolted_perf_data, &["--ba"], t),
    );
    add(
        "perf2bolt --ba BAT (perf.data) yaml",
        "bolt.ba.yaml",
        &|t| {
            perf2bolt(
                &bolted,
                &bolted_perf_data,
                &["--ba", "--profile-format=yaml"],
                t,
            )
        },
    );
    Corpus {
        bin,
        bolted,
        instr_fdata,
        instr_yaml,
        pa,
        bolted_pa,
        perf_data,
        perf_data_z,
        bolted_perf_data,
        outputs,
    }
}
