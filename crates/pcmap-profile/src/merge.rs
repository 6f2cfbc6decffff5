//! Merging profiles: fdata with LLVM `merge-fdata`'s rules, YAML with `merge-fdata`'s YAML rules, and
//! pre-aggregated text by summing identical records.
//!
//! fdata ([`merge_fdata`]): all inputs must agree on `boltedcollection` and on `no_lbr`; records with the
//! same locations are summed (counts and mispredictions); like `merge-fdata`, the merged `no_lbr` header
//! carries no event names. Unlike `merge-fdata` (which keys lines by their text and prints them in hash
//! order), records are keyed by their parsed locations and written in a deterministic order (LBR records
//! in perf2bolt's order), and memory-event lines keep their own layout.
//!
//! YAML ([`merge_yaml`]): `merge-fdata`'s header rules (first binary name and build-id win with a
//! warning on mismatch, LBR and sample profiles cannot mix, origins joined with `; `, differing event
//! names joined with `,`, hash functions must agree) and function rules (same `nblocks`, `fid`, `hash`;
//! blocks matched by `bid` must agree on `insns` and `hash`; exec, events, call and successor counts
//! summed); output functions sorted by `fid`. One deliberate difference: merge-fdata keys call sites by
//! offset and successors by index only, so when a block lists several call sites at one offset or several
//! successor entries with one index (indirect calls, BAT profiles) it drops some counts; pcmap pairs such
//! entries in order and sums all of them.

use std::collections::HashMap;

use crate::fdata::{self, BranchRecord, Line, MemRecord, SampleRecord};
use crate::preagg::{Location, Record};
use crate::yaml;

/// Why profiles cannot be merged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Input `index` disagrees with the first input on a header (`boltedcollection` or `no_lbr`).
    #[error("input #{index}: cannot mix profile with and without {header}")]
    MixedMode {
        /// 0-based input index.
        index: usize,
        /// The header word.
        header: &'static str,
    },
    /// A YAML profile with an unsupported version.
    #[error("input #{index}: unable to merge data from profile using version {version}")]
    Version {
        /// 0-based input index.
        index: usize,
        /// The version found.
        version: u32,
    },
    /// LBR and basic-sample YAML profiles.
    #[error("input #{index}: cannot merge LBR profile with non-LBR profile")]
    LbrWithSample {
        /// 0-based input index.
        index: usize,
    },
    /// Different `hash-func`.
    #[error("input #{index}: cannot merge profiles with different hash functions")]
    HashFunction {
        /// 0-based input index.
        index: usize,
    },
    /// Function profiles with the same name that do not describe the same function.
    #[error("function `{function}`: {what} mismatch")]
    Function {
        /// Function name.
        function: String,
        /// `number of basic blocks`, `ID` or `hash`.
        what: &'static str,
    },
    /// Blocks with the same index that do not describe the same block.
    #[error("function `{function}`, block #{block}: {what}")]
    Block {
        /// Function name.
        function: String,
        /// Block index.
        block: u32,
        /// What is wrong.
        what: &'static str,
    },
}

/// Merge fdata profiles with `merge-fdata`'s rules (see the module documentation).
pub fn merge_fdata<'a>(profiles: &[fdata::Profile<'a>]) -> Result<fdata::Profile<'a>, Error> {
    let Some(first) = profiles.first() else {
        return Ok(fdata::Profile::default());
    };
    for (index, p) in profiles.iter().enumerate() {
        if p.bolted_collection != first.bolted_collection {
            return Err(Error::MixedMode {
                index,
                header: "boltedcollection",
            });
        }
        if p.is_no_lbr() != first.is_no_lbr() {
            return Err(Error::MixedMode {
                index,
                header: "no_lbr",
            });
        }
    }
    let mut branches: HashMap<(fdata::Location<'a>, fdata::Location<'a>), (u64, u64)> =
        HashMap::new();
    let mut samples: HashMap<fdata::Location<'a>, u64> = HashMap::new();
    let mut mem: HashMap<(fdata::Location<'a>, fdata::Location<'a>), u64> = HashMap::new();
    for p in profiles {
        for l in &p.lines {
            match l {
                Line::Branch(b) => {
                    let e = branches.entry((b.from.clone(), b.to.clone())).or_default();
                    e.0 = e.0.saturating_add(b.mispreds);
                    e.1 = e.1.saturating_add(b.count);
                }
                Line::Sample(s) => {
                    let e = samples.entry(s.at.clone()).or_default();
                    *e = e.saturating_add(s.count);
                }
                Line::Mem(m) => {
                    let e = mem.entry((m.pc.clone(), m.addr.clone())).or_default();
                    *e = e.saturating_add(m.count);
                }
            }
        }
    }
    let mut br: Vec<BranchRecord<'a>> = branches
        .into_iter()
        .map(|((from, to), (mispreds, count))| BranchRecord {
            from,
            to,
            mispreds,
            count,
        })
        .collect();
    fdata::sort_branches_like_perf2bolt(&mut br);
    let mut sa: Vec<SampleRecord<'a>> = samples
        .into_iter()
        .map(|(at, count)| SampleRecord { at, count })
        .collect();
    sa.sort_by(|a, b| a.at.cmp(&b.at));
    let mut me: Vec<MemRecord<'a>> = mem
        .into_iter()
        .map(|((pc, addr), count)| MemRecord { pc, addr, count })
        .collect();
    me.sort_by(|a, b| a.pc.cmp(&b.pc).then_with(|| a.addr.cmp(&b.addr)));
    let mut lines: Vec<Line<'a>> = br.into_iter().map(Line::Branch).collect();
    lines.extend(sa.into_iter().map(Line::Sample));
    lines.extend(me.into_iter().map(Line::Mem));
    Ok(fdata::Profile {
        bolted_collection: first.bolted_collection,
        no_lbr: first.no_lbr.as_ref().map(|_| Vec::new()),
        lines,
    })
}

fn merge_headers(
    merged: &mut yaml::Header,
    h: &yaml::Header,
    index: usize,
    warnings: &mut Vec<String>,
) -> Result<(), Error> {
    if merged.binary_name.is_empty() {
        merged.binary_name = h.binary_name.clone();
    }
    if !merged.binary_name.is_empty() && merged.binary_name != h.binary_name {
        warnings.push(format!(
            "merging profile from a binary for {} into a profile for binary {}",
            h.binary_name, merged.binary_name
        ));
    }
    if merged.build_id.is_empty() {
        merged.build_id = h.build_id.clone();
    }
    if !merged.build_id.is_empty() && merged.build_id != h.build_id {
        warnings.push("build-ids in merged profiles do not match".into());
    }
    if merged.flags == 0 {
        merged.flags = h.flags;
    }
    let mask = yaml::PF_LBR | yaml::PF_SAMPLE;
    if merged.flags & mask != h.flags & mask {
        return Err(Error::LbrWithSample { index });
    }
    merged.flags |= h.flags;
    if !h.origin.is_empty() {
        if merged.origin.is_empty() {
            merged.origin = h.origin.clone();
        } else if merged.origin != h.origin {
            merged.origin = format!("{}; {}", merged.origin, h.origin);
        }
    }
    if merged.events.is_empty() {
        merged.events = h.events.clone();
    }
    if merged.events != h.events {
        warnings.push("merging profiles with different sampling events".into());
        merged.events = format!("{},{}", merged.events, h.events);
    }
    if merged.hash_func != h.hash_func {
        return Err(Error::HashFunction { index });
    }
    Ok(())
}

fn merge_block(merged: &mut yaml::Block, b: yaml::Block, f: &yaml::Function) -> Result<(), Error> {
    let block_err = |what| Error::Block {
        function: f.name.clone(),
        block: b.index,
        what,
    };
    if b.num_instructions != merged.num_instructions {
        return Err(block_err("number of instructions in block mismatch"));
    }
    if b.hash != merged.hash {
        return Err(block_err("basic block hash mismatch"));
    }
    merged.exec_count = merged.exec_count.saturating_add(b.exec_count);
    merged.event_count = merged.event_count.saturating_add(b.event_count);
    // Call sites: matched by (offset, callee, discriminator); the rest appended.
    let mut rest: Vec<Option<yaml::CallSite>> = b.calls.into_iter().map(Some).collect();
    for mc in &mut merged.calls {
        if let Some(slot) = rest.iter_mut().find(|c| {
            c.as_ref().is_some_and(|c| {
                c.offset == mc.offset
                    && c.dest_id == mc.dest_id
                    && c.entry_discriminator == mc.entry_discriminator
            })
        }) && let Some(c) = slot.take()
        {
            mc.count = mc.count.saturating_add(c.count);
            mc.mispreds = mc.mispreds.saturating_add(c.mispreds);
        }
    }
    merged.calls.extend(rest.into_iter().flatten());
    // Successors: matched by index; repeated indices (BAT profiles list one entry per translated branch)
    // pair up in order. (merge-fdata keeps only the last entry per index and drops the others' counts.)
    let mut by_index: HashMap<u32, std::collections::VecDeque<yaml::Successor>> = HashMap::new();
    let mut order = Vec::new();
    for s in b.successors {
        if s.index >= f.num_basic_blocks {
            return Err(Error::Block {
                function: f.name.clone(),
                block: s.index,
                what: "bad successor index",
            });
        }
        order.push(s.index);
        by_index.entry(s.index).or_default().push_back(s);
    }
    for ms in &mut merged.successors {
        if let Some(s) = by_index.get_mut(&ms.index).and_then(|q| q.pop_front()) {
            ms.count = ms.count.saturating_add(s.count);
            ms.mispreds = ms.mispreds.saturating_add(s.mispreds);
        }
    }
    merged.successors.extend(
        order
            .into_iter()
            .filter_map(|i| by_index.get_mut(&i).and_then(|q| q.pop_front())),
    );
    Ok(())
}

fn merge_function(merged: &mut yaml::Function, f: yaml::Function) -> Result<(), Error> {
    let ferr = |what| Error::Function {
        function: f.name.clone(),
        what,
    };
    if f.num_basic_blocks != merged.num_basic_blocks {
        return Err(ferr("number of basic blocks"));
    }
    if f.id != merged.id {
        return Err(ferr("ID"));
    }
    if f.hash != merged.hash {
        return Err(ferr("hash"));
    }
    merged.exec_count = merged.exec_count.saturating_add(f.exec_count);
    let mut by_index: HashMap<u32, yaml::Block> = HashMap::new();
    let mut order = Vec::new();
    let shape = yaml::Function {
        name: f.name.clone(),
        num_basic_blocks: f.num_basic_blocks,
        ..Default::default()
    };
    for b in f.blocks {
        if b.index >= f.num_basic_blocks {
            return Err(Error::Block {
                function: f.name.clone(),
                block: b.index,
                what: "bad basic block index",
            });
        }
        order.push(b.index);
        by_index.insert(b.index, b);
    }
    for mb in &mut merged.blocks {
        if let Some(b) = by_index.remove(&mb.index) {
            merge_block(mb, b, &shape)?;
        }
    }
    merged
        .blocks
        .extend(order.into_iter().filter_map(|i| by_index.remove(&i)));
    Ok(())
}

/// Merge YAML profiles with `merge-fdata`'s rules. Returns the merged profile and warnings (binary name,
/// build-id or event mismatches) for the caller to print.
pub fn merge_yaml(profiles: Vec<yaml::Profile>) -> Result<(yaml::Profile, Vec<String>), Error> {
    let mut warnings = Vec::new();
    let mut header: Option<yaml::Header> = None;
    let mut functions: Vec<yaml::Function> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for (index, p) in profiles.into_iter().enumerate() {
        if p.header.version != 1 {
            return Err(Error::Version {
                index,
                version: p.header.version,
            });
        }
        match header.as_mut() {
            None => header = Some(p.header.clone()),
            Some(m) => merge_headers(m, &p.header, index, &mut warnings)?,
        }
        for f in p.functions {
            match by_name.get(&f.name) {
                Some(&i) => merge_function(&mut functions[i], f)?,
                None => {
                    by_name.insert(f.name.clone(), functions.len());
                    functions.push(f);
                }
            }
        }
    }
    functions.sort_by_key(|f| f.id);
    Ok((
        yaml::Profile {
            header: header.unwrap_or_default(),
            functions,
            pseudo_probe_desc: Default::default(),
        },
        warnings,
    ))
}

/// Sums pre-aggregated records: feed records from any number of inputs with [`PreAggMerger::add`], then
/// [`PreAggMerger::finish`] returns the event records (first-seen order) followed by the summed records
/// in a deterministic order. Memory is proportional to the distinct records.
#[derive(Debug, Default)]
pub struct PreAggMerger<'a> {
    events: Vec<&'a [u8]>,
    counts: HashMap<Record<'a>, (u64, u64)>,
}

impl<'a> PreAggMerger<'a> {
    /// A new, empty merger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add one record.
    pub fn add(&mut self, r: Record<'a>) {
        let (key, count, mispreds) = match r {
            Record::Event { name } => {
                if !self.events.contains(&name) {
                    self.events.push(name);
                }
                return;
            }
            Record::Sample { addr, count } => (Record::Sample { addr, count: 0 }, count, 0),
            Record::Trace {
                kind,
                branch,
                ft_start,
                ft_end,
                count,
            } => (
                Record::Trace {
                    kind,
                    branch,
                    ft_start,
                    ft_end,
                    count: 0,
                },
                count,
                0,
            ),
            Record::Branch {
                from,
                to,
                count,
                mispreds,
            } => (
                Record::Branch {
                    from,
                    to,
                    count: 0,
                    mispreds: 0,
                },
                count,
                mispreds,
            ),
            Record::FallThrough {
                kind,
                from,
                to,
                count,
            } => (
                Record::FallThrough {
                    kind,
                    from,
                    to,
                    count: 0,
                },
                count,
                0,
            ),
        };
        let e = self.counts.entry(key).or_default();
        e.0 = e.0.saturating_add(count);
        e.1 = e.1.saturating_add(mispreds);
    }

    /// Merge another merger (e.g. from another thread) into this one.
    pub fn absorb(&mut self, other: PreAggMerger<'a>) {
        for e in other.events {
            if !self.events.contains(&e) {
                self.events.push(e);
            }
        }
        for (k, (c, m)) in other.counts {
            let e = self.counts.entry(k).or_default();
            e.0 = e.0.saturating_add(c);
            e.1 = e.1.saturating_add(m);
        }
    }

    /// The merged records: events first, then the others sorted.
    pub fn finish(self) -> Vec<Record<'a>> {
        let mut out: Vec<Record<'a>> = self
            .events
            .into_iter()
            .map(|name| Record::Event { name })
            .collect();
        let mut rest: Vec<Record<'a>> = self
            .counts
            .into_iter()
            .map(|(k, (c, m))| match k {
                Record::Sample { addr, .. } => Record::Sample { addr, count: c },
                Record::Trace {
                    kind,
                    branch,
                    ft_start,
                    ft_end,
                    ..
                } => Record::Trace {
                    kind,
                    branch,
                    ft_start,
                    ft_end,
                    count: c,
                },
                Record::Branch { from, to, .. } => Record::Branch {
                    from,
                    to,
                    count: c,
                    mispreds: m,
                },
                Record::FallThrough { kind, from, to, .. } => Record::FallThrough {
                    kind,
                    from,
                    to,
                    count: c,
                },
                Record::Event { name } => Record::Event { name },
            })
            .collect();
        rest.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
        out.extend(rest);
        out
    }
}

fn sort_key<'a>(r: &Record<'a>) -> (char, [Location<'a>; 3]) {
    let z = Location::addr(0);
    let locs = match *r {
        Record::Event { .. } => [z, z, z],
        Record::Sample { addr, .. } => [addr, z, z],
        Record::Trace {
            branch,
            ft_start,
            ft_end,
            ..
        } => [branch, ft_start, ft_end],
        Record::Branch { from, to, .. } | Record::FallThrough { from, to, .. } => [from, to, z],
    };
    (r.letter(), locs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdata_rules() {
        let a = fdata::parse(b"1 f 1 1 f 5 1 10\n1 f 1 1 g 0 0 2\n").unwrap();
        let b = fdata::parse(b"1 f 1 1 f 5 2 20\n").unwrap();
        let m = merge_fdata(&[a.clone(), b]).unwrap();
        let mut out = Vec::new();
        fdata::write(&mut out, &m).unwrap();
        assert_eq!(out, b"1 f 1 1 f 5 3 30\n1 f 1 1 g 0 0 2\n");
        let c = fdata::parse(b"boltedcollection\n1 f 1 1 f 5 1 10\n").unwrap();
        assert_eq!(
            merge_fdata(&[a, c]).unwrap_err(),
            Error::MixedMode {
                index: 1,
                header: "boltedcollection"
            }
        );
        let s1 = fdata::parse(b"no_lbr cycles\n1 f 1 10\n").unwrap();
        let s2 = fdata::parse(b"no_lbr cycles\n1 f 1 5\n").unwrap();
        let m = merge_fdata(&[s1, s2]).unwrap();
        let mut out = Vec::new();
        fdata::write(&mut out, &m).unwrap();
        assert_eq!(out, b"no_lbr\n1 f 1 15\n");
    }

    #[test]
    fn preagg_sums() {
        let text = b"E cycles\nB 1 2 3 1\nB 1 2 4 0\nE cycles\nS 5 1\n";
        let mut m = PreAggMerger::new();
        for r in crate::preagg::parse(text) {
            m.add(r.unwrap());
        }
        let mut out = Vec::new();
        crate::preagg::write(&mut out, &m.finish()).unwrap();
        assert_eq!(out, b"E cycles\nB 1 2 7 1\nS 5 1\n");
    }
}
