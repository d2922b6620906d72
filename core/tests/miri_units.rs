//! Unit-sized tests of the core's `unsafe` code and its NEFF parser, small enough for Miri
//! (`cargo +nightly miri test -p nrt-core --test miri_units`, in CI): caller-owned buffers
//! attached to virtual tensors (`Tensor::attach_buffer`, the raw-pointer reads and writes),
//! slices of them, copies between overlapping slices of one buffer, and the NEFF writer and
//! parser over a small file, its truncations and its corruptions. Every refusal is checked for
//! its status and message. They also run, quickly, as ordinary tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::NrtStatus;
use nrt_core::io::{Dtype, TensorUsage};
use nrt_core::neff::{self, NeffFeatures, NeffSpec, NeffTensor, ParseOptions, SubgraphSpec};
use nrt_core::tensor::{Tensor, TensorPlacement};

#[test]
fn attached_buffer_reads_writes_and_refusals() {
    let mut buf = vec![0u8; 64];
    let mut t = Tensor::empty("v");
    assert_eq!(t.placement(), TensorPlacement::Virtual);
    let e = t.read(0, &mut [0u8; 1]).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert_eq!(
        e.message(),
        "Tensor \"v\": a read of 1 bytes at offset 0 is outside its 0 bytes"
    );
    // SAFETY: `buf` outlives `t` and nothing else touches it while attached.
    unsafe { t.attach_buffer(buf.as_mut_ptr(), buf.len()) }.unwrap();
    assert_eq!(t.size(), 64);
    t.write(8, &[1, 2, 3, 4]).unwrap();
    t.memset(60, 0xAB, 4).unwrap();
    let mut out = [0u8; 8];
    t.read(6, &mut out).unwrap();
    assert_eq!(out, [0, 0, 1, 2, 3, 4, 0, 0]);
    let e = t.write(62, &[0; 4]).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert_eq!(
        e.message(),
        "Tensor \"v\": a write of 4 bytes at offset 62 is outside its 64 bytes"
    );
    let e = t.read(u64::MAX, &mut out).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    // A slice reads and writes through the same buffer; a slice cannot take a buffer.
    let mut s = t.slice(8, 16, "s").unwrap();
    let mut two = [0u8; 2];
    s.read(1, &mut two).unwrap();
    assert_eq!(two, [2, 3]);
    // SAFETY: refused before any access.
    let e = unsafe { s.attach_buffer(buf.as_mut_ptr(), 4) }.unwrap_err();
    assert_eq!(
        e.message(),
        "Tensor \"s\": cannot attach a buffer to a slice"
    );
    let e = t.slice(60, 8, "late").unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    // SAFETY: NULL is refused before any access.
    let e = unsafe { t.attach_buffer(std::ptr::null_mut(), 8) }.unwrap_err();
    assert_eq!(e.message(), "Tensor \"v\": the buffer is NULL");
    drop((s, t));
    assert_eq!(&buf[8..12], &[1, 2, 3, 4]);
    assert_eq!(&buf[60..], &[0xAB; 4]);
}

#[test]
fn copies_between_overlapping_slices_of_one_buffer() {
    let mut buf: Vec<u8> = (0..=255).collect();
    let mut t = Tensor::empty("whole");
    // SAFETY: `buf` outlives every clone and slice of `t`.
    unsafe { t.attach_buffer(buf.as_mut_ptr(), buf.len()) }.unwrap();
    let a = t.slice(0, 200, "a").unwrap();
    let b = t.slice(10, 200, "b").unwrap();
    // Forward overlap through the chunked copy: b[0..100) = a[0..100).
    Tensor::copy(&a, 0, &b, 0, 100).unwrap();
    let clone = t.clone();
    let mut out = [0u8; 4];
    clone.read(10, &mut out).unwrap();
    assert_eq!(out, [0, 1, 2, 3]);
    // A second, separately owned buffer as the destination.
    let mut other = vec![0u8; 300];
    let mut o = Tensor::empty("other");
    // SAFETY: `other` outlives `o`.
    unsafe { o.attach_buffer(other.as_mut_ptr(), other.len()) }.unwrap();
    Tensor::copy(&t, 0, &o, 44, 256).unwrap();
    let e = Tensor::copy(&t, 1, &o, 0, 256).unwrap_err();
    assert_eq!(
        e.message(),
        "Tensor \"whole\": a copy source of 256 bytes at offset 1 is outside its 256 bytes"
    );
    drop((a, b, clone, t, o));
    assert_eq!(&other[44..48], &[0, 1, 2, 3]);
    assert_eq!(&other[54..58], &[0, 1, 2, 3]);
}

fn small_neff(gzip: bool) -> Vec<u8> {
    let t = |name: &str, usage| NeffTensor {
        name: name.into(),
        usage,
        size: 16,
        dtype: Dtype::Float32,
        shape: vec![4],
        var_id: 1,
    };
    neff::write(&NeffSpec {
        name: "tiny".into(),
        uuid: [3; 16],
        version: (2, 0),
        feature_bits: NeffFeatures::empty(),
        lnc_size: 1,
        num_tpb: 1,
        gzip,
        subgraphs: vec![SubgraphSpec {
            name: "sg00".into(),
            members: vec![("extra.bin".into(), vec![9; 40])],
        }],
        tensors: vec![t("x", TensorUsage::Input), t("y", TensorUsage::Output)],
    })
    .unwrap()
}

#[test]
fn neff_parse_whole_truncated_and_corrupted() {
    for gzip in [false, true] {
        let file = small_neff(gzip);
        let opts = ParseOptions::default();
        let n = neff::parse(&file, &opts).unwrap();
        let spec = n.to_spec();
        assert_eq!(spec.name, "tiny");
        assert_eq!(spec.tensors.len(), 2);
        // Every truncation is refused with a status, never a panic (Miri: no UB either).
        // Under Miri a sample of lengths keeps the run short (fewer for the gzip file: its
        // every parse interprets the inflater).
        let samples = if gzip { 8 } else { 16 };
        let step = if cfg!(miri) {
            file.len() / samples + 1
        } else {
            1
        };
        for len in (0..file.len()).step_by(step) {
            let e = neff::parse(&file[..len], &opts).unwrap_err();
            assert!(
                matches!(
                    e.status(),
                    NrtStatus::Invalid | NrtStatus::UnsupportedNeffVersion
                ),
                "gzip {gzip}, {len} bytes: {e}"
            );
        }
        // Flipped bytes: refused or parsed, never a panic.
        for at in (0..file.len()).step_by(step.max(7)) {
            let mut bad = file.clone();
            bad[at] ^= 0x5A;
            if let Err(e) = neff::parse(&bad, &opts) {
                assert!(
                    matches!(
                        e.status(),
                        NrtStatus::Invalid | NrtStatus::UnsupportedNeffVersion
                    ),
                    "gzip {gzip}, byte {at}: {e}"
                );
            }
        }
    }
}
