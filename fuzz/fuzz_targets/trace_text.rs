#![no_main]
//! Every text trace format (detection included) must reject bad input without panicking, and
//! the HTR passes must handle whatever it accepts.
use libfuzzer_sys::fuzz_target;
use pcmap_trace::htr::{BuildOptions, Htr};
use pcmap_trace::trace::Trace;

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = Trace::read(data, "fuzz") {
        for t in trace.threads.iter().take(4) {
            if t.ids.len() <= 4096 {
                let _ = Htr::build(t, &BuildOptions::default());
            }
        }
    }
});
