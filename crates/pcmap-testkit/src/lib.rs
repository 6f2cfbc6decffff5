//! Test support for pcmap's oracle tests.
//!
//! * [`tool`] finds an oracle tool (LLVM 22, BOLT 22, pahole, perf, ...) and fails the test with the
//!   Debian package that installs it when it is missing: a test never passes silently without its oracle.
//! * [`build`] compiles a fixture program from sources under `fixtures/` with `clang-22 -fuse-ld=lld`
//!   and caches the result under `target/pcmap-fixtures/`, keyed by a hash of the sources, the
//!   flags and the compiler path, so every test binary and every test thread can ask for the same
//!   fixture cheaply.
//! * [`run`] / [`run_ok`] run a command and return its output, failing with the full command line and
//!   its stderr when it does not succeed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian's LLVM 22 packages put their tools.
pub const LLVM_BIN: &str = "/usr/lib/llvm-22/bin";

/// The repository root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("testkit lives in crates/pcmap-testkit")
        .to_path_buf()
}

/// Fixture sources kept in the repository.
pub fn fixtures_dir() -> PathBuf {
    workspace_root().join("fixtures")
}

/// The cache of built fixtures (under `target/`, so `cargo clean` removes it).
pub fn cache_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("pcmap-fixtures");
    std::fs::create_dir_all(&dir).expect("create fixture cache");
    dir
}

/// A fresh scratch directory for one test (kept under the cache so failures can be inspected).
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = cache_dir()
        .join("scratch")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The Debian package that provides `name`.
pub fn package_for(name: &str) -> &'static str {
    match name {
        "clang" | "clang++" => "clang-22",
        "ld.lld" | "lld" => "lld-22",
        "llvm-bolt" | "perf2bolt" | "merge-fdata" | "llvm-boltdiff" | "llvm-bolt-heatmap" => {
            "bolt-22"
        }
        "pahole" => "dwarves",
        "perf" => "linux-perf",
        "bpftool" => "bpftool",
        "qemu-x86_64" => "qemu-user",
        "valgrind" => "valgrind",
        "gcc" | "g++" => "gcc",
        "uftrace" => "uftrace",
        "lldb" => "lldb-22",
        _ if name.starts_with("llvm-") || name.starts_with("yaml2obj") || name == "obj2yaml" => {
            "llvm-22"
        }
        _ => "(unknown package)",
    }
}

/// Find an oracle tool. LLVM tools are looked up in `/usr/lib/llvm-22/bin` first, then as
/// `NAME-22` and `NAME` on `PATH`. Panics (fails the test) with the package to install.
pub fn tool(name: &str) -> PathBuf {
    try_tool(name).unwrap_or_else(|| {
        panic!(
            "oracle tool `{name}` is not installed: run `apt-get install -y {}` (see .ci/run)",
            package_for(name)
        )
    })
}

/// Like [`tool`] but returns `None` instead of failing.
pub fn try_tool(name: &str) -> Option<PathBuf> {
    let llvm = Path::new(LLVM_BIN).join(name);
    if llvm.is_file() {
        return Some(llvm);
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for candidate in [format!("{name}-22"), name.to_string()] {
            let p = dir.join(&candidate);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Run a command; returns its output whatever the exit status.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// Panic unless `out` (of the command described by `what`) succeeded, with the command, its exit
/// status, stdout and stderr in the message: an assertion on an external tool must say why.
pub fn assert_success(what: &str, out: &Output) {
    if !out.status.success() {
        panic!(
            "command failed ({}): {what}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Run a command that must succeed; returns its whole output (see [`assert_success`]).
pub fn run_success(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert_success(&format!("{cmd:?}"), &out);
    out
}

/// Run a command that must succeed; returns its stdout as a string.
pub fn run_ok(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run_success(cmd).stdout).into_owned()
}

/// Compile `sources` (paths relative to `fixtures/src`, or absolute) with `compiler`
/// (`clang`, `clang++` or `gcc`) and `flags`, caching the output as `target/pcmap-fixtures/<name>-<hash>`.
///
/// The cache key covers the source bytes, the flags and the compiler, so editing a fixture rebuilds it.
/// Built once ([`derive()`]), so concurrent tests asking for the same fixture are safe.
pub fn build_with(compiler: &str, name: &str, sources: &[&str], flags: &[&str]) -> PathBuf {
    let cc = tool(compiler);
    let src_dir = fixtures_dir().join("src");
    let srcs: Vec<PathBuf> = sources
        .iter()
        .map(|s| {
            let p = Path::new(s);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                src_dir.join(p)
            }
        })
        .collect();
    let mut h = DefaultHasher::new();
    cc.hash(&mut h);
    flags.hash(&mut h);
    for s in &srcs {
        s.file_name().hash(&mut h);
        std::fs::read(s)
            .unwrap_or_else(|e| panic!("read fixture source {}: {e}", s.display()))
            .hash(&mut h);
    }
    let out = cache_dir().join(format!("{name}-{:016x}", h.finish()));
    derive(&out, |tmp| {
        let mut cmd = Command::new(&cc);
        if compiler.starts_with("clang") {
            cmd.arg("-fuse-ld=lld");
        }
        cmd.args(flags).args(&srcs).arg("-o").arg(tmp);
        run_ok(&mut cmd);
    })
}

/// The unpacked source directory of crate `name` at the version `lock` (a `Cargo.lock` under the
/// workspace root) pins, in cargo's registry (there once a build or `cargo fetch` needed it).
fn registry_crate(lock: &str, name: &str) -> PathBuf {
    let lock_text = std::fs::read_to_string(workspace_root().join(lock))
        .unwrap_or_else(|e| panic!("read {lock}: {e}"));
    let version = lock_text
        .split("[[package]]")
        .find(|p| p.contains(&format!("name = \"{name}\"")))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .map(|v| v.trim_end_matches('"').to_string())
        .unwrap_or_else(|| panic!("{name} in {lock}"));
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cargo"));
    let registry = home.join("registry/src");
    std::fs::read_dir(&registry)
        .unwrap_or_else(|e| panic!("{}: {e}", registry.display()))
        .filter_map(Result::ok)
        .map(|e| e.path().join(format!("{name}-{version}")))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| {
            panic!(
                "{name} {version} is not in {}: run `cargo fetch` for {lock}",
                registry.display()
            )
        })
}

/// The files of `dir` whose names end in `ext`, sorted.
fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    out.sort();
    out
}

/// libFuzzer's C++ sources (real C++ with exceptions, about 7,800 lines) from the `libfuzzer-sys`
/// crate `fuzz/Cargo.lock` pins (in cargo's registry once `cargo fetch --manifest-path
/// fuzz/Cargo.toml` ran), without the files for other systems.
pub fn libfuzzer_sources() -> Vec<PathBuf> {
    let dir = registry_crate("fuzz/Cargo.lock", "libfuzzer-sys").join("libfuzzer");
    files_with(&dir, ".cpp")
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            !["Windows", "Darwin", "Fuchsia"]
                .iter()
                .any(|os| name.contains(os))
        })
        .collect()
}

/// A program built from zstd's C library (real C, about 30,000 lines: compression,
/// decompression and their common code, without the x86 assembly; the `zstd-sys` crate the
/// workspace's `Cargo.lock` pins) and `fixtures/src/report/zstd_driver.c`, which compresses and
/// decompresses a generated buffer. `flags` come after `-DZSTD_DISABLE_ASM -I<zstd/lib>`.
pub fn build_zstd(name: &str, flags: &[&str]) -> PathBuf {
    let lib = registry_crate("Cargo.lock", "zstd-sys").join("zstd/lib");
    let mut srcs: Vec<String> = ["common", "compress", "decompress"]
        .iter()
        .flat_map(|d| files_with(&lib.join(d), ".c"))
        .map(|p| p.display().to_string())
        .collect();
    srcs.push("report/zstd_driver.c".into());
    let srcs: Vec<&str> = srcs.iter().map(String::as_str).collect();
    let include = format!("-I{}", lib.display());
    let mut all_flags = vec!["-DZSTD_DISABLE_ASM", include.as_str()];
    all_flags.extend_from_slice(flags);
    build(name, &srcs, &all_flags)
}

/// The C++ exception fixture `perf2bolt/eh.cpp` (landing pads, FDEs of several CIEs) as the
/// oracle tests build it, by cache name and flags: non-PIE (absolute FDE pointers) and PIE
/// (pc-relative). Build one with [`build_eh`].
pub const EH_FIXTURES: [(&str, &[&str]); 2] = [
    (
        "perf2bolt-eh",
        &[
            "-O2",
            "-fno-pie",
            "-no-pie",
            "-Wl,--emit-relocs",
            "-pthread",
        ],
    ),
    (
        "perf2bolt-eh-pie",
        &["-O2", "-fpie", "-pie", "-Wl,--emit-relocs", "-pthread"],
    ),
];

/// One of [`EH_FIXTURES`], built (cached like [`build`]).
pub fn build_eh((name, flags): (&str, &[&str])) -> PathBuf {
    build(name, &["perf2bolt/eh.cpp"], flags)
}

/// [`build_with`] using `clang-22` (C) or `clang++-22` (when any source ends in `.cc`/`.cpp`).
pub fn build(name: &str, sources: &[&str], flags: &[&str]) -> PathBuf {
    let cxx = sources
        .iter()
        .any(|s| s.ends_with(".cc") || s.ends_with(".cpp"));
    build_with(if cxx { "clang++" } else { "clang" }, name, sources, flags)
}

/// Run a cached derivation step: if `out` does not exist, call `make(tmp)` to produce it at a
/// temporary path, then rename. Use for BOLT runs, profiles and other derived fixtures.
///
/// One maker at a time per output, across the threads of a test binary and across test
/// binaries (an exclusive lock on `<out>.lock`): the first makes it, the others wait and take
/// it. Two makers renaming their copies one over the other replaced a file while a test ran it:
/// a BOLT-instrumented binary reopens its own path when it exits, and failed with "failed to
/// open binary path" (seen on a cold fixture cache, as CI has).
pub fn derive(out: &Path, make: impl FnOnce(&Path)) -> PathBuf {
    if out.exists() {
        return out.to_path_buf();
    }
    let lock_path = derived(out, "lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap_or_else(|e| panic!("open {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", lock_path.display()));
    if !out.exists() {
        let tmp = temp_beside(out);
        make(&tmp);
        std::fs::rename(&tmp, out)
            .unwrap_or_else(|e| panic!("rename {} -> {}: {e}", tmp.display(), out.display()));
    }
    // The lock is released when `lock` is closed.
    drop(lock);
    out.to_path_buf()
}

/// A cache path derived from an input file and a tag, e.g. `derived(&bin, "bolt")` -> `<bin>.bolt`.
pub fn derived(input: &Path, tag: &str) -> PathBuf {
    let mut s = input.as_os_str().to_owned();
    s.push(".");
    s.push(tag);
    PathBuf::from(s)
}

/// Parse a hexadecimal number with or without `0x`.
pub fn hex(s: &str) -> u64 {
    let s = s.trim();
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("not hex: {s:?}: {e}"))
}

/// A small stable hash (FNV-1a) for cache tags derived from flags.
pub fn tag_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Profile `binary` with BOLT instrumentation (run with `args`) and optimize it with that exact
/// profile and `flags` (e.g. `--enable-bat`, `-split-functions`). Every step is cached next to
/// the fixture; returns the optimized binary.
///
/// The instrumented binary appends its PID to the profile's name, so tests running at the same
/// time (threads of one test binary, or several test binaries) never take each other's profile.
pub fn bolt_with_instrumentation(binary: &Path, args: &[&str], flags: &[&str]) -> PathBuf {
    let base = derived(binary, "instr-profile");
    let instrumented = derive(&derived(binary, "instr"), |tmp| {
        run_ok(
            Command::new(tool("llvm-bolt"))
                .arg(binary)
                .arg("-instrument")
                .arg("--instrumentation-file-append-pid")
                .arg("-o")
                .arg(tmp)
                .arg(format!("--instrumentation-file={}", base.display())),
        );
    });
    let profile = derive(&derived(binary, "fdata"), |tmp| {
        let child = Command::new(&instrumented)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", instrumented.display()));
        let pid = child.id();
        let out = child
            .wait_with_output()
            .expect("wait for the instrumented run");
        assert!(
            out.status.success(),
            "instrumented run failed ({}): {} {}\n--- stderr ---\n{}",
            out.status,
            instrumented.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        let written = PathBuf::from(format!("{}.{pid}.fdata", base.display()));
        let written = if written.exists() {
            written
        } else {
            PathBuf::from(format!("{}.{pid}", base.display()))
        };
        std::fs::rename(&written, tmp).unwrap_or_else(|e| {
            panic!(
                "instrumented run should have written {}: {e}",
                written.display()
            )
        });
    });
    let tag = format!("bolt-{:x}", tag_hash(flags.join(" ").as_bytes()));
    derive(&derived(binary, &tag), |tmp| {
        run_ok(
            Command::new(tool("llvm-bolt"))
                .arg(binary)
                .arg("-data")
                .arg(&profile)
                .arg("-o")
                .arg(tmp)
                .args(flags),
        );
    })
}

/// Write generated fixture source `name` under the cache (atomically, only when its content
/// changed) and return its path, for [`build`].
pub fn generated_source(name: &str, content: &str) -> PathBuf {
    let dir = cache_dir().join("generated-src");
    std::fs::create_dir_all(&dir).expect("create generated source dir");
    let path = dir.join(name);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(content) {
        derive_fresh(&path, |tmp| {
            std::fs::write(tmp, content).expect("write generated source")
        });
    }
    path
}

/// A temporary path beside `out`, this process's and this thread's own, to make `out` at and
/// then rename.
fn temp_beside(out: &Path) -> PathBuf {
    out.with_extension(
        format!(
            "tmp{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        )
        .replace(['(', ')'], ""),
    )
}

/// Like [`derive`] but always (re)creates `out`.
fn derive_fresh(out: &Path, make: impl FnOnce(&Path)) {
    let tmp = temp_beside(out);
    make(&tmp);
    std::fs::rename(&tmp, out).unwrap_or_else(|e| panic!("rename {}: {e}", out.display()));
}

/// A C program with `n` small non-inlined functions (a third with switch jump tables, a third
/// with loops and cold paths, a third calling their neighbour) called through a table from
/// `main` (argument: iterations). Used where a test needs "thousands of functions".
pub fn many_functions_source(n: usize) -> PathBuf {
    let mut c = String::from("#include <stdio.h>\n#include <stdlib.h>\n");
    for i in 0..n {
        match i % 3 {
            0 => {
                c += &format!(
                    "__attribute__((noinline)) int f{i}(int x) {{ switch (x & 7) {{ case 0: return x * {i}; \
                 case 1: return x + {i}; case 2: return x ^ {i}; case 3: return x - 3; case 4: return x << 1; \
                 case 5: return x >> 2; case 6: return ~x; default: return x * 5; }} }}\n"
                )
            }
            1 => {
                c += &format!(
                    "__attribute__((noinline)) int f{i}(int x) {{ int a = 0; for (int k = 0; k < (x & 3); k++) a += k * {i}; \
                 if (__builtin_expect(x == 987654, 0)) {{ printf(\"odd %d\\n\", x); a = 1; }} return a; }}\n"
                )
            }
            _ => {
                c += &format!(
                    "__attribute__((noinline)) int f{i}(int x) {{ return x > {i} ? f{prev}(x - 1) + 1 : x; }}\n",
                    prev = i - 1
                )
            }
        }
    }
    c += "typedef int (*fn)(int);\nstatic fn table[] = {";
    for i in 0..n {
        c += &format!("f{i},");
    }
    c += "};\nint main(int argc, char **argv) {\n  long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;\n";
    c += &format!("  for (long i = 0; i < n; i++) s += table[(i * 7) % {n}]((int)i);\n");
    c += "  printf(\"%ld\\n\", s);\n  return 0;\n}\n";
    generated_source(&format!("many-{n}.c"), &c)
}

/// One probe point `perf probe -x BIN -n -v SPEC` would create: its offset in the file and each
/// fetch argument in perf's syntax (`x=%di`, `n=-8(%bp)`; the `:type` suffix removed).
#[derive(Debug, Clone)]
pub struct ProbeEvent {
    /// File offset of the probe point.
    pub offset: u64,
    /// Argument name -> location as perf prints it.
    pub args: std::collections::BTreeMap<String, String>,
}

/// Ask `perf probe` (dry run, `-n -v`) where it would put probes for `spec` in `bin`; `None` if
/// perf refuses the spec.
pub fn perf_probe(bin: &Path, spec: &str) -> Option<Vec<ProbeEvent>> {
    let out = run(Command::new(tool("perf"))
        .args(["probe", "-x"])
        .arg(bin)
        .args(["-n", "-v", spec]));
    if !out.status.success() {
        return None;
    }
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let mut events = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("Writing event: ") else {
            continue;
        };
        // "<group:event> <binary>:<offset> <arg>=<loc>[:<type>] ..."
        let mut words = rest.split_whitespace().skip(1);
        let off = words.next()?.rsplit_once(':')?.1;
        let offset = u64::from_str_radix(off.trim_start_matches("0x"), 16).ok()?;
        let args = words
            .filter_map(|w| {
                let (k, v) = w.split_once('=')?;
                Some((
                    k.to_string(),
                    v.rsplit_once(':').map_or(v, |(a, _)| a).to_string(),
                ))
            })
            .collect();
        events.push(ProbeEvent { offset, args });
    }
    Some(events)
}

/// perf's name for x86-64 DWARF register `reg` (0-15), as in its fetch-arg syntax.
pub fn perf_x86_64_register(reg: u64) -> Option<&'static str> {
    const NAMES: [&str; 16] = [
        "ax", "dx", "cx", "bx", "si", "di", "bp", "sp", "r8", "r9", "r10", "r11", "r12", "r13",
        "r14", "r15",
    ];
    usize::try_from(reg)
        .ok()
        .and_then(|r| NAMES.get(r).copied())
}
