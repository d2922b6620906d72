//! Spec 002 §4: `nrt_get_version` into a caller buffer, and status strings.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::version::{GIT_HASH, IMPLEMENTATION, write_version};
use nrt_core::{NrtStatus, status_as_str};
use nrt_tests::assert_err;

const FILL: u8 = 0xAB;

fn call(size: usize) -> (Result<(), nrt_core::Error>, Vec<u8>) {
    // A larger backing buffer shows that nothing is written past `size`.
    let mut backing = vec![FILL; 256];
    let r = write_version(&mut backing[..size]);
    (r, backing)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

fn cstr_at(b: &[u8], off: usize) -> &str {
    let end = b[off..]
        .iter()
        .position(|&c| c == 0)
        .expect("NUL-terminated")
        + off;
    std::str::from_utf8(&b[off..end]).unwrap()
}

#[test]
fn version_buffer_of_159_is_refused() {
    let (r, b) = call(159);
    assert_err(r, NrtStatus::Failure, "Size is < 160");
    assert!(b.iter().all(|&c| c == FILL), "nothing written");
    let (r, _) = call(0);
    assert_err(r, NrtStatus::Failure, "Size is < 160");
}

#[test]
fn version_buffer_of_160_gets_components_and_detail_but_no_hash() {
    let (r, b) = call(160);
    r.unwrap();
    assert_eq!(
        [u64_at(&b, 0), u64_at(&b, 8), u64_at(&b, 16), u64_at(&b, 24)],
        [2, 31, 24, 0]
    );
    let detail = cstr_at(&b, 32);
    assert_eq!(
        detail,
        format!("libnrt version 2.31.24.0 ({IMPLEMENTATION})")
    );
    assert!(detail.starts_with("libnrt version 2.31.24.0"));
    assert!(detail.contains("nrt-rs"));
    assert!(
        b[160..].iter().all(|&c| c == FILL),
        "no hash below 201 bytes"
    );
}

#[test]
fn version_buffer_of_200_gets_no_hash() {
    let (r, b) = call(200);
    r.unwrap();
    assert!(b[160..].iter().all(|&c| c == FILL));
}

#[test]
fn version_buffer_of_201_gets_the_hash() {
    let (r, b) = call(201);
    r.unwrap();
    assert_eq!(cstr_at(&b, 160), GIT_HASH);
    assert!(b[201..].iter().all(|&c| c == FILL), "nothing past size");
}

#[test]
fn version_buffer_of_224_gets_everything() {
    let (r, b) = call(224);
    r.unwrap();
    assert_eq!(u64_at(&b, 8), 31);
    assert_eq!(cstr_at(&b, 160), GIT_HASH);
    assert!(
        GIT_HASH == "unknown"
            || (GIT_HASH.len() == 40 && GIT_HASH.bytes().all(|c| c.is_ascii_hexdigit()))
    );
    assert!(b[224..].iter().all(|&c| c == FILL));
}

#[test]
fn status_as_str_names_every_status() {
    for s in NrtStatus::ALL {
        assert_eq!(status_as_str(s.code()), s.name());
        assert!(s.name().starts_with("NRT_"));
    }
    assert_eq!(status_as_str(13), "NRT_UNINITIALIZED");
    assert_eq!(status_as_str(14), "NRT_CLOSED");
    assert_eq!(status_as_str(12), "NRT_UNKNOWN_STATUS");
}
