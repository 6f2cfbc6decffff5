//! The heatmap as an SVG picture: the same rows, buckets and six count ranges as the text map,
//! one square per bucket, with the address of each row, the text sections and a legend. Every
//! bucket carries a tooltip (`<title>`) with its address range, count and section.

use std::fmt::Write as _;

use crate::Heatmap;
use crate::text::{range_index, ranges};

/// Fill colors of the six count ranges, coldest first (the text map's white, white, cyan,
/// green, yellow, red, on a light background).
const FILLS: [&str; 6] = [
    "#9ecae1", "#4292c6", "#41ab5d", "#fed976", "#fd8d3c", "#e31a1c",
];
/// Colors that tell the text sections apart (the strip under each row).
const SECTION_COLORS: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
];

/// Width of a bucket.
const CELL: u64 = 4;
/// Height of a bucket; a row is this plus the section strip and a gap.
const CELL_H: u64 = 10;
const STRIP: u64 = 2;
const ROW: u64 = CELL_H + STRIP + 1;
const LEFT: u64 = 150;
const TOP: u64 = 70;
const SKIP: u64 = 14;

/// Escape text for XML/HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => o.push('?'),
            c => o.push(c),
        }
    }
    o
}

impl Heatmap {
    /// The map at `block_size` as a standalone SVG document (an XML declaration, then
    /// [`Heatmap::svg_element`]).
    pub fn svg(&self, block_size: u64) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}",
            self.svg_element(block_size)
        )
    }

    /// The map at `block_size` as one `<svg>` element, to embed in an HTML page.
    pub fn svg_element(&self, block_size: u64) -> String {
        let block = block_size.max(1);
        let line_buckets = self.opts.line_size.max(1);
        let line = line_buckets.saturating_mul(block);
        let lines = self.lines(block);
        let max = lines
            .values()
            .flat_map(|v| v.iter().map(|&(_, c)| c))
            .max()
            .unwrap_or(0);
        let ranges = ranges(max);
        let grid_width = line_buckets.min(4096) * CELL;
        let width = LEFT + grid_width + 20;

        let mut body = String::new();
        let mut y = TOP;
        let mut prev_line: Option<u64> = None;
        for (&line_addr, cells) in &lines {
            if let Some(p) = prev_line
                && line_addr.wrapping_sub(p) > line
            {
                let skipped = (line_addr - p) / line - 1;
                let _ = writeln!(
                    body,
                    r##"<text x="{}" y="{}" class="gap">… {skipped} empty line{} …</text>"##,
                    LEFT,
                    y + SKIP - 4,
                    if skipped == 1 { "" } else { "s" }
                );
                y += SKIP;
            }
            prev_line = Some(line_addr);
            let _ = writeln!(
                body,
                r##"<text x="{}" y="{}" class="addr">0x{line_addr:x}</text>"##,
                LEFT - 8,
                y + CELL_H - 1
            );
            // The section band: which text section each bucket of the row starts in.
            let mut band: Option<(usize, u64, u64)> = None;
            let flush = |band: Option<(usize, u64, u64)>, body: &mut String| {
                if let Some((s, from, to)) = band {
                    let sec = &self.sections[s];
                    // Light background where the row is inside the section, its color below.
                    let _ = writeln!(
                        body,
                        r##"<rect x="{x}" y="{y}" width="{w}" height="{CELL_H}" fill="#eeeeee"/><rect x="{x}" y="{}" width="{w}" height="{STRIP}" fill="{}"><title>{}</title></rect>"##,
                        y + CELL_H,
                        SECTION_COLORS[s % SECTION_COLORS.len()],
                        escape(&sec.name),
                        x = LEFT + from * CELL,
                        w = (to - from) * CELL,
                    );
                }
            };
            for i in 0..line_buckets.min(4096) {
                let a = line_addr.wrapping_add(i * block);
                let s = self.section_at(0, a);
                match (band, s) {
                    (Some((bs, from, _)), Some(s)) if bs == s => band = Some((s, from, i + 1)),
                    (_, Some(s)) => {
                        flush(band, &mut body);
                        band = Some((s, i, i + 1));
                    }
                    (_, None) => {
                        flush(band, &mut body);
                        band = None;
                    }
                }
            }
            flush(band, &mut body);
            for &(off, count) in cells {
                if off >= 4096 {
                    continue;
                }
                let level = range_index(&ranges, count).unwrap_or(5);
                let a = line_addr.wrapping_add(off * block);
                let section = self
                    .section_at(0, a)
                    .map(|s| format!(" in {}", escape(&self.sections[s].name)))
                    .unwrap_or_default();
                let _ = writeln!(
                    body,
                    r##"<rect x="{}" y="{y}" width="{CELL}" height="{CELL_H}" fill="{}"><title>0x{a:x}-0x{:x}: {count} sample{}{section}</title></rect>"##,
                    LEFT + off * CELL,
                    FILLS[level],
                    a.wrapping_add(block),
                    if count == 1 { "" } else { "s" },
                );
            }
            y += ROW;
        }

        // Legend: count ranges, then the text sections.
        let mut legend = String::new();
        let mut ly = y + 24;
        let _ = writeln!(
            legend,
            r##"<text x="{LEFT}" y="{ly}" class="h">Samples per {block}-byte bucket</text>"##
        );
        ly += 8;
        let mut prev = 0u64;
        for (i, &r) in ranges.iter().enumerate() {
            let x = LEFT + (i as u64) * 130;
            let _ = writeln!(
                legend,
                r##"<rect x="{x}" y="{ly}" width="12" height="12" fill="{}"/><text x="{}" y="{}">({prev}, {r}]</text>"##,
                FILLS[i],
                x + 16,
                ly + 11
            );
            prev = r;
        }
        ly += 34;
        if !self.sections.is_empty() {
            let _ = writeln!(
                legend,
                r##"<text x="{LEFT}" y="{ly}" class="h">Text sections</text>"##
            );
            ly += 6;
            for (i, s) in self.sections.iter().enumerate() {
                let _ = writeln!(
                    legend,
                    r##"<rect x="{LEFT}" y="{}" width="12" height="{STRIP}" fill="{}"/><text x="{}" y="{}">{} 0x{:x}-0x{:x}</text>"##,
                    ly + 8,
                    SECTION_COLORS[i % SECTION_COLORS.len()],
                    LEFT + 16,
                    ly + 11,
                    escape(&s.name),
                    s.begin,
                    s.end
                );
                ly += 16;
            }
        }
        let height = ly + 20;
        let total: u64 = lines
            .values()
            .flat_map(|v| v.iter().map(|&(_, c)| c))
            .fold(0u64, u64::wrapping_add);

        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">
<style>.addr{{text-anchor:end}} .gap{{fill:#777;font-style:italic}} .h{{font-weight:bold}} text{{fill:#222}}</style>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="{LEFT}" y="24" class="h" font-size="14">Code heatmap</text>
<text x="{LEFT}" y="42">{block}-byte buckets, {line_buckets} per row ({line} bytes); {n} non-empty buckets, {total} samples</text>
<text x="{}" y="{}" class="h addr">address</text>"##,
            LEFT - 8,
            TOP - 8,
            n = lines.values().map(Vec::len).sum::<usize>(),
        );
        svg.push_str(&body);
        svg.push_str(&legend);
        svg.push_str("</svg>\n");
        svg
    }
}
