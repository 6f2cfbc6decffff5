//! Inline-site extraction, census and symbolization on arbitrary ELF bytes (seed the corpus with
//! the `fixtures/src/inline` binaries): must never panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(debug) = pcmap_inline::DebugData::load(data) else { return };
    if let Ok(info) = pcmap_inline::extract_sites(&debug) {
        let census = pcmap_inline::census::Census::new(&info);
        let _ = census.sites;
        for site in info.sites.iter().take(64) {
            for p in &site.params {
                let _ = p.location.display_x86_64();
            }
        }
    }
    if let Ok(sym) = pcmap_inline::symbolize::Symbolizer::new(&debug) {
        for s in debug.symbols.iter().take(16) {
            let _ = sym.frames(s.address, true);
        }
    }
});
