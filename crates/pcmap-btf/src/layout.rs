//! The kind-layout section (merged upstream March 2026): one 4-byte `btf_layout` per kind, so a
//! reader can skip records of kinds it does not know.

use crate::error::{Cursor, Error, Result};
use crate::kind::Kind;

/// Size description of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KindLayout {
    /// Fixed bytes after the 12-byte `btf_type`.
    pub info_sz: u8,
    /// Bytes per `vlen` element.
    pub elem_sz: u8,
    /// Flags (none defined that we use).
    pub flags: u16,
}

/// A parsed layout section: index = kind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    /// One entry per kind.
    pub kinds: Vec<KindLayout>,
}

impl Layout {
    /// Parse `data` (the layout section's bytes) found at `base` in the blob.
    pub fn parse(data: &[u8], base: usize, big_endian: bool) -> Result<Layout> {
        if !data.len().is_multiple_of(4) {
            return Err(Error::invalid(
                "layout section",
                base,
                format!("length {} is not a multiple of 4", data.len()),
            ));
        }
        let mut c = Cursor::new(data, base, big_endian);
        let mut kinds = Vec::with_capacity(data.len() / 4);
        while c.remaining() > 0 {
            let at = c.offset();
            let info_sz = c.u8("btf_layout.info_sz")?;
            let elem_sz = c.u8("btf_layout.elem_sz")?;
            let flags = c.u16("btf_layout.flags")?;
            if !info_sz.is_multiple_of(4) || !elem_sz.is_multiple_of(4) {
                return Err(Error::invalid(
                    "btf_layout",
                    at,
                    format!("sizes {info_sz}/{elem_sz} are not multiples of 4"),
                ));
            }
            kinds.push(KindLayout {
                info_sz,
                elem_sz,
                flags,
            });
        }
        Ok(Layout { kinds })
    }

    /// The layout of the 2026 revision: the standard kinds plus LOC_PARAM (4/4), LOC_PROTO (0/4)
    /// and LOCSEC (0/12).
    pub fn revision_2026() -> Layout {
        let mut kinds: Vec<KindLayout> = (0..=19u8)
            .map(|k| {
                let (i, e) = Kind(k).standard_layout().expect("standard kind");
                KindLayout {
                    info_sz: i as u8,
                    elem_sz: e as u8,
                    flags: 0,
                }
            })
            .collect();
        kinds.push(KindLayout {
            info_sz: 4,
            elem_sz: 4,
            flags: 0,
        });
        kinds.push(KindLayout {
            info_sz: 0,
            elem_sz: 4,
            flags: 0,
        });
        kinds.push(KindLayout {
            info_sz: 0,
            elem_sz: 12,
            flags: 0,
        });
        Layout { kinds }
    }

    /// Layout of `kind`, if described.
    pub fn get(&self, kind: Kind) -> Option<KindLayout> {
        self.kinds.get(kind.0 as usize).copied()
    }

    /// Serialise (little-endian).
    pub fn write(&self, out: &mut Vec<u8>) {
        for k in &self.kinds {
            out.push(k.info_sz);
            out.push(k.elem_sz);
            out.extend_from_slice(&k.flags.to_le_bytes());
        }
    }
}
