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

/// Run a command that must succeed; returns its stdout as a string.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    if !out.status.success() {
        panic!(
            "command failed ({}): {cmd:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compile `sources` (paths relative to `fixtures/src`, or absolute) with `compiler`
/// (`clang`, `clang++` or `gcc`) and `flags`, caching the output as `target/pcmap-fixtures/<name>-<hash>`.
///
/// The cache key covers the source bytes, the flags and the compiler, so editing a fixture rebuilds it.
/// Builds write to a temporary name and rename, so concurrent tests asking for the same fixture are safe.
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
    if out.exists() {
        return out;
    }
    let tmp = out.with_extension(
        format!(
            "tmp{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        )
        .replace(['(', ')'], ""),
    );
    let mut cmd = Command::new(&cc);
    if compiler.starts_with("clang") {
        cmd.arg("-fuse-ld=lld");
    }
    cmd.args(flags).args(&srcs).arg("-o").arg(&tmp);
    run_ok(&mut cmd);
    std::fs::rename(&tmp, &out).expect("rename built fixture");
    out
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
pub fn derive(out: &Path, make: impl FnOnce(&Path)) -> PathBuf {
    if !out.exists() {
        let tmp = out.with_extension(
            format!(
                "tmp{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            )
            .replace(['(', ')'], ""),
        );
        make(&tmp);
        std::fs::rename(&tmp, out)
            .unwrap_or_else(|e| panic!("rename {} -> {}: {e}", tmp.display(), out.display()));
    }
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
