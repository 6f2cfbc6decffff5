//! fdata output in perf2bolt's order: functions by byte-wise name; per function the branch
//! records sorted by (source offset, destination), then entries from unknown code by offset.
//! Basic samples follow a `no_lbr <events>` header (event names in LLVM `StringSet` order, as
//! perf2bolt prints them); the sample records themselves are in hash order in perf2bolt and sorted
//! by name and offset here.
//!
//! Lines are formatted by `pcmap-profile`'s fdata writer, in parallel slices of the record list
//! (each function's name looked up once per run of its records), and written in order.

use std::io::{self, Write};

use pcmap_profile::fdata::{BranchRecord, Line, Location, SampleRecord, write_line};

use crate::aggregate::{BranchProfile, Loc, RecordKey, SampleProfile};
use crate::preagg::TraceCounts;
use pcmap_binary::bolt::BoltFunctions;

/// Records formatted per parallel slice: large enough that a slice's buffer amortises its
/// allocation, small enough that both threads get work on a profile of a few thousand lines.
const SLICE: usize = 4096;

/// Write an LBR-mode fdata file (records already in perf2bolt's order). Returns the number of
/// records written.
pub fn write_branches(
    w: &mut (impl Write + ?Sized),
    image: &BoltFunctions<'_, '_>,
    profile: &BranchProfile,
    bolted: bool,
) -> io::Result<u64> {
    pcmap_profile::fdata::write_header::<_, &str>(w, bolted, None)?;
    let name = |f: u32| image.functions()[f as usize].profile_name(bolted);
    let format = |buf: &mut Vec<u8>, slice: &[(RecordKey, TraceCounts)]| {
        // Records come grouped by function: escape each name once per run.
        let mut from_name: Option<(u32, Location<'_>)> = None;
        for (key, c) in slice {
            let from = if key.external_entry {
                Location::unknown()
            } else {
                match &from_name {
                    Some((f, l)) if *f == key.func => Location {
                        offset: key.from,
                        ..l.clone()
                    },
                    _ => {
                        let l = Location::symbol(name(key.func), key.from);
                        from_name = Some((key.func, l.clone()));
                        l
                    }
                }
            };
            let to = match key.to {
                Loc::Unknown => Location::unknown(),
                Loc::Func(f, off) => match &from_name {
                    Some((ff, l)) if *ff == f => Location {
                        offset: off,
                        ..l.clone()
                    },
                    _ => Location::symbol(name(f), off),
                },
            };
            let line = Line::Branch(BranchRecord {
                from,
                to,
                mispreds: c.mispreds,
                count: c.count,
            });
            // Writing into a Vec cannot fail.
            let _ = write_line(buf, &line);
        }
    };
    pcmap_profile::write_in_parallel(w, &profile.records, SLICE, format)?;
    Ok(profile.records.len() as u64)
}

/// Write a basic-sample (`no_lbr`) fdata file. Returns the number of records written.
pub fn write_samples(
    w: &mut (impl Write + ?Sized),
    image: &BoltFunctions<'_, '_>,
    profile: &SampleProfile,
    events: &[String],
    bolted: bool,
) -> io::Result<u64> {
    let events = crate::stringmap::string_set_order(events);
    pcmap_profile::fdata::write_header(w, bolted, Some(&events[..]))?;
    let mut recs: Vec<_> = profile.samples.iter().collect();
    recs.sort_unstable_by(|a, b| {
        let na = image.functions()[a.0.0 as usize]
            .profile_name(bolted)
            .as_bytes();
        let nb = image.functions()[b.0.0 as usize]
            .profile_name(bolted)
            .as_bytes();
        (na, a.0.1).cmp(&(nb, b.0.1))
    });
    for ((f, off), count) in &recs {
        let line = Line::Sample(SampleRecord {
            at: Location::symbol(image.functions()[*f as usize].profile_name(bolted), *off),
            count: **count,
        });
        write_line(w, &line)?;
    }
    Ok(recs.len() as u64)
}
