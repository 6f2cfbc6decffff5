//! Write a large, realistic perf.data with 32-entry branch stacks for a non-PIE binary, for the
//! gigabyte-scale benchmark (`bench/perfdata.sh`); machines without an LBR-capable PMU cannot
//! record one.
//!
//! Usage: `gen-perfdata BINARY OUT.data SIZE_MB [PROCESSES]`
//!
//! Each branch stack is a walk through the binary's real code: from the entry of one of a few
//! thousand hot functions (chosen with a skewed distribution), instructions are decoded one after
//! the other; conditional branches are taken or not at random, direct jumps and calls are followed
//! (calls push their return address, returns pop it), so consecutive stack entries chain through
//! real fall-throughs, as a CPU's LBR records them. A walk that reaches an indirect branch, a return
//! with nothing to return to, or bytes that do not decode is dropped. A pool of walks is reused
//! with varying start points, so the file holds far more samples than distinct branches. Several
//! processes run the binary (COMM, one MMAP2 per executable segment, FORK and EXIT records); a few
//! samples belong to another program, which perf2bolt ignores.

use std::io::{BufWriter, Write};

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};
use pcmap_binary::bolt::{BoltFunctions, FunctionKind};
use pcmap_binary::{Binary, MappedFile};
use pcmap_profile::perfdata::{BranchEntry, writer};

const STACK: usize = 32;

/// A small deterministic generator (the file must be the same for every run of the bench).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One walk of [`STACK`] taken branches, oldest first.
fn walk(code: &Code<'_, '_>, start: u64, rng: &mut Rng) -> Option<Vec<BranchEntry>> {
    let bin = code.image.binary();
    let mut pc = start;
    let mut calls: Vec<u64> = Vec::new();
    let mut taken: Vec<BranchEntry> = Vec::with_capacity(STACK);
    let mut ins = Instruction::default();
    for _ in 0..20_000 {
        let bytes = bin.code_bytes(pc, 15)?;
        let mut d = Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE);
        d.decode_out(&mut ins);
        if ins.is_invalid() {
            return None;
        }
        let next = ins.next_ip();
        let to = match ins.flow_control() {
            FlowControl::Next => {
                pc = next;
                continue;
            }
            FlowControl::ConditionalBranch => {
                if rng.below(2) == 0 {
                    pc = next;
                    continue;
                }
                ins.near_branch_target()
            }
            FlowControl::UnconditionalBranch => ins.near_branch_target(),
            FlowControl::Call => {
                calls.push(next);
                ins.near_branch_target()
            }
            // An indirect call is stepped over (a call does not end a block, so the fall-through
            // stays valid).
            FlowControl::IndirectCall => {
                pc = next;
                continue;
            }
            // With nothing to return to, return to one of the function's callers.
            FlowControl::Return => match calls.pop() {
                Some(r) => r,
                None => {
                    let f = code.image.function_containing(pc)?;
                    let sites = code.return_sites.get(&code.image.functions()[f].address)?;
                    sites[rng.below(sites.len())]
                }
            },
            // A jump table: to one of the function's blocks (a direct branch target in it).
            FlowControl::IndirectBranch => {
                let f = code.image.function_containing(pc)?;
                let blocks = code.block_starts.get(&code.image.functions()[f].address)?;
                blocks[rng.below(blocks.len())]
            }
            _ => return None,
        };
        let flags = u64::from(rng.below(8) == 0); // mispredicted
        taken.push(BranchEntry {
            from: pc,
            to,
            flags,
        });
        if taken.len() == STACK {
            taken.reverse(); // newest first, as perf records it
            return Some(taken);
        }
        pc = to;
    }
    None
}

/// The binary and, for each function start, the return addresses of its direct call sites and
/// the targets of direct branches inside it.
struct Code<'a, 'data> {
    image: &'a BoltFunctions<'a, 'data>,
    return_sites: std::collections::HashMap<u64, Vec<u64>>,
    block_starts: std::collections::HashMap<u64, Vec<u64>>,
}

impl<'a, 'data> Code<'a, 'data> {
    fn new(image: &'a BoltFunctions<'a, 'data>) -> Self {
        let mut return_sites: std::collections::HashMap<u64, Vec<u64>> = Default::default();
        let mut block_starts: std::collections::HashMap<u64, Vec<u64>> = Default::default();
        for f in image.functions() {
            let Some(bytes) = image.binary().code_bytes(f.address, f.size) else {
                continue;
            };
            let mut d = Decoder::with_ip(64, bytes, f.address, DecoderOptions::NONE);
            let mut ins = Instruction::default();
            while d.can_decode() {
                d.decode_out(&mut ins);
                match ins.flow_control() {
                    FlowControl::Call => return_sites
                        .entry(ins.near_branch_target())
                        .or_default()
                        .push(ins.next_ip()),
                    FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch
                        if (f.address..f.address + f.size).contains(&ins.near_branch_target()) =>
                    {
                        block_starts
                            .entry(f.address)
                            .or_default()
                            .push(ins.near_branch_target())
                    }
                    _ => {}
                }
            }
        }
        Code {
            image,
            return_sites,
            block_starts,
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: gen-perfdata BINARY OUT.data SIZE_MB [PROCESSES]".into());
    }
    let (path, out, size_mb) = (&args[1], &args[2], args[3].parse::<u64>()?);
    let processes: u32 = args.get(4).map_or(Ok(8), |p| p.parse())?;
    let file = MappedFile::open(path)?;
    let bin = Binary::parse(file.bytes())?;
    let image = BoltFunctions::discover(&bin)?;
    let build_id = bin.build_id().ok_or("the binary has no build-id")?.to_vec();
    let funcs: Vec<u64> = image
        .functions()
        .iter()
        .filter(|f| f.kind == FunctionKind::Regular && f.size > 0)
        .map(|f| f.address)
        .collect();
    if funcs.is_empty() {
        return Err("the binary has no functions".into());
    }
    let code = Code::new(&image);
    let mut rng = Rng(0x5eed);
    // Hot functions: a fixed tenth of the binary (at most 4,000), picked once.
    let hot: Vec<u64> = (0..funcs.len().div_ceil(10).min(4000))
        .map(|_| funcs[rng.below(funcs.len())])
        .collect();
    let mut pool: Vec<Vec<BranchEntry>> = Vec::new();
    let mut attempts = 0;
    while pool.len() < 50_000 && attempts < 2_000_000 {
        attempts += 1;
        // Skewed: low indices much more often (the square of a uniform draw).
        let r = rng.below(hot.len());
        let start = hot[r * r / hot.len()];
        if let Some(w) = walk(&code, start, &mut rng) {
            pool.push(w);
        }
    }
    if pool.is_empty() {
        return Err("no walk of 32 taken branches through the binary's code".into());
    }

    let name = std::path::absolute(path)?;
    let name = name.to_string_lossy().into_owned().into_bytes();
    let mut w = writer::Writer::new(writer::Options::default());
    let mut time = 1u64;
    let base_pid = 10_000;
    for p in 0..processes {
        let pid = base_pid + p;
        w.task(false, pid, 1, pid, 1, time);
        w.comm(pid, pid, b"big", time);
        for s in bin.segments().iter().filter(|s| {
            s.p_type == pcmap_binary::PT_LOAD && s.flags & 1 != 0 // PF_X
        }) {
            let page = s.vaddr & 0xfff;
            w.mmap2(
                pid,
                pid,
                s.vaddr - page,
                s.mem_size + page,
                s.offset & !0xfff,
                &name,
                time,
            );
        }
        w.build_id(pid as i32, &build_id, &name);
        time += 1;
    }
    let other = base_pid + processes;
    w.comm(other, other, b"other", time);
    let sample_size = 8 + 32 + 8 + 24 * STACK as u64;
    let samples = size_mb * 1024 * 1024 / sample_size;
    let mut spec = writer::SampleSpec {
        period: 100_003,
        ..Default::default()
    };
    for k in 0..samples {
        let walk = &pool[rng.below(pool.len())];
        spec.pid = if k % 1000 == 999 {
            other
        } else {
            base_pid + (k % u64::from(processes)) as u32
        };
        spec.tid = spec.pid;
        spec.time = time;
        spec.ip = walk[0].to;
        spec.branches.clone_from(walk);
        w.sample(&spec);
        time += 1;
    }
    for p in 0..processes {
        w.task(true, base_pid + p, 1, base_pid + p, 1, time);
    }
    let tmp = format!("{out}.tmp");
    let mut f = BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
    w.write_to(&mut f)?;
    f.flush()?;
    drop(f);
    std::fs::rename(&tmp, out)?;
    eprintln!(
        "wrote {out}: {samples} samples of {STACK} branches from {} distinct walks, {processes} processes",
        pool.len()
    );
    Ok(())
}
