//! pcmap-demangle against llvm-cxxfilt 22 (LLVM's demangler driver) on real symbol tables:
//! libstdc++, LLVM's own library (tens of thousands of C++ template names) and this test binary
//! (Rust's legacy mangling).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use pcmap_testkit::{run_ok, tool};

/// The names of `lib`'s symbols, as llvm-nm 22 lists them (dynamic symbols for shared libraries),
/// without the `@VERSION` llvm-nm appends to versioned dynamic symbols (not part of the name).
fn symbol_names(lib: &Path, dynamic: bool) -> Vec<String> {
    let mut cmd = Command::new(tool("llvm-nm"));
    cmd.arg("--just-symbol-name");
    if dynamic {
        cmd.arg("-D");
    }
    let mut names: Vec<String> = run_ok(cmd.arg(lib))
        .lines()
        .map(|l| l.trim().split('@').next().unwrap_or_default().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// llvm-cxxfilt's answer for each name (one per line, in order).
fn cxxfilt(names: &[String]) -> Vec<String> {
    let exe = tool("llvm-cxxfilt");
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", exe.display()));
    let input = names.join("\n") + "\n";
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("llvm-cxxfilt output");
    writer.join().expect("writer thread").expect("write names");
    assert!(
        out.status.success(),
        "{} exited with {}: {}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), names.len(), "llvm-cxxfilt: one line per name");
    lines
}

fn compare(what: &str, names: &[String], min_mangled: usize) {
    assert!(
        pcmap_demangle::is_llvm(),
        "pcmap-demangle was built with {} instead of LLVM's demangler: install llvm-22-dev \
         (scripts/install-test-deps does) and rebuild",
        pcmap_demangle::engine()
    );
    let expected = cxxfilt(names);
    let mangled = names.iter().filter(|n| n.starts_with("_Z")).count();
    assert!(
        mangled >= min_mangled,
        "{what}: only {mangled} mangled names (expected at least {min_mangled})"
    );
    let mut differ = Vec::new();
    for (name, want) in names.iter().zip(&expected) {
        let got = pcmap_demangle::demangle(name);
        if got != want.as_str() {
            differ.push(format!(
                "{name}\n  llvm-cxxfilt: {want}\n  pcmap:        {got}"
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{what}: {} of {} names differ from llvm-cxxfilt 22, e.g.\n{}",
        differ.len(),
        names.len(),
        differ[..differ.len().min(10)].join("\n")
    );
}

#[test]
fn libstdcxx_symbols_match_llvm_cxxfilt() {
    let lib = Path::new("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
    assert!(
        lib.exists(),
        "{} missing (package libstdc++6)",
        lib.display()
    );
    compare("libstdc++", &symbol_names(lib, true), 3000);
}

#[test]
fn llvm_library_symbols_match_llvm_cxxfilt() {
    let lib = Path::new("/usr/lib/x86_64-linux-gnu/libLLVM.so.22.1");
    assert!(
        lib.exists(),
        "{} missing (package libllvm22)",
        lib.display()
    );
    compare("libLLVM 22", &symbol_names(lib, true), 20_000);
}

#[test]
fn rust_symbols_match_llvm_cxxfilt() {
    let exe = std::env::current_exe().expect("test binary path");
    compare("this test binary", &symbol_names(&exe, false), 500);
}
