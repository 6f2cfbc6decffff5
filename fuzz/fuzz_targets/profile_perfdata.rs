#![no_main]
//! perf.data: header, attributes, feature sections and the record walker over arbitrary bytes.

use libfuzzer_sys::fuzz_target;
use pcmap_profile::perfdata::{MmapTable, PerfFile, Record};

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = PerfFile::parse(data) {
        let mut table = MmapTable::default();
        let _ = f.for_each_record(|r| {
            table.observe(r);
            if let Record::Sample(s) = r {
                if let Some(bs) = s.branch_stack {
                    let _ = bs.iter().map(|b| b.from ^ b.to).fold(0u64, |a, b| a ^ b);
                }
                let _ = s.callchain().count();
            }
            true
        });
        for i in 0..f.attrs.len() {
            let _ = f.event_name(i);
        }
    }
});
