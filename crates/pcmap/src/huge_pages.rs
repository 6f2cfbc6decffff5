//! pcmap's global allocator: the system's, asking the kernel to back large blocks with
//! transparent huge pages.
//!
//! On large inputs much of pcmap's time went to first touches of fresh memory: each 4 KiB page
//! of a new block is a fault, and the kernel zeroes and maps it (a fifth to a quarter of the CPU
//! time of `perf2bolt` on 1.2 million records, in system time). A block of 4 MiB or more (trace
//! lists, tables of every function or symbol) is marked `MADV_HUGEPAGE` before it is touched, so
//! that its 2 MiB-aligned part faults in 2 MiB at a time. Where the system's transparent huge
//! pages are off, or its `defrag` setting finds no huge page free, the advice changes nothing:
//! the block is the system allocator's either way. Smaller blocks are left alone (their pages
//! are reused from block to block, and a huge page of them would mostly hold other blocks).
//!
//! With the system's `defrag` setting at `madvise` (the usual default), a fault in an advised
//! block may wait for the kernel to compact memory when no huge page is free. On a host short of
//! memory that can cost more than it saves: `PCMAP_HUGE_PAGES=0` turns the advice off.
//!
//! Written by hand: a global allocator that only adds a hint to the system's is shorter than a
//! dependency, and the allocators on crates.io that use huge pages replace the system's (one was
//! measured, mimalloc, and gained nothing here).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether large blocks are advised ([`configure_from_env`]).
static ADVISE: AtomicBool = AtomicBool::new(true);

/// Read `PCMAP_HUGE_PAGES` (`0` turns the advice off); call once, first thing in `main`.
pub fn configure_from_env() {
    if std::env::var_os("PCMAP_HUGE_PAGES").is_some_and(|v| v == "0") {
        ADVISE.store(false, Ordering::Relaxed);
    }
}

/// The size of a transparent huge page on x86-64 (and the granule of the advice).
const HUGE_PAGE: usize = 2 << 20;

/// Blocks of at least this size are advised.
const ADVISED: usize = 2 * HUGE_PAGE;

pub struct HugePageHint;

impl HugePageHint {
    /// `block` (of `len` bytes, null when the system allocator failed), its huge pages advised
    /// when it is large enough ([`ADVISED`]).
    fn advised(block: *mut u8, len: usize) -> *mut u8 {
        if len >= ADVISED && !block.is_null() && ADVISE.load(Ordering::Relaxed) {
            Self::advise(block, len);
        }
        block
    }

    /// Mark the huge pages wholly inside `[block, block + len)` for transparent huge pages.
    /// Only a hint: failures (an old kernel, a system without them) are ignored.
    fn advise(block: *mut u8, len: usize) {
        let start = (block as usize).next_multiple_of(HUGE_PAGE);
        let end = (block as usize).saturating_add(len) / HUGE_PAGE * HUGE_PAGE;
        if start < end {
            // SAFETY: the range lies inside a block the system allocator just handed out (so it
            // is mapped, and this process's to use), and `MADV_HUGEPAGE` changes no contents:
            // it only sets how later faults in the range are served.
            let _ = unsafe {
                rustix::mm::madvise(
                    start as *mut std::ffi::c_void,
                    end - start,
                    rustix::mm::Advice::LinuxHugepage,
                )
            };
        }
    }
}

// SAFETY: every method hands the request to `System` unchanged and returns its answer; the
// advice only changes how the kernel backs memory `System` allocated, never its contents.
unsafe impl GlobalAlloc for HugePageHint {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `layout` is passed on as it is.
        Self::advised(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        Self::advised(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: `block` came from this allocator, hence from `System`, with `layout`.
        unsafe { System.dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and the caller's contract for `new_size` is passed on.
        Self::advised(unsafe { System.realloc(block, layout, new_size) }, new_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `VmFlags` of the mapping of this process that contains `address`.
    fn vm_flags_at(address: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((lo, hi)) = range.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&address);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags.trim().to_string());
            }
        }
        None
    }

    /// A large block is advised (`hg` in its mapping's flags, where the kernel has transparent
    /// huge pages) and keeps its contents through a reallocation.
    #[test]
    fn large_blocks_are_advised_and_kept() {
        let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists();
        let a = HugePageHint;
        let layout = Layout::from_size_align(3 * ADVISED, 8).unwrap();
        // SAFETY: a non-zero layout; the block is written within its size, reallocated with the
        // same layout, and freed once with the layout it then has.
        unsafe {
            let block = a.alloc(layout);
            assert!(!block.is_null());
            for i in (0..layout.size()).step_by(4096) {
                *block.add(i) = (i / 4096) as u8;
            }
            if thp {
                let middle = block as usize + layout.size() / 2;
                let flags = vm_flags_at(middle).expect("the block's mapping in /proc/self/smaps");
                assert!(flags.split(' ').any(|f| f == "hg"), "VmFlags: {flags}");
            } else {
                eprintln!("note: no transparent huge pages on this kernel; advice not checked");
            }
            let grown = a.realloc(block, layout, 2 * layout.size());
            assert!(!grown.is_null());
            for i in (0..layout.size()).step_by(4096) {
                assert_eq!(*grown.add(i), (i / 4096) as u8);
            }
            a.dealloc(
                grown,
                Layout::from_size_align(2 * layout.size(), 8).unwrap(),
            );
        }
    }
}
