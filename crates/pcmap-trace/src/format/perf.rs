//! `perf script` output from Intel PT decoding (`--itrace=i0ns` instruction samples or
//! `--itrace=b` branch samples), in the field layouts perf and magic-trace use:
//!
//! ```text
//! 13165  ffffffff815f3e1d do_mmap+0x5ad ([kernel.kallsyms])                         (-F tid,ip,sym,symoff,dso)
//! 25375/25375 4509191.343298468:   call  7f6fce0b71f4 __clock_gettime+0x24 =>  7ffd193838e0 __vdso_clock_gettime+0x0
//!  instruction trace error type 1 time 47170.086912826 cpu -1 pid 293415 tid 293415 ip 0x7ffff7327730 code 7: Overflow packet
//! ```
//!
//! Threads (`pid/tid` or `tid`) and times (`SECONDS.NANOS:`) are kept. A branch sample gives one
//! unit per taken-branch target: the instructions between that target and the next branch are
//! not listed by perf, and counting them needs a decoder, so each such unit counts as one
//! instruction. `tr end` becomes a tracing-disabled gap, trace errors become gaps.

use super::lines::Lines;
use super::{Sink, parse_dec, parse_hex};
use crate::{GapReason, Record, TraceError};

/// The leading fields of a sample line.
struct SampleHead<'a> {
    tid: Option<u64>,
    ns: Option<u64>,
    rest: Vec<&'a str>,
}

fn parse_time(tok: &str) -> Option<u64> {
    let t = tok.strip_suffix(':')?;
    let (s, f) = t.split_once('.')?;
    let secs = parse_dec(s)?;
    if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac: u64 = f.parse().ok()?;
    let frac = frac * 10u64.pow(9 - f.len() as u32);
    secs.checked_mul(1_000_000_000)?.checked_add(frac)
}

fn parse_tid(tok: &str) -> Option<u64> {
    match tok.split_once('/') {
        Some((p, t)) => {
            parse_dec(p)?;
            parse_dec(t)
        }
        None => parse_dec(tok),
    }
}

fn split_head(part: &str) -> SampleHead<'_> {
    let toks: Vec<&str> = part.split_ascii_whitespace().collect();
    // The last token ending in ':' (time, event name) ends the header.
    let time_at = toks.iter().position(|t| parse_time(t).is_some());
    let last_colon = toks.iter().rposition(|t| t.ends_with(':') && t.len() > 1);
    let mut tid = None;
    let ns = time_at.and_then(|i| parse_time(toks[i]));
    let rest_from = match (time_at, last_colon) {
        (_, Some(c)) => {
            let before = time_at.unwrap_or(c);
            tid = toks[..before].iter().rev().find_map(|t| parse_tid(t));
            c + 1
        }
        (Some(t), None) => {
            tid = toks[..t].iter().rev().find_map(|t| parse_tid(t));
            t + 1
        }
        (None, None) => {
            if toks.len() >= 2
                && (toks[0].contains('/') || parse_dec(toks[0]).is_some())
                && parse_hex(toks[1]).is_some()
            {
                tid = parse_tid(toks[0]);
                1
            } else {
                0
            }
        }
    };
    SampleHead {
        tid,
        ns,
        rest: toks
            .get(rest_from..)
            .map(|r| r.to_vec())
            .unwrap_or_default(),
    }
}

/// Whether a trimmed line looks like a perf instruction sample.
pub(crate) fn is_sample_line(t: &str) -> bool {
    let head = split_head(t);
    head.rest.first().is_some_and(|w| parse_hex(w).is_some())
}

fn trace_error(t: &str) -> Option<Record> {
    let i = t.find("instruction trace error")?;
    let msg = &t[i..];
    let detail = msg
        .split_once("code ")
        .and_then(|(_, r)| r.split_once(": "))
        .map(|(_, m)| m.trim());
    let reason = if msg.contains("Overflow") || msg.contains("Lost") {
        GapReason::LostData
    } else {
        GapReason::DecodeError
    };
    Some(Record::Gap {
        reason,
        message: Some(detail.unwrap_or(msg).to_string()),
    })
}

struct Emitter {
    tid: Option<u64>,
    ns: Option<u64>,
}

impl Emitter {
    fn head(&mut self, head: &SampleHead<'_>, sink: &mut Sink<'_>) -> Result<(), String> {
        if let Some(t) = head.tid
            && self.tid != Some(t)
        {
            self.tid = Some(t);
            sink(Record::Thread { tid: t })?;
        }
        if let Some(ns) = head.ns
            && self.ns != Some(ns)
        {
            self.ns = Some(ns);
            sink(Record::Timestamp { ns })?;
        }
        Ok(())
    }
}

/// Read `perf script` instruction samples into `sink`.
pub fn read_instructions(data: &[u8], file: &str, sink: &mut Sink<'_>) -> Result<(), TraceError> {
    let mut em = Emitter {
        tid: None,
        ns: None,
    };
    for line in Lines::new(data, file) {
        let (lineno, line) = line?;
        let t = line.trim();
        let loc = |m: String| TraceError::text(file, lineno, 1, m);
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(gap) = trace_error(t) {
            sink(gap).map_err(loc)?;
            continue;
        }
        let head = split_head(t);
        let Some(addr) = head.rest.first().and_then(|w| parse_hex(w)) else {
            return Err(loc(format!(
                "expected a perf sample with a hexadecimal ip column, found `{t}`"
            )));
        };
        em.head(&head, sink).map_err(loc)?;
        sink(Record::Insn { addr }).map_err(loc)?;
    }
    Ok(())
}

/// Read `perf script` branch samples into `sink`.
pub fn read_branches(data: &[u8], file: &str, sink: &mut Sink<'_>) -> Result<(), TraceError> {
    let mut em = Emitter {
        tid: None,
        ns: None,
    };
    for line in Lines::new(data, file) {
        let (lineno, line) = line?;
        let t = line.trim();
        let loc = |m: String| TraceError::text(file, lineno, 1, m);
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(gap) = trace_error(t) {
            sink(gap).map_err(loc)?;
            continue;
        }
        let Some((left, right)) = t.split_once("=>") else {
            return Err(loc(format!(
                "expected a branch sample `SRC ... => DST ...`, found `{t}`"
            )));
        };
        let head = split_head(left);
        let flags: Vec<&str> = head
            .rest
            .iter()
            .copied()
            .take_while(|w| parse_hex(w).is_none())
            .collect();
        let Some(dst) = right.split_ascii_whitespace().next().and_then(parse_hex) else {
            return Err(loc(
                "expected a hexadecimal branch target after `=>`".to_string()
            ));
        };
        em.head(&head, sink).map_err(loc)?;
        let tr_end = flags.windows(2).any(|w| w == ["tr", "end"]);
        if tr_end || dst == 0 {
            sink(Record::Gap {
                reason: GapReason::TracingDisabled,
                message: None,
            })
            .map_err(loc)?;
        } else {
            sink(Record::Insn { addr: dst }).map_err(loc)?;
        }
    }
    Ok(())
}
