//! A deterministic synthetic instruction trace for benchmarks and scale tests: a random walk
//! over a fixed control-flow graph of basic blocks shaped like compiled code (sequential
//! instructions of 1-7 bytes, blocks of 1-8 instructions, each ending in a branch that is taken
//! 7 times in 8, mostly backwards, so loops iterate).

/// A synthetic control-flow graph and a walker over it.
pub struct SyntheticTrace {
    /// Per block: instruction addresses and the branch target block.
    blocks: Vec<(Vec<u64>, usize)>,
    state: u64,
    cur: usize,
    pos: usize,
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

impl SyntheticTrace {
    /// A graph of `nblocks` basic blocks seeded by `seed`.
    pub fn new(nblocks: usize, seed: u64) -> Self {
        let mut s = seed | 1;
        let nblocks = nblocks.max(2);
        let mut addr = 0x401000u64;
        let mut blocks = Vec::with_capacity(nblocks);
        for i in 0..nblocks {
            let n = 1 + (xorshift(&mut s) % 8) as usize;
            let mut insns = Vec::with_capacity(n);
            for _ in 0..n {
                insns.push(addr);
                addr += 1 + xorshift(&mut s) % 7;
            }
            let target = if xorshift(&mut s).is_multiple_of(3) {
                (i + (xorshift(&mut s) % 50) as usize) % nblocks
            } else {
                i.saturating_sub((xorshift(&mut s) % 6) as usize)
            };
            blocks.push((insns, target));
        }
        SyntheticTrace {
            blocks,
            state: seed.wrapping_mul(0x9e3779b97f4a7c15) | 1,
            cur: 0,
            pos: 0,
        }
    }

    /// The next executed instruction address.
    #[inline]
    pub fn next_addr(&mut self) -> u64 {
        loop {
            let (insns, target) = &self.blocks[self.cur];
            if let Some(&a) = insns.get(self.pos) {
                self.pos += 1;
                return a;
            }
            let r = xorshift(&mut self.state);
            let n = self.blocks.len();
            self.cur = if !r.is_multiple_of(8) {
                *target
            } else {
                (self.cur + 1) % n
            };
            // Now and then jump ahead, so the walk does not stay in one region.
            if r % 64 == 1 {
                self.cur = (self.cur + 1 + (r >> 8) as usize % 7) % n;
            }
            self.pos = 0;
        }
    }
}
