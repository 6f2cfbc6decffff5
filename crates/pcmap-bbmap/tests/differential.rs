//! Differential test against llvm-readobj 22 on random section contents: maps built with the
//! encoder, then truncated or with random bytes changed, wrapped in a minimal ELF64 file of
//! either byte order. For each, llvm-readobj and our decoder must agree on accept/reject and, when
//! both accept, on every decoded field.

use std::process::Command;

use pcmap_bbmap::Endian;
use pcmap_bbmap::elf::{ReadOptions, read_elf};
use pcmap_bbmap::encode::{EncodeOptions, encode_function};
use pcmap_bbmap::model::{
    BbEntry, BbRange, BlockMetadata, Features, FunctionMap, Layout, PgoAnalysis, PgoBbEntry,
    PgoSuccessor,
};
use pcmap_testkit::{run, scratch_dir, tool};
use serde_json::Value;

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn value(&mut self) -> u64 {
        // Mostly small values, sometimes near the 32-bit limit.
        match self.below(10) {
            0 => u64::from(u32::MAX) - self.below(3),
            1 => self.next(),
            _ => self.below(300),
        }
    }
}

fn random_function(r: &mut Rng) -> FunctionMap {
    let version = 2 + r.below(4) as u8;
    let mut f = Features(r.below(256) as u16);
    if f.min_version() > version {
        f = Features(f.0 & 0x1f);
    }
    let nranges = if f.multi_bb_range() {
        1 + r.below(3)
    } else {
        1
    };
    let mut ranges = Vec::new();
    for _ in 0..nranges {
        let n = r.below(5);
        let entries: Vec<BbEntry> = (0..n)
            .map(|_| {
                let mut cs: Vec<u32> = (0..r.below(3)).map(|_| r.below(40) as u32).collect();
                cs.sort_unstable();
                BbEntry {
                    id: r.value() as u32,
                    offset: r.value() as u32,
                    size: r.value() as u32,
                    metadata: BlockMetadata(r.below(32) as u32),
                    callsite_end_offsets: if f.callsite_end_offsets() { cs } else { vec![] },
                    hash: if f.bb_hash() { r.next() } else { 0 },
                }
            })
            .collect();
        ranges.push(BbRange {
            base_address: 0x1000 + r.below(0x10000),
            num_blocks: if f.omit_bb_entries() {
                r.below(4) as u32
            } else {
                n as u32
            },
            entries: if f.omit_bb_entries() { vec![] } else { entries },
        });
    }
    let total: usize = ranges.iter().map(|r| r.entries.len()).sum();
    let pgo = f.has_pgo_analysis().then(|| PgoAnalysis {
        func_entry_count: if f.func_entry_count() { r.value() } else { 0 },
        bb_entries: if f.has_pgo_analysis_bb_data() {
            (0..total)
                .map(|_| PgoBbEntry {
                    frequency: if f.bb_freq() { r.value() } else { 0 },
                    post_link_frequency: if f.post_link_cfg() {
                        r.value() as u32
                    } else {
                        0
                    },
                    successors: if f.br_prob() {
                        (0..r.below(3))
                            .map(|_| PgoSuccessor {
                                id: r.value() as u32,
                                probability: r.value() as u32,
                                post_link_frequency: if f.post_link_cfg() {
                                    r.value() as u32
                                } else {
                                    0
                                },
                            })
                            .collect()
                    } else {
                        vec![]
                    },
                })
                .collect()
        } else {
            vec![]
        },
    });
    FunctionMap {
        layout: Layout::Versioned(version),
        features: f,
        ranges,
        pgo,
    }
}

/// A minimal ELF64 ET_EXEC file holding one SHT_LLVM_BB_ADDR_MAP section.
fn elf_with_map(map: &[u8], big: bool) -> Vec<u8> {
    let shstrtab = b"\0.llvm_bb_addr_map\0.shstrtab\0";
    let mut out = vec![0u8; 64];
    let map_off = 64u64;
    out.extend_from_slice(map);
    let str_off = out.len() as u64;
    out.extend_from_slice(shstrtab);
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    let shoff = out.len() as u64;
    let w16 = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w64 = |v: u64| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut sh = |name: u32, ty: u32, flags: u64, off: u64, size: u64| {
        let mut s = Vec::new();
        s.extend_from_slice(&w32(name));
        s.extend_from_slice(&w32(ty));
        s.extend_from_slice(&w64(flags));
        s.extend_from_slice(&w64(0)); // addr
        s.extend_from_slice(&w64(off));
        s.extend_from_slice(&w64(size));
        s.extend_from_slice(&w32(0)); // link
        s.extend_from_slice(&w32(0)); // info
        s.extend_from_slice(&w64(1)); // align
        s.extend_from_slice(&w64(0)); // entsize
        out.extend_from_slice(&s);
    };
    sh(0, 0, 0, 0, 0);
    sh(1, 0x6fff_4c0a, 0x80, map_off, map.len() as u64);
    sh(19, 3, 0, str_off, shstrtab.len() as u64);
    let mut h = Vec::new();
    h.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, if big { 2 } else { 1 }, 1, 0]);
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&w16(2)); // ET_EXEC
    h.extend_from_slice(&w16(62)); // EM_X86_64
    h.extend_from_slice(&w32(1));
    h.extend_from_slice(&w64(0)); // entry
    h.extend_from_slice(&w64(0)); // phoff
    h.extend_from_slice(&w64(shoff));
    h.extend_from_slice(&w32(0)); // flags
    h.extend_from_slice(&w16(64));
    h.extend_from_slice(&w16(0));
    h.extend_from_slice(&w16(0));
    h.extend_from_slice(&w16(64));
    h.extend_from_slice(&w16(3));
    h.extend_from_slice(&w16(2));
    out[..64].copy_from_slice(&h);
    out
}

fn readobj_maps(path: &std::path::Path) -> Result<Value, String> {
    let o = run(Command::new(tool("llvm-readobj"))
        .args(["--elf-output-style=JSON", "--bb-addr-map"])
        .arg(path));
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    if stderr.contains("unable to") {
        return Err(stderr);
    }
    let v: Value = serde_json::from_slice(&o.stdout).map_err(|e| format!("{e}: {stderr}"))?;
    Ok(v[0]
        .get("BBAddrMap")
        .cloned()
        .unwrap_or(Value::Array(vec![])))
}

#[test]
fn random_sections_agree_with_readobj() {
    let dir = scratch_dir("bb-differential");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut accepted, mut rejected) = (0, 0);
    for case in 0..240 {
        let big = case % 2 == 1;
        let o = EncodeOptions {
            endian: if big { Endian::Big } else { Endian::Little },
            address_size: 8,
        };
        let mut bytes = Vec::new();
        for _ in 0..1 + rng.below(3) {
            encode_function(&random_function(&mut rng), o, &mut bytes).unwrap();
        }
        match rng.below(4) {
            0 => {}
            1 => bytes.truncate(rng.below(bytes.len() as u64 + 1) as usize),
            _ => {
                for _ in 0..1 + rng.below(3) {
                    if bytes.is_empty() {
                        break;
                    }
                    let i = rng.below(bytes.len() as u64) as usize;
                    bytes[i] = rng.next() as u8;
                }
            }
        }
        let path = dir.join(format!("case{case}.elf"));
        std::fs::write(&path, elf_with_map(&bytes, big)).unwrap();
        let theirs = readobj_maps(&path);
        let ours = read_elf(&std::fs::read(&path).unwrap(), ReadOptions::default())
            .map(|m| {
                let v: Value =
                    serde_json::from_str(&pcmap_bbmap::readobj::render_file("x", &m)).unwrap();
                v[0]["BBAddrMap"].clone()
            })
            .map_err(|e| e.to_string());
        match (&theirs, &ours) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "case {case} ({}) decodes differently", path.display());
                accepted += 1;
            }
            (Err(_), Err(_)) => rejected += 1,
            _ => panic!(
                "case {case} ({}): readobj {:?} vs ours {:?}",
                path.display(),
                theirs.as_ref().map(|_| "accepts"),
                ours.as_ref().map(|_| "accepts")
            ),
        }
    }
    assert!(
        accepted > 40 && rejected > 40,
        "{accepted} accepted, {rejected} rejected"
    );
}
