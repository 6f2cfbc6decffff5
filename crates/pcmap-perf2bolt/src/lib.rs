//! perf2bolt 22's semantics in Rust, for `pcmap perf2bolt`:
//!
//! * the input binary as BOLT's aggregator sees it comes from `pcmap-binary`
//!   ([`pcmap_binary::bolt::BoltFunctions`], built from a [`pcmap_binary::Binary`] the caller
//!   parsed once): functions with BOLT's names, sizes and "max sizes", PLT pseudo functions;
//! * [`cfg`](mod@cfg): CFGs built like BOLT's from the disassembly (leaders, successor order, jump tables,
//!   tail calls, which functions are simple);
//! * [`preagg`]: the aggregator's input, merged trace records built by a sink of
//!   `pcmap-profile`'s branch-event pipeline from pre-aggregated text or perf.data (branch stacks
//!   and basic samples; fixed-address, PIE and shared-object binaries);
//! * [`aggregate`]: taken branches, fall-through validation with call continuation, external
//!   origins, returns, statistics, in parallel over address-sorted traces;
//! * [`fdata`] and [`yaml`]: perf2bolt's output files; [`stringmap`]: LLVM `StringSet` order;
//! * [`quality`]: llvm-bolt's reading of a branch profile onto the CFGs (block and edge
//!   counts) and the profile-quality figures it prints;
//! * [`reread`]: fdata and YAML profiles read back onto the binary, as records and as the branch
//!   events that give them (for block-level consumers such as Propeller);
//! * [`block_hash`]: BOLT's function hash and block hashes (`BlendedBlockHash`) from LLVM opcode names, AT&T
//!   mnemonics, MCInst operands and LLVM register numbers ([`block_hash_table`], generated);
//! * [`scan_index`]: what the decoding pass over every function found, kept between runs;
//! * [`stale`]: llvm-bolt's matching of a stale profile's blocks to a new build.
//!
//! BOLT-optimized inputs (with `.note.bolt_bat`) are aggregated in perf2bolt's BAT mode
//! ([`aggregate::Aggregator::with_bat`]) for fdata and BAT YAML output.
//!
//! C++ exceptions: landing pads from each function's LSDA (`pcmap_binary::bolt::BoltFunctions::lsda`)
//! start blocks, invokes list their landing pads (throw edges), and the call-continuation rule
//! skips landing pads, as in BOLT 22 ([`cfg`](mod@cfg)).

pub mod aggregate;
pub mod bat_origin;
pub mod block_hash;
#[rustfmt::skip]
pub mod block_hash_table;
pub mod cfg;
pub mod fdata;
pub mod preagg;
pub mod quality;
pub mod reread;
pub mod scan_index;
pub mod stale;
pub mod stringmap;
mod trace_table;
pub mod yaml;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The binary cannot be used (malformed, or a machine BOLT's model does not decode).
    #[error("reading the binary: {0}")]
    Binary(#[from] pcmap_binary::Error),
    /// The perf.data file cannot be used.
    #[error("perf.data: {0}")]
    PerfData(#[from] pcmap_profile::events::PerfError),
    /// A pre-aggregated profile line is malformed.
    #[error("pre-aggregated profile line {}, column {}", .0.pos.line, .0.pos.column)]
    Preagg(#[from] pcmap_profile::preagg::Error),
    /// A scan index ([`scan_index::ScanIndex`]) is malformed.
    #[error("scan index, at byte offset {offset:#x}: expected {expected}")]
    ScanIndex {
        /// Where the field that is wrong starts.
        offset: usize,
        /// What was expected there.
        expected: &'static str,
    },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The lists one after another, in one list of the exact size, copied in parallel: copying the
/// million traces of a pre-aggregated profile on one thread
/// kept the other core idle for tens of milliseconds (the first write to each page of the new
/// list is most of the cost). Written by hand: rayon collects only indexed iterators in place,
/// and a flattened list of lists is not one.
pub(crate) fn concat<T: Copy + Send + Sync>(lists: &[Vec<T>]) -> Vec<T> {
    use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};
    let total = lists.iter().map(Vec::len).sum();
    let mut all = Vec::with_capacity(total);
    let parts = split_lengths(
        &mut all.spare_capacity_mut()[..total],
        lists.iter().map(Vec::len),
    );
    parts
        .into_par_iter()
        .zip(lists.into_par_iter())
        .for_each(|(part, list)| _ = part.write_copy_of_slice(list));
    // SAFETY: the parts are the first `total` slots of `all`, one per list, each as long as its
    // list (their lengths sum to `total`), and each was written from its list above.
    unsafe { all.set_len(total) };
    all
}

/// Merge each run of items with one key in `items` into its first item (counts summed,
/// wrapping), moving the kept items to the front; how many were kept.
pub(crate) fn merge_equal_neighbours<K: PartialEq + Copy>(
    items: &mut [(K, preagg::TraceCounts)],
) -> usize {
    let mut kept = 0;
    for i in 0..items.len() {
        let (k, c) = items[i];
        if kept > 0 && items[kept - 1].0 == k {
            items[kept - 1].1.add(c.count, c.mispreds);
        } else {
            items[kept] = (k, c);
            kept += 1;
        }
    }
    kept
}

/// `items` cut into consecutive parts of the given `lengths` (whose sum must not exceed
/// `items.len()`; the rest is left out), for parallel work that fills one list part by part.
pub(crate) fn split_lengths<T>(
    mut items: &mut [T],
    lengths: impl ExactSizeIterator<Item = usize>,
) -> Vec<&mut [T]> {
    let mut parts = Vec::with_capacity(lengths.len());
    for len in lengths {
        let (part, tail) = items.split_at_mut(len);
        parts.push(part);
        items = tail;
    }
    parts
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// The parallel concatenation is the lists one after another (empty lists included).
        #[test]
        fn concat_is_the_lists_in_order(
            lists in proptest::collection::vec(proptest::collection::vec(0u64..1000, 0..40), 0..12)
        ) {
            let want: Vec<u64> = lists.iter().flatten().copied().collect();
            prop_assert_eq!(super::concat(&lists), want);
        }
    }
}
