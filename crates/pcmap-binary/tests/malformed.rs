//! Malformed inputs give typed errors naming the structure and offset, never a panic; compressed
//! sections decompress to what llvm-objcopy decompresses them to.

use std::path::PathBuf;
use std::process::Command;

use pcmap_binary::{Binary, Error, MappedFile};
use pcmap_testkit::{build, derive, derived, run_ok, tool};

fn prog() -> PathBuf {
    build(
        "prog",
        &["binary/prog.c", "binary/other.c"],
        &[
            "-O2",
            "-fno-pie",
            "-no-pie",
            "-Wl,--emit-relocs",
            "-Wl,--build-id=sha1",
        ],
    )
}

fn prog_bytes() -> Vec<u8> {
    std::fs::read(prog()).unwrap()
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn truncated_header() {
    let b = prog_bytes();
    let err = Binary::parse(&b[..40]).unwrap_err().to_string();
    assert!(
        err.contains("file header") && err.contains("40 bytes") && err.contains("needs 64"),
        "{err}"
    );
    let err = Binary::parse(&b[..3]).unwrap_err();
    assert!(matches!(err, Error::NotElf(_)), "{err}");
    let err = Binary::parse(b"#!/bin/sh\necho hello\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not an ELF file"), "{err}");
}

#[test]
fn section_table_past_end_of_file() {
    let mut b = prog_bytes();
    let len = b.len() as u64;
    // e_shoff is at 0x28 in an ELF64 header.
    b[0x28..0x30].copy_from_slice(&(len - 100).to_le_bytes());
    let err = Binary::parse(&b).unwrap_err().to_string();
    assert!(
        err.contains("section header table") && err.contains("past the end of the file"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{:#x}", len - 100)),
        "offset missing: {err}"
    );
}

#[test]
fn bad_section_name_offset() {
    let mut b = prog_bytes();
    let shoff = le64(&b, 0x28) as usize;
    // Section 1's sh_name (first word of its 64-byte header).
    let at = shoff + 64;
    b[at..at + 4].copy_from_slice(&0x00ff_ffffu32.to_le_bytes());
    let err = Binary::parse(&b).unwrap_err().to_string();
    assert!(
        err.contains("name of section 1") && err.contains("0xffffff") && err.contains(".shstrtab"),
        "{err}"
    );
}

/// Where `.symtab` and `.strtab` lie in the file, and the stored name of each symbol by index.
fn symbol_tables(b: &[u8]) -> (usize, usize, usize, Vec<String>) {
    let bin = Binary::parse(b).unwrap();
    let symtab = bin.section_by_name(".symtab").unwrap();
    let strtab = bin.section_by_name(".strtab").unwrap();
    let names = bin.symbols().iter().map(|s| s.name.to_string()).collect();
    (
        symtab.offset as usize,
        strtab.offset as usize,
        strtab.size as usize,
        names,
    )
}

/// `st_name` of ELF64 symbol `index` (the first word of its 24-byte entry).
fn st_name(b: &[u8], symtab: usize, index: usize) -> u32 {
    let at = symtab + 24 * index;
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn set_st_name(b: &mut [u8], symtab: usize, index: usize, value: u32) {
    let at = symtab + 24 * index;
    b[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

#[test]
fn symbol_names_outside_the_string_table_or_not_utf8() {
    let clean = prog_bytes();
    let (symtab, strtab, strtab_size, names) = symbol_tables(&clean);
    let main = names.iter().position(|n| n == "main").unwrap();
    let main_name = strtab + st_name(&clean, symtab, main) as usize;

    // A name past the end of the table.
    let mut b = clean.clone();
    set_st_name(&mut b, symtab, main, strtab_size as u32 + 5);
    let err = Binary::parse(&b).unwrap_err().to_string();
    assert!(
        err.contains(&format!("name of symbol {main}"))
            && err.contains("outside the symbol string table")
            && err.contains(&format!("{:#x}", strtab + strtab_size + 5)),
        "{err}"
    );

    // A name that is not UTF-8 (so the table is not either).
    let mut b = clean.clone();
    b[main_name + 1] = 0xff;
    let err = Binary::parse(&b).unwrap_err().to_string();
    assert!(
        err.contains(&format!("name of symbol {main}")) && err.contains("not valid UTF-8"),
        "{err}"
    );

    // A table that is UTF-8 throughout, with a name starting inside a character: `main`
    // becomes `mén`, and another symbol's name starts at the second byte of the `é`.
    let accented = || {
        let mut b = clean.clone();
        b[main_name + 1..main_name + 3].copy_from_slice("é".as_bytes());
        b
    };
    let mut b = accented();
    let other = (1..names.len())
        .find(|&i| i != main && !names[i].is_empty())
        .unwrap();
    set_st_name(&mut b, symtab, other, st_name(&clean, symtab, main) + 2);
    let err = Binary::parse(&b).unwrap_err().to_string();
    assert!(
        err.contains(&format!("name of symbol {other}")) && err.contains("not valid UTF-8"),
        "{err}"
    );
    // The same table with the names left whole reads every name.
    let b = accented();
    let bin = Binary::parse(&b).unwrap();
    assert_eq!(bin.symbols()[main].name, "mén");
}

#[test]
fn section_contents_past_end_of_file() {
    let mut b = prog_bytes();
    let shoff = le64(&b, 0x28) as usize;
    // Section 1's sh_size (offset 32 in the header) made huge.
    let at = shoff + 64 + 32;
    b[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let err = Binary::parse(&b).unwrap_err().to_string();
    assert!(
        err.contains("contents of section 1") && err.contains("past the end of the file"),
        "{err}"
    );
}

fn compressed(format: &str) -> PathBuf {
    build(
        &format!("prog-g-{format}"),
        &["binary/prog.c", "binary/other.c"],
        &["-O2", "-g", &format!("-gz={format}")],
    )
}

#[test]
fn compressed_sections_decompress_like_llvm_objcopy() {
    for format in ["zlib", "zstd"] {
        let path = compressed(format);
        let plain = derive(&derived(&path, "decompressed"), |tmp| {
            run_ok(
                Command::new(tool("llvm-objcopy"))
                    .arg("--decompress-debug-sections")
                    .arg(&path)
                    .arg(tmp),
            );
        });
        let file = MappedFile::open(&path).unwrap();
        let bin = Binary::parse(file.bytes()).unwrap();
        let plain_file = MappedFile::open(&plain).unwrap();
        let plain_bin = Binary::parse(plain_file.bytes()).unwrap();
        let mut checked = 0;
        for s in bin.sections().iter().filter(|s| s.compression().is_some()) {
            assert_eq!(s.compression().unwrap().name(), format);
            let ours = bin.section_data(s).unwrap();
            let theirs = plain_bin.section_by_name(s.name).unwrap();
            assert_eq!(&ours[..], theirs.raw, "{format}: {}", s.name);
            assert_eq!(s.uncompressed_size(), theirs.size);
            checked += 1;
        }
        assert!(checked >= 3, "{format}: only {checked} compressed sections");
    }
}

#[test]
fn corrupt_compressed_section() {
    let path = compressed("zlib");
    let mut b = std::fs::read(&path).unwrap();
    let (offset, size) = {
        let bin = Binary::parse(&b).unwrap();
        let s = bin.section_by_name(".debug_info").unwrap();
        (s.offset as usize, s.size as usize)
    };
    // Keep the 24-byte Chdr and the zlib header; scramble the deflate stream.
    for x in &mut b[offset + 26..offset + size] {
        *x ^= 0x5a;
    }
    let bin = Binary::parse(&b).unwrap();
    let s = bin.section_by_name(".debug_info").unwrap();
    let err = bin.section_data(s).unwrap_err().to_string();
    assert!(
        err.contains(".debug_info") && err.contains("zlib") && err.contains("cannot decompress"),
        "{err}"
    );

    // A header claiming an absurd size is refused before allocating.
    let mut b = std::fs::read(&path).unwrap();
    b[offset + 8..offset + 16].copy_from_slice(&(1u64 << 50).to_le_bytes());
    let bin = Binary::parse(&b).unwrap();
    let s = bin.section_by_name(".debug_info").unwrap();
    let err = bin.section_data(s).unwrap_err().to_string();
    assert!(err.contains("claims"), "{err}");
}

/// Deterministic byte-flip mutations of real binaries: every parse, walk and decode must
/// return (errors are fine), never panic. (The fuzz target explores this further.)
#[test]
fn mutations_never_panic() {
    for path in [prog(), compressed("zlib")] {
        let base = std::fs::read(&path).unwrap();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..300 {
            let mut b = base.clone();
            for _ in 0..8 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // Bias towards the headers, where a flip changes structure.
                let at = if seed & 1 == 0 {
                    (seed >> 8) as usize % 256
                } else {
                    (seed >> 8) as usize % b.len()
                };
                b[at] ^= (seed >> 40) as u8 | 1;
            }
            let cut = (seed >> 20) as usize % (b.len() + 1);
            pcmap_binary::fuzz_walk(&b);
            pcmap_binary::fuzz_walk(&b[..cut]);
        }
    }
}

/// The load bias computed from a process mapping agrees with where the loader really put this
/// (PIE) test executable: a function's run-time address minus the bias is its symbol value.
#[test]
fn load_bias_matches_the_running_process() {
    #[unsafe(no_mangle)]
    #[inline(never)]
    extern "C" fn pcmap_load_bias_marker() -> u64 {
        42
    }
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let runtime = pcmap_load_bias_marker as *const () as u64;
    let file = MappedFile::open(&exe).unwrap();
    let bin = Binary::parse(file.bytes()).unwrap();
    let sym = bin
        .function_table()
        .symbols()
        .iter()
        .find(|s| s.name == "pcmap_load_bias_marker")
        .expect("marker symbol in the test binary");
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut checked = 0;
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Private mappings only: our own read-only map of the file (MappedFile) is shared.
        if f.len() < 6 || std::path::Path::new(f[5]) != exe || !f[1].ends_with('p') {
            continue;
        }
        let (start, _) = f[0].split_once('-').unwrap();
        let start = u64::from_str_radix(start, 16).unwrap();
        let pgoff = u64::from_str_radix(f[2], 16).unwrap();
        let bias = bin
            .load_bias(start, pgoff)
            .expect("mapping covered by a PT_LOAD segment");
        assert_eq!(runtime.wrapping_sub(bias), sym.address, "mapping {line}");
        checked += 1;
    }
    assert!(
        checked >= 2,
        "expected several mappings of the executable, found {checked}"
    );
    assert_eq!(pcmap_load_bias_marker(), 42);
}

/// A broken note section is reported but does not make the rest of the file unreadable.
#[test]
fn malformed_note_section_is_reported_not_fatal() {
    let mut b = prog_bytes();
    let (offset, name) = {
        let bin = Binary::parse(&b).unwrap();
        assert!(bin.build_id().is_some());
        let s = bin
            .sections()
            .iter()
            .find(|s| s.name == ".note.gnu.build-id")
            .unwrap();
        (s.offset as usize, s.name.to_string())
    };
    // n_descsz far beyond the section.
    b[offset + 4..offset + 8].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    let bin = Binary::parse(&b).unwrap();
    assert!(bin.build_id().is_none());
    let errs: Vec<String> = bin.note_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains(&name) && errs[0].contains(&format!("{offset:#x}")),
        "{errs:?}"
    );
    assert!(!bin.functions().is_empty());
}
