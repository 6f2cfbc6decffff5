//! BOLT's text outputs: the colored map, the CDF of bucket counts, the section-hotness table.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use crate::Heatmap;

/// raw_ostream's colors (ANSI codes 30 + n).
const BLACK: u8 = 0;
const RED: u8 = 1;
const GREEN: u8 = 2;
const YELLOW: u8 = 3;
const CYAN: u8 = 6;
const WHITE: u8 = 7;

/// The colors of the six count ranges, coldest first.
const COLORS: [u8; 6] = [WHITE, WHITE, CYAN, GREEN, YELLOW, RED];

/// The foreground color the text maps of one run last set. BOLT keeps it across the maps it
/// writes in one process (so the second map does not repeat a color the first one left set):
/// write every map of a run with the same state, starting from [`AnsiState::default`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnsiState {
    current: u8,
}

impl Default for AnsiState {
    fn default() -> Self {
        AnsiState { current: BLACK }
    }
}

/// The upper bounds of the six count ranges for a map whose largest count is `max`.
pub(crate) fn ranges(max: u64) -> [u64; 6] {
    let mut r = [0u64; 6];
    for (i, slot) in r.iter_mut().enumerate() {
        let i = i as u64;
        // The float-to-integer conversion truncates, as in C++.
        *slot = (i + 1).max((max as f64).powf((i + 1) as f64 / 6.0) as u64);
    }
    r[5] = 6u64.max(max);
    r
}

/// Index of the range a count falls in (the last one for counts above every bound).
pub(crate) fn range_index(ranges: &[u64; 6], value: u64) -> Option<usize> {
    ranges.iter().position(|&r| value <= r)
}

struct Painter<'a, W: Write + ?Sized> {
    out: &'a mut W,
    state: &'a mut AnsiState,
}

impl<W: Write + ?Sized> Painter<'_, W> {
    fn color(&mut self, c: u8) -> io::Result<()> {
        if self.state.current == c {
            return Ok(());
        }
        self.state.current = c;
        write!(self.out, "\x1b[0;{}m", 30 + u32::from(c))
    }
}

fn align_to(v: u64, align: u64) -> u64 {
    v.wrapping_add(align - 1) / align * align
}

impl Heatmap {
    fn address(&self, a: u64) -> String {
        if self.opts.max_address > 0xffff_ffff {
            format!("0x{a:016x}")
        } else {
            format!("0x{a:08x}")
        }
    }

    /// Write the text map at `block_size` exactly as llvm-bolt-heatmap 22 writes its heatmap
    /// files (ANSI colors included). `state` carries the last color across the maps of one run.
    pub fn write_text<W: Write + ?Sized>(
        &self,
        out: &mut W,
        block_size: u64,
        state: &mut AnsiState,
    ) -> io::Result<()> {
        let block = block_size.max(1);
        let map = self.buckets(block);
        let line = self.opts.line_size.saturating_mul(block);
        let max = map.values().copied().max().unwrap_or(0);
        let ranges = ranges(max);
        let mut p = Painter { out, state };

        let print_value =
            |p: &mut Painter<'_, W>, value: u64, ch: u8, reset: bool| -> io::Result<()> {
                if let Some(i) = range_index(&ranges, value) {
                    p.color(COLORS[i])?;
                }
                let c = if value <= ranges[0] {
                    ch.to_ascii_lowercase()
                } else {
                    ch.to_ascii_uppercase()
                };
                p.out.write_all(&[c])?;
                if reset {
                    p.color(WHITE)?;
                }
                Ok(())
            };

        let start_line =
            |p: &mut Painter<'_, W>, mut address: u64, empty: bool| -> io::Result<()> {
                p.color(WHITE)?;
                let line_address = address / line * line;
                write!(p.out, "{}: ", self.address(line_address))?;
                if empty {
                    address = line_address.wrapping_add(line);
                }
                let mut fill = line_address;
                while fill < address {
                    p.out.write_all(b".")?;
                    match fill.checked_add(block) {
                        Some(f) => fill = f,
                        None => break,
                    }
                }
                Ok(())
            };

        let finish_line = |p: &mut Painter<'_, W>, address: u64| -> io::Result<()> {
            let end = align_to(address.wrapping_add(1), line);
            let mut fill = address.checked_add(block);
            while let Some(f) = fill.filter(|&f| f < end) {
                p.out.write_all(b".")?;
                fill = f.checked_add(block);
            }
            p.out.write_all(b"\n")
        };

        let fill_range = |p: &mut Painter<'_, W>, start: u64, end: u64| -> io::Result<()> {
            if start / line == end / line {
                let mut fill = start.checked_add(block);
                while let Some(f) = fill.filter(|&f| f < end) {
                    p.color(WHITE)?;
                    p.out.write_all(b".")?;
                    fill = f.checked_add(block);
                }
                return Ok(());
            }
            p.color(WHITE)?;
            finish_line(p, start)?;
            let mut start = align_to(start, line);
            let empty_lines = end.wrapping_sub(start) / line;
            if empty_lines > 32 {
                p.out.write_all(b"\n")?;
            } else {
                for _ in 0..empty_lines {
                    start_line(p, start, true)?;
                    p.out.write_all(b"\n")?;
                    start = start.wrapping_add(line);
                }
            }
            start_line(p, end, false)
        };

        // Black background, default color.
        p.out.write_all(b"\x1b[0;40m")?;
        p.color(WHITE)?;
        p.out.write_all(b"Legend:\n\nRanges:\n")?;
        let mut prev = 0u64;
        for &value in &ranges {
            p.out.write_all(b"  ")?;
            print_value(&mut p, value, b'o', true)?;
            writeln!(p.out, " : ({prev}, {value}]")?;
            prev = value;
        }
        if self.opts.print_mappings {
            p.out.write_all(b"\nSections:\n")?;
            for (i, s) in self.sections.iter().enumerate() {
                let upper = b'A' + (i % 26) as u8;
                writeln!(
                    p.out,
                    "  {}/{} : {:<10} {}-{}",
                    upper.to_ascii_lowercase() as char,
                    upper as char,
                    s.name,
                    self.address(s.begin),
                    self.address(s.end)
                )?;
            }
            p.out.write_all(b"\n")?;
        }
        // Column headers: hex digit `pos` (from the right) of each bucket's offset in its line.
        for pos in (1..=5u32).rev() {
            p.out.write_all(b"            ")?;
            if self.opts.max_address > 0xffff_ffff {
                p.out.write_all(b"        ")?;
            }
            let mut prev = u64::MAX;
            let mut i = 0u64;
            while i < line {
                // BOLT computes the offset in 32 bits.
                let v = ((i & 0xffff_ffff) & ((1u64 << (pos * 4)) - 1)) >> ((pos - 1) * 4);
                if v != prev {
                    write!(p.out, "{v:x}")?;
                    prev = v;
                } else {
                    p.out.write_all(b" ")?;
                }
                match i.checked_add(block) {
                    Some(n) => i = n,
                    None => break,
                }
            }
            p.out.write_all(b"\n")?;
        }

        let mut section_from = 0usize;
        let mut prev_address = 0u64;
        for (&bucket, &count) in &map {
            let address = bucket.wrapping_mul(block);
            let mut ch = b'o';
            if let Some(s) = self.section_at(section_from, address) {
                section_from = s;
                ch = b'a' + (s % 26) as u8;
            }
            if prev_address != 0 {
                fill_range(&mut p, prev_address, address)?;
            } else {
                start_line(&mut p, address, false)?;
            }
            print_value(&mut p, count, ch, false)?;
            prev_address = address;
        }
        if prev_address != 0 {
            p.color(WHITE)?;
            finish_line(&mut p, prev_address)?;
        }
        Ok(())
    }

    /// Write the cumulative distribution of bucket counts at the first block size (BOLT's
    /// `FILE.csv`): buckets by decreasing count, the size they cover, the share of all samples.
    pub fn write_cdf<W: Write + ?Sized>(&self, out: &mut W) -> io::Result<()> {
        let block = self.opts.block_sizes[0].max(1);
        let mut counts: Vec<u64> = self.map.values().copied().collect();
        let total = counts.iter().fold(0u64, |a, &c| a.wrapping_add(c));
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let kb = block as f64 / 1024.0;
        let pct = 100.0 / total as f64;
        let mut running = 0u64;
        out.write_all(b"Bucket counts, Size (KB), CDF (%)\n")?;
        for (i, c) in counts.iter().enumerate() {
            running = running.wrapping_add(*c);
            let n = i as u64 + 1;
            writeln!(
                out,
                "{n}, {:.4}, {:.4}",
                kb * n as f64,
                pct * running as f64
            )?;
        }
        Ok(())
    }

    /// Per-section figures at the first block size, as BOLT computes them.
    pub fn section_hotness(&self) -> SectionHotness {
        let block = self.opts.block_sizes[0].max(1);
        let mut samples: HashMap<&str, u64> = HashMap::new();
        let mut buckets: HashMap<&str, u64> = HashMap::new();
        let mut total = 0u64;
        let mut unmapped = 0u64;
        let mut idx = 0usize;
        let (hot_start, hot_end) = self.hot;
        const HOT: &str = "[hot text]";
        for (&bucket, &count) in &self.map {
            total = total.wrapping_add(count);
            let address = bucket.wrapping_mul(block);
            while idx < self.sections.len() && address >= self.sections[idx].end {
                idx += 1;
            }
            if idx >= self.sections.len() || address.wrapping_add(block) < self.sections[idx].begin
            {
                unmapped = unmapped.wrapping_add(count);
                continue;
            }
            let name = self.sections[idx].name.as_str();
            *samples.entry(name).or_default() += count;
            *buckets.entry(name).or_default() += 1;
            if hot_start <= address && address < hot_end {
                *samples.entry(HOT).or_default() += count;
                *buckets.entry(HOT).or_default() += 1;
            }
        }
        let mut rows: Vec<(String, u64, u64)> = self
            .sections
            .iter()
            .map(|s| (s.name.clone(), s.begin, s.end))
            .collect();
        if hot_start != hot_end {
            rows.push((HOT.to_string(), hot_start, hot_end));
        }
        let mapped = total.wrapping_sub(unmapped);
        let rows = rows
            .into_iter()
            .map(|(name, begin, end)| {
                let s = samples.get(name.as_str()).copied().unwrap_or(0);
                let b = buckets.get(name.as_str()).copied().unwrap_or(0);
                // BOLT keeps these figures in single precision.
                let hotness = (s as f64 / total as f64) as f32;
                let mapped_hotness = if mapped != 0 {
                    (s as f64 / mapped as f64) as f32
                } else {
                    0.0
                };
                let n = (end / block + u64::from(end % block != 0)).wrapping_sub(begin / block);
                let utilization = (b as f64 / n as f64) as f32;
                SectionRow {
                    name,
                    begin,
                    end,
                    samples: s,
                    buckets: b,
                    hotness_pct: 100.0 * f64::from(hotness),
                    utilization_pct: 100.0 * f64::from(utilization),
                    partition_score: f64::from(mapped_hotness * utilization),
                }
            })
            .collect();
        SectionHotness {
            rows,
            total,
            unmapped,
        }
    }

    /// Write the section-hotness table (BOLT's `FILE-section-hotness.csv`). Nothing is written for
    /// a binary without text sections.
    pub fn write_section_hotness<W: Write + ?Sized>(&self, out: &mut W) -> io::Result<()> {
        if self.sections.is_empty() {
            return Ok(());
        }
        let h = self.section_hotness();
        out.write_all(
            b"Section Name, Begin Address, End Address, Percentage Hotness, Utilization Pct, Partition Score\n",
        )?;
        for r in &h.rows {
            writeln!(
                out,
                "{}, {:#x}, {:#x}, {}, {}, {}",
                r.name,
                r.begin,
                r.end,
                fixed4(r.hotness_pct),
                fixed4(r.utilization_pct),
                fixed4(r.partition_score)
            )?;
        }
        if h.unmapped > 0 {
            writeln!(
                out,
                "[unmapped], 0x0, 0x0, {}, 0, 0",
                fixed4(100.0 * h.unmapped as f64 / h.total as f64)
            )?;
        }
        Ok(())
    }

    /// The largest count at `block_size` and the six range bounds the legend shows.
    pub fn legend(&self, block_size: u64) -> [u64; 6] {
        ranges(
            self.buckets(block_size)
                .values()
                .copied()
                .max()
                .unwrap_or(0),
        )
    }

    /// Bucket counts at `block_size` grouped into lines of `line_size` buckets: line address ->
    /// (bucket offset in the line, count).
    pub(crate) fn lines(&self, block_size: u64) -> BTreeMap<u64, Vec<(u64, u64)>> {
        let block = block_size.max(1);
        let line = self.opts.line_size.saturating_mul(block);
        let mut out: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for (b, c) in self.buckets(block) {
            let a = b.wrapping_mul(block);
            out.entry(a / line * line)
                .or_default()
                .push(((a % line) / block, c));
        }
        out
    }
}

/// LLVM's `{:f4}`: fixed with four decimals; `nan` and `INF` spelled as LLVM spells them.
fn fixed4(v: f64) -> String {
    if v.is_nan() {
        "nan".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "INF" } else { "-INF" }.to_string()
    } else {
        format!("{v:.4}")
    }
}

/// One row of the section-hotness table.
#[derive(Clone, Debug, PartialEq)]
pub struct SectionRow {
    /// Section name (`[hot text]` for the hot-text range).
    pub name: String,
    /// First address.
    pub begin: u64,
    /// One past the last address.
    pub end: u64,
    /// Samples in buckets attributed to the section.
    pub samples: u64,
    /// Non-empty buckets attributed to the section.
    pub buckets: u64,
    /// Share of all samples, in percent.
    pub hotness_pct: f64,
    /// Share of the section's buckets that are non-empty, in percent.
    pub utilization_pct: f64,
    /// Share of mapped samples times utilization (0..1).
    pub partition_score: f64,
}

/// The section-hotness figures.
#[derive(Clone, Debug, PartialEq)]
pub struct SectionHotness {
    /// One row per text section (then `[hot text]`).
    pub rows: Vec<SectionRow>,
    /// All samples in buckets.
    pub total: u64,
    /// Samples in buckets outside every text section.
    pub unmapped: u64,
}
