//! `pcmap symbolize` as a drop-in for llvm-symbolizer 22: the same answers in the LLVM and GNU
//! text layouts (byte for byte) and in `--output-style=JSON` (equal as JSON), with and without
//! inline frames, for every third address from 0 to past the end of the image of
//! `fixtures/src/inline` built with clang-22 and gcc (addresses in functions, between them, in
//! data and past everything: unnamed, line-less and unknown answers included); standard-input mode
//! through a pipe, answering each line before the next is written. C++ names are demangled as
//! llvm-symbolizer demangles them (libFuzzer built with clang++ and g++).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use pcmap_testkit::{build_with, libfuzzer_sources, run, run_ok, scratch_dir, tool};
use serde_json::Value;

fn fixtures() -> Vec<(&'static str, PathBuf)> {
    let src = &["inline/inline.c"];
    vec![
        (
            "clang",
            build_with("clang", "inline-clang-d5", src, &["-O2", "-g", "-gdwarf-5"]),
        ),
        (
            "gcc",
            build_with("gcc", "inline-gcc-d5", src, &["-O2", "-g", "-gdwarf-5"]),
        ),
    ]
}

/// Every third address from 0 to 64 bytes past the highest defined symbol (`_end`).
fn addresses(bin: &Path) -> Vec<String> {
    (0..image_end(bin) + 64)
        .step_by(3)
        .map(|a| format!("{a:#x}"))
        .collect()
}

/// The end of the highest defined symbol (`_end`), from llvm-nm.
fn image_end(bin: &Path) -> u64 {
    let nm = run_ok(
        Command::new(tool("llvm-nm"))
            .args(["-S", "--defined-only"])
            .arg(bin),
    );
    nm.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let a = u64::from_str_radix(f.first()?, 16).ok()?;
            let size = if f.len() == 4 {
                u64::from_str_radix(f[1], 16).ok()?
            } else {
                0
            };
            Some(a + size)
        })
        .max()
        .expect("symbols")
}

/// Address and size of `.text`, from llvm-readelf.
fn text_section(bin: &Path) -> (u64, u64) {
    let sections = run_ok(Command::new(tool("llvm-readelf")).arg("-SW").arg(bin));
    sections
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let i = f.iter().position(|x| *x == ".text")?;
            Some((
                u64::from_str_radix(f.get(i + 2)?, 16).ok()?,
                u64::from_str_radix(f.get(i + 4)?, 16).ok()?,
            ))
        })
        .expect(".text in llvm-readelf -S")
}

/// A finished command with what a failure report needs.
struct Ran {
    command: String,
    out: Output,
}

impl Ran {
    fn new(cmd: &mut Command, stdin: Option<&Path>) -> Ran {
        let command = format!(
            "{cmd:?}{}",
            stdin.map_or(String::new(), |p| format!(" < {}", p.display()))
        );
        if let Some(p) = stdin {
            cmd.stdin(File::open(p).expect("address list"));
        }
        let out = run(cmd);
        let ran = Ran { command, out };
        assert!(ran.out.status.success(), "{}", ran.describe());
        ran
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    fn describe(&self) -> String {
        format!(
            "command: {}\nstatus: {}\nstderr:\n{}",
            self.command,
            self.out.status,
            String::from_utf8_lossy(&self.out.stderr)
        )
    }
}

fn llvm(args: &[&str], stdin: Option<&Path>) -> Ran {
    Ran::new(Command::new(tool("llvm-symbolizer")).args(args), stdin)
}

fn pcmap(args: &[&str], stdin: Option<&Path>) -> Ran {
    Ran::new(
        Command::new(env!("CARGO_BIN_EXE_pcmap"))
            .arg("symbolize")
            .args(args),
        stdin,
    )
}

/// One JSON value per output line (standard-input mode answers one line per address).
fn json_lines(ran: &Ran) -> Vec<Value> {
    ran.stdout()
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{}", ran.describe()))
        })
        .collect()
}

#[test]
fn answers_equal_llvm_symbolizer() {
    for (name, bin) in fixtures() {
        let b = bin.to_str().unwrap();
        let addrs = addresses(&bin);
        assert!(addrs.len() >= 1000, "{name}: {} addresses", addrs.len());
        let list = scratch_dir(&format!("symbolize-dropin-{name}")).join("addrs");
        std::fs::write(&list, addrs.join("\n") + "\n").unwrap();
        let obj = format!("--obj={b}");

        for inline in ["--inlining", "--no-inlines"] {
            // JSON, standard-input mode: one object per line, compared as JSON values.
            let args = [obj.as_str(), inline, "--output-style=JSON"];
            let (t, o) = (llvm(&args, Some(&list)), pcmap(&args, Some(&list)));
            let (tj, oj) = (json_lines(&t), json_lines(&o));
            assert_eq!(tj.len(), addrs.len(), "{}", t.describe());
            assert_eq!(oj.len(), tj.len(), "{}\n{}", o.describe(), t.describe());
            let mut kinds = [0usize; 4]; // no function name, no line, nothing at all, discriminator
            for ((x, y), a) in oj.iter().zip(&tj).zip(&addrs) {
                assert_eq!(
                    x,
                    y,
                    "{name} {inline} {a}: ours vs llvm-symbolizer\n{}\n{}",
                    o.describe(),
                    t.describe()
                );
                for f in y["Symbol"].as_array().unwrap() {
                    kinds[0] += (f["FunctionName"] == "") as usize;
                    kinds[1] += (f["Line"] == 0) as usize;
                    kinds[2] += (f["FunctionName"] == "" && f["FileName"] == "") as usize;
                    kinds[3] += (f["Discriminator"] != 0) as usize;
                }
            }
            assert!(
                kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0,
                "{name}: the addresses must include unnamed, line-less and unknown answers: {kinds:?}"
            );
            eprintln!(
                "{name} JSON {inline}: {} addresses equal to llvm-symbolizer \
                 ({} frames without a function name, {} without a line, {} unknown, {} with a discriminator)",
                addrs.len(),
                kinds[0],
                kinds[1],
                kinds[2],
                kinds[3]
            );

            // Text layouts, byte for byte.
            for style in ["--output-style=LLVM", "--output-style=GNU"] {
                let args = [obj.as_str(), inline, style];
                let (t, o) = (llvm(&args, Some(&list)), pcmap(&args, Some(&list)));
                let (ts, os) = (t.stdout(), o.stdout());
                if ts != os {
                    let line = ts
                        .lines()
                        .zip(os.lines())
                        .position(|(x, y)| x != y)
                        .unwrap_or(0);
                    panic!(
                        "{name} {inline} {style}: first difference at line {}: llvm {:?}, ours {:?}\n{}\n{}",
                        line + 1,
                        ts.lines().nth(line),
                        os.lines().nth(line),
                        o.describe(),
                        t.describe()
                    );
                }
                eprintln!(
                    "{name} {style} {inline}: {} addresses byte-identical ({} bytes)",
                    addrs.len(),
                    ts.len()
                );
            }
        }

        // Addresses on the command line: one JSON array, llvm's defaults (inline frames),
        // the `-e` spelling, non-addresses looked up as symbol names (SYMBOL, SYMBOL+OFFSET).
        let mut args: Vec<&str> = vec!["-e", b, "--output-style=JSON"];
        args.extend(addrs.iter().step_by(7).map(String::as_str));
        args.extend([
            "main",
            "012",
            "42",
            "nosuch+4",
            "mix64+4",
            "_start",
            "fold_many+0x1000",
        ]);
        let (t, o) = (llvm(&args, None), pcmap(&args, None));
        let tv: Value = serde_json::from_str(&t.stdout()).expect("llvm JSON");
        let ov: Value = serde_json::from_str(&o.stdout())
            .unwrap_or_else(|e| panic!("pcmap JSON: {e}\n{}", o.describe()));
        assert_eq!(ov, tv, "{}\n{}", o.describe(), t.describe());
        // The same inputs in the text layouts.
        for style in ["--output-style=LLVM", "--output-style=GNU"] {
            let mut a = args.clone();
            a[2] = style;
            let (t, o) = (llvm(&a, None), pcmap(&a, None));
            assert!(
                t.stdout() == o.stdout(),
                "{name} {style}: output differs\n{}\n{}",
                o.describe(),
                t.describe()
            );
        }

        // The other spellings: -a, -p, --functions, --adjust-vma, -C, --relative-address.
        let head: Vec<&str> = addrs.iter().take(600).map(String::as_str).collect();
        let few = list.with_file_name("few");
        std::fs::write(&few, head.join("\n") + "\n").unwrap();
        for extra in [
            &["-a", "-p"][..],
            &["--print-address", "--output-style=GNU", "-i"],
            &["--output-style=GNU"],
            &["--verbose"],
            &["--verbose", "--no-inlines", "-p"],
            &["--verbose", "--output-style=GNU"],
            &["--functions=short"],
            &["--functions=none", "--pretty-print"],
            &["-f", "--no-inlines", "-a"],
            &["--adjust-vma=0x10", "-a"],
            &["--adjust-vma", "0x1000", "--output-style=JSON"],
            &["-C", "--relative-address"],
            &["--no-demangle", "--functions=short", "--output-style=JSON"],
            &["--inlining=false", "-demangle=false", "--addresses"],
            &["--basenames", "--output-style=JSON"],
            &["-s", "--output-style=GNU"],
            &[
                "--inlining=true",
                "-demangle=true",
                "-f=linkage",
                "--exe",
                b,
            ],
        ] {
            let mut args = vec![obj.as_str()];
            args.extend_from_slice(extra);
            let (t, o) = (llvm(&args, Some(&few)), pcmap(&args, Some(&few)));
            assert!(
                t.stdout() == o.stdout(),
                "{name} {extra:?}: output differs\n{}\n{}",
                o.describe(),
                t.describe()
            );
        }

        // `BINARY ADDR` input lines (no --obj), quoted or not, with a CODE prefix.
        let lines = list.with_file_name("lines");
        let mut text = String::new();
        for (i, a) in addrs.iter().step_by(11).enumerate() {
            text += &match i % 3 {
                0 => format!("{b} {a}\n"),
                1 => format!("\"{b}\" {a}\n"),
                _ => format!("CODE {b} {a}\n"),
            };
        }
        std::fs::write(&lines, text).unwrap();
        let args = ["--output-style=JSON"];
        let (t, o) = (llvm(&args, Some(&lines)), pcmap(&args, Some(&lines)));
        assert_eq!(
            json_lines(&o),
            json_lines(&t),
            "{}\n{}",
            o.describe(),
            t.describe()
        );
    }
}

/// Standard input through a pipe, one address at a time: each answer is read before the next
/// address is written, so pcmap must answer (and flush) per line while its input is still open.
#[test]
fn stdin_answers_line_by_line() {
    let (_, bin) = &fixtures()[0];
    let b = bin.to_str().unwrap();
    let addrs: Vec<String> = addresses(bin).into_iter().step_by(97).collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pcmap"));
    cmd.args(["symbolize", "--obj", b, "--output-style=JSON"]);
    let described = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pcmap symbolize");
    let pid = child.id();
    // A watchdog: if pcmap never answers (no flush), end it so the read below sees end of file
    // and the test fails with a message instead of hanging.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .is_err()
        {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for a in &addrs {
        writeln!(stdin, "{a}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        if line.is_empty() {
            let _ = done_tx.send(());
            let out = child.wait_with_output().unwrap();
            panic!(
                "no answer for {a} while standard input is open\ncommand: {described}\nstatus: {}\nstderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ours: Value = serde_json::from_str(&line).expect("JSON line");
        let theirs = llvm(&[&format!("--obj={b}"), "--output-style=JSON", a], None);
        let theirs: Value = serde_json::from_str(&theirs.stdout()).unwrap();
        assert_eq!(ours, theirs[0], "{a}\ncommand: {described}");
    }
    drop(stdin);
    let _ = done_tx.send(());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "command: {described}\nstatus: {}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    watchdog.join().unwrap();
    eprintln!(
        "stdin coprocess: {} addresses answered one at a time",
        addrs.len()
    );
}

/// A large Rust binary (pcmap itself, unoptimized, with DWARF): generic code inlined across
/// units (`DW_FORM_ref_addr` origins), thousands of units. Names compared as stored
/// (`--no-demangle`) and demangled (Rust's legacy mangling, through LLVM's demangler).
#[test]
fn rust_binary_equals_llvm_symbolizer() {
    let bin = Path::new(env!("CARGO_BIN_EXE_pcmap"));
    let b = bin.to_str().unwrap();
    let (start, size) = text_section(bin);
    // A fixed pseudo-random sample of .text (a linear congruential sequence).
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let addrs: Vec<String> = (0..1500)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            format!("{:#x}", start + (x >> 16) % size)
        })
        .collect();
    let list = scratch_dir("symbolize-rust").join("addrs");
    std::fs::write(&list, addrs.join("\n") + "\n").unwrap();
    let obj = format!("--obj={b}");
    for (inline, names) in [
        ("--inlining", "--no-demangle"),
        ("--no-inlines", "--no-demangle"),
        ("--inlining", "--demangle"),
    ] {
        let args = [obj.as_str(), inline, names, "--output-style=JSON"];
        let (t, o) = (llvm(&args, Some(&list)), pcmap(&args, Some(&list)));
        let (tj, oj) = (json_lines(&t), json_lines(&o));
        assert_eq!(oj.len(), tj.len(), "{}\n{}", o.describe(), t.describe());
        for ((x, y), a) in oj.iter().zip(&tj).zip(&addrs) {
            assert_eq!(x, y, "{a}\n{}\n{}", o.describe(), t.describe());
        }
        let args = [obj.as_str(), inline, names];
        let (t, o) = (llvm(&args, Some(&list)), pcmap(&args, Some(&list)));
        assert!(
            t.stdout() == o.stdout(),
            "text differs\n{}\n{}",
            o.describe(),
            t.describe()
        );
        eprintln!(
            "pcmap (Rust) {inline} {names}: {} addresses equal to llvm-symbolizer",
            addrs.len()
        );
    }
}

/// libFuzzer (real C++: templates, the standard library, lambdas, exceptions) built with clang++
/// 22 and g++ at -O2 with DWARF: llvm-symbolizer's default answers (demangled names, inline
/// frames) and `--no-inlines`, as JSON and as LLVM text, for 2,000 addresses spread over the
/// whole image (inside functions, between them, in data, past the end).
#[test]
fn cxx_names_are_demangled_as_llvm_symbolizer_does() {
    let mut srcs: Vec<String> = libfuzzer_sources()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    srcs.push("perf2bolt/eh_fuzz_driver.cpp".into());
    let srcs: Vec<&str> = srcs.iter().map(String::as_str).collect();
    let flags = ["-O2", "-g", "-pthread"];
    for (compiler, bin) in [
        (
            "clang++",
            build_with("clang++", "symbolize-libfuzzer-clang", &srcs, &flags),
        ),
        (
            "g++",
            build_with("g++", "symbolize-libfuzzer-gcc", &srcs, &flags),
        ),
    ] {
        // From a page below .text (read-only data) to past the end of the image. Not lower:
        // there llvm-symbolizer 22 answers with the line rows of C++ inline functions the
        // linker discarded (their sequences are tombstoned at address 0, so they overlay the ELF
        // header and the dynamic tables); pcmap, like addr2line, leaves discarded code out.
        let low = text_section(&bin).0.saturating_sub(0x1000);
        // The end of the range `addresses` covers (whole steps of 3), without listing it.
        let end = (image_end(&bin) + 64).div_ceil(3) * 3;
        // A fixed pseudo-random sample (a linear congruential sequence).
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let addrs: Vec<String> = (0..2000)
            .map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                format!("{:#x}", low + (x >> 16) % (end - low))
            })
            .collect();
        let list = scratch_dir(&format!("symbolize-cxx-{compiler}")).join("addrs");
        std::fs::write(&list, addrs.join("\n") + "\n").unwrap();
        let obj = format!("--obj={}", bin.display());
        for inline in ["--inlining", "--no-inlines"] {
            for demangle in [None, Some("-C")] {
                let mut args = vec![obj.as_str(), inline, "--output-style=JSON"];
                args.extend(demangle);
                let (t, o) = (llvm(&args, Some(&list)), pcmap(&args, Some(&list)));
                let (tj, oj) = (json_lines(&t), json_lines(&o));
                assert_eq!(oj.len(), tj.len(), "{}\n{}", o.describe(), t.describe());
                let (mut demangled, mut unnamed) = (0, 0);
                for ((x, y), a) in oj.iter().zip(&tj).zip(&addrs) {
                    assert_eq!(
                        x,
                        y,
                        "{compiler} {inline} {a}: ours vs llvm-symbolizer\n{}\n{}",
                        o.describe(),
                        t.describe()
                    );
                    for f in y["Symbol"].as_array().unwrap() {
                        let name = f["FunctionName"].as_str().unwrap_or_default();
                        demangled += name.contains("::") as usize;
                        unnamed += name.is_empty() as usize;
                    }
                }
                assert!(
                    demangled >= 500 && unnamed > 0,
                    "{compiler}: expected many demangled C++ names and some unnamed frames: \
                     {demangled} demangled, {unnamed} unnamed"
                );
                eprintln!(
                    "{compiler} JSON {inline} {demangle:?}: {} addresses equal to llvm-symbolizer \
                     ({demangled} frames with a demangled C++ name, {unnamed} unnamed)",
                    addrs.len()
                );
            }
            let args = [obj.as_str(), inline];
            let (t, o) = (llvm(&args, Some(&list)), pcmap(&args, Some(&list)));
            assert!(
                t.stdout() == o.stdout(),
                "{compiler} {inline}: LLVM text differs\n{}\n{}",
                o.describe(),
                t.describe()
            );
        }
    }
}
