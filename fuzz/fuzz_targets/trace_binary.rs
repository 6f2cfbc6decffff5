#![no_main]
//! PCMTRACE: header, trailer index, records, and the streaming chunk-parallel pass.
use libfuzzer_sys::fuzz_target;
use pcmap_trace::format::binary::PcmTrace;
use pcmap_trace::htr::streaming;

fuzz_target!(|data: &[u8]| {
    let mut bytes = b"PCMTRACE".to_vec();
    bytes.extend_from_slice(data);
    for input in [data, &bytes[..]] {
        if let Ok(pt) = PcmTrace::parse(input, "fuzz") {
            let _ = pt.read_all(&mut |_| Ok(()));
            let _ = streaming::summarize(&pt, 4);
        }
    }
});
