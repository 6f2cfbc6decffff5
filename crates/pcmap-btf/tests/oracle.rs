//! pcmap-btf against the oracles: bpftool (raw dump of base and split BTF), pahole (base BTF of
//! real binaries), llvm-readelf / llvm-objcopy (the ELF appender) and running the rewritten binary.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_btf::elf_append::{NewSection, append_sections, section_data};
use pcmap_btf::raw::dump_raw;
use pcmap_btf::{
    Btf, CodeSection, Format, FuncParam, InlineFunc, Loc, ParamLoc, Site, SiteSet, TypeDesc,
};
use pcmap_testkit::{build, build_with, run, run_ok, scratch_dir, tool};

const FIXTURE: &str = "btf/inl.c";

fn fixtures() -> Vec<(&'static str, PathBuf)> {
    vec![
        ("clang", build("btf-inl-clang", &[FIXTURE], &["-O2", "-g"])),
        (
            "gcc",
            build_with("gcc", "btf-inl-gcc", &[FIXTURE], &["-O2", "-g"]),
        ),
    ]
}

/// Base BTF of `bin` made by pahole.
fn pahole_base(bin: &Path, dir: &Path) -> PathBuf {
    let out = dir.join(format!(
        "{}.btf",
        bin.file_name().unwrap().to_string_lossy()
    ));
    run_ok(
        Command::new(tool("pahole"))
            .arg(format!("--btf_encode_detached={}", out.display()))
            .arg(bin),
    );
    out
}

fn bpftool_raw(args: &[&Path], base: Option<&Path>) -> String {
    let mut cmd = Command::new(tool("bpftool"));
    cmd.arg("btf").arg("dump");
    if let Some(b) = base {
        cmd.arg("-B").arg(b);
    }
    cmd.arg("file").args(args).arg("format").arg("raw");
    run_ok(&mut cmd)
}

#[test]
fn raw_printer_matches_bpftool_on_pahole_base_btf() {
    let dir = scratch_dir("btf-raw-base");
    for (cc, bin) in fixtures() {
        let base_path = pahole_base(&bin, &dir);
        let bytes = std::fs::read(&base_path).unwrap();
        let btf = Btf::parse(&bytes).unwrap();
        let mut ours = String::new();
        dump_raw(&btf, &mut ours).unwrap();
        let theirs = bpftool_raw(&[&base_path], None);
        assert!(
            btf.own_type_count() > 20,
            "{cc}: pahole wrote {} types",
            btf.own_type_count()
        );
        assert_eq!(ours, theirs, "{cc} fixture");
    }
}

#[test]
fn raw_printer_matches_bpftool_on_every_standard_kind() {
    // clang's BPF target emits VAR, DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64, RESTRICT, bitfields.
    let obj = build(
        "btf-kinds-bpf.o",
        &["btf/kinds.c"],
        &["-target", "bpf", "-g", "-O2", "-c"],
    );
    let data = std::fs::read(&obj).unwrap();
    let btf_bytes = section_data(&data, ".BTF")
        .unwrap()
        .expect(".BTF in the BPF object");
    let btf = Btf::parse(btf_bytes).unwrap();
    let mut ours = String::new();
    dump_raw(&btf, &mut ours).unwrap();
    let theirs = bpftool_raw(&[&obj], None);
    for kind in [
        "VAR",
        "DATASEC",
        "FLOAT",
        "DECL_TAG",
        "TYPE_TAG",
        "ENUM64",
        "RESTRICT",
        "bitfield_size",
    ] {
        assert!(theirs.contains(kind), "fixture lacks {kind}");
    }
    assert_eq!(ours, theirs);
}

fn int(name: &str, size: u32, signed: bool) -> TypeDesc {
    TypeDesc::Int {
        name: name.into(),
        size,
        signed,
        char: false,
        bool: false,
    }
}

/// Sites over the fixture's own base BTF: functions with parameters of types the base has
/// (`struct point`, `u32`, pointers) and types it lacks.
fn synthetic_sites() -> SiteSet {
    let point = TypeDesc::Struct {
        name: Some("point".into()),
        size: 16,
    };
    let u32t = TypeDesc::Typedef {
        name: "u32".into(),
        target: Box::new(int("unsigned int", 4, false)),
    };
    let funcs = vec![
        InlineFunc {
            name: "dot".into(),
            ret: int("long", 8, true),
            params: vec![
                FuncParam {
                    name: "a".into(),
                    ty: point.clone(),
                },
                FuncParam {
                    name: "b".into(),
                    ty: point.clone(),
                },
            ],
            varargs: false,
        },
        InlineFunc {
            name: "mix".into(),
            ret: u32t.clone(),
            params: vec![
                FuncParam {
                    name: "h".into(),
                    ty: u32t.clone(),
                },
                FuncParam {
                    name: "v".into(),
                    ty: u32t.clone(),
                },
            ],
            varargs: false,
        },
        InlineFunc {
            name: "not_in_base".into(),
            ret: TypeDesc::Void,
            params: vec![
                FuncParam {
                    name: "p".into(),
                    ty: TypeDesc::Pointer(Box::new(TypeDesc::Const(Box::new(TypeDesc::Struct {
                        name: Some("nowhere".into()),
                        size: 0,
                    })))),
                },
                FuncParam {
                    name: "arr".into(),
                    ty: TypeDesc::Pointer(Box::new(TypeDesc::Array {
                        elem: Box::new(int("char", 1, true)),
                        len: 7,
                    })),
                },
                FuncParam {
                    name: "d".into(),
                    ty: TypeDesc::Float {
                        name: "double".into(),
                        size: 8,
                    },
                },
            ],
            varargs: true,
        },
        InlineFunc {
            name: "hash_bytes".into(),
            ret: u32t.clone(),
            params: vec![
                FuncParam {
                    name: "p".into(),
                    ty: TypeDesc::Pointer(Box::new(int("unsigned char", 1, false))),
                },
                FuncParam {
                    name: "n".into(),
                    ty: int("unsigned long", 8, false),
                },
            ],
            varargs: false,
        },
    ];
    let reg = |r| {
        Some(ParamLoc {
            size: 8,
            signed: false,
            loc: Loc::Reg(r),
        })
    };
    let sites = (0..40u64)
        .map(|i| Site {
            address: 0x1000 + i * 24,
            func: (i % 4) as usize,
            params: match i % 4 {
                0 => vec![
                    Some(ParamLoc {
                        size: 16,
                        signed: false,
                        loc: Loc::RegPair(5, 4),
                    }),
                    None,
                ],
                1 => vec![
                    reg(5),
                    Some(ParamLoc {
                        size: 4,
                        signed: false,
                        loc: Loc::Const(42),
                    }),
                ],
                2 => vec![
                    Some(ParamLoc {
                        size: 8,
                        signed: false,
                        loc: Loc::Deref { reg: 7, offset: 48 },
                    }),
                    None,
                    reg(17),
                ],
                _ => vec![
                    Some(ParamLoc {
                        size: 8,
                        signed: false,
                        loc: Loc::RegOffset { reg: 7, offset: 16 },
                    }),
                    reg(1),
                ],
            },
        })
        .collect();
    SiteSet {
        sections: vec![CodeSection {
            name: ".text".into(),
            address: 0x1000,
            size: 0x1000,
        }],
        funcs,
        sites,
    }
}

#[test]
fn split_btf_with_func_and_func_proto_is_accepted_by_bpftool() {
    let dir = scratch_dir("btf-split-bpftool");
    for (cc, bin) in fixtures() {
        let base_path = pahole_base(&bin, &dir);
        let base_bytes = std::fs::read(&base_path).unwrap();
        let base = Btf::parse(&base_bytes).unwrap();
        for format in Format::ALL {
            let enc = pcmap_btf::encode(&synthetic_sites(), &base, format).unwrap();
            let types_path = dir.join(format!("{cc}-{}.types.btf", format.name()));
            std::fs::write(&types_path, &enc.types).unwrap();
            let theirs = bpftool_raw(&[&types_path], Some(&base_path));
            let split = Btf::parse_split(&enc.types, &base).unwrap();
            let mut ours = String::new();
            dump_raw(&split, &mut ours).unwrap();
            assert_eq!(ours, theirs, "{cc} {}", format.name());
            // Fully inlined functions got FUNC + FUNC_PROTO; the partially inlined hash_bytes reuses the base's FUNC.
            assert!(
                theirs.contains("FUNC 'not_in_base'") && theirs.contains("FUNC 'dot'"),
                "{theirs}"
            );
            assert!(!theirs.contains("FUNC 'hash_bytes'"), "{theirs}");
            assert_eq!(enc.stats.funcs_from_base, 1);
            if format.blob_is_btf() {
                // The blob's standard-kind records are the types file's records, same ids and lines.
                let blob = Btf::parse_split(&enc.blob, &base).unwrap();
                let mut full = String::new();
                dump_raw(&blob, &mut full).unwrap();
                assert!(full.starts_with(&ours), "{cc} {}", format.name());
                assert!(full.contains("LOCSEC 'inline.text'"));
            }
        }
    }
}

#[test]
fn location_kinds_are_rejected_by_bpftool_7_1_as_documented() {
    // bpftool 7.1 / libbpf 1.1 know kinds up to 19 and no layout section: the blob with location
    // kinds must fail there (which is why the standard-kind types are also written separately).
    let dir = scratch_dir("btf-loc-bpftool");
    let (_, bin) = fixtures().remove(0);
    let base_path = pahole_base(&bin, &dir);
    let base_bytes = std::fs::read(&base_path).unwrap();
    let base = Btf::parse(&base_bytes).unwrap();
    let enc = pcmap_btf::encode(&synthetic_sites(), &base, Format::Btf2025).unwrap();
    let p = dir.join("blob.btf");
    std::fs::write(&p, &enc.blob).unwrap();
    let out = run(Command::new(tool("bpftool"))
        .args(["-d", "btf", "dump", "-B"])
        .arg(&base_path)
        .arg("file")
        .arg(&p)
        .args(["format", "raw"]));
    let version = run_ok(Command::new(tool("bpftool")).arg("version"));
    if version.contains("libbpf v1.1") {
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Unsupported BTF_KIND:20"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn appended_sections_are_accepted_by_llvm_tools_and_the_binary_still_runs() {
    let dir = scratch_dir("btf-append");
    for (cc, bin) in fixtures() {
        let input = std::fs::read(&bin).unwrap();
        let base_path = pahole_base(&bin, &dir);
        let base_bytes = std::fs::read(&base_path).unwrap();
        let base = Btf::parse(&base_bytes).unwrap();
        let enc = pcmap_btf::encode(&synthetic_sites(), &base, Format::Btf2026).unwrap();
        let out = append_sections(
            &input,
            &[
                NewSection {
                    name: ".BTF",
                    data: &base_bytes,
                    align: 4,
                },
                NewSection {
                    name: ".BTF.extra",
                    data: &enc.blob,
                    align: 4,
                },
            ],
        )
        .unwrap();
        let out_path = dir.join(format!("{cc}.with-btf"));
        std::fs::write(&out_path, &out).unwrap();
        std::fs::set_permissions(&out_path, std::fs::metadata(&bin).unwrap().permissions())
            .unwrap();

        // Allocated content did not move: program headers identical, original bytes a prefix.
        assert_eq!(
            &out[64..input.len()],
            &input[64..],
            "{cc}: bytes after the ELF header changed"
        );
        let phdrs = |p: &Path| {
            let text = run_ok(Command::new(tool("llvm-readelf")).arg("-lW").arg(p));
            // Non-allocated sections are listed under "None" in the mapping: compare the headers and
            // the segment-to-section mapping of the allocated ones.
            text.lines()
                .filter(|l| !l.trim_start().starts_with("None"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(phdrs(&bin), phdrs(&out_path), "{cc}");

        let sections = run_ok(Command::new(tool("llvm-readelf")).arg("-SW").arg(&out_path));
        assert!(
            sections.contains(".BTF.extra") && sections.contains(" .BTF "),
            "{sections}"
        );
        for (name, data) in [(".BTF", &base_bytes), (".BTF.extra", &enc.blob)] {
            let dumped = dir.join(format!("{cc}{name}.dump"));
            run_ok(
                Command::new(tool("llvm-objcopy"))
                    .arg(format!("--dump-section={name}={}", dumped.display()))
                    .arg(&out_path)
                    .arg(dir.join("discard")),
            );
            assert_eq!(&std::fs::read(&dumped).unwrap(), data, "{cc} {name}");
        }
        // objcopy can rewrite the result (it parses every header we wrote).
        run_ok(
            Command::new(tool("llvm-objcopy"))
                .arg("--strip-debug")
                .arg(&out_path)
                .arg(dir.join(format!("{cc}.stripped"))),
        );
        // bpftool reads .BTF from the rewritten ELF.
        assert_eq!(
            bpftool_raw(&[&out_path], None),
            bpftool_raw(&[&base_path], None)
        );
        // And the program runs as before.
        // (The checksum hashes argv, so both runs get the same argv[0].)
        let a = run_ok(Command::new(&bin).arg0("inl").args(["x", "y"]));
        let b = run_ok(Command::new(&out_path).arg0("inl").args(["x", "y"]));
        assert_eq!(a, b);
        assert!(a.starts_with("inl checksum"));
    }
}

#[test]
fn appending_a_duplicate_section_name_fails() {
    let (_, bin) = fixtures().remove(0);
    let input = std::fs::read(&bin).unwrap();
    let err = append_sections(
        &input,
        &[NewSection {
            name: ".text",
            data: b"x",
            align: 1,
        }],
    )
    .unwrap_err();
    assert!(err.to_string().contains(".text"), "{err}");
}
