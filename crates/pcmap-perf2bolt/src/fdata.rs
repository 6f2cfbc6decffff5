//! fdata output in perf2bolt's order: functions by byte-wise name; per function the branch
//! records sorted by (source offset, destination), then entries from unknown code by offset.
//! Basic samples follow a `no_lbr <events>` header (event names in LLVM `StringSet` order, as
//! perf2bolt prints them); the sample records themselves are in hash order in perf2bolt and sorted
//! by name and offset here.

use std::io::{self, Write};

use crate::aggregate::{BranchProfile, Loc, SampleProfile};
use pcmap_binary::bolt::BoltFunctions;

/// Escape a name the way BOLT does in fdata (space and backslash get a backslash).
pub fn escape_name(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.contains([' ', '\\']) {
        return name.into();
    }
    let mut s = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c == ' ' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s.into()
}

fn write_loc(
    w: &mut (impl Write + ?Sized),
    image: &BoltFunctions<'_, '_>,
    loc: Loc,
    bolted: bool,
) -> io::Result<()> {
    match loc {
        Loc::Unknown => w.write_all(b"0 [unknown] 0 "),
        Loc::Func(f, off) => write!(
            w,
            "1 {} {:x} ",
            escape_name(image.functions()[f as usize].profile_name(bolted)),
            off
        ),
    }
}

/// Write an LBR-mode fdata file (records already in perf2bolt's order). Returns the number of
/// records written.
pub fn write_branches(
    w: &mut (impl Write + ?Sized),
    image: &BoltFunctions<'_, '_>,
    profile: &BranchProfile,
    bolted: bool,
) -> io::Result<u64> {
    if bolted {
        w.write_all(b"boltedcollection\n")?;
    }
    for (key, c) in &profile.records {
        if key.external_entry {
            write_loc(w, image, Loc::Unknown, bolted)?;
        } else {
            write_loc(w, image, Loc::Func(key.func, key.from), bolted)?;
        }
        write_loc(w, image, key.to, bolted)?;
        writeln!(w, "{} {}", c.mispreds, c.count)?;
    }
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
    if bolted {
        w.write_all(b"boltedcollection\n")?;
    }
    w.write_all(b"no_lbr")?;
    for e in crate::stringmap::string_set_order(events) {
        write!(w, " {e}")?;
    }
    w.write_all(b"\n")?;
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
        writeln!(
            w,
            "1 {} {:x} {}",
            escape_name(image.functions()[*f as usize].profile_name(bolted)),
            off,
            count
        )?;
    }
    Ok(recs.len() as u64)
}
