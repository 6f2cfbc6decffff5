#![no_main]
//! Decode arbitrary bytes as a BAT payload and as a `.note.bolt_bat` section: never a panic.
//! Whatever decodes must re-encode, decode to the same model (a fixed point), index, and
//! translate without panicking.

use libfuzzer_sys::fuzz_target;
use pcmap_bat::{Bat, BatTable};

fuzz_target!(|data: &[u8]| {
    for model in [Bat::decode(data), Bat::decode_note(data)].into_iter().flatten() {
        let bytes = model.encode().expect("a decoded model is valid");
        assert_eq!(Bat::decode(&bytes).expect("re-encoded model decodes"), model);
        let table = BatTable::from_model(&model).expect("a decoded model is valid");
        for h in &model.hot {
            for e in &h.entries {
                let a = h.address.wrapping_add(u64::from(e.output_offset));
                let _ = table.translate(a, true);
                let _ = table.translate_in(h.address, a, false);
            }
            let _ = table.block_at(h.address, 0);
            let _ = table.fragments_of(h.address).count();
        }
    }
    if let Ok(table) = BatTable::parse_payload(data) {
        let _ = table.translate(u64::from_le_bytes(data.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8])), false);
    }
});
