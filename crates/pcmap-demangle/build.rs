//! Finds LLVM's demangler library (`libLLVMDemangle.a`, in Debian's `llvm-22-dev`) and compiles
//! the small C shim over it (`src/llvm_shim.cpp`).
//!
//! Why link LLVM's library instead of a Rust crate: `pcmap symbolize` is a drop-in for
//! llvm-symbolizer, whose names come from LLVM's Itanium/Rust/D/Microsoft demanglers. The only
//! maintained Rust Itanium demangler, `cpp_demangle`, disagrees with LLVM's on about half of
//! libstdc++'s symbols (`std::istream` vs `std::basic_istream<...>`, lambda and literal spelling,
//! thunk wording), and writing a second Itanium demangler would duplicate LLVM's for no gain.
//! `libLLVMDemangle` is LLVM's standalone, dependency-free library for exactly this job.
//!
//! Where LLVM is looked for, in order: `$PCMAP_LLVM_CONFIG`, `$LLVM_CONFIG`, `llvm-config-22` on
//! `PATH`, `/usr/lib/llvm-22/bin/llvm-config`, `llvm-config` on `PATH`. `PCMAP_LLVM_DEMANGLE=0`
//! skips the search. When none is found the crate falls back to `cpp_demangle` and says so in a
//! build warning (and `pcmap --version` names the demangler in use).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(pcmap_llvm_demangle)");
    println!("cargo::rerun-if-changed=src/llvm_shim.cpp");
    for var in [
        "PCMAP_LLVM_CONFIG",
        "LLVM_CONFIG",
        "PCMAP_LLVM_DEMANGLE",
        "PATH",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    if std::env::var("PCMAP_LLVM_DEMANGLE").is_ok_and(|v| v == "0") {
        fallback("PCMAP_LLVM_DEMANGLE=0");
        return;
    }
    match find_llvm() {
        Some(llvm) => {
            cc::Build::new()
                .cpp(true)
                .std("c++17")
                .include(&llvm.include_dir)
                .file("src/llvm_shim.cpp")
                .warnings(false)
                .compile("pcmap_llvm_demangle_shim");
            println!("cargo::rustc-link-search=native={}", llvm.lib_dir.display());
            println!("cargo::rustc-link-lib=static=LLVMDemangle");
            println!("cargo::rustc-cfg=pcmap_llvm_demangle");
            println!(
                "cargo::rustc-env=PCMAP_LLVM_DEMANGLE_VERSION={}",
                llvm.version
            );
            println!("cargo::rerun-if-changed={}", llvm.archive().display());
        }
        None => fallback("no LLVM with libLLVMDemangle.a and its headers was found"),
    }
}

struct Llvm {
    version: String,
    lib_dir: PathBuf,
    include_dir: PathBuf,
}

impl Llvm {
    fn archive(&self) -> PathBuf {
        self.lib_dir.join("libLLVMDemangle.a")
    }
}

fn find_llvm() -> Option<Llvm> {
    let mut candidates: Vec<String> = Vec::new();
    for var in ["PCMAP_LLVM_CONFIG", "LLVM_CONFIG"] {
        if let Ok(v) = std::env::var(var) {
            candidates.push(v);
        }
    }
    candidates.extend(
        [
            "llvm-config-22",
            "/usr/lib/llvm-22/bin/llvm-config",
            "llvm-config",
        ]
        .map(String::from),
    );
    candidates.iter().find_map(|c| probe(c))
}

fn probe(llvm_config: &str) -> Option<Llvm> {
    let ask = |flag: &str| -> Option<String> {
        let out = Command::new(llvm_config).arg(flag).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let llvm = Llvm {
        version: ask("--version")?,
        lib_dir: ask("--libdir")?.into(),
        include_dir: ask("--includedir")?.into(),
    };
    let header = llvm.include_dir.join("llvm/Demangle/Demangle.h");
    (llvm.archive().is_file() && header.is_file()).then_some(llvm)
}

fn fallback(why: &str) {
    println!(
        "cargo::warning=pcmap-demangle: {why}; demangling with cpp_demangle, which spells some \
         C++ names differently from llvm-symbolizer (install llvm-22-dev, or point \
         PCMAP_LLVM_CONFIG at an llvm-config, for LLVM's own demangler)"
    );
}
