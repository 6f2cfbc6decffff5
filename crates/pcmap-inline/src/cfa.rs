//! Canonical frame address (CFA) rules from `.eh_frame` / `.debug_frame`.
//!
//! gimli can find the FDE for an address only by a linear scan (or through `.eh_frame_hdr`, which
//! `.debug_frame` lacks), so we index the FDEs of both sections once, sorted by start address, and
//! binary-search that index for every frame-base-relative parameter.

use gimli::{BaseAddresses, CfaRule, DebugFrame, EhFrame, UnwindContext, UnwindSection};

use crate::location::RegOffset;
use crate::sections::{DebugData, Slice};

#[derive(Debug, Clone, Copy)]
struct FdeEntry {
    start: u64,
    end: u64,
    offset: usize,
    eh: bool,
}

/// Sorted index of FDEs; `Sync`, shared by all worker threads.
pub(crate) struct CfaIndex<'a> {
    eh_frame: Option<EhFrame<Slice<'a>>>,
    debug_frame: Option<DebugFrame<Slice<'a>>>,
    bases: BaseAddresses,
    fdes: Vec<FdeEntry>,
}

impl<'a> CfaIndex<'a> {
    pub(crate) fn new(data: &'a DebugData<'_>, address_size: u8) -> Self {
        let endian = data.endian();
        let mut bases = BaseAddresses::default().set_text(data.text_addr);
        let eh_frame = data.eh_frame.as_ref().map(|(addr, bytes)| {
            bases = bases.clone().set_eh_frame(*addr);
            let mut s = EhFrame::new(bytes, endian);
            s.set_address_size(address_size);
            s
        });
        let debug_frame = data.debug_frame.as_ref().map(|bytes| {
            let mut s = DebugFrame::new(bytes, endian);
            s.set_address_size(address_size);
            s
        });
        let mut fdes = Vec::new();
        if let Some(s) = &eh_frame {
            collect(s, &bases, true, &mut fdes);
        }
        if let Some(s) = &debug_frame {
            collect(s, &bases, false, &mut fdes);
        }
        fdes.sort_by_key(|f| (f.start, f.end));
        CfaIndex {
            eh_frame,
            debug_frame,
            bases,
            fdes,
        }
    }

    /// The CFA rule at `address` as register + offset, or `None` if there is no FDE or the rule is
    /// an expression.
    pub(crate) fn cfa_at(&self, ctx: &mut UnwindContext<usize>, address: u64) -> Option<RegOffset> {
        let idx = self.fdes.partition_point(|f| f.start <= address);
        // Look back over a few FDEs in case of overlapping entries (e.g. both sections present).
        for f in self.fdes[..idx].iter().rev().take(4) {
            if address >= f.end {
                continue;
            }
            let rule = if f.eh {
                let s = self.eh_frame.as_ref()?;
                let fde = s
                    .fde_from_offset(
                        &self.bases,
                        gimli::EhFrameOffset(f.offset),
                        EhFrame::cie_from_offset,
                    )
                    .ok()?;
                fde.unwind_info_for_address(s, &self.bases, ctx, address)
                    .ok()?
                    .cfa()
                    .clone()
            } else {
                let s = self.debug_frame.as_ref()?;
                let fde = s
                    .fde_from_offset(
                        &self.bases,
                        gimli::DebugFrameOffset(f.offset),
                        DebugFrame::cie_from_offset,
                    )
                    .ok()?;
                fde.unwind_info_for_address(s, &self.bases, ctx, address)
                    .ok()?
                    .cfa()
                    .clone()
            };
            return match rule {
                CfaRule::RegisterAndOffset { register, offset } => Some(RegOffset {
                    reg: register.0,
                    offset,
                }),
                CfaRule::Expression(_) => None,
            };
        }
        None
    }
}

fn collect<'a, S>(section: &S, bases: &BaseAddresses, eh: bool, out: &mut Vec<FdeEntry>)
where
    S: UnwindSection<Slice<'a>>,
{
    let mut entries = section.entries(bases);
    // A malformed entry ends the scan: frame-base resolution is best effort.
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry {
            let Ok(fde) = partial.parse(S::cie_from_offset) else {
                continue;
            };
            let start = fde.initial_address();
            let end = start.saturating_add(fde.len());
            if start < end {
                out.push(FdeEntry {
                    start,
                    end,
                    offset: fde.offset(),
                    eh,
                });
            }
        }
    }
}
