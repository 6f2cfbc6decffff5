//! Every text trace format (detection included) must reject bad input without panicking, and
//! the HTR passes must handle whatever it accepts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcmap_fuzz::trace_text(data));
