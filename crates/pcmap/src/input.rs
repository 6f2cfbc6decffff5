//! The profiled binary as the branch-event pipeline sees it (`pcmap_profile::events::BinaryDesc`),
//! filled from `pcmap_binary::Binary` for every command that reads perf.data.

use std::path::Path;

use pcmap_binary::{Binary, FileKind};
use pcmap_profile::events::{BinaryDesc, Segment};

/// `PF_X`.
const PF_X: u32 = 1;

/// Describe `bin` (opened from `path`) for the perf.data producer: build-id, file name, `PT_LOAD`
/// segments, and whether it runs at its link-time addresses.
pub fn binary_desc<'a>(bin: &Binary<'a>, path: &'a Path) -> BinaryDesc<'a> {
    BinaryDesc {
        build_id: bin.build_id(),
        file_name: path.as_os_str().as_encoded_bytes(),
        segments: bin
            .segments()
            .iter()
            .filter(|s| s.p_type == pcmap_binary::PT_LOAD)
            .map(|s| Segment {
                vaddr: s.vaddr,
                offset: s.offset,
                file_size: s.file_size,
                mem_size: s.mem_size,
                align: s.align,
                executable: s.flags & PF_X != 0,
            })
            .collect(),
        fixed_address: bin.kind() == FileKind::Executable,
    }
}
