//! Fuzz the basic-block address map decoder (every layout and ELF shape) and the block index.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcmap_bbmap::decode::{DecodeOptions, Endian, LegacyMode, StoredAddress, decode_section};
use pcmap_bbmap::encode::{EncodeOptions, encode_section};
use pcmap_bbmap::index::BlockIndex;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let options = DecodeOptions {
        endian: if mode & 1 == 0 {
            Endian::Little
        } else {
            Endian::Big
        },
        address_size: if mode & 2 == 0 { 8 } else { 4 },
        legacy: match (mode >> 2) & 3 {
            0 => LegacyMode::Strict,
            1 => LegacyMode::Versions0And1,
            2 => LegacyMode::Unversioned,
            _ => LegacyMode::BbInfoProposal,
        },
    };
    if let Ok(functions) = decode_section(body, options, &StoredAddress) {
        // Whatever decodes re-encodes to something that decodes to the same maps.
        let eo = EncodeOptions {
            endian: options.endian,
            address_size: options.address_size,
        };
        let (bytes, _) = encode_section(&functions, eo).expect("decoded maps are encodable");
        let again =
            decode_section(&bytes, options, &StoredAddress).expect("re-encoded maps decode");
        assert_eq!(again, functions);
        let index = BlockIndex::new(&functions);
        for pc in [0, 1, u64::MAX, 0x1000] {
            let _ = index.lookup(pc);
            let _ = index.lookup_branch_target(pc);
        }
    }
    // Whole ELF files too.
    let _ = pcmap_bbmap::elf::read_elf(
        body,
        pcmap_bbmap::elf::ReadOptions {
            legacy: mode & 16 != 0,
        },
    );
});
