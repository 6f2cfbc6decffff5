//! Faults while writing output, and hostile sizes in input: pcmap must lose nothing and allocate
//! no more than the input justifies.
//!
//! * a kill (`SIGKILL`) in the middle of writing a large output leaves the previous file at that
//!   path intact and no temporary file behind;
//! * a full disk (a 256 KiB tmpfs) and a read-only directory give a clear error naming the path,
//!   exit status 1, and no file;
//! * a directory as the output path is refused with a clear error;
//! * counts near `u64::MAX` and sizes past the end of the input are refused, with a peak memory
//!   (measured by GNU time) that stays a small multiple of the input size.
//!
//! The file-system faults run in a private mount namespace (`unshare -rm`, or plain `unshare -m`
//! as root) so the test mounts its own small file systems without touching the machine's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use pcmap_testkit::{run, scratch_dir, workspace_root};

fn pcmap_path() -> &'static str {
    env!("CARGO_BIN_EXE_pcmap")
}

fn describe(cmd: &str, out: &Output) -> String {
    format!(
        "command: {cmd}\nstatus: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An fdata profile of `lines` distinct branch records (about 40 bytes a line).
fn write_big_fdata(path: &Path, lines: usize) {
    let mut s = String::with_capacity(lines * 40);
    for i in 0..lines {
        s += &format!(
            "1 func{} {:x} 1 func{} {:x} 0 {}\n",
            i % 997,
            i,
            (i * 7) % 991,
            i % 4096,
            i % 1000 + 1
        );
    }
    std::fs::write(path, s).unwrap();
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Whether process `pid` has an output file open in `dir` that has no name yet (Linux shows an
/// `O_TMPFILE` file as `<dir>/#<inode> (deleted)`), or a temporary file beside the target.
fn writing_into(pid: u32, dir: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|target| target.parent() == Some(dir) && target != dir.join("big.fdata"))
}

#[test]
fn sigkill_while_writing_keeps_the_previous_file_and_leaves_nothing_behind() {
    let dir = scratch_dir("faults-sigkill");
    let input = dir.join("big.fdata");
    let output = dir.join("merged.fdata");
    // The kill must land while the output is being written: if pcmap finishes before the test
    // sees it writing, try again with an input twice as large.
    let mut lines = 400_000;
    for _attempt in 0..6 {
        write_big_fdata(&input, lines);
        std::fs::write(&output, "previous content\n").unwrap();
        let mut child = Command::new(pcmap_path())
            .arg("merge-fdata")
            .arg(&input)
            .arg("-o")
            .arg(&output)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pcmap");
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut caught = false;
        while Instant::now() < deadline {
            if writing_into(pid, &dir) {
                child.kill().expect("SIGKILL pcmap");
                caught = true;
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let status = child.wait().unwrap();
        if !caught {
            assert!(
                status.success(),
                "pcmap merge-fdata {} failed: {status}",
                input.display()
            );
            lines *= 2;
            continue;
        }
        assert_eq!(
            std::fs::read_to_string(&output).unwrap(),
            "previous content\n",
            "the previous output must survive a kill"
        );
        assert_eq!(
            entries(&dir),
            ["big.fdata", "merged.fdata"],
            "no temporary file may be left behind"
        );
        return;
    }
    panic!("pcmap always finished before it could be killed while writing");
}

/// Run `script` with `sh -c` in a private mount namespace; `PCMAP` and `DIR` are set for it.
fn in_mount_namespace(script: &str, dir: &Path) -> Output {
    let root = is_root();
    let mut cmd = Command::new("unshare");
    if root {
        cmd.arg("-m");
    } else {
        cmd.arg("-rm");
    }
    cmd.args(["sh", "-c", script])
        .env("PCMAP", pcmap_path())
        .env("DIR", dir);
    let out = run(&mut cmd);
    if out.status.code() == Some(97) {
        panic!(
            "cannot mount a tmpfs in a private mount namespace (needs root or user namespaces):\n{}",
            describe(script, &out)
        );
    }
    out
}

fn is_root() -> bool {
    // `id -u` rather than a syscall binding: the test crate needs no extra dependency.
    let out = run(Command::new("id").arg("-u"));
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Run `script` (which runs pcmap with an output named `merged.fdata` and then prints `exit=$?`)
/// in a private mount namespace; pcmap must have exited with status 1 and an error naming the
/// output and `cause`. Returns the script's stdout and a description for further assertions.
fn refused_in_mount_namespace(script: &str, dir: &Path, cause: &str) -> (String, String) {
    let out = in_mount_namespace(script, dir);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let why = describe(script, &out);
    assert!(stdout.contains("exit=1\n"), "expected exit status 1\n{why}");
    assert!(
        stderr.contains(cause) && stderr.contains("merged.fdata"),
        "the error must name the output and say {cause:?}\n{why}"
    );
    (stdout, why)
}

#[test]
fn full_disk_gives_a_clear_error_and_no_partial_file() {
    let dir = scratch_dir("faults-full-disk");
    let input = dir.join("big.fdata");
    write_big_fdata(&input, 100_000); // about 4 MB of output into a 256 KiB file system
    let script = r#"
        mkdir -p "$DIR/mnt" && mount -t tmpfs -o size=256k tmpfs "$DIR/mnt" || exit 97
        printf 'previous content\n' > "$DIR/mnt/merged.fdata"
        "$PCMAP" merge-fdata "$DIR/big.fdata" -o "$DIR/mnt/merged.fdata"
        echo "exit=$?"
        echo "--- files"; ls -A "$DIR/mnt"
        echo "--- content"; cat "$DIR/mnt/merged.fdata"
    "#;
    let (stdout, why) = refused_in_mount_namespace(script, &dir, "No space left on device");
    assert!(
        stdout.contains("--- files\nmerged.fdata\n--- content\nprevious content\n"),
        "only the previous file may remain, unchanged\n{why}"
    );
}

#[test]
fn read_only_directory_gives_a_clear_error() {
    let dir = scratch_dir("faults-read-only");
    std::fs::write(dir.join("small.fdata"), "1 main 10 1 work 0 0 3\n").unwrap();
    let script = r#"
        mkdir -p "$DIR/ro" && mount -t tmpfs -o ro,size=64k tmpfs "$DIR/ro" || exit 97
        "$PCMAP" merge-fdata "$DIR/small.fdata" -o "$DIR/ro/merged.fdata"
        echo "exit=$?"
        echo "--- files"; ls -A "$DIR/ro"
    "#;
    let (stdout, why) = refused_in_mount_namespace(script, &dir, "Read-only file system");
    assert!(
        stdout.ends_with("--- files\n"),
        "nothing may be created\n{why}"
    );
}

#[test]
fn a_directory_as_output_path_is_refused() {
    let dir = scratch_dir("faults-dir-output");
    let input = dir.join("small.fdata");
    std::fs::write(&input, "1 main 10 1 work 0 0 3\n").unwrap();
    let target = dir.join("out");
    std::fs::create_dir_all(&target).unwrap();
    let out = run(Command::new(pcmap_path())
        .arg("merge-fdata")
        .arg(&input)
        .arg("-o")
        .arg(&target));
    let why = describe("pcmap merge-fdata small.fdata -o out/", &out);
    assert_eq!(out.status.code(), Some(1), "{why}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is a directory") && stderr.contains(&*target.to_string_lossy()),
        "{why}"
    );
    assert!(entries(&target).is_empty(), "{why}");
}

/// Run pcmap under GNU time; returns its output and peak resident memory in KiB.
fn peak_memory(args: &[&str]) -> (Output, u64) {
    let dir = scratch_dir("faults-peak-memory");
    let report = dir.join(format!("time-{}.txt", args.join("_").replace('/', "_")));
    let mut cmd = Command::new("/usr/bin/time");
    cmd.arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(pcmap_path())
        .args(args);
    let out = run(&mut cmd);
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "GNU time wrote no report ({e}); is the `time` package installed?\n{}",
            describe(&format!("{cmd:?}"), &out)
        )
    });
    let kib = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected GNU time report {text:?}"));
    (out, kib)
}

/// A hostile input must be refused (exit status 1, an error message, no panic) within a peak
/// memory of a small multiple of its size plus the process's fixed cost.
fn assert_refused_within_memory(what: &str, args: &[&str], input: &Path) {
    let size_kib = std::fs::metadata(input).unwrap().len() / 1024;
    let (out, peak) = peak_memory(args);
    let why = describe(&format!("pcmap {}", args.join(" ")), &out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{what}: expected a refusal\n{why}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what}: panic\n{why}");
    // 64 MiB covers the executable, its libraries, thread stacks and buffers.
    let limit = 64 * 1024 + 8 * size_kib;
    assert!(
        peak <= limit,
        "{what}: peak memory {peak} KiB for a {size_kib} KiB input (limit {limit} KiB)\n{why}"
    );
}

/// An ELF64 file of type `e_type` (1 relocatable, 2 executable) with one section named `name` of
/// type `sh_type` holding `content`.
fn elf_with_section(e_type: u16, name: &str, sh_type: u32, content: &[u8]) -> Vec<u8> {
    let shstrtab = format!("\0{name}\0.shstrtab\0");
    let content_off = 64u64;
    let strtab_off = content_off + content.len() as u64;
    let sh_off = (strtab_off + shstrtab.len() as u64).next_multiple_of(8);
    let mut f = Vec::new();
    f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    f.extend_from_slice(&e_type.to_le_bytes());
    f.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&0u64.to_le_bytes()); // entry
    f.extend_from_slice(&0u64.to_le_bytes()); // phoff
    f.extend_from_slice(&sh_off.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 0, 0, 64, 3, 2] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(content);
    f.extend_from_slice(shstrtab.as_bytes());
    f.resize(sh_off as usize, 0);
    let section = |f: &mut Vec<u8>, name: u32, ty: u32, off: u64, size: u64| {
        f.extend_from_slice(&name.to_le_bytes());
        f.extend_from_slice(&ty.to_le_bytes());
        f.extend_from_slice(&0u64.to_le_bytes()); // flags
        f.extend_from_slice(&0u64.to_le_bytes()); // addr
        f.extend_from_slice(&off.to_le_bytes());
        f.extend_from_slice(&size.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&1u64.to_le_bytes());
        f.extend_from_slice(&0u64.to_le_bytes());
    };
    section(&mut f, 0, 0, 0, 0);
    section(&mut f, 1, sh_type, content_off, content.len() as u64);
    let shstr_name = 1 + name.len() as u32 + 1;
    section(&mut f, shstr_name, 3, strtab_off, shstrtab.len() as u64);
    f
}

/// ULEB128 of `v` (test input construction only).
fn uleb(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[test]
fn hostile_counts_and_sizes_are_refused_within_bounded_memory() {
    let dir = scratch_dir("faults-hostile");
    let path = |n: &str| dir.join(n);
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();

    // A BAT note whose function count is the largest the format allows (the decoder must bound
    // it by the bytes that follow, not allocate for it).
    let mut desc = Vec::new();
    uleb(u64::from(u32::MAX), &mut desc);
    desc.extend_from_slice(&[0x80; 64]);
    let mut note = Vec::new();
    note.extend_from_slice(&5u32.to_le_bytes());
    note.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    note.extend_from_slice(&1u32.to_le_bytes());
    note.extend_from_slice(b"BOLT\0\0\0\0");
    note.extend_from_slice(&desc);
    let bat = path("hostile-bat.o");
    std::fs::write(&bat, elf_with_section(1, ".note.bolt_bat", 7, &note)).unwrap();
    assert_refused_within_memory("BAT count", &["bat", "dump", &s(&bat)], &bat);

    // A basic-block address map (version 2) claiming the most blocks the format allows.
    let mut map = vec![2u8, 0];
    map.extend_from_slice(&0x1000u64.to_le_bytes());
    uleb(u64::from(u32::MAX), &mut map);
    map.extend_from_slice(&[0x81; 32]);
    let bbmap = path("hostile-bbmap.o");
    std::fs::write(
        &bbmap,
        elf_with_section(2, ".llvm_bb_addr_map", 0x6fff4c0a, &map),
    )
    .unwrap();
    assert_refused_within_memory("BB map count", &["bbmap", "dump", &s(&bbmap)], &bbmap);

    // A compressed section whose header claims 2^60 uncompressed bytes.
    let mut chdr = Vec::new();
    chdr.extend_from_slice(&1u32.to_le_bytes()); // ELFCOMPRESS_ZLIB
    chdr.extend_from_slice(&0u32.to_le_bytes());
    chdr.extend_from_slice(&(1u64 << 60).to_le_bytes());
    chdr.extend_from_slice(&1u64.to_le_bytes());
    chdr.extend_from_slice(&[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
    let mut compressed = elf_with_section(1, ".debug_info", 1, &chdr);
    // SHF_COMPRESSED on section 1: its header starts at e_shoff + 64; sh_flags at +8.
    let sh_off = u64::from_le_bytes(compressed[40..48].try_into().unwrap()) as usize;
    compressed[sh_off + 64 + 8..sh_off + 64 + 16].copy_from_slice(&0x800u64.to_le_bytes());
    let zlib = path("hostile-compressed.o");
    std::fs::write(&zlib, compressed).unwrap();
    let (out, peak) = peak_memory(&["info", &s(&zlib)]);
    let why = describe("pcmap info hostile-compressed.o", &out);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{why}"
    );
    assert!(peak <= 64 * 1024, "peak memory {peak} KiB\n{why}");

    // A perf.data header whose data section runs far past the end of the file.
    let mut perf = Vec::new();
    perf.extend_from_slice(b"PERFILE2");
    perf.extend_from_slice(&104u64.to_le_bytes()); // header size
    perf.extend_from_slice(&136u64.to_le_bytes()); // attr size
    for v in [104u64, 0, 104, u64::MAX / 4, 0, 0] {
        perf.extend_from_slice(&v.to_le_bytes()); // attrs, data (offset, size), event types
    }
    perf.resize(104, 0);
    let perfdata = path("hostile.perf.data");
    std::fs::write(&perfdata, &perf).unwrap();
    assert_refused_within_memory(
        "perf.data sizes",
        &[
            "perf2bolt",
            &s(&workspace_root().join("examples/prog")),
            "-p",
            &s(&perfdata),
            "-o",
            &s(&path("p.fdata")),
        ],
        &perfdata,
    );
    assert!(!path("p.fdata").exists(), "no output for a refused input");

    // fdata counts that overflow when summed: refused or saturated, never a panic.
    let big = path("big-counts.fdata");
    std::fs::write(
        &big,
        format!(
            "1 main 10 1 work 0 0 {}\n1 main 10 1 work 0 0 {}\n",
            u64::MAX,
            u64::MAX
        ),
    )
    .unwrap();
    let out = run(Command::new(pcmap_path())
        .arg("merge-fdata")
        .arg(&big)
        .arg(&big)
        .arg("-o")
        .arg(path("merged.fdata")));
    let why = describe("pcmap merge-fdata big-counts.fdata big-counts.fdata", &out);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{why}"
    );
    assert!(matches!(out.status.code(), Some(0 | 1)), "{why}");
}
