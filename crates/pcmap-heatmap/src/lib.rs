//! Code heatmaps as `llvm-bolt-heatmap` 22 draws them: profile samples counted in fixed-size
//! buckets of the binary's address space, rendered as BOLT's colored text map (one per block
//! size), the cumulative distribution of bucket counts (CSV), the per-section hotness table (CSV),
//! and an SVG picture of the same map.
//!
//! What is counted (BOLT's rules):
//! * pre-aggregated profiles: every record with a fall-through (`T`, `R`, `F`, `f`, `r`) adds its
//!   count to each bucket of the range `from ..= to`; `S` records add their count at their
//!   address; `B` records (branch only) add nothing;
//! * perf.data branch stacks: each trace's fall-through range as above, plus one count at the
//!   target of the newest entry and one at the source of the oldest entry of each sample (the
//!   addresses no fall-through covers);
//! * perf.data basic samples (`--ba`): one count at each sampled address.
//!
//! A range whose start lies outside `[min_address, max_address]`, whose end precedes its start, or
//! that is longer than 64 KiB is not counted ("invalid traces": per record for pre-aggregated
//! input, per distinct `(branch, from, to)` trace for perf.data, as BOLT counts them).
//!
//! Build a [`Heatmap`] by feeding a [`HeatmapBuilder`] (a [`Sink`]) with events from
//! `pcmap_profile::events`, then [`HeatmapBuilder::finish`]; render with
//! [`Heatmap::write_text`], [`Heatmap::write_cdf`], [`Heatmap::write_section_hotness`] and
//! [`Heatmap::svg`].

use std::collections::BTreeMap;

use pcmap_binary::Binary;
use pcmap_profile::events::{Event, ParallelSink, Sink, TraceKind};
use rustc_hash::FxHashSet;

mod svg;
pub use svg::escape;
mod text;

pub use text::{AnsiState, SectionHotness, SectionRow};

/// Why a heatmap cannot be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The profile has no samples at all.
    #[error(
        "no {} detected in profile: cannot build a heatmap{}",
        if *basic { "basic event samples" } else { "brstack traces" },
        if *basic { "" } else { " (use --ba for a heatmap of basic events)" }
    )]
    NoSamples {
        /// Basic samples were expected (`--ba`).
        basic: bool,
    },
    /// No sample fell into the valid address range.
    #[error("no valid traces registered{}", if *no_branch_stacks { " (the perf.data has no branch stacks: use --ba)" } else { "" })]
    NoValidTraces {
        /// The input is perf.data whose samples all lack branch stacks.
        no_branch_stacks: bool,
    },
    /// A `--block-size` specification is malformed.
    #[error("--block-size: {0}")]
    BlockSize(String),
}

/// Result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Options of `llvm-bolt-heatmap` that shape the map (same names and defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeatmapOptions {
    /// Bucket sizes in bytes: the first is the counting granularity; each later one (a multiple of
    /// the one before) gives a coarser zoomed-out map (`--block-size`, default 64, 4K, 256K).
    pub block_sizes: Vec<u64>,
    /// Lowest address counted (`--min-address`, default 0).
    pub min_address: u64,
    /// Highest address counted (`--max-address`, default 0xffffffff); above 32 bits, addresses
    /// are printed with 16 hex digits.
    pub max_address: u64,
    /// Buckets per text line (`--line-size`, default 256; the work per line grows with it).
    pub line_size: u64,
    /// List the text sections and their letters in the legend (`--print-mappings`).
    pub print_mappings: bool,
}

impl Default for HeatmapOptions {
    fn default() -> Self {
        HeatmapOptions {
            block_sizes: vec![64, 4096, 262_144],
            min_address: 0,
            max_address: 0xffff_ffff,
            line_size: 256,
            print_mappings: false,
        }
    }
}

/// Parse a `--block-size` value as llvm-bolt-heatmap does: comma-separated decimal sizes, each
/// with an optional `K`/`M`/`G` suffix (`KiB`, `kb`, ... accepted), each a multiple of (and larger
/// than) the one before, each fitting in 32 bits.
pub fn parse_block_sizes(spec: &str) -> Result<Vec<u64>> {
    let mut out: Vec<u64> = Vec::new();
    for part in spec.split(',') {
        let digits = part.bytes().take_while(u8::is_ascii_digit).count();
        let (num, suffix) = part.split_at(digits);
        let value: u32 = num.parse().map_err(|_| {
            Error::BlockSize(format!("'{part}' value can't be parsed as an integer"))
        })?;
        let shift = match suffix.as_bytes() {
            [] => 0,
            [k] | [k, b'i'] | [k, b'b' | b'B'] | [k, b'i', b'b' | b'B'] => match k {
                b'k' | b'K' => 10,
                b'm' | b'M' => 20,
                b'g' | b'G' => 30,
                _ => {
                    return Err(Error::BlockSize(format!(
                        "'{suffix}' value can't be parsed as a suffix"
                    )));
                }
            },
            _ => {
                return Err(Error::BlockSize(format!(
                    "'{suffix}' value can't be parsed as a suffix"
                )));
            }
        };
        // LLVM shifts a 32-bit value: sizes that overflow it are refused.
        let size = u64::from(value) << shift;
        if size > u64::from(u32::MAX) {
            return Err(Error::BlockSize(format!("'{part}' is too large")));
        }
        let prev = out.last().copied().unwrap_or(0);
        if size <= prev || (prev != 0 && size % prev != 0) {
            return Err(Error::BlockSize(format!(
                "'{part}' must be a multiple of previous value"
            )));
        }
        out.push(size);
    }
    Ok(out)
}

/// An executable section of the binary: `[begin, end)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextSection {
    /// Section name.
    pub name: String,
    /// First address.
    pub begin: u64,
    /// One past the last address.
    pub end: u64,
}

/// The executable sections BOLT's heatmap labels: every section with `SHF_EXECINSTR` and a
/// non-zero size, by start address.
pub fn text_sections(binary: &Binary<'_>) -> Vec<TextSection> {
    const SHF_EXECINSTR: u64 = 4;
    let mut v: Vec<TextSection> = binary
        .sections()
        .iter()
        .filter(|s| s.flags & SHF_EXECINSTR != 0 && s.size != 0)
        .map(|s| TextSection {
            name: s.name.to_string(),
            begin: s.address,
            end: s.address.wrapping_add(s.size),
        })
        .collect();
    v.sort_by_key(|s| s.begin);
    v
}

/// The hot-text range `[__hot_start, __hot_end)` BOLT reports as `[hot text]` (each bound 0 when
/// its symbol is absent).
pub fn hot_text(binary: &Binary<'_>) -> (u64, u64) {
    let value = |name: &str| {
        binary
            .symbols()
            .iter()
            .find(|s| s.name == name && !s.is_undefined)
            .map_or(0, |s| s.address)
    };
    (value("__hot_start"), value("__hot_end"))
}

/// How the events fed to a [`HeatmapBuilder`] are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Pre-aggregated text (`--pa`).
    PreAggregated,
    /// perf.data branch stacks: the events of `pcmap_profile::events::read_perf_data` in branch
    /// mode (each sample's traces newest first, starting with a branch-only trace).
    BranchStacks,
    /// perf.data basic samples (`--ba`).
    BasicSamples,
}

/// What `llvm-bolt-heatmap` prints about the input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events read (pre-aggregated: records, event names included).
    pub entries: u64,
    /// Samples read (pre-aggregated: the sum of the records' counts).
    pub samples: u64,
    /// Ranges not counted (outside the address range, reversed, or longer than 64 KiB).
    pub invalid_traces: u64,
    /// Non-empty buckets at the first block size.
    pub buckets: u64,
}

/// Collects events into bucket counts; a [`Sink`] for `pcmap_profile::events` producers.
#[derive(Debug)]
pub struct HeatmapBuilder {
    opts: HeatmapOptions,
    sections: Vec<TextSection>,
    hot: (u64, u64),
    input: Input,
    bucket: u64,
    map: BTreeMap<u64, u64>,
    stats: Stats,
    /// perf.data: distinct invalid traces.
    invalid: FxHashSet<(u64, u64, u64)>,
    /// perf.data: the source of the oldest entry seen so far of the current sample.
    oldest_source: Option<u64>,
    /// perf.data: a sample had a branch stack entry.
    saw_branches: bool,
}

/// BOLT's limit on a counted range.
const MAX_RANGE: u64 = 64 * 1024;

impl HeatmapBuilder {
    /// A builder for `binary`'s heatmap with `opts` (its sections and hot-text symbols).
    pub fn new(binary: &Binary<'_>, opts: HeatmapOptions, input: Input) -> Self {
        Self::with_sections(text_sections(binary), hot_text(binary), opts, input)
    }

    /// A builder over given sections and hot-text range.
    pub fn with_sections(
        sections: Vec<TextSection>,
        hot: (u64, u64),
        mut opts: HeatmapOptions,
        input: Input,
    ) -> Self {
        if opts.block_sizes.is_empty() {
            opts.block_sizes = HeatmapOptions::default().block_sizes;
        }
        opts.line_size = opts.line_size.max(1);
        let bucket = opts.block_sizes[0].max(1);
        HeatmapBuilder {
            opts,
            sections,
            hot,
            input,
            bucket,
            map: BTreeMap::new(),
            stats: Stats::default(),
            invalid: FxHashSet::default(),
            oldest_source: None,
            saw_branches: false,
        }
    }

    /// An empty builder with the same binary, options and input (for one chunk of a parallel
    /// read).
    pub fn empty_like(&self) -> Self {
        Self::with_sections(
            self.sections.clone(),
            self.hot,
            self.opts.clone(),
            self.input,
        )
    }

    /// What was read so far (the invalid-trace count included).
    pub fn stats(&self) -> Stats {
        let mut s = self.stats;
        if self.input == Input::BranchStacks {
            s.invalid_traces = self.invalid.len() as u64;
        }
        s.buckets = self.map.len() as u64;
        s
    }

    /// Set the number of samples read (for perf.data, where samples of other processes and
    /// samples without branch stacks produce no events).
    pub fn set_samples(&mut self, samples: u64) {
        self.stats.samples = samples;
    }

    fn ignored(&self, addr: u64) -> bool {
        addr > self.opts.max_address || addr < self.opts.min_address
    }

    fn add_address(&mut self, addr: u64, count: u64) {
        if !self.ignored(addr) {
            let e = self.map.entry(addr / self.bucket).or_default();
            *e = e.wrapping_add(count);
        }
    }

    /// Count a range; `false` if it is invalid.
    fn add_range(&mut self, start: u64, end: u64, count: u64) -> bool {
        if self.ignored(start) || start > end || end - start > MAX_RANGE {
            return false;
        }
        for b in start / self.bucket..=end / self.bucket {
            let e = self.map.entry(b).or_default();
            *e = e.wrapping_add(count);
        }
        true
    }

    fn end_sample(&mut self) {
        if let Some(a) = self.oldest_source.take() {
            self.add_address(a, 1);
        }
    }

    /// The finished heatmap, or why there is none.
    pub fn finish(mut self) -> Result<Heatmap> {
        self.end_sample();
        if self.input == Input::BranchStacks {
            self.stats.invalid_traces = self.invalid.len() as u64;
        }
        if self.stats.samples == 0 {
            return Err(Error::NoSamples {
                basic: self.input == Input::BasicSamples,
            });
        }
        if self.map.is_empty() {
            return Err(Error::NoValidTraces {
                no_branch_stacks: self.input == Input::BranchStacks && !self.saw_branches,
            });
        }
        self.stats.buckets = self.map.len() as u64;
        Ok(Heatmap {
            opts: self.opts,
            sections: self.sections,
            hot: self.hot,
            map: self.map,
            stats: self.stats,
        })
    }
}

impl Sink for HeatmapBuilder {
    fn event(&mut self, event: &Event<'_>) {
        self.stats.entries += 1;
        match *event {
            Event::Name(_) => {}
            Event::Sample(s) => {
                if self.input != Input::BranchStacks {
                    self.stats.samples = self.stats.samples.wrapping_add(s.count);
                    self.add_address(s.at.addr, s.count);
                }
            }
            Event::Trace(t) => match self.input {
                Input::PreAggregated => {
                    self.stats.samples = self.stats.samples.wrapping_add(t.count);
                    if t.kind.has_fall_through() && !self.add_range(t.from.addr, t.to.addr, t.count)
                    {
                        self.stats.invalid_traces += 1;
                    }
                }
                Input::BranchStacks => {
                    self.saw_branches = true;
                    if t.kind == TraceKind::BranchOnly {
                        // A new sample: its newest entry's target is not covered by a range.
                        self.end_sample();
                        self.add_address(t.from.addr, t.count);
                    } else if !self.add_range(t.from.addr, t.to.addr, t.count) {
                        self.invalid.insert((t.branch.addr, t.from.addr, t.to.addr));
                    }
                    self.oldest_source = Some(t.branch.addr);
                }
                Input::BasicSamples => {}
            },
        }
    }
}

/// Chunks read in parallel merge by adding counts. A perf.data piece ends with its last sample's
/// oldest branch source still pending (a sample's end is only seen when the next one starts):
/// `later` starts a new sample, so it is counted here, and `later`'s pending one carries over.
impl ParallelSink for HeatmapBuilder {
    fn merge(mut self, later: Self) -> Self {
        self.end_sample();
        self.oldest_source = later.oldest_source;
        for (b, c) in later.map {
            let e = self.map.entry(b).or_default();
            *e = e.wrapping_add(c);
        }
        self.stats.entries += later.stats.entries;
        self.stats.samples = self.stats.samples.wrapping_add(later.stats.samples);
        self.stats.invalid_traces += later.stats.invalid_traces;
        self.invalid.extend(later.invalid);
        self.saw_branches |= later.saw_branches;
        self
    }
}

/// Bucket counts over the binary's address space, at the first block size.
#[derive(Clone, Debug)]
pub struct Heatmap {
    opts: HeatmapOptions,
    sections: Vec<TextSection>,
    hot: (u64, u64),
    map: BTreeMap<u64, u64>,
    stats: Stats,
}

impl Heatmap {
    /// The options the map was built with.
    pub fn options(&self) -> &HeatmapOptions {
        &self.opts
    }

    /// The text sections, by address.
    pub fn sections(&self) -> &[TextSection] {
        &self.sections
    }

    /// What was read and counted.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The block sizes of the maps to draw, first (finest) first.
    pub fn block_sizes(&self) -> &[u64] {
        &self.opts.block_sizes
    }

    /// Non-empty buckets at `block_size` (a multiple of the first block size): bucket index
    /// (address / `block_size`) -> count.
    pub fn buckets(&self, block_size: u64) -> BTreeMap<u64, u64> {
        let base = self.opts.block_sizes[0].max(1);
        let block_size = block_size.max(1);
        if block_size == base {
            return self.map.clone();
        }
        let mut out = BTreeMap::new();
        for (&b, &c) in &self.map {
            let e = out.entry(b.wrapping_mul(base) / block_size).or_insert(0u64);
            *e = e.wrapping_add(c);
        }
        out
    }

    /// Index of the first section (from `from`) containing `address`.
    fn section_at(&self, from: usize, address: u64) -> Option<usize> {
        self.sections[from..]
            .iter()
            .position(|s| address >= s.begin && address < s.end)
            .map(|i| i + from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcmap_profile::events::{Loc, Sample, Trace};

    fn sections() -> Vec<TextSection> {
        vec![
            TextSection {
                name: ".text".into(),
                begin: 0x1000,
                end: 0x1400,
            },
            TextSection {
                name: "<odd&name>".into(),
                begin: 0x1400,
                end: 0x1410,
            },
        ]
    }

    fn trace(kind: TraceKind, branch: u64, from: u64, to: u64) -> Event<'static> {
        Event::Trace(Trace {
            pid: Some(1),
            kind,
            branch: Loc::inside(branch),
            from: Loc::inside(from),
            to: Loc::inside(to),
            count: 1,
            mispreds: 0,
        })
    }

    #[test]
    fn block_sizes_parse_like_llvm() {
        assert_eq!(
            parse_block_sizes("64,4K,256K").unwrap(),
            [64, 4096, 262_144]
        );
        assert_eq!(
            parse_block_sizes("1KiB,2mb,1G").unwrap(),
            [1024, 2 << 20, 1 << 30]
        );
        for bad in ["", "64,100", "0", "4X", "5G", "64,64", "k", "4Kx"] {
            assert!(parse_block_sizes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn branch_stacks_count_ranges_and_uncovered_ends() {
        let mut b = HeatmapBuilder::with_sections(
            sections(),
            (0, 0),
            HeatmapOptions {
                block_sizes: vec![16],
                ..Default::default()
            },
            Input::BranchStacks,
        );
        // One sample, newest first: 0x1100 -> 0x1200 (branch only), 0x1040 -> 0x1080 whose
        // fall-through runs to 0x1100, then an invalid (reversed) trace seen twice.
        b.event(&trace(TraceKind::BranchOnly, 0x1100, 0x1200, 0));
        b.event(&trace(TraceKind::Taken, 0x1040, 0x1080, 0x1100));
        b.event(&trace(TraceKind::Taken, 0x1300, 0x1390, 0x1010));
        b.event(&trace(TraceKind::BranchOnly, 0x1300, 0x1390, 0));
        b.event(&trace(TraceKind::Taken, 0x1300, 0x1390, 0x1010));
        b.set_samples(2);
        let h = b.finish().unwrap();
        let m = h.buckets(16);
        // The newest target of each sample, the oldest source of each sample, the range.
        assert_eq!(m[&(0x1200 / 16)], 1);
        assert_eq!(m[&(0x1390 / 16)], 1);
        assert_eq!(m[&(0x1300 / 16)], 2);
        assert_eq!((0x1080..=0x1100).step_by(16).count(), 9);
        assert!((0x1080 / 16..=0x1100 / 16).all(|k| m[&k] == 1));
        assert_eq!(h.stats().invalid_traces, 1, "distinct traces");
        // Zoomed out: counts add up.
        let z = h.buckets(256);
        assert_eq!(z.values().sum::<u64>(), m.values().sum::<u64>());
    }

    #[test]
    fn preaggregated_invalid_records_count_each_and_no_samples_is_an_error() {
        let mut b = HeatmapBuilder::with_sections(
            sections(),
            (0, 0),
            HeatmapOptions::default(),
            Input::PreAggregated,
        );
        b.event(&trace(TraceKind::FallThrough, 0, 0x1200, 0x1100));
        b.event(&trace(TraceKind::FallThrough, 0, 0x1200, 0x1100));
        b.event(&trace(TraceKind::Taken, 0, 0x1000, 0x1000 + MAX_RANGE + 1));
        b.event(&trace(TraceKind::BranchOnly, 0x1000, 0x1010, 0));
        assert_eq!(b.stats().invalid_traces, 3);
        assert!(matches!(
            b.finish(),
            Err(Error::NoValidTraces {
                no_branch_stacks: false
            })
        ));
        let b = HeatmapBuilder::with_sections(
            sections(),
            (0, 0),
            HeatmapOptions::default(),
            Input::BasicSamples,
        );
        assert!(matches!(b.finish(), Err(Error::NoSamples { basic: true })));
    }

    /// A small XML well-formedness check: balanced tags, quoted attributes, escaped text.
    fn check_xml(doc: &str) -> usize {
        let mut stack: Vec<&str> = Vec::new();
        let mut rest = doc.strip_prefix("<?xml").expect("XML declaration");
        rest = &rest[rest.find("?>").expect("end of declaration") + 2..];
        let mut elements = 0;
        loop {
            let Some(open) = rest.find('<') else {
                assert!(rest.trim().is_empty(), "text after the root: {rest}");
                break;
            };
            let text = &rest[..open];
            assert!(!text.contains('>'), "raw > in text {text:?}");
            for (i, _) in text.match_indices('&') {
                let ent = &text[i..];
                assert!(
                    ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                        .iter()
                        .any(|e| ent.starts_with(e)),
                    "bad entity in {text:?}"
                );
            }
            let close = rest[open..].find('>').expect("unclosed tag") + open;
            let tag = &rest[open + 1..close];
            rest = &rest[close + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name), "mismatched </{name}>");
                continue;
            }
            elements += 1;
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name = body.split_whitespace().next().expect("tag name");
            // Attributes: name="value" pairs, values without '<' or '"'.
            let mut attrs = body[name.len()..].trim();
            while !attrs.is_empty() {
                let eq = attrs.find("=\"").expect("attribute value is quoted");
                let end = attrs[eq + 2..].find('"').expect("closing quote") + eq + 2;
                assert!(!attrs[eq + 2..end].contains('<'));
                attrs = attrs[end + 1..].trim_start();
            }
            if !self_closing {
                stack.push(name);
            }
            if stack.is_empty() {
                assert!(rest.trim().is_empty(), "content after the root element");
                break;
            }
        }
        assert!(stack.is_empty(), "unclosed {stack:?}");
        elements
    }

    #[test]
    fn svg_is_well_formed_with_one_square_per_bucket() {
        let mut b = HeatmapBuilder::with_sections(
            sections(),
            (0, 0),
            HeatmapOptions {
                block_sizes: vec![16, 256],
                line_size: 16,
                ..Default::default()
            },
            Input::BasicSamples,
        );
        for (addr, count) in [(0x1000u64, 1u64), (0x1010, 50), (0x1404, 7), (0x9000, 3)] {
            b.event(&Event::Sample(Sample {
                pid: None,
                at: Loc::inside(addr),
                count,
            }));
        }
        let h = b.finish().unwrap();
        let svg = h.svg(16);
        assert!(check_xml(&svg) > 10);
        assert!(svg.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        // One titled square per non-empty bucket, each with its address and count.
        for needle in [
            "0x1000-0x1010: 1 sample in .text",
            "0x1010-0x1020: 50 samples in .text",
            "0x1400-0x1410: 7 samples in &lt;odd&amp;name&gt;",
            "0x9000-0x9010: 3 samples<",
        ] {
            assert!(svg.contains(needle), "{needle} missing");
        }
        // Rows far apart are separated by a gap marker.
        assert!(svg.contains("empty lines"));
        assert!(check_xml(&h.svg(256)) > 5);
    }
}
