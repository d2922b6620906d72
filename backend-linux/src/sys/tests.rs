//! Unit tests of the request/struct layer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use super::*;

#[test]
fn composers_match_kernel_macros() {
    // Values of the kernel's own macros for well-known requests.
    assert_eq!(io(b'N', 1), 0x0000_4e01);
    assert_eq!(ior(b'N', 2, 1), 0x8001_4e02);
    assert_eq!(iow(b'N', 93, 8), 0x4008_4e5d);
    assert_eq!(iowr(b'N', 85, 80), 0xc050_4e55);
    // The size field is 14 bits wide.
    assert_eq!(ior(b'N', 133, 12296), 0xb008_4e85);
}

#[test]
fn tables_are_consistent_with_the_types() {
    assert_eq!(STRUCTS.len(), 23);
    for s in STRUCTS {
        let mut end = 0;
        for f in s.fields {
            assert!(f.offset >= end, "{}: {} overlaps", s.c_name, f.name);
            end = f.offset + f.size;
        }
        assert!(end <= s.size, "{}", s.c_name);
    }
    for r in REQUESTS {
        assert!(
            STRUCTS
                .iter()
                .any(|s| s.c_name == r.arg && s.size == r.arg_size),
            "{} has no struct table entry",
            r.name
        );
    }
}

#[test]
fn opening_a_missing_node_fails_with_enoent() {
    let err = DeviceFd::open(Path::new("/nonexistent-nrt-linux/neuron0"), OpenMode::Misc)
        .expect_err("must not exist");
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
}

#[test]
fn ioctl_on_a_regular_file_is_enotty() {
    let path = std::env::temp_dir().join(format!("nrt-linux-sys-{}", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    let fd = DeviceFd::open(&path, OpenMode::Misc).unwrap();
    assert_eq!(fd.mode(), OpenMode::Misc);
    let mut v = CompatibleVersion::default();
    let err = ioctl(&fd, COMPATIBLE_VERSION, &mut v).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
    drop(fd);
    let _ = std::fs::remove_file(&path);
}
