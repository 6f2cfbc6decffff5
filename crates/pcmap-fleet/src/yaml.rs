//! YAML output of a merge: perf2bolt's aggregation of the binary rebuilt from merged fdata records
//! (function name + offset), for `pcmap-perf2bolt`'s YAML writer.

use std::collections::HashMap;

use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::aggregate::{BranchProfile, Loc, RecordKey};
use pcmap_perf2bolt::preagg::TraceCounts;
use pcmap_profile::fdata::{self, Line};

use crate::{Error, Result};

/// The branch aggregation of `image` that has the records of `merged` (an LBR-mode profile in
/// perf2bolt's record order, as [`crate::engine::merge`] returns it). Names are matched with the
/// names perf2bolt prints (`bolted`: BAT mode). Sample and memory lines are ignored.
pub fn branch_profile(
    image: &BoltFunctions<'_, '_>,
    merged: &fdata::Profile<'_>,
    bolted: bool,
) -> Result<BranchProfile> {
    let mut by_name: HashMap<&str, u32> = HashMap::new();
    for (i, f) in image.functions().iter().enumerate() {
        by_name.entry(f.profile_name(bolted)).or_insert(i as u32);
    }
    let func = |l: &fdata::Location<'_>| -> Result<u32> {
        let name = l.unescaped_name();
        by_name
            .get(name.as_ref())
            .copied()
            .ok_or_else(|| Error::UnknownFunction(name.into_owned()))
    };
    let mut out = BranchProfile::default();
    for line in &merged.lines {
        let Line::Branch(b) = line else { continue };
        let to = if b.to.kind.is_symbol() {
            Loc::Func(func(&b.to)?, b.to.offset)
        } else {
            Loc::Unknown
        };
        let key = if b.from.kind.is_symbol() {
            RecordKey {
                func: func(&b.from)?,
                external_entry: false,
                from: b.from.offset,
                to,
            }
        } else {
            let Loc::Func(f, _) = to else { continue };
            RecordKey {
                func: f,
                external_entry: true,
                from: 0,
                to,
            }
        };
        out.records.push((
            key,
            TraceCounts {
                count: b.count,
                mispreds: b.mispreds,
            },
        ));
    }
    Ok(out)
}
