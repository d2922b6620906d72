//! Raw bytes → the NEFF parser, with the default options, with hash validation and keeping
//! every subgraph member under small limits. A file that parses is walked through every
//! accessor and the runtime's I/O table.
//!
//! Besides the raw input, a copy whose header is patched to be consistent (header_size,
//! data_size, a supported version and pkg_version) is parsed too, so mutations reach the tar
//! and JSON layers instead of dying at the header checks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nrt_core::NrtStatus;
use nrt_core::io::TensorUsage;
use nrt_core::neff::{self, HEADER_SIZE, KeepMembers, MAX_SUBGRAPHS, Neff, ParseOptions};

fn exercise(n: &Neff) {
    let _ = (
        n.name(),
        n.uuid(),
        n.version(),
        &n.tool_version,
        &n.warnings,
    );
    assert!(!n.tensors.is_empty(), "a parsed NEFF has I/O tensors");
    assert!(
        !n.subgraphs.is_empty() && n.subgraphs.len() <= MAX_SUBGRAPHS,
        "{} subgraphs",
        n.subgraphs.len()
    );
    // Documented order: inputs by name, then outputs by name.
    assert!(
        n.tensors
            .windows(2)
            .all(|w| (w[0].usage as u32, w[0].name.as_bytes())
                < (w[1].usage as u32, w[1].name.as_bytes())),
        "tensors not in (usage, name) order"
    );
    let ins = n.tensors_of(TensorUsage::Input).count();
    let outs = n.tensors_of(TensorUsage::Output).count();
    assert_eq!(ins + outs, n.tensors.len());
    for t in &n.tensors {
        assert!(t.size > 0);
        assert!(t.shape.len() <= neff::MAX_DIMS);
        let _ = neff::dtype_str(t.dtype);
    }
    for s in &n.subgraphs {
        assert!(n.subgraph(&s.name).is_some());
        for m in &s.members {
            let d = s.member(&m.name);
            if let (Some(d), Some(own)) = (d, m.data.as_deref()) {
                // `member` returns the first member of that name.
                let _ = (d.len(), own.len());
            }
            if let Some(own) = &m.data {
                assert_eq!(
                    own.len() as u64,
                    m.size,
                    "kept data of {} vs its size",
                    m.name
                );
            }
        }
    }
    let _ = n.to_spec();
    // The runtime's I/O table: Ok or an error status, never a panic.
    if let Ok(io) = n.io_table() {
        for usage in [TensorUsage::Input, TensorUsage::Output] {
            for t in io.tensors(usage) {
                if usage == TensorUsage::Input {
                    assert!(io.input(&t.name).is_some(), "input {:?} not found", t.name);
                }
            }
        }
    }
}

fn check(data: &[u8], options: &ParseOptions<'_>) {
    match neff::parse(data, options) {
        Ok(n) => exercise(&n),
        Err(e) => assert!(
            matches!(
                e.status(),
                NrtStatus::Invalid | NrtStatus::UnsupportedNeffVersion
            ),
            "unexpected status {e:?}"
        ),
    }
}

fn check_all(data: &[u8]) {
    check(data, &ParseOptions::default());
    check(
        data,
        &ParseOptions {
            validate_hash: true,
            ..Default::default()
        },
    );
    check(
        data,
        &ParseOptions {
            keep: KeepMembers::All,
            max_member_size: 4096,
            max_kept_bytes: 16384,
            max_members: 64,
            validate_hash: false,
            // The smallest window firmware may choose: back-references past it are refused.
            inflate_window: nrt_core::neff::MIN_INFLATE_WINDOW,
        },
    );
}

fuzz_target!(|data: &[u8]| {
    check_all(data);
    if data.len() > HEADER_SIZE {
        let mut b = data.to_vec();
        let payload = (b.len() - HEADER_SIZE) as u64;
        b[8..16].copy_from_slice(&(HEADER_SIZE as u64).to_le_bytes());
        b[16..24].copy_from_slice(&payload.to_le_bytes());
        let major = if b[24] & 1 == 0 { 1u64 } else { 2 };
        b[24..32].copy_from_slice(&major.to_le_bytes());
        let pkg: u64 = if b[HEADER_SIZE] == 0x1f { 2 } else { 1 };
        b[0..8].copy_from_slice(&pkg.to_le_bytes());
        let lnc = u32::from(b[552] % 9);
        b[552..556].copy_from_slice(&lnc.to_le_bytes());
        if b != data {
            check_all(&b);
        }
    }
});
