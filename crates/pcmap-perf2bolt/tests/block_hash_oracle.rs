//! Block hashes (`BlendedBlockHash`) against perf2bolt 22's YAML output, field by field.
//!
//! For each fixture a pre-aggregated profile with a taken branch at every in-function jump and
//! a fall-through between every pair of consecutive instructions (from `llvm-objdump`, the
//! oracle's disassembly) makes perf2bolt list almost every block of every function; the hashes it
//! writes are compared with [`pcmap_perf2bolt::block_hash::block_hashes`] per field: offset,
//! opcode (loose) hash, instruction hash, predecessor and successor hash, and whole hash.

mod support;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::block_hash::{self, Context};
use pcmap_testkit as tk;

const FLAGS: &[&str] = &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];

/// Agreement counts: blocks compared, then per field (offset, opcode, instr, pred, succ, whole).
#[derive(Debug, Default, Clone, Copy)]
struct Agreement {
    blocks: usize,
    fields: [usize; 6],
    /// Functions whose function hash equals perf2bolt's, and functions compared.
    functions: (usize, usize),
}

impl Agreement {
    fn percent(&self, field: usize) -> f64 {
        100.0 * self.fields[field] as f64 / self.blocks.max(1) as f64
    }
}

const FIELDS: [&str; 6] = ["offset", "opcode", "instr", "pred", "succ", "whole"];

fn profile(bin: &Path) -> String {
    let funcs = support::disassemble(bin);
    let mut out = String::from("E cycles\n");
    for f in &funcs {
        for (k, i) in f.insns.iter().enumerate() {
            let m = i.mnemonic.as_str();
            if let Some(t) = i
                .target
                .filter(|&t| m.starts_with('j') && f.insns.iter().any(|x| x.addr == t))
            {
                writeln!(out, "B {:x} {t:x} 1 0", i.addr).unwrap();
            }
            let ends = m.starts_with("jmp") || m.starts_with("ret") || m == "ud2";
            if let (Some(n), false) = (f.insns.get(k + 1), ends) {
                writeln!(out, "F {:x} {:x} 1", i.addr, n.addr).unwrap();
            }
        }
    }
    out
}

fn measure(bin: &Path, tag: &str) -> Agreement {
    let dir = tk::scratch_dir(&format!("block-hash-{tag}"));
    let prof = dir.join("prof.pa");
    std::fs::write(&prof, profile(bin)).unwrap();
    let yaml = dir.join("p2b.yaml");
    support::perf2bolt(
        bin,
        &prof,
        &dir.join("p2b.fdata"),
        &["-w", yaml.to_str().unwrap()],
    );
    let theirs = pcmap_profile::yaml::parse(&std::fs::read(&yaml).unwrap()).unwrap();
    let data = std::fs::read(bin).unwrap();
    let binary = pcmap_binary::Binary::parse(&data).unwrap();
    let image = BoltFunctions::discover(&binary).unwrap();
    let ctx = Context::new(&image);
    let agg = pcmap_perf2bolt::aggregate::Aggregator::new(&image);
    agg.prepare(None);
    let by_name: HashMap<&str, usize> = image
        .functions()
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name(), i))
        .collect();
    let mut a = Agreement::default();
    let mut unknown = 0;
    let mut report = String::new();
    // Function hashes, for information.
    let (mut fn_same2, mut fn_all) = (0, 0);
    for yf in &theirs.functions {
        let Some(&fi) = by_name.get(yf.name.as_str()) else {
            continue;
        };
        let func = &image.functions()[fi];
        let c = agg.cfg(fi);
        let (ours, stats) = block_hash::block_hashes(&ctx, func, c);
        fn_all += 1;
        let fh = block_hash::function_hash(&ctx, func, c).0;
        // The one-pass form the YAML writer uses gives the same two answers.
        let (one_pass_fh, one_pass_blocks, _) = block_hash::hashes(&ctx, func, c);
        assert_eq!(
            (one_pass_fh, &one_pass_blocks),
            (fh, &ours),
            "{tag} {}",
            yf.name
        );
        fn_same2 += usize::from(fh == yf.hash);
        if fh != yf.hash {
            writeln!(
                report,
                "{tag} {}: function hash ours {fh:#x} theirs {:#x} ({} blocks)",
                yf.name,
                yf.hash,
                c.blocks.len()
            )
            .unwrap();
        }
        let inputs = block_hash::hash_inputs(&ctx, func, c, &mut block_hash::Stats::default());
        unknown += stats.unknown;
        if let Some(u) = stats.first_unknown {
            writeln!(report, "{tag} {}: unknown instruction form {u:?}", yf.name).unwrap();
        }
        for yb in &yf.blocks {
            let Some(&o) = ours.get(yb.index as usize) else {
                continue;
            };
            let t = yb.hash;
            a.blocks += 1;
            let parts = [
                (0, 0xffff),
                (16, 0xffff),
                (32, 0xffff),
                (48, 0xff),
                (56, 0xff),
                (0, u64::MAX),
            ];
            for (k, (shift, mask)) in parts.into_iter().enumerate() {
                if (o >> shift) & mask == (t >> shift) & mask {
                    a.fields[k] += 1;
                } else if report.len() < 200_000 && k < 5 {
                    writeln!(
                        report,
                        "{tag} {} bb{} {}: ours {:#x} theirs {:#x} (opcode string {:?})",
                        yf.name,
                        yb.index,
                        FIELDS[k],
                        (o >> shift) & mask,
                        (t >> shift) & mask,
                        inputs
                            .get(yb.index as usize)
                            .map(|i| i.1.as_str())
                            .unwrap_or("")
                    )
                    .unwrap();
                }
            }
        }
    }
    a.functions = (fn_same2, fn_all);
    std::fs::write(dir.join("mismatches.txt"), &report).unwrap();
    eprintln!(
        "{tag}: {} blocks, {unknown} unknown instructions, function hashes {fn_same2}/{fn_all}; {}",
        a.blocks,
        FIELDS
            .iter()
            .enumerate()
            .map(|(k, f)| format!("{f} {}/{} ({:.1}%)", a.fields[k], a.blocks, a.percent(k)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    a
}

/// Assert measured floors (percent per field: offset, opcode, instr, pred, succ, whole). These are
/// floors measured on LLVM 22 just below the agreement reached, not targets.
fn check(a: &Agreement, tag: &str, floors: [f64; 6], min_blocks: usize) {
    assert!(a.blocks >= min_blocks, "{tag}: only {} blocks", a.blocks);
    for (k, floor) in floors.into_iter().enumerate() {
        assert!(
            a.percent(k) >= floor,
            "{tag}: {} agreement {:.1}% below the measured floor {floor}%",
            FIELDS[k],
            a.percent(k)
        );
    }
}

#[test]
fn block_hashes_match_perf2bolt() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let p4 = tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS);
    let src = tk::many_functions_source(2500);
    let many = tk::build("block-hash-many", &[src.to_str().unwrap()], FLAGS);
    let a1 = measure(&p1, "p1");
    let a4 = measure(&p4, "p4");
    let am = measure(&many, "many");
    // Measured floors (LLVM 22: 100% of every field on all three), set one block below what was
    // measured; they are not targets.
    check(&a1, "p1", [96.0; 6], 25);
    check(&a4, "p4", [95.0; 6], 20);
    check(&am, "many", [99.9; 6], 6000);
}

/// Without code relocations (position-independent, no `--emit-relocs`: BOLT's non-relocation
/// mode, operands symbolized only when %rip-relative) and with GCC's code generation.
#[test]
fn block_hashes_match_perf2bolt_pie_and_gcc() {
    const PIE: &[&str] = &["-O2", "-fPIE", "-pie"];
    let src = tk::many_functions_source(2500);
    let p1 = tk::build("block-hash-p1-pie", &["perf2bolt/p1.c"], PIE);
    let many = tk::build("block-hash-many-pie", &[src.to_str().unwrap()], PIE);
    let gcc = tk::build_with(
        "gcc",
        "block-hash-many-gcc",
        &[src.to_str().unwrap()],
        FLAGS,
    );
    let gcc_pie = tk::build_with(
        "gcc",
        "block-hash-many-gcc-pie",
        &[src.to_str().unwrap()],
        PIE,
    );
    let a1 = measure(&p1, "p1-pie");
    let am = measure(&many, "many-pie");
    let ag = measure(&gcc, "many-gcc");
    let agp = measure(&gcc_pie, "many-gcc-pie");
    // Measured floors (LLVM 22: 100% of every field on all four), not targets.
    check(&a1, "p1-pie", [95.0; 6], 20);
    check(&am, "many-pie", [99.9; 6], 6000);
    check(&ag, "many-gcc", [99.9; 6], 20000);
    check(&agp, "many-gcc-pie", [99.9; 6], 20000);
}

/// Instruction variety (jump tables, cmov/set, vector compares, AVX-512 masking and
/// broadcasts, string operations, indirect calls and tail calls) from clang and gcc.
#[test]
fn block_hashes_match_perf2bolt_instruction_mix() {
    const V4: &[&str] = &[
        "-O3",
        "-march=x86-64-v4",
        "-fno-pie",
        "-no-pie",
        "-Wl,--emit-relocs",
    ];
    const V4_PIE: &[&str] = &["-O2", "-march=x86-64-v4", "-fPIE", "-pie"];
    let src = ["perf2bolt/blockhash_mix.c"];
    let clang = tk::build("block-hash-mix", &src, V4);
    let clang_pie = tk::build("block-hash-mix-pie", &src, V4_PIE);
    let gcc = tk::build_with("gcc", "block-hash-mix-gcc", &src, V4);
    let gcc_pie = tk::build_with("gcc", "block-hash-mix-gcc-pie", &src, V4_PIE);
    let runs = [
        (measure(&clang, "mix"), "mix"),
        (measure(&clang_pie, "mix-pie"), "mix-pie"),
        (measure(&gcc, "mix-gcc"), "mix-gcc"),
        (measure(&gcc_pie, "mix-gcc-pie"), "mix-gcc-pie"),
    ];
    // Measured floors (LLVM 22), not targets: FLOORS_MIX below.
    for ((a, tag), floors) in runs.iter().zip(FLOORS_MIX) {
        check(a, tag, floors, 40);
    }
    // Conditional tail calls; a conditional branch to the next instruction.
    let ctc = tk::build("block-hash-ctc", &["perf2bolt/blockhash_ctc.s"], FLAGS);
    let a = measure(&ctc, "ctc");
    // Measured: 21 of 21 blocks in every field; floor one block below (not a target).
    check(&a, "ctc", [95.0; 6], 15);
}

/// x87 floating point (`long double` code from clang -O2 and every x87 instruction form
/// (memory sizes, st(i) operands, popping forms, conditional moves such as `fcmovnbe`, whose
/// mnemonic is printed whole, and integer-operand forms such as `fisubrl`/`fidivl`), and AVX-512
/// register moves. Every function and block hash must equal perf2bolt's.
#[test]
fn block_hashes_match_perf2bolt_x87_and_avx512_registers() {
    let c_flags = [FLAGS, &["-lm"]].concat();
    let c = tk::build("block-hash-x87", &["perf2bolt/x87.c"], &c_flags);
    let forms = tk::build("block-hash-x87-forms", &["perf2bolt/x87_forms.s"], FLAGS);
    // AVX-512 register moves (`vmovaps %zmm31, %zmm3`, as in LLVM's entry-point-fallthru.s).
    let avx = tk::build(
        "block-hash-avx512-regs",
        &["perf2bolt/avx512_regs.s"],
        FLAGS,
    );
    for (bin, tag, min_blocks) in [
        (&c, "x87", 40),
        (&forms, "x87-forms", 1),
        (&avx, "avx512-regs", 1),
    ] {
        let a = measure(bin, tag);
        check(&a, tag, [100.0; 6], min_blocks);
        let (same, all) = a.functions;
        assert!(all > 0, "{tag}: no function to compare");
        assert_eq!(same, all, "{tag}: function hashes equal to perf2bolt's");
    }
}

/// Floors for [`block_hashes_match_perf2bolt_instruction_mix`] (offset, opcode, instr, pred,
/// succ, whole): 100% of every field measured with perf2bolt 22 on all four builds (75 to 121
/// blocks), the floor one block below; measured, not targets.
const FLOORS_MIX: [[f64; 6]; 4] = [[98.5; 6]; 4];

/// Ad-hoc measurement on other binaries, not part of the suite:
/// `PCMAP_BLOCK_HASH_BINARIES=a:b cargo test -p pcmap-perf2bolt --test block_hash_oracle -- --ignored --nocapture`
/// prints the agreement per field for each; each binary must give perf2bolt blocks to compare.
#[test]
#[ignore = "measurement on binaries named by PCMAP_BLOCK_HASH_BINARIES"]
fn block_hashes_of_other_binaries() {
    let list = std::env::var_os("PCMAP_BLOCK_HASH_BINARIES")
        .expect("set PCMAP_BLOCK_HASH_BINARIES to a :-separated list of binaries");
    for (k, bin) in std::env::split_paths(&list).enumerate() {
        let a = measure(&bin, &format!("extra{k}"));
        assert!(a.blocks > 0, "{}: no block to compare", bin.display());
    }
}
