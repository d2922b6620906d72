//! Text (the bytes read as UTF-8, invalid sequences replaced) → the program assembler
//! (`engine::assemble`, which validates as the decoder does). Errors must be `NRT_INVALID` /
//! `NRT_UNSUPPORTED_NEFF_VERSION`; a program that assembles must encode to bytes the decoder
//! accepts (the same validation), and its disassembly must assemble to the same bytes and
//! disassemble to the same text (the round trip).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nrt_core::NrtStatus;
use nrt_sim::engine::{Program, assemble, disassemble};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let program = match assemble(&text) {
        Ok(p) => p,
        Err(e) => {
            assert!(
                matches!(
                    e.status(),
                    NrtStatus::Invalid | NrtStatus::UnsupportedNeffVersion
                ),
                "{e:?}"
            );
            return;
        }
    };
    let bytes = program.to_bytes();
    let decoded = Program::from_bytes(&bytes)
        .unwrap_or_else(|e| panic!("an assembled program does not decode: {e:?}"));
    assert_eq!(decoded.to_bytes(), bytes, "unstable encoding");
    let listing = disassemble(&program);
    let again = assemble(&listing)
        .unwrap_or_else(|e| panic!("a disassembly does not assemble: {e:?}\n{listing}"));
    assert_eq!(
        again.to_bytes(),
        bytes,
        "the round trip changed the program"
    );
    assert_eq!(
        disassemble(&again),
        listing,
        "the disassembly is not a fixed point"
    );
});
