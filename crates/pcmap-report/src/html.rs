//! The report as one self-contained HTML page: inline CSS, inline SVG for the CFGs, a few lines
//! of inline script (it records script errors into the page, `#script-errors`, so a headless
//! browser check can see them), no external resource of any kind.
//!
//! More sections can be added by the caller: [`Section`] is a title and an SVG image (for
//! instance a heat map) rendered after the built-in sections by [`write()`].

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::{CfgHeat, FunctionHeat, MAX_DRAWN_BLOCKS, ProfileKind, Report};

/// An extra section of the page: a heading and an SVG document (`<svg ...>...</svg>`), embedded
/// as is (the caller makes it; it must be self-contained).
#[derive(Debug, Clone)]
pub struct Section {
    /// The heading.
    pub title: String,
    /// The SVG markup.
    pub svg: String,
}

/// Escape text for HTML/SVG content and attribute values (the one escaper, shared with the
/// heat map's SVG).
pub use pcmap_heatmap::escape;

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// Heat colour of `count` against `max` (log scale, light yellow to dark red; grey for 0).
fn heat(count: u64, max: u64) -> String {
    if count == 0 || max == 0 {
        return "#e8e8e8".to_string();
    }
    let t = ((count as f64).ln_1p() / (max as f64).ln_1p()).clamp(0.0, 1.0);
    let hue = 55.0 - 55.0 * t;
    let light = 88.0 - 40.0 * t;
    format!("hsl({hue:.0},95%,{light:.0}%)")
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1d1d1f;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:16px 0 6px;font-family:ui-monospace,monospace}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #eee}
th{background:#f4f4f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;height:10px;background:#e4572e;vertical-align:middle}
.meta{color:#555;font-size:13px}.note{color:#7a4b00;background:#fff6e0;padding:6px 10px;font-size:13px}
.fig{font-size:26px;font-weight:600}.figs{display:flex;gap:28px;flex-wrap:wrap}.figs div{min-width:150px}
.lbl{font-size:12px;color:#555}pre{white-space:pre-wrap;font-size:12px}code{font-size:12px}svg text{font-family:ui-monospace,monospace}
";

const SCRIPT: &str = "window.addEventListener('error',function(e){var d=document.getElementById('script-errors');\
if(d){d.textContent+=(e.message||'error')+'\\n';}});";

/// Write `report` as an HTML page, with `extra` sections after the built-in ones.
pub fn write(w: &mut dyn Write, report: &Report, extra: &[Section]) -> io::Result<()> {
    w.write_all(render(report, extra).as_bytes())
}

/// The page as a string.
pub fn render(report: &Report, extra: &[Section]) -> String {
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>pcmap report: {}</title><style>{STYLE}</style>\
         <script>{SCRIPT}</script></head><body>",
        escape(&report.binary)
    );
    let _ = writeln!(
        h,
        "<h1>pcmap report</h1><p class=\"meta\">binary <code>{}</code> · profile <code>{}</code> · \
         {} · total count {}{}</p>",
        escape(&report.binary),
        escape(&report.profile),
        match report.kind {
            ProfileKind::Branches => "branch records",
            ProfileKind::Samples => "basic samples",
        },
        report.total,
        if report.bolted {
            " · BOLT-optimized binary: names and offsets before BOLT (address translation)"
        } else {
            ""
        }
    );
    hottest(&mut h, report);
    quality(&mut h, report);
    cfgs(&mut h, report);
    inline(&mut h, report);
    stale(&mut h, report);
    for s in extra {
        let _ = writeln!(
            h,
            "<section class=\"extra\"><h2>{}</h2>\n{}\n</section>",
            escape(&s.title),
            s.svg
        );
    }
    h.push_str("<pre id=\"script-errors\"></pre>\n</body></html>\n");
    h
}

fn hottest(h: &mut String, r: &Report) {
    h.push_str("<section id=\"hottest\"><h2>Hottest functions</h2>\n");
    if r.functions.is_empty() {
        h.push_str(
            "<p class=\"note\">The profile counts no function of this binary.</p></section>\n",
        );
        return;
    }
    let _ = writeln!(
        h,
        "<table><tr><th>#</th><th>function</th><th>address</th><th>count</th><th>share</th>{}<th></th></tr>",
        if r.kind == ProfileKind::Branches {
            "<th>entries</th>"
        } else {
            ""
        }
    );
    let max_share = r.functions.iter().map(|f| f.share).fold(0.0f64, f64::max);
    for (i, f) in r.functions.iter().take(50).enumerate() {
        let _ = writeln!(
            h,
            "<tr class=\"fn\"><td class=\"n\">{}</td><td class=\"name\"><code>{}</code></td>\
             <td><code>{:#x}</code></td><td class=\"n count\">{}</td><td class=\"n\">{}</td>{}\
             <td><span class=\"bar\" style=\"width:{:.0}px\"></span></td></tr>",
            i + 1,
            escape(&f.name),
            f.address,
            f.count,
            pct(f.share),
            if r.kind == ProfileKind::Branches {
                format!("<td class=\"n\">{}</td>", f.exec_count)
            } else {
                String::new()
            },
            if max_share > 0.0 {
                (f.share / max_share * 200.0).max(1.0)
            } else {
                1.0
            }
        );
    }
    h.push_str("</table>");
    if r.functions.len() > 50 {
        let _ = write!(
            h,
            "<p class=\"meta\">{} more functions in the JSON report.</p>",
            r.functions.len() - 50
        );
    }
    h.push_str("</section>\n");
}

fn quality(h: &mut String, r: &Report) {
    h.push_str("<section id=\"quality\"><h2>Profile quality (BOLT's figures)</h2>\n");
    match &r.quality {
        Some(q) => {
            let _ = writeln!(
                h,
                "<div class=\"figs\">\
                 <div><div class=\"fig\">{}</div><div class=\"lbl\">function CFG discontinuity</div></div>\
                 <div><div class=\"fig\">{}</div><div class=\"lbl\">call graph flow conservation gap</div></div>\
                 <div><div class=\"fig\">{}</div><div class=\"lbl\">CFG flow conservation gap (weighted)</div></div>\
                 <div><div class=\"fig\">{}</div><div class=\"lbl\">CFG flow conservation gap (worst)</div></div>\
                 <div><div class=\"fig\">{} / {}</div><div class=\"lbl\">exception handling (of block counts / of invoke counts)</div></div>\
                 </div><p class=\"meta\">Top 5% values over the {} hottest functions with a valid profile, \
                 as llvm-bolt 22 prints them:</p><pre>{}</pre>",
                pct(q.figures.cfg_discontinuity),
                pct(q.figures.call_graph_gap),
                pct(q.figures.cfg_gap_weighted),
                pct(q.figures.cfg_gap_worst),
                pct(q.figures.eh_of_blocks),
                pct(q.figures.eh_of_invokes),
                q.figures.functions,
                escape(&q.bolt_line)
            );
        }
        None => {
            let _ = write!(
                h,
                "<p class=\"note\">{}</p>",
                escape(r.quality_note.as_deref().unwrap_or("not available"))
            );
        }
    }
    h.push_str("</section>\n");
}

fn cfgs(h: &mut String, r: &Report) {
    let with_cfg: Vec<&FunctionHeat> = r.functions.iter().filter(|f| f.cfg.is_some()).collect();
    h.push_str("<section id=\"cfgs\"><h2>Block heat</h2>\n");
    if with_cfg.is_empty() {
        h.push_str(if r.bolted {
            "<p class=\"note\">Block heat is drawn on the CFGs of a binary not optimized by BOLT (the \
             profile of a BOLTed binary belongs to the input binary's blocks).</p>"
        } else {
            "<p class=\"note\">No hot function has a CFG.</p>"
        });
    }
    for f in with_cfg {
        let Some(cfg) = &f.cfg else { continue };
        let _ = writeln!(
            h,
            "<details open class=\"cfg\"><summary><h3 style=\"display:inline\">{}</h3> \
             <span class=\"meta\">count {} · {} blocks{}</span></summary>",
            escape(&f.name),
            f.count,
            cfg.blocks.len(),
            if cfg.valid {
                ""
            } else {
                " · profile not accepted by llvm-bolt (records do not fit the CFG): counts cleared"
            }
        );
        if cfg.blocks.len() > MAX_DRAWN_BLOCKS {
            block_table(h, cfg);
        } else {
            cfg_svg(h, cfg);
        }
        h.push_str("</details>\n");
    }
    h.push_str("</section>\n");
}

fn block_table(h: &mut String, cfg: &CfgHeat) {
    h.push_str("<table><tr><th>block</th><th>offset</th><th>count</th></tr>");
    for (i, b) in cfg.blocks.iter().enumerate() {
        let _ = write!(
            h,
            "<tr><td>BB{i}</td><td><code>{:#x}</code></td><td class=\"n\">{}</td></tr>",
            b.offset, b.count
        );
    }
    h.push_str("</table>\n");
}

/// The CFG as an SVG: blocks stacked in address order, coloured by count; fall-through edges
/// straight down, other edges as arcs on the right, each labelled with its count.
fn cfg_svg(h: &mut String, cfg: &CfgHeat) {
    const BW: f64 = 250.0;
    const BH: f64 = 26.0;
    const GAP: f64 = 22.0;
    const X0: f64 = 10.0;
    let n = cfg.blocks.len();
    let max = cfg.blocks.iter().map(|b| b.count).max().unwrap_or(0);
    let max_edge = cfg.edges.iter().map(|e| e.count).max().unwrap_or(0);
    let y = |i: usize| 10.0 + i as f64 * (BH + GAP);
    let arcs: Vec<_> = cfg
        .edges
        .iter()
        .filter(|e| e.to as usize != e.from as usize + 1)
        .collect();
    let width = X0 + BW + 60.0 + 26.0 * arcs.len().min(12) as f64 + 60.0;
    let height = y(n) + 10.0;
    let _ = writeln!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"8\" \
         markerHeight=\"8\" markerUnits=\"userSpaceOnUse\" orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\" fill=\"#555\"/>\
         </marker></defs>"
    );
    let stroke = |c: u64| {
        if max_edge == 0 || c == 0 {
            1.0
        } else {
            1.0 + 3.0 * (c as f64 / max_edge as f64)
        }
    };
    // Fall-through edges.
    for e in cfg
        .edges
        .iter()
        .filter(|e| e.to as usize == e.from as usize + 1)
    {
        let (a, b) = (e.from as usize, e.to as usize);
        let x = X0 + BW / 2.0;
        let _ = writeln!(
            h,
            "<line x1=\"{x}\" y1=\"{:.1}\" x2=\"{x}\" y2=\"{:.1}\" stroke=\"#555\" stroke-width=\"{:.1}\" \
             marker-end=\"url(#arrow)\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#333\">{}</text>",
            y(a) + BH,
            y(b) - 1.0,
            stroke(e.count),
            x + 6.0,
            y(a) + BH + GAP / 2.0 + 3.0,
            e.count
        );
    }
    // Other edges: arcs on the right side.
    for (k, e) in arcs.iter().enumerate() {
        let (a, b) = (e.from as usize, e.to as usize);
        let bulge = X0 + BW + 30.0 + 26.0 * (k % 12) as f64;
        let (y1, y2) = (y(a) + BH * 0.65, y(b) + BH * 0.35);
        let colour = if e.count > 0 { "#c0392b" } else { "#999" };
        let _ = writeln!(
            h,
            "<path d=\"M{:.1},{y1:.1} C{bulge:.1},{y1:.1} {bulge:.1},{y2:.1} {:.1},{y2:.1}\" fill=\"none\" \
             stroke=\"{colour}\" stroke-width=\"{:.1}\" marker-end=\"url(#arrow)\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"{colour}\">{}</text>",
            X0 + BW,
            X0 + BW + 1.0,
            stroke(e.count),
            bulge - 4.0,
            (y1 + y2) / 2.0,
            e.count
        );
    }
    for (i, b) in cfg.blocks.iter().enumerate() {
        let _ = writeln!(
            h,
            "<g class=\"block\"><rect x=\"{X0}\" y=\"{:.1}\" width=\"{BW}\" height=\"{BH}\" rx=\"4\" \
             fill=\"{}\" stroke=\"#444\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">BB{i} +{:#x}{}  \
             {}</text></g>",
            y(i),
            heat(b.count, max),
            X0 + 6.0,
            y(i) + BH / 2.0 + 4.0,
            b.offset,
            if b.tail_call { " tail call" } else { "" },
            b.count
        );
    }
    h.push_str("</svg>\n");
}

fn inline(h: &mut String, r: &Report) {
    let Some(inl) = &r.inline else {
        return;
    };
    h.push_str(
        "<section id=\"inline\"><h2>Inlined callees</h2>\n<p class=\"meta\">Counts at \
                addresses whose DWARF inline frames include the callee (time spent in inlined \
                code, which a plain profile reports to the caller).</p>\n",
    );
    if inl.is_empty() {
        h.push_str("<p class=\"note\">No counted address lies in inlined code.</p>");
    } else {
        h.push_str(
            "<table><tr><th>callee</th><th>count</th><th>share</th><th>inlined into</th></tr>\n",
        );
        for i in inl.iter().take(30) {
            let callers: Vec<String> = i
                .callers
                .iter()
                .map(|(c, n)| format!("{} ({n})", escape(c)))
                .collect();
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                escape(&i.callee),
                i.count,
                pct(i.share),
                callers.join(", ")
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</section>\n");
}

fn stale(h: &mut String, r: &Report) {
    let Some(s) = &r.stale else {
        return;
    };
    let _ = writeln!(
        h,
        "<section id=\"stale\"><h2>Stale profile for <code>{}</code></h2>\n\
         <div class=\"figs\"><div><div class=\"fig\">{}</div><div class=\"lbl\">of the profile is stale</div></div>\
         <div><div class=\"fig\">{}</div><div class=\"lbl\">count in changed functions</div></div>\
         <div><div class=\"fig\">{}</div><div class=\"lbl\">count in missing functions</div></div></div>",
        escape(&s.new_binary),
        pct(s.stale_share),
        s.changed,
        s.missing
    );
    if let Some(b) = s.blocks.filter(|b| b.stale.blocks > 0) {
        let part = |c: pcmap_perf2bolt::stale::BlockCount| {
            format!(
                "{} blocks ({} of the blocks, {} of their samples)",
                c.blocks,
                pct(c.blocks as f64 / b.stale.blocks as f64),
                pct(if b.stale.samples == 0 {
                    0.0
                } else {
                    c.samples as f64 / b.stale.samples as f64
                })
            )
        };
        let _ = writeln!(
            h,
            "<p>The changed functions' profiles list {} blocks with {} samples. Matched to the \
             new build's blocks as <code>llvm-bolt --infer-stale-profile</code> matches them: \
             exactly {}; by their callees {}; by their opcodes only {}.</p>",
            b.stale.blocks,
            b.stale.samples,
            part(b.exact),
            part(b.call),
            part(b.loose)
        );
    }
    if !s.functions.is_empty() {
        h.push_str(
            "<table><tr><th>function</th><th>count</th><th>status</th>\
             <th>blocks matched exactly / by calls / loosely, of profiled</th></tr>\n",
        );
        for f in s.functions.iter().take(30) {
            let blocks = f.blocks.map_or(String::new(), |b| {
                format!(
                    "{} / {} / {} of {}",
                    b.exact.blocks, b.call.blocks, b.loose.blocks, b.stale.blocks
                )
            });
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
                escape(&f.name),
                f.count,
                f.status,
                blocks
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BlockHeat, CfgHeat, EdgeHeat, FunctionHeat, ProfileKind, Report};

    fn report() -> Report {
        Report {
            binary: "a<b>&\"c\"".to_string(),
            profile: "p".to_string(),
            kind: ProfileKind::Branches,
            bolted: false,
            total: 10,
            functions: vec![FunctionHeat {
                name: "f<int>".to_string(),
                address: 0x1000,
                count: 10,
                share: 1.0,
                exec_count: 4,
                cfg: Some(CfgHeat {
                    valid: true,
                    blocks: vec![
                        BlockHeat {
                            offset: 0,
                            end: 4,
                            count: 4,
                            tail_call: false,
                        },
                        BlockHeat {
                            offset: 4,
                            end: 9,
                            count: 6,
                            tail_call: false,
                        },
                    ],
                    edges: vec![
                        EdgeHeat {
                            from: 0,
                            to: 1,
                            count: 4,
                        },
                        EdgeHeat {
                            from: 1,
                            to: 1,
                            count: 2,
                        },
                    ],
                }),
            }],
            quality: None,
            quality_note: Some("none".to_string()),
            inline: None,
            stale: None,
        }
    }

    #[test]
    fn names_are_escaped_and_extra_sections_embedded() {
        let page = render(
            &report(),
            &[Section {
                title: "Heat map <1>".to_string(),
                svg: "<svg xmlns=\"http://www.w3.org/2000/svg\"><rect width=\"1\"/></svg>"
                    .to_string(),
            }],
        );
        assert!(page.contains("<code>f&lt;int&gt;</code>"));
        assert!(page.contains("a&lt;b&gt;&amp;&quot;c&quot;"));
        assert!(!page.contains("f<int>"));
        assert!(page.contains("<h2>Heat map &lt;1&gt;</h2>"));
        assert!(
            page.contains("<svg xmlns=\"http://www.w3.org/2000/svg\"><rect width=\"1\"/></svg>")
        );
        // The extra section comes after the built-in ones, before the error log.
        let extra = page.find("Heat map").unwrap();
        assert!(page.find("id=\"cfgs\"").unwrap() < extra);
        assert!(extra < page.find("script-errors\"></pre>").unwrap());
        // Self-contained: no external resource.
        for bad in ["src=\"http", "href=\"http", "@import", "url(http"] {
            assert!(!page.contains(bad), "{bad}");
        }
    }

    #[test]
    fn cfg_has_one_box_per_block_and_a_path_per_edge_that_is_not_a_fall_through() {
        let page = render(&report(), &[]);
        assert_eq!(page.matches("<g class=\"block\">").count(), 2);
        assert_eq!(page.matches("<line ").count(), 1);
        // The arrow head's path, and the self-loop's arc.
        assert_eq!(page.matches("<path d=\"M").count(), 2);
        assert_eq!(page.matches("marker-end=\"url(#arrow)\"").count(), 2);
    }
}
